// The Swift fixture program: generics and functions the optimizer inlines.
struct Accumulator<Value: Numeric> {
  var total: Value = 0
  var count = 0
  mutating func add(_ value: Value) { total += value; count += 1 }
}

@inline(__always) func clamp<T: Comparable>(_ value: T, _ low: T, _ high: T) -> T {
  min(max(value, low), high)
}

@inline(never) func weigh(_ values: [Int]) -> Int {
  var sum = Accumulator<Int>()
  for value in values { sum.add(clamp(value * 3, -50, 50)) }
  return sum.total
}

let count = CommandLine.arguments.count + 10
let values = (0..<count).map { $0 * CommandLine.arguments.count - 4 }
print(weigh(values))
