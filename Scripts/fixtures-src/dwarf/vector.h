/* Shared by every C and C++ source: static inline functions that -O2 inlines into callers in several
   files, so line tables name more than one file and inline chains cross files. No system headers: the
   same sources build for Linux and for Mach-O without an SDK. */
#ifndef DWARF_FIXTURE_VECTOR_H
#define DWARF_FIXTURE_VECTOR_H

#ifdef __cplusplus
extern "C" {
#endif
int printf(const char *format, ...);
#ifdef __cplusplus
}
#endif

struct vec2 { long x, y; };

static inline long vec2_dot(struct vec2 a, struct vec2 b) {
  return a.x * b.x + a.y * b.y;
}

static inline long vec2_length_squared(struct vec2 v) {
  return vec2_dot(v, v);
}

static inline struct vec2 vec2_scale(struct vec2 v, long factor) {
  struct vec2 scaled = { v.x * factor, v.y * factor };
  return scaled;
}

static inline long clamp_long(long value, long low, long high) {
  if (value < low) return low;
  if (value > high) return high;
  return value;
}

#endif
