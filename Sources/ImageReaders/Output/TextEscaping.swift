/// The one escaping for text output (every style but JSON, which has its own): text taken from files,
/// processes and reports is data, so it is shown visibly and reversibly, never as terminal control.
///
/// The scheme (the audit module's C writes the same bytes):
/// - `\` becomes `\\`; newline, carriage return and tab become `\n`, `\r`, `\t`;
/// - every other byte 0x00–0x1F and 0x7F becomes `\xHH` (two lowercase hex digits);
/// - every byte that is not part of a well-formed UTF-8 sequence becomes `\xHH`, and so does every
///   scalar U+F780–U+F7FF, which stands for such a byte in a `String` made by `PathBytes`;
/// - the C1 control code points U+0080–U+009F become `\u{HH}` (lowercase hex, e.g. `\u{9b}`);
/// - everything else is copied unchanged.
///
/// `TextEscaping.unescaped` reverses it: the bytes it gives are the path's or name's own bytes, which
/// `PathBytes.string` turns back into the same `String`.
public enum TextEscaping {
  /// `text` escaped; the same `String` when nothing needs escaping.
  public static func escaped(_ text: String) -> String {
    var contiguous = text
    return contiguous.withUTF8 { bytes in
      if isPlain(UnsafeRawBufferPointer(bytes)) { return text }
      var result: [UInt8] = []
      append(bytes, to: &result)
      return String(decoding: result, as: UTF8.self)
    }
  }

  /// Raw `bytes` (a path or name as the file or kernel holds it) escaped: the same text as `escaped`
  /// gives for `PathBytes.string(bytes)`.
  public static func escaped(bytes: [UInt8]) -> String {
    escaped(PathBytes.string(bytes))
  }

  /// True when `bytes` need no escaping: printable ASCII other than `\`. Eight bytes at a time (a
  /// byte below 0x20, a high bit, 0x7F or `\` in the word); bytes 0x80 and above go the slow way.
  package static func isPlain(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    while index + 8 <= bytes.count {
      // A String's own UTF-8 in memory, not file bytes: ByteReader's rule is for the parsers.
      let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
      if word & ByteScan.highBits != 0 || ByteScan.hasByte(in: word, below: 0x20)
        || ByteScan.hasByte(in: word, equalTo: 0x7F) || ByteScan.hasByte(in: word, equalTo: 0x5C) {
        return false
      }
      index += 8
    }
    while index < bytes.count {
      let byte = bytes[index]
      if byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\\") { return false }
      index += 1
    }
    return true
  }

