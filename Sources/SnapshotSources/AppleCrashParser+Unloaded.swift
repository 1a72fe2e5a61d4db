import ProcessInspection
import ImageReaders
import Snapshot

extension AppleCrashParser {
  /// One `Unloaded Images:` line of imagelog's report (`Sources/CImageLog/crash_unloaded.h`): the image's
  /// Binary Images line, then `  unloaded T ms before the crash by thread N` and `, loaded for L
  /// ms` when known. `nil` when it is not one.
  static func unloadedImage(_ line: String) -> ProcessSnapshot.UnloadedImage? {
    guard let split = line.ranges(of: "  unloaded").last, let image = binaryImage(String(line[..<split.lowerBound])),
          let path = image.path, let end = image.endAddress, end >= image.loadAddress else { return nil }
    // end >= loadAddress: the size cannot wrap (a last byte of 0xff...ff gives a size of 0, kept as read).
    var gone = ProcessSnapshot.UnloadedImage(baseAddress: image.loadAddress, size: end - image.loadAddress &+ 1, path: path,
                                             buildID: image.identity?.bytes ?? [])
    let rest = line[split.upperBound...]
    let words = rest.split(separator: " ")
    if let ms = words.firstIndex(of: "ms"), ms > 0, words[ms - 1] != "for", rest.contains(" before the crash") {
      gone.unloadedBeforeCrashNanoseconds = nanoseconds(words[ms - 1])
    }
    if let by = words.firstIndex(of: "thread"), by + 1 < words.count {
      if let tid = UInt32(words[by + 1].prefix { $0.isASCII && $0.isNumber }) { gone.tid = Int32(bitPattern: tid) }
    }
    if let loaded = rest.ranges(of: ", loaded for ").last {
      gone.loadedForNanoseconds = nanoseconds(rest[loaded.upperBound...].prefix { $0 != " " })
    }
    return gone
  }

  /// One `Image Timeline:` line of imagelog's report (`crash_unloaded.h`'s `il_unloaded_event_line`):
  /// `-T ms  loaded NAME at ADDRESS by thread N` or `-T ms  unloaded NAME at
  /// ADDRESS (loaded for L ms) by thread N`. `nil` when it is not one.
  static func timelineEvent(_ line: String) -> ProcessSnapshot.ImageEvent? {
    guard let sign = line.first, sign == "-" || sign == "+", let gap = line.ranges(of: " ms  ").first,
          let magnitude = nanoseconds(line[line.index(after: line.startIndex)..<gap.lowerBound]),
          let offset = Int64(exactly: magnitude), let by = line.ranges(of: " by thread ").last,
          let tid = UInt32(line[by.upperBound...]) else { return nil }
    var middle = line[gap.upperBound..<by.lowerBound]
    let kind: ProcessSnapshot.ImageEvent.Kind
    if middle.hasPrefix("loaded ") { kind = .loaded } else if middle.hasPrefix("unloaded ") { kind = .unloaded } else { return nil }
    middle = middle.dropFirst(kind.rawValue.count + 1)
    let signed: Int64 = sign == "-" ? 0 - offset : offset
    var event = ProcessSnapshot.ImageEvent(kind: kind, name: "", baseAddress: 0, crashOffsetNanoseconds: signed, tid: Int32(bitPattern: tid))
    if kind == .unloaded, middle.hasSuffix(" ms)"), let open = middle.ranges(of: " (loaded for ").last {
      guard let loadedFor = nanoseconds(middle[open.upperBound..<middle.index(middle.endIndex, offsetBy: -4)]) else { return nil }
      event.loadedForNanoseconds = loadedFor
      middle = middle[..<open.lowerBound]
    }
    guard let at = middle.ranges(of: " at 0x").last, let base = UInt64(middle[at.upperBound...], radix: 16) else { return nil }
    event.baseAddress = base
    middle = middle[..<at.lowerBound]
    guard !middle.isEmpty else { return nil }
    event.name = String(middle)
    return event
  }

  /// `3.200` (milliseconds, three decimals) as nanoseconds; `nil` when it is not that or too large.
  static func nanoseconds(_ text: Substring) -> UInt64? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 2, parts[1].count == 3, parts[0].count <= 12, let whole = UInt64(parts[0]), let micro = UInt64(parts[1])
    else { return nil }
    return whole * 1_000_000 + micro * 1_000  // whole < 10^12: fits
  }
}
