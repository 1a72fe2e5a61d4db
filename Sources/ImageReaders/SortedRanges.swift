extension RandomAccessCollection where Index == Int {
  /// The index of the element whose `range` holds `address`, among elements sorted by address whose
  /// ranges do not overlap (a core's segments, a minidump's memory); `nil` when none does. Binary search.
  func sortedRangeIndex(containing address: UInt64, _ range: (Element) -> Range<UInt64>) -> Int? {
    var low = startIndex, high = endIndex
    while low < high {
      let middle = low + (high - low) / 2
      if range(self[middle]).upperBound <= address { low = middle + 1 } else { high = middle }
    }
    guard low < endIndex, range(self[low]).contains(address) else { return nil }
    return low
  }
}
