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

/// Which of several address ranges, that may overlap, owns each address: the ranges are given in the
/// order they claim addresses (the first to claim an address owns it), and each question is a binary
/// search. Built in O(n log n), however the ranges overlap: each piece of the address space between
/// two range edges is claimed once. What frames' images and a walk's mapped files are found by.
package struct RangeOwners: Sendable {
  /// Where the address space changes owner: `owners[k]` owns `starts[k] ... starts[k + 1] - 1` (the
  /// last piece through 2^64 - 1); `nil` where no range does.
  private var starts: [UInt64] = []
  private var owners: [Int?] = []

  /// `ranges[i]` (`first ... last`, inclusive; one with `last < first` holds nothing) is owner `i`
  /// where no range before it in `claimOrder` (indices into `ranges`, each once) claimed the address.
  package init(_ ranges: [(first: UInt64, last: UInt64)], claimOrder: [Int]) {
    var points: [UInt64] = []
    points.reserveCapacity(2 * ranges.count)
    for range in ranges where range.first <= range.last {
      points.append(range.first)
      if range.last < UInt64.max { points.append(range.last + 1) }
    }
    points.sort()
    starts = []
    starts.reserveCapacity(points.count)
    for point in points where starts.last != point { starts.append(point) }
    owners = [Int?](repeating: nil, count: starts.count)
    // `next[k]` leads to the first piece at or after k not claimed yet (path halving): each piece is
    // claimed once, and a range skips what earlier ones took.
    var next = Array(0...starts.count)
    func unclaimed(_ piece: Int) -> Int {
      var piece = piece
      while next[piece] != piece {
        next[piece] = next[next[piece]]
        piece = next[piece]
      }
      return piece
    }
    for index in claimOrder where ranges.indices.contains(index) && ranges[index].first <= ranges[index].last {
      let upper = Self.count(atOrBelow: ranges[index].last, in: starts)
      var piece = unclaimed(Self.count(atOrBelow: ranges[index].first, in: starts) - 1)  // starts holds `first`
      while piece < upper {
        owners[piece] = index
        next[piece] = piece + 1
        piece = unclaimed(piece + 1)
      }
    }
  }

  /// How many of the sorted `values` are at most `address`.
  private static func count(atOrBelow address: UInt64, in values: [UInt64]) -> Int {
    var low = 0, high = values.count
    while low < high {
      let middle = low + (high - low) / 2
      if values[middle] <= address { low = middle + 1 } else { high = middle }
    }
    return low
  }

  /// The range that owns `address`, or `nil` when none holds it.
  package func owner(of address: UInt64) -> Int? {
    let count = Self.count(atOrBelow: address, in: starts)
    return count > 0 ? owners[count - 1] : nil
  }
}