  /// Appends `bytes` escaped to `result`: the one implementation of the scheme.
  package static func append(_ bytes: UnsafeBufferPointer<UInt8>, to result: inout [UInt8]) {
    result.reserveCapacity(result.count + bytes.count + 8)
    var index = 0
    while index < bytes.count {
      let byte = bytes[index]
      switch byte {
      case UInt8(ascii: "\\"): result += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]; index += 1
      case 0x0A: result += [UInt8(ascii: "\\"), UInt8(ascii: "n")]; index += 1
      case 0x0D: result += [UInt8(ascii: "\\"), UInt8(ascii: "r")]; index += 1
      case 0x09: result += [UInt8(ascii: "\\"), UInt8(ascii: "t")]; index += 1
      case 0..<0x20, 0x7F: appendByteEscape(byte, to: &result); index += 1
      case 0x20..<0x7F: result.append(byte); index += 1
      default:
        let length = wellFormedLength(UnsafeRawBufferPointer(bytes), at: index)
        if length == 0 {
          appendByteEscape(byte, to: &result)
          index += 1
        } else if length == 3, let raw = PathBytes.byteScalar(UnsafeRawBufferPointer(bytes), at: index) {
          appendByteEscape(raw, to: &result)
          index += 3
        } else if length == 2 && byte == 0xC2 && bytes[index + 1] < 0xA0 {
          // U+0080...U+009F: C2 80...C2 9F.
          result += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "{"),
                     HexText.digit(Int(bytes[index + 1] >> 4)), HexText.digit(Int(bytes[index + 1] & 0xF)),
                     UInt8(ascii: "}")]
          index += 2
        } else {
          result.append(contentsOf: bytes[index..<index + length])  // length <= count - index
          index += length
        }
      }
    }
  }

  /// The original bytes of `text` written by `append`; `nil` when `text` holds a backslash that does
  /// not start one of the scheme's escapes, or a raw control character (it was not escaped by us).
  public static func unescaped(_ text: String) -> [UInt8]? {
    let bytes = Array(text.utf8)
    var result: [UInt8] = []
    var index = 0
    func hexValue(_ byte: UInt8) -> UInt8? {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      default: nil
      }
    }
    while index < bytes.count {
      let byte = bytes[index]
      if byte < 0x20 || byte == 0x7F { return nil }
      guard byte == UInt8(ascii: "\\") else { result.append(byte); index += 1; continue }
      guard index + 1 < bytes.count else { return nil }
      switch bytes[index + 1] {
      case UInt8(ascii: "\\"): result.append(UInt8(ascii: "\\")); index += 2
      case UInt8(ascii: "n"): result.append(0x0A); index += 2
      case UInt8(ascii: "r"): result.append(0x0D); index += 2
      case UInt8(ascii: "t"): result.append(0x09); index += 2
      case UInt8(ascii: "x"):
        guard index + 3 < bytes.count, let high = hexValue(bytes[index + 2]), let low = hexValue(bytes[index + 3])
        else { return nil }
        result.append(high << 4 | low)
        index += 4
      case UInt8(ascii: "u"):
        guard index + 5 < bytes.count, bytes[index + 2] == UInt8(ascii: "{"), let high = hexValue(bytes[index + 3]),
              let low = hexValue(bytes[index + 4]), bytes[index + 5] == UInt8(ascii: "}"), high >= 8, high <= 9
        else { return nil }
        result += [0xC2, high << 4 | low]
        index += 6
      default: return nil
      }
    }
    return result
  }

  private static func appendByteEscape(_ byte: UInt8, to result: inout [UInt8]) {
    result += [UInt8(ascii: "\\"), UInt8(ascii: "x"), HexText.digit(Int(byte >> 4)), HexText.digit(Int(byte & 0xF))]
  }

  /// The length of the well-formed UTF-8 sequence (Unicode Table 3-7) starting at `index` with a byte
  /// of 0x80 or above, or 0 when none starts there.
  static func wellFormedLength(_ bytes: UnsafeRawBufferPointer, at index: Int) -> Int {
    let lead = bytes[index]
    let length: Int
    var secondRange: ClosedRange<UInt8> = 0x80...0xBF
    switch lead {
    case 0xC2...0xDF: length = 2
    case 0xE0: length = 3; secondRange = 0xA0...0xBF
    case 0xE1...0xEC, 0xEE...0xEF: length = 3
    case 0xED: length = 3; secondRange = 0x80...0x9F
    case 0xF0: length = 4; secondRange = 0x90...0xBF
    case 0xF1...0xF3: length = 4
    case 0xF4: length = 4; secondRange = 0x80...0x8F
    default: return 0
    }
    guard length <= bytes.count - index, secondRange.contains(bytes[index + 1]) else { return 0 }
    for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) { return 0 }
    return length
  }
}

/// Word-at-a-time byte tests for the output scans (`TextEscaping.isPlain`, `JSONWriter.needsNoEscape`):
/// "some byte of `word` is below `n`" is `(word - n…n) & ~word & 0x80…80 != 0`, exact for n <= 0x80.
enum ByteScan {
  package static let ones: UInt64 = 0x0101_0101_0101_0101
  package static let highBits: UInt64 = 0x8080_8080_8080_8080

  /// True when a byte of `word` is below `limit` (at most 0x80).
  @inlinable @inline(__always)
  static func hasByte(in word: UInt64, below limit: UInt64) -> Bool {
    (word &- ones &* limit) & ~word & highBits != 0
  }

  /// True when a byte of `word` equals `byte`.
  @inlinable @inline(__always)
  static func hasByte(in word: UInt64, equalTo byte: UInt64) -> Bool {
    hasByte(in: word ^ (ones &* byte), below: 1)
  }
}

extension TextEscaping {
  /// `text` for XML or HTML text: `&`, `<` and `>` as entities; with `attribute`, `"` and `'` too (for a
  /// quoted attribute value). The one markup escaper: property lists and the triage page use it.
  package static func markup(_ text: String, attribute: Bool = false) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for character in text {
      switch character {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"" where attribute: result += "&quot;"
      case "'" where attribute: result += "&#39;"
      default: result.append(character)
      }
    }
    return result
  }
}
