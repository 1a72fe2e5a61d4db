/* A hash with a chain of static inline helpers, and the shared header's helpers. */
#include "vector.h"

static inline unsigned long rotate(unsigned long value, int bits) {
  return (value << bits) | (value >> (64 - bits));
}

static inline unsigned long mix(unsigned long hash, unsigned long word) {
  hash ^= word * 0x9E3779B97F4A7C15UL;
  return rotate(hash, 27) * 5 + 0x52DCE729;
}

unsigned long hash_points(const struct vec2 *points, int count) {
  unsigned long hash = (unsigned long)count;
  for (int i = 0; i < count; i++) {
    hash = mix(hash, (unsigned long)points[i].x);
    hash = mix(hash, (unsigned long)clamp_long(points[i].y, -100, 100));
  }
  return hash;
}
