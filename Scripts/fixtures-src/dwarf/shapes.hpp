// Templates and inline members instantiated from two C++ files, over the C header's helpers.
#ifndef DWARF_FIXTURE_SHAPES_HPP
#define DWARF_FIXTURE_SHAPES_HPP
#include "vector.h"

namespace shapes {

template <typename T> struct Accumulator {
  T total{};
  long count = 0;
  void add(T value) { total += value; count += 1; }
  T mean() const { return count == 0 ? T{} : total / static_cast<T>(count); }
};

template <typename T> inline T clamp(T value, T low, T high) {
  return value < low ? low : (value > high ? high : value);
}

class Polygon {
public:
  explicit Polygon(int sides) : sides_(sides) {}
  virtual ~Polygon() = default;
  virtual long area(long size) const { return clamp<long>(size * sides_, 0, 1 << 20); }
  int sides() const { return sides_; }
private:
  int sides_;
};

class Square final : public Polygon {
public:
  Square() : Polygon(4) {}
  long area(long size) const override { return vec2_length_squared(vec2{size, 0}); }
};

template <typename Shape> long total_area(const Shape &shape, int rounds) {
  Accumulator<long> sum;
  for (int i = 0; i < rounds; i++) sum.add(shape.area(i));
  return sum.total + sum.mean();
}

long polygon_areas(int rounds);

} // namespace shapes
#endif
