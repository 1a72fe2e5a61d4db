/// A JSON value written by hand (no Foundation in the CLI's hot path): strings are escaped as RFC 8259
/// requires, numbers are unsigned integers, objects keep their members' order.
enum JSONValue {
  case string(String)
  case number(UInt64)
  case bool(Bool)
  case null
  case array([JSONValue])
  case object([(String, JSONValue)])
  /// JSON text already written (by a `JSONWriter`), copied as is.
  case raw([UInt8])

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
    case .number(let number): JSONWriter.appendDecimal(number, to: &result)
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
    case .raw(let text): result += text
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
    var text: [UInt8] = []
    text.reserveCapacity(1024)
    value.write(into: &text)
    element(text)
  }

  /// Adds an element already written as compact JSON text.
  mutating func element(_ text: [UInt8]) {
    if var pending {
      pending.append(UInt8(ascii: ","))
      writeOutputLine(pending)
    }
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

  /// The uppercase hex digit for `nibble` (0...15).
  static func upperDigit(_ nibble: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: nibble < 10 ? 48 + nibble : 55 + nibble)  // "A" - 10 is 55
  }

  /// The lowercase hex digit for `nibble` (0...15).
  static func digit(_ nibble: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: nibble < 10 ? 48 + nibble : 87 + nibble)  // "0" is 48, "a" - 10 is 87
  }
}

/// Writes compact JSON straight into bytes, with no tree of values in between: the views of files
/// that are printed by the thousand (ELF's, and the members every slice has) are written with it.
/// Commas are placed by the writer: a value or key after another value gets one.
struct JSONWriter {
  private(set) var bytes: [UInt8] = []
  private var needsComma = false

  init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

  mutating func beginObject() {
    separate()
    bytes.append(UInt8(ascii: "{"))
    needsComma = false
  }

  mutating func endObject() {
    bytes.append(UInt8(ascii: "}"))
    needsComma = true
  }

  mutating func beginArray() {
    separate()
    bytes.append(UInt8(ascii: "["))
    needsComma = false
  }

  mutating func endArray() {
    bytes.append(UInt8(ascii: "]"))
    needsComma = true
  }

  /// `"key":` (keys are identifiers: nothing to escape); the value comes next.
  mutating func key(_ key: StaticString) {
    separate()
    bytes.append(UInt8(ascii: "\""))
    key.withUTF8Buffer { bytes.append(contentsOf: $0) }
    bytes.append(UInt8(ascii: "\""))
    bytes.append(UInt8(ascii: ":"))
    needsComma = false
  }

  /// A key that is not a literal (the members a format's renderer returns).
  mutating func key(_ key: String) {
    separate()
    JSONValue.writeString(key, into: &bytes)
    bytes.append(UInt8(ascii: ":"))
    needsComma = false
  }

  mutating func string(_ string: String) {
    separate()
    JSONValue.writeString(string, into: &bytes)
    needsComma = true
  }

  /// A string, or `null` when absent.
  mutating func string(_ string: String?) {
    if let string { self.string(string) } else { null() }
  }

  mutating func number(_ number: UInt64) {
    separate()
    Self.appendDecimal(number, to: &bytes)
    needsComma = true
  }

  mutating func bool(_ value: Bool) {
    separate()
    bytes += value ? [UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"), UInt8(ascii: "e")]
      : [UInt8(ascii: "f"), UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "e")]
    needsComma = true
  }

  mutating func null() {
    separate()
    bytes += [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")]
    needsComma = true
  }

  /// `"0x…"`: the value in lowercase hex without leading zeros (`HexText.address`).
  mutating func address(_ value: UInt64) {
    separate()
    bytes.append(UInt8(ascii: "\""))
    bytes.append(UInt8(ascii: "0"))
    bytes.append(UInt8(ascii: "x"))
    let width = value == 0 ? 1 : (64 - value.leadingZeroBitCount + 3) / 4
    for index in stride(from: width - 1, through: 0, by: -1) {
      bytes.append(HexText.digit(Int((value >> UInt64(4 * index)) & 0xF)))
    }
    bytes.append(UInt8(ascii: "\""))
    needsComma = true
  }

  /// Every byte as two lowercase hex digits, quoted (`HexText.bytes`).
  mutating func hexString(_ data: [UInt8]) {
    separate()
    bytes.append(UInt8(ascii: "\""))
    for byte in data {
      bytes.append(HexText.digit(Int(byte >> 4)))
      bytes.append(HexText.digit(Int(byte & 0xF)))
    }
    bytes.append(UInt8(ascii: "\""))
    needsComma = true
  }

  /// The first 16 bytes (zero-padded) as an uppercase dashed UUID, quoted (`HexText.uuid`).
  mutating func uuidString(_ data: [UInt8]) {
    separate()
    bytes.append(UInt8(ascii: "\""))
    for index in 0..<16 {
      if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
      let byte = index < data.count ? data[index] : 0
      bytes.append(HexText.upperDigit(Int(byte >> 4)))
      bytes.append(HexText.upperDigit(Int(byte & 0xF)))
    }
    bytes.append(UInt8(ascii: "\""))
    needsComma = true
  }

  /// A value of the tree form (a format's own members).
  mutating func value(_ value: JSONValue) {
    separate()
    value.write(into: &bytes)
    needsComma = true
  }

  private mutating func separate() {
    if needsComma { bytes.append(UInt8(ascii: ",")) }
  }

  /// The decimal digits of `number`, without a String in between.
  static func appendDecimal(_ number: UInt64, to bytes: inout [UInt8]) {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in  // UInt64.max has 20 digits
      var value = number
      var index = buffer.count
      repeat {
        index -= 1
        buffer[index] = UInt8(ascii: "0") + UInt8(value % 10)
        value /= 10
      } while value > 0
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[index...]))
    }
  }
}
