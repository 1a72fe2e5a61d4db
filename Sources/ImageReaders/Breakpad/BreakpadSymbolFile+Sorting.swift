/// How a symbol file's records are put in address (or number) order: stably, as the file gives equal
/// keys, and cheaply for files that come in a few sorted parts.
extension BreakpadSymbolFile {
  /// `table` sorted by number, keeping the file's order among equal numbers.
  static func sortedByNumber(_ table: [NameRange]) -> [NameRange] {
    stableSorted(table, by: { $0.number })
  }

  /// `items` in the order of their `key`, those with equal keys in their order in `items`. Records a
  /// file gives in a few sorted parts (dump_syms writes a Mach-O file's `STACK CFI INIT` records in
  /// two) are merged part by part, a pass each; more parts than `mergedRuns` are sorted as a whole.
  static func stableSorted<T>(_ items: [T], by key: (T) -> UInt64) -> [T] {
    var starts = [0]
    for index in items.indices.dropFirst() where key(items[index]) < key(items[index - 1]) {
      starts.append(index)
      guard starts.count <= mergedRuns else {
        return items.enumerated().sorted { (key($0.element), $0.offset) < (key($1.element), $1.offset) }
          .map(\.element)
      }
    }
    guard starts.count > 1 else { return items }
    var merged = Array(items[0..<starts[1]])
    for (run, start) in starts.enumerated().dropFirst() {
      let part = items[start..<(run + 1 < starts.count ? starts[run + 1] : items.count)]
      var next: [T] = []
      next.reserveCapacity(merged.count + part.count)
      var left = merged.startIndex, right = part.startIndex
      // Each round takes one item: bounded by the two runs' sizes. On equal keys the earlier run's first.
      while left < merged.endIndex, right < part.endIndex {
        if key(part[right]) < key(merged[left]) {
          next.append(part[right])
          right += 1
        } else {
          next.append(merged[left])
          left += 1
        }
      }
      next += merged[left...]
      next += part[right...]
      merged = next
    }
    return merged
  }

  /// The most sorted parts `stableSorted` merges.
  static let mergedRuns = 8

  /// True when `lines[range]` is in address order.
  static func linesSorted(_ lines: [Line], _ range: Range<Int>) -> Bool {
    var index = range.lowerBound
    while index + 1 < range.upperBound {
      if lines[index].address > lines[index + 1].address { return false }
      index += 1
    }
    return true
  }
}
