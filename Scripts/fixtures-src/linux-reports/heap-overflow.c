/* A heap buffer overflow (a WRITE one past the end): with fast_unwind_on_malloc=0 the allocation's
   stack goes down to _start, one frame deeper than the write's. */
#include <stdlib.h>
__attribute__((noinline)) int *make(int count) { return malloc(count * sizeof(int)); }
__attribute__((noinline)) void fill(int *p, int count) { for (int i = 0; i <= count; i++) p[i] = i; }
int main(void) {
  int *p = make(4);
  fill(p, 4);
  free(p);
  return 0;
}
