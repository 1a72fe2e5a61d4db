/* A small program for the DWARF reader's own tests (DWARFLinesTests): functions inlined two deep
   across a header, a loop, a noinline callee, and a static function. */
#include <stdio.h>
#include "dwarf-lines.h"

static int table[64];

__attribute__((noinline)) static int dwarf_lines_fill(int count) {
  for (int i = 0; i < count && i < 64; i++) table[i] = dwarf_lines_twice(i);
  return table[count % 64];
}

__attribute__((noinline)) int dwarf_lines_compute(int n) {
  int total = 0;
  for (int i = 0; i < n; i++) total += dwarf_lines_twice(i) ^ (total >> 3);
  return total + dwarf_lines_fill(n);
}

int main(int argc, char **argv) {
  (void)argv;
  printf("%d\n", dwarf_lines_compute(argc * 1000));
  return 0;
}
