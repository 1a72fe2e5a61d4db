/* Three bugs for imagelog triage's tests (TriageCommandTests), one per mode; BUILD makes builds differ.
   Each crashing function is noinline so it is the top frame its signature is made from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef BUILD
#define BUILD 1
#endif

__attribute__((noinline)) void triage_null_write(int *where) {
  *where = BUILD; /* triage: null */
}

__attribute__((noinline)) void triage_check_failed(const char *what) {
  fprintf(stderr, "check failed: %s (build %d)\n", what, BUILD);
  abort(); /* triage: abort */
}

__attribute__((noinline)) int triage_overflow(int count) {
  int *values = malloc((size_t)count * sizeof(int));
  values[count] = BUILD; /* triage: overflow */
  int first = values[0];
  free(values);
  return first;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "null";
  if (strcmp(mode, "null") == 0) triage_null_write((int *)(long)(argc - 2));
  else if (strcmp(mode, "abort") == 0) triage_check_failed(mode);
  else if (strcmp(mode, "overflow") == 0) return triage_overflow(argc + 3);
  return 0;
}
