import ProcessInspection
import ImageReaders
import Snapshot

/// What the report readers share, below both the dispatcher (`ReportParser`) and each reader: lines,
/// hex numbers. (Architecture names are `Architecture(reportName:)`; placing frames in images is the
/// model's `placeFrames`.)
enum ReportText {
  /// The largest report accepted (crash reports are kilobytes; a 64 MiB one is not a report).
  static let maximumSize = 64 << 20

  /// The most frames a report may have. Symbolication keeps each frame's address, image and answer
  /// (a few hundred bytes: README's "Limits" gives the peak memory), so this bounds memory where the
  /// size limit alone does not: 64 MiB of `0x1 ` would be 16 million frames. A list of more addresses is
  /// refused before any frame is kept; other kinds spend at least 20 bytes of text a frame.
  static let maximumFrames = 2_000_000

  /// Lines without their terminators (`\n` or `\r\n`).
  static func splitLines(_ text: String) -> [String] {
    // On UTF-8 bytes: a long address list splits without grapheme breaking or substrings.
    var text = text
    return text.withUTF8 { bytes -> [String] in
      var lines: [String] = []
      var start = 0
      for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") {
        lines.append(line(bytes, start..<index))
        start = index + 1
      }
      if start < bytes.count { lines.append(line(bytes, start..<bytes.count)) }  // no empty last line
      return lines
    }
  }

  private static func line(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    let end = range.upperBound > range.lowerBound && bytes[range.upperBound - 1] == UInt8(ascii: "\r") ? range.upperBound - 1 : range.upperBound
    return String(decoding: UnsafeBufferPointer(rebasing: bytes[range.lowerBound..<end]), as: UTF8.self)
  }

  /// `0x` (or `0X`) and 1 to 16 hex digits, read from UTF-8 bytes without making a string; `nil` for
  /// anything else (as `hexNumber(_:)` reads a string).
  static func plainHexNumber(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
    guard bytes.count >= 3, bytes[0] == UInt8(ascii: "0"),
          bytes[1] == UInt8(ascii: "x") || bytes[1] == UInt8(ascii: "X") else { return nil }
    return hexDigitsValue(bytes[2...])
  }

  /// The value of 1 to 16 hex digits (UTF-8 bytes), else nil.
  static func hexDigitsValue(_ digits: some Collection<UInt8>) -> UInt64? {
    guard !digits.isEmpty, digits.count <= 16 else { return nil }
    var value: UInt64 = 0
    for byte in digits {
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: return nil
      }
      value = value << 4 | UInt64(digit)  // at most 16 digits: no bits are lost
    }
    return value
  }

  /// `0x` followed by hex digits (or bare hex digits when `requirePrefix` is false).
  /// Read as UTF-8 bytes: no digit is more than one, and a token with any other byte is no number.
  static func hexNumber(_ token: some StringProtocol, requirePrefix: Bool = true) -> UInt64? {
    var bytes = Substring(token).utf8[...]
    if bytes.starts(with: "0x".utf8) || bytes.starts(with: "0X".utf8) { bytes = bytes.dropFirst(2) } else if requirePrefix { return nil }
    return hexDigitsValue(bytes)
  }

}

// The model's parts by shorter names, for the readers (`Image` alone is the loader's `ProcessInspection.Image`).
typealias ReportImage = ProcessSnapshot.Image
typealias ReportThread = ProcessSnapshot.Thread
typealias ReportFrame = ProcessSnapshot.Frame
