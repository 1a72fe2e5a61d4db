/* Loops over the shared inline helpers: at -O2 they are inlined two levels deep. */
#include "vector.h"

static long weigh(struct vec2 v, long factor) {
  struct vec2 scaled = vec2_scale(v, factor);
  return clamp_long(vec2_length_squared(scaled), 0, 1L << 40);
}

long table_total(const struct vec2 *points, int count, long factor) {
  long total = 0;
  for (int i = 0; i < count; i++) {
    total += weigh(points[i], factor + i);
    if (total > 1000000) total -= vec2_dot(points[i], points[0]);
  }
  return total;
}
