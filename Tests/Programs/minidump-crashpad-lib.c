/* The shared library of minidump-crashpad's "library" mode, built with gcc -O2 -fomit-frame-pointer
   -shared: minidump_library_crash sorts through qsort(3) with a comparator of its own, which crashes
   three calls deep (library_compare -> library_first -> library_second -> library_third writes through
   the address 0x38). Unwinding from the fault back to the program takes this library's call frame
   information (no frame pointers), then libc's through qsort. noipa keeps each function whole and
   named (no inlining, cloning or tail call). */
#include <stdint.h>
#include <stdlib.h>

static volatile int library_start;

__attribute__((noipa)) static void library_third(int depth) {
  volatile int *bad = (volatile int *)(uintptr_t)(0x30 + depth * 4);
  *bad = depth;
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static void library_second(int depth) {
  library_third(depth + 1);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static void library_first(int depth) {
  library_second(depth + 1);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) static int library_compare(const void *a, const void *b) {
  library_first(library_start);
  return *(const int *)a - *(const int *)b;
}

void minidump_library_crash(void) {
  int values[] = {3, 1, 2};
  qsort(values, 3, sizeof values[0], library_compare);
  __asm__ volatile("" ::: "memory");
}
