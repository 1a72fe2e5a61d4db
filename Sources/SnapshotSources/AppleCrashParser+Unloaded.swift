import ProcessInspection
import ImageReaders
import Snapshot

extension AppleCrashParser {
  /// One `Unloaded Images:` line of imagelog's report (`Sources/CImageLog/crash_unloaded.h`): the image's
  /// Binary Images line, then `  unloaded 3.200 ms before the crash by thread 4` and `, loaded for 10.000
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

  /// `3.200` (milliseconds, three decimals) as nanoseconds; `nil` when it is not that or too large.
  static func nanoseconds(_ text: Substring) -> UInt64? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 2, parts[1].count == 3, parts[0].count <= 12, let whole = UInt64(parts[0]), let micro = UInt64(parts[1])
    else { return nil }
    return whole * 1_000_000 + micro * 1_000  // whole < 10^12: fits
  }
}
