// Instantiates the shared templates for other types than main.cpp does.
#include "shapes.hpp"

namespace shapes {

long polygon_areas(int rounds) {
  Polygon hexagon(6);
  Accumulator<double> ratios;
  for (int i = 1; i <= rounds; i++) ratios.add(clamp<double>(i / 3.0, 0.5, 2.5));
  return total_area(hexagon, rounds) + static_cast<long>(ratios.mean() * 100);
}

} // namespace shapes
