// The C++ fixture program: templates from shapes.hpp instantiated here and in polygons.cpp.
#include "shapes.hpp"

namespace {
struct Point { long x, y; };

template <int Scale> long scaled_sum(const Point *points, int count) {
  shapes::Accumulator<long> sum;
  for (int i = 0; i < count; i++) sum.add(vec2_dot(vec2{points[i].x, points[i].y}, vec2{Scale, 1}));
  return sum.total;
}
} // namespace

int main(int argc, char **) {
  Point points[8];
  for (int i = 0; i < 8; i++) points[i] = Point{argc * i, shapes::clamp<long>(argc - i, -2, 2)};
  shapes::Square square;
  long result = scaled_sum<3>(points, argc + 4) + scaled_sum<7>(points, argc) +
                shapes::total_area(square, argc + 2) + shapes::polygon_areas(argc + 3);
  printf("%ld\n", result);
  return static_cast<int>(result & 1);
}
