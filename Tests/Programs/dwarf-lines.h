/* Included from dwarf-lines.c: its functions' lines live in another file (an include directory entry
   of the line table) and are inlined into callers in the main file. */
static inline int dwarf_lines_mix(int value, int salt) {
  int mixed = value * 31 + salt;
  if (mixed & 1) mixed ^= salt << 3;
  return mixed;
}

static inline __attribute__((always_inline)) int dwarf_lines_twice(int value) {
  return dwarf_lines_mix(value, 7) + dwarf_lines_mix(value + 1, 11);
}
