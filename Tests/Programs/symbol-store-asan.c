/* A heap overflow for AddressSanitizer to report (SymbolStoreCLITests): two calls deep, the bad read
   in a function inlined into the deeper one, so the report's frames need FUNC, line and INLINE
   records of the program's symbol file once the program is gone. */
#include <stdlib.h>

static inline __attribute__((always_inline)) int store_read(const int *values, int index) {
  return values[index];
}

__attribute__((noinline)) int store_deep(const int *values, int index) {
  return store_read(values, index) + 1;
}

__attribute__((noinline)) int store_middle(const int *values, int index) {
  return store_deep(values, index) * 2;
}

int main(int argc, char **argv) {
  (void)argv;
  int *values = malloc(2 * sizeof(int));
  return store_middle(values, 8 + argc);
}
