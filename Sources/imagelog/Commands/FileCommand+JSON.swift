/// A JSON value written by hand (no Foundation in the CLI's hot path): strings are escaped as RFC 8259
/// requires, numbers are unsigned integers, objects keep their members' order.
enum JSONValue {
  case string(String)
  case number(UInt64)
  case bool(Bool)
  case null
  case array([JSONValue])
  case object([(String, JSONValue)])

  /// The compact text of this value.
  var text: String {
    var result: [UInt8] = []
    write(into: &result)
    return String(decoding: result, as: UTF8.self)
  }

  /// Appends the compact UTF-8 text of this value to `result`.
  func write(into result: inout [UInt8]) {
    switch self {
    case .string(let string): Self.writeString(string, into: &result)
    case .number(let number): result += String(number).utf8
    case .bool(let bool): result += (bool ? "true" : "false").utf8
    case .null: result += "null".utf8
    case .array(let elements):
      result.append(UInt8(ascii: "["))
      for (index, element) in elements.enumerated() {
        if index > 0 { result.append(UInt8(ascii: ",")) }
        element.write(into: &result)
      }
      result.append(UInt8(ascii: "]"))
    case .object(let members):
      result.append(UInt8(ascii: "{"))
      for (index, (key, value)) in members.enumerated() {
        if index > 0 { result.append(UInt8(ascii: ",")) }
        Self.writeString(key, into: &result)
        result.append(UInt8(ascii: ":"))
        value.write(into: &result)
      }
      result.append(UInt8(ascii: "}"))
    }
  }

  /// Escapes `"`, `\` and control characters; every other byte of the UTF-8 is copied as is, which
  /// RFC 8259 allows (invalid UTF-8 in paths was already replaced when the String was made).
  static func writeString(_ string: String, into result: inout [UInt8]) {
    result.append(UInt8(ascii: "\""))
    var string = string
    string.withUTF8 { bytes in
      if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
        result.append(contentsOf: bytes)  // the common case: nothing to escape
        return
      }
      for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""): result += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
        case UInt8(ascii: "\\"): result += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case 0x0A: result += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case 0x0D: result += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        case 0x09: result += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case 0..<0x20:
          let digits: [UInt8] = Array("0123456789abcdef".utf8)
          result += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                     digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
        default: result.append(byte)
        }
      }
    }
    result.append(UInt8(ascii: "\""))
  }
}

/// Streams a JSON array to standard output, one element per line, so a long walk prints as it goes.
struct JSONArrayPrinter {
  private var pending: [UInt8]?

  mutating func begin() { printOutput("[") }

  mutating func element(_ value: JSONValue) {
    if var pending {
      pending.append(UInt8(ascii: ","))
      writeOutputLine(pending)
    }
    var text: [UInt8] = []
    text.reserveCapacity(1024)
    value.write(into: &text)
    pending = text
  }

  mutating func end() {
    if let pending { writeOutputLine(pending) }
    pending = nil
    printOutput("]")
  }
}

/// Writes UTF-8 `bytes` and a newline to standard output, through `printOutput` so the order holds.
func writeOutputLine(_ bytes: [UInt8]) {
  printOutput(String(decoding: bytes, as: UTF8.self))
}

/// Fast hex text for the JSON and detailed views (BuildID's own forms build one String per byte).
enum HexText {
  private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

  /// Every byte as two lowercase hex digits (`BuildID.hex`).
  static func bytes(_ bytes: [UInt8]) -> String {
    String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
      for (index, byte) in bytes.enumerated() {
        buffer[2 * index] = digits[Int(byte >> 4)]
        buffer[2 * index + 1] = digits[Int(byte & 0xF)]
      }
      return bytes.count * 2
    }
  }

  /// The first 16 bytes (zero-padded) as an uppercase dashed UUID (`BuildID.uuid`).
  static func uuid(_ bytes: [UInt8]) -> String {
    String(unsafeUninitializedCapacity: 36) { buffer in
      var out = 0
      for index in 0..<16 {
        if index == 4 || index == 6 || index == 8 || index == 10 { buffer[out] = UInt8(ascii: "-"); out += 1 }
        let byte = index < bytes.count ? bytes[index] : 0
        buffer[out] = upper(digits[Int(byte >> 4)])
        buffer[out + 1] = upper(digits[Int(byte & 0xF)])
        out += 2
      }
      return out
    }
  }

  /// `0x` and the value in lowercase hex without leading zeros.
  static func address(_ value: UInt64) -> String {
    let width = value == 0 ? 1 : (64 - value.leadingZeroBitCount + 3) / 4
    return String(unsafeUninitializedCapacity: width + 2) { buffer in
      buffer[0] = UInt8(ascii: "0")
      buffer[1] = UInt8(ascii: "x")
      for index in 0..<width {
        buffer[2 + index] = digits[Int((value >> UInt64(4 * (width - 1 - index))) & 0xF)]
      }
      return width + 2
    }
  }

  private static func upper(_ digit: UInt8) -> UInt8 { digit >= UInt8(ascii: "a") ? digit - 32 : digit }
}
