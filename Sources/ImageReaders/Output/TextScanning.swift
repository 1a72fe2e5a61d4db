// Text scanning the report readers, symbolication and the writers share: on UTF-8, without
// Character work, so long reports stay linear.

extension Substring {
  /// The first occurrence of `needle`, compared as UTF-8 bytes (what `firstRange(of:)` finds for text
  /// compared by code units); its bounds are scalar boundaries, as `needle` is whole UTF-8.
  package func utf8Range(of needle: String) -> Range<Index>? {
    let bytes = utf8
    let pattern = Array(needle.utf8)
    guard let first = pattern.first else { return startIndex..<startIndex }
    var start = bytes.startIndex
    while let found = bytes[start...].firstIndex(of: first) {
      var end = found
      var matched = 0
      while matched < pattern.count, end < bytes.endIndex, bytes[end] == pattern[matched] {
        bytes.formIndex(after: &end)
        matched += 1
      }
      if matched == pattern.count { return found..<end }
      start = bytes.index(after: found)
    }
    return nil
  }
}

extension String {
  /// `Substring.utf8Range(of:)` over the whole string.
  package func utf8Range(of needle: String) -> Range<Index>? { self[...].utf8Range(of: needle) }
}

extension StringProtocol {
  /// The text without leading and trailing spaces and tabs. Walked as UTF-8: both are one byte and one
  /// scalar, so the ends found are scalar boundaries, as a walk over the scalars would find them.
  package var trimmingSpaces: String {
    let whole = Substring(self)
    let bytes = whole.utf8
    var start = bytes.startIndex
    var end = bytes.endIndex
    while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { bytes.formIndex(after: &start) }
    while start < end {
      let before = bytes.index(before: end)
      guard bytes[before] == UInt8(ascii: " ") || bytes[before] == UInt8(ascii: "\t") else { break }
      end = before
    }
    return String(whole[start..<end])
  }
}

extension StringProtocol {
  /// The words between single spaces, without empty ones (`split(separator: " ")` for a space that is
  /// its own Character). Walked as UTF-8, as the rest of a `.sym` is: the Character split's generic
  /// walk costs more than the split (BENCHMARKS.md, the .sym area).
  package var spaceSeparatedWords: [Substring] {
    let whole = Substring(self)
    let bytes = whole.utf8
    var words: [Substring] = []
    var start = bytes.startIndex
    while start < bytes.endIndex {
      let end = bytes[start...].firstIndex(of: UInt8(ascii: " ")) ?? bytes.endIndex
      if start < end { words.append(whole[start..<end]) }
      start = end < bytes.endIndex ? bytes.index(after: end) : end
    }
    return words
  }
}
