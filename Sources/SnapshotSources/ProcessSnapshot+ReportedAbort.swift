import ImageReaders
import Snapshot

extension ProcessSnapshot {
  /// Sets `abortMessage` from the Swift runtime's line in a Swift backtrace's text (its report, or
  /// the stderr before a JSON one): `Fatal error: …`, `Precondition failed: …`, `Assertion failed: …`,
  /// with the `FILE:LINE: ` the runtime puts before it, as printed; the first such line. Searched as
  /// UTF-8 (`utf8Range(of:)`), as the signature's text is: every line of a report is looked at.
  mutating func readSwiftRuntimeMessage(_ lines: some Sequence<String>) {
    for line in lines {
      let whole = line[...]
      guard whole.utf8Range(of: "Fatal error:") != nil || whole.utf8Range(of: "Precondition failed:") != nil
              || whole.utf8Range(of: "Assertion failed:") != nil else { continue }
      let trimmed = line.trimmingSpaces
      if !trimmed.isEmpty { abortMessage = trimmed; return }
    }
  }

  /// Sets `abortMessage` from a sanitizer's summary (`SUMMARY: AddressSanitizer: heap-use-after-free
  /// FILE:LINE in f`: the tool and its kind, `AddressSanitizer: heap-use-after-free`), and
  /// `oomAllocationSize` from an AddressSanitizer allocation failure: `requested allocation size 0xN`
  /// (allocation-size-too-big) or `allocator is trying to allocate 0xN bytes` (out-of-memory).
  mutating func readSanitizerKind(_ lines: some Sequence<String>) {
    for line in lines where abortMessage == nil || oomAllocationSize == nil {
      if abortMessage == nil, let range = line[...].utf8Range(of: "SUMMARY: ") {
        let words = line[range.upperBound...].split(separator: " ", maxSplits: 2)
        // A kind is a word (`heap-use-after-free`); a leak summary gives a count (`264 byte(s) leaked`).
        if words.count >= 2, words[0].hasSuffix("Sanitizer:"), words[1].first?.isLetter == true { abortMessage = "\(words[0]) \(words[1])" }
      }
      if oomAllocationSize == nil {
        for lead in ["requested allocation size 0x", "allocator is trying to allocate 0x"] {
          guard let range = line[...].utf8Range(of: lead) else { continue }
          let digits = line[range.upperBound...].prefix { $0.isHexDigit }
          if !digits.isEmpty, digits.count <= 16, let size = UInt64(digits, radix: 16) { oomAllocationSize = size }
        }
      }
    }
  }
}
