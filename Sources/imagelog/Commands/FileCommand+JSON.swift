#if canImport(Glibc)
internal import Glibc
#endif

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

/// Writes UTF-8 `bytes` (which hold no NUL: JSON escapes control characters) and a newline to
/// standard output with `puts`, into the stdio buffer Swift's `print` writes to, so the order holds.
func writeOutputLine(_ bytes: [UInt8]) {
  let line = [CChar](unsafeUninitializedCapacity: bytes.count + 1) { buffer, initialized in
    bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(buffer).copyMemory(from: $0) }
    buffer[bytes.count] = 0
    initialized = bytes.count + 1
  }
  _ = puts(line)
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
/// Commas are placed by the writer: a value or key after another value gets one. The bytes live in
/// one growing buffer written through a pointer (an `Array` append per byte checks uniqueness and
/// capacity each time).
struct JSONWriter: ~Copyable {
  private var buffer: UnsafeMutableRawBufferPointer
  private var count = 0
  private var needsComma = false

  init(capacity: Int = 2048) {
    buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(capacity, 64), alignment: 1)
  }

  deinit { buffer.deallocate() }

  /// The JSON text written so far.
  var bytes: [UInt8] { Array(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }

  mutating func beginObject() {
    separate()
    put(UInt8(ascii: "{"))
    needsComma = false
  }

  mutating func endObject() {
    put(UInt8(ascii: "}"))
    needsComma = true
  }

  mutating func beginArray() {
    separate()
    put(UInt8(ascii: "["))
    needsComma = false
  }

  mutating func endArray() {
    put(UInt8(ascii: "]"))
    needsComma = true
  }

  /// `"key":` (keys are identifiers: nothing to escape); the value comes next.
  mutating func key(_ key: StaticString) {
    separate()
    reserve(key.utf8CodeUnitCount + 3)
    put(UInt8(ascii: "\""))
    key.withUTF8Buffer { putAll(UnsafeRawBufferPointer($0)) }
    put(UInt8(ascii: "\""))
    put(UInt8(ascii: ":"))
    needsComma = false
  }

  /// A key that is not a literal (the members a format's renderer returns).
  mutating func key(named key: String) {
    separate()
    putString(key)
    put(UInt8(ascii: ":"))
    needsComma = false
  }

  mutating func string(_ string: String) {
    separate()
    putString(string)
    needsComma = true
  }

  /// A string literal that needs no escaping (ASCII letters, digits and punctuation other than `"` and `\\`).
  mutating func literal(_ text: StaticString) {
    separate()
    reserve(text.utf8CodeUnitCount + 2)
    put(UInt8(ascii: "\""))
    putLiteral(text)
    put(UInt8(ascii: "\""))
    needsComma = true
  }

  /// A string, or `null` when absent.
  mutating func string(_ string: String?) {
    if let string { self.string(string) } else { null() }
  }

  mutating func number(_ number: UInt64) {
    separate()
    reserve(20)  // UInt64.max has 20 digits
    var digits = 1
    var rest = number / 10
    while rest > 0 {
      digits += 1
      rest /= 10
    }
    var value = number
    for index in stride(from: count + digits - 1, through: count, by: -1) {
      buffer[index] = UInt8(ascii: "0") + UInt8(value % 10)
      value /= 10
    }
    count += digits
    needsComma = true
  }

  mutating func bool(_ value: Bool) {
    separate()
    putLiteral(value ? "true" : "false")
    needsComma = true
  }

  mutating func null() {
    separate()
    putLiteral("null")
    needsComma = true
  }

  /// `"0x…"`: the value in lowercase hex without leading zeros (`HexText.address`).
  mutating func address(_ value: UInt64) {
    separate()
    let width = value == 0 ? 1 : (64 - value.leadingZeroBitCount + 3) / 4
    reserve(width + 4)
    put(UInt8(ascii: "\""))
    put(UInt8(ascii: "0"))
    put(UInt8(ascii: "x"))
    for index in stride(from: width - 1, through: 0, by: -1) {
      put(HexText.digit(Int((value >> UInt64(4 * index)) & 0xF)))
    }
    put(UInt8(ascii: "\""))
    needsComma = true
  }

  /// Every byte as two lowercase hex digits, quoted (`HexText.bytes`).
  mutating func hexString(_ data: [UInt8]) {
    separate()
    reserve(data.count * 2 + 2)
    put(UInt8(ascii: "\""))
    for byte in data {
      put(HexText.digit(Int(byte >> 4)))
      put(HexText.digit(Int(byte & 0xF)))
    }
    put(UInt8(ascii: "\""))
    needsComma = true
  }

  /// The first 16 bytes (zero-padded) as an uppercase dashed UUID, quoted (`HexText.uuid`).
  mutating func uuidString(_ data: [UInt8]) {
    separate()
    reserve(38)
    put(UInt8(ascii: "\""))
    for index in 0..<16 {
      if index == 4 || index == 6 || index == 8 || index == 10 { put(UInt8(ascii: "-")) }
      let byte = index < data.count ? data[index] : 0
      put(HexText.upperDigit(Int(byte >> 4)))
      put(HexText.upperDigit(Int(byte & 0xF)))
    }
    put(UInt8(ascii: "\""))
    needsComma = true
  }

  /// A value of the tree form (a format's own members).
  mutating func value(_ value: JSONValue) {
    separate()
    var text: [UInt8] = []
    value.write(into: &text)
    text.withUnsafeBytes { putAll($0) }
    needsComma = true
  }

  @inline(__always)
  private mutating func separate() {
    if needsComma { put(UInt8(ascii: ",")) }
  }

  /// Makes room for `extra` more bytes.
  @inline(__always)
  private mutating func reserve(_ extra: Int) {
    if extra > buffer.count - count { grow(extra) }
  }

  private mutating func grow(_ extra: Int) {
    let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(buffer.count * 2, count + extra), alignment: 1)
    grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    buffer.deallocate()
    buffer = grown
  }

  @inline(__always)
  private mutating func put(_ byte: UInt8) {
    reserve(1)
    buffer[count] = byte
    count += 1
  }

  @inline(__always)
  private mutating func putAll(_ bytes: UnsafeRawBufferPointer) {
    reserve(bytes.count)
    UnsafeMutableRawBufferPointer(rebasing: buffer[count..<count + bytes.count]).copyMemory(from: bytes)
    count += bytes.count
  }

  private mutating func putLiteral(_ text: StaticString) {
    text.withUTF8Buffer { putAll(UnsafeRawBufferPointer($0)) }
  }

  /// `string` quoted, with `"`, `\` and control characters escaped as `JSONValue.writeString` does.
  private mutating func putString(_ string: String) {
    var contiguous = string
    contiguous.withUTF8 { utf8 in
      if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
        reserve(utf8.count + 2)
        put(UInt8(ascii: "\""))
        putAll(UnsafeRawBufferPointer(utf8))
        put(UInt8(ascii: "\""))
      } else {
        var text: [UInt8] = []
        JSONValue.writeString(string, into: &text)
        text.withUnsafeBytes { putAll($0) }
      }
    }
  }
}
