/* The C fixture program: main and two other files share vector.h. */
#include "vector.h"

long table_total(const struct vec2 *points, int count, long factor);
unsigned long hash_points(const struct vec2 *points, int count);

static int fill(struct vec2 *points, int count, int seed) {
  for (int i = 0; i < count; i++) {
    points[i].x = seed * i - 3;
    points[i].y = clamp_long(seed - i, -5, 5);
  }
  return count;
}

int main(int argc, char **argv) {
  (void)argv;
  struct vec2 points[16];
  int count = fill(points, argc + 8, argc);
  long total = table_total(points, count, argc);
  unsigned long hash = hash_points(points, count);
  printf("%ld %lx %ld\n", total, hash, vec2_length_squared(points[argc]));
  return (int)(total & 1);
}
