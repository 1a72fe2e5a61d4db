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

  mutating func begin(_ output: inout OutputLines) { output.line("[") }

  /// Adds an element already written as compact JSON text.
  mutating func element(_ text: [UInt8], _ output: inout OutputLines) {
    if let pending { output.line(pending, suffix: UInt8(ascii: ",")) }
    pending = text
  }

  mutating func end(_ output: inout OutputLines) {
    if let pending { output.line(pending) }
    pending = nil
    output.line("]")
  }
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
    UInt8(truncatingIfNeeded: nibble < 10 ? 48 &+ nibble : 55 &+ nibble)  // "A" - 10 is 55
  }

  /// The lowercase hex digit for `nibble` (0...15).
  static func digit(_ nibble: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: nibble < 10 ? 48 &+ nibble : 87 &+ nibble)  // "0" is 48, "a" - 10 is 87
  }
}

/// The hex digits in order, indexed by value (a literal: no array, no lazy initialization).
let lowercaseHexDigits: StaticString = "0123456789abcdef"

/// "00", "01", ... "99" in one literal: the pair for n (0...99) starts at 2n.
let decimalDigitPairs: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

/// Writes compact JSON straight into bytes, with no tree of values in between: the views of files
/// that are printed by the thousand (ELF's, and the members every slice has) are written with it.
/// Commas are placed by the writer: a value or key after another value gets one. The bytes live in
/// one buffer that each write first makes room in, then stores into through a pointer (an `Array`
/// append per byte checks uniqueness and capacity every time).
struct JSONWriter: ~Copyable {
  private var base: UnsafeMutablePointer<UInt8>
  private var capacity: Int
  private var count = 0
  private var needsComma = false

  init(capacity: Int = 2048) {
    self.capacity = max(capacity, 64)
    base = UnsafeMutablePointer<UInt8>.allocate(capacity: self.capacity)
  }

  deinit { base.deallocate() }

  /// The JSON text written so far.
  var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

  @inline(__always)
  mutating func beginObject() {
    reserve(2)
    separate()
    store(UInt8(ascii: "{"))
    needsComma = false
  }

  @inline(__always)
  mutating func endObject() {
    reserve(1)
    store(UInt8(ascii: "}"))
    needsComma = true
  }

  @inline(__always)
  mutating func beginArray() {
    reserve(2)
    separate()
    store(UInt8(ascii: "["))
    needsComma = false
  }

  @inline(__always)
  mutating func endArray() {
    reserve(1)
    store(UInt8(ascii: "]"))
    needsComma = true
  }

  /// `"key":` (keys are identifiers: nothing to escape); the value comes next.
  @inline(__always)
  mutating func key(_ key: StaticString) {
    let length = key.utf8CodeUnitCount
    reserve(length + 4)
    separate()
    store(UInt8(ascii: "\""))
    storeAll(key.utf8Start, length)
    store(UInt8(ascii: "\""))
    store(UInt8(ascii: ":"))
    needsComma = false
  }

  /// A key that is not a literal (the members a format's renderer returns).
  mutating func key(named key: String) {
    reserve(1)
    separate()
    putString(key)
    reserve(1)
    store(UInt8(ascii: ":"))
    needsComma = false
  }

  @inline(__always)
  mutating func string(_ string: String) {
    reserve(1)
    separate()
    putString(string)
    needsComma = true
  }

  /// A string literal that needs no escaping (ASCII letters, digits and punctuation other than `"` and `\\`).
  @inline(__always)
  mutating func literal(_ text: StaticString) {
    let length = text.utf8CodeUnitCount
    reserve(length + 3)
    separate()
    store(UInt8(ascii: "\""))
    storeAll(text.utf8Start, length)
    store(UInt8(ascii: "\""))
    needsComma = true
  }

  /// JSON text written as it is, with no comma before it: the fixed parts of an object whose members
  /// are always the same (`,"offset":"0x`), between the values `hexDigits` and `decimalDigits` write.
  /// The caller keeps the text well formed; the next value or key gets no comma either.
  @inline(__always)
  mutating func fragment(_ text: StaticString) {
    let length = text.utf8CodeUnitCount
    reserve(length)
    storeAll(text.utf8Start, length)
    needsComma = false
  }

  /// `value` in lowercase hex without leading zeros, unquoted and without `0x` (after a `fragment`).
  @inline(__always)
  mutating func hexDigits(_ value: UInt64) {
    reserve(16)
    count = Self.writeHex(value, to: base, at: count)
  }

  /// `value` in decimal (after a `fragment`).
  @inline(__always)
  mutating func decimalDigits(_ value: UInt64) {
    reserve(20)
    count = Self.writeDecimal(value, to: base, at: count)
  }

  /// A string, or `null` when absent.
  @inline(__always)
  mutating func string(_ string: String?) {
    if let string { self.string(string) } else { null() }
  }

  @inline(__always)
  mutating func number(_ number: UInt64) {
    reserve(21)  // a comma and UInt64.max's 20 digits
    separate()
    count = Self.writeDecimal(number, to: base, at: count)
    needsComma = true
  }

  /// `value`'s decimal digits at `base + position`, which has room for 20; returns the position after them.
  @inline(__always)
  static func writeDecimal(_ value: UInt64, to base: UnsafeMutablePointer<UInt8>, at position: Int) -> Int {
    // The number of digits: at most 20, so `threshold` (10^digits) is multiplied at most 19 times and
    // stays below 2^64 while the loop runs; it is not used after it wraps.
    var digits = 1
    var threshold: UInt64 = 10
    while digits < 20 && value >= threshold {
      digits &+= 1
      threshold &*= 10
    }
    // Two digits per division, from the last pair back.
    let pairs = decimalDigitPairs.utf8Start
    var rest = value
    var index = position &+ digits
    while rest >= 100 {
      let pair = Int(truncatingIfNeeded: rest % 100) &* 2
      rest /= 100
      index &-= 2
      base[index] = pairs[pair]
      base[index &+ 1] = pairs[pair &+ 1]
    }
    if rest >= 10 {
      let pair = Int(truncatingIfNeeded: rest) &* 2
      base[position] = pairs[pair]
      base[position &+ 1] = pairs[pair &+ 1]
    } else {
      base[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
    }
    return position &+ digits
  }

  @inline(__always)
  mutating func bool(_ value: Bool) {
    reserve(6)
    separate()
    let text: StaticString = value ? "true" : "false"
    storeAll(text.utf8Start, text.utf8CodeUnitCount)
    needsComma = true
  }

  @inline(__always)
  mutating func null() {
    reserve(5)
    separate()
    let text: StaticString = "null"
    storeAll(text.utf8Start, text.utf8CodeUnitCount)
    needsComma = true
  }

  /// `"0x…"`: the value in lowercase hex without leading zeros (`HexText.address`).
  @inline(__always)
  mutating func address(_ value: UInt64) {
    reserve(21)  // a comma, quotes, "0x" and at most 16 digits
    separate()
    store(UInt8(ascii: "\""))
    store(UInt8(ascii: "0"))
    store(UInt8(ascii: "x"))
    count = Self.writeHex(value, to: base, at: count)
    store(UInt8(ascii: "\""))
    needsComma = true
  }

  /// `value` in lowercase hex without leading zeros (one digit for 0) at `base + position`, which has
  /// room for 16; returns the position after them. Written from the last digit back.
  @inline(__always)
  static func writeHex(_ value: UInt64, to base: UnsafeMutablePointer<UInt8>, at position: Int) -> Int {
    let width = value == 0 ? 1 : (67 &- value.leadingZeroBitCount) / 4  // 1...16
    let digits = lowercaseHexDigits.utf8Start
    var rest = value
    var index = position &+ width
    repeat {
      index &-= 1
      base[index] = digits[Int(truncatingIfNeeded: rest & 0xF)]
      rest >>= 4
    } while index > position
    return position &+ width
  }

  /// `"0x"` and `value` as 8 lowercase hex digits, quoted (`"0x" + hexDigits(value, width: 8)`).
  mutating func hex32(_ value: UInt32) {
    reserve(13)
    separate()
    store(UInt8(ascii: "\""))
    store(UInt8(ascii: "0"))
    store(UInt8(ascii: "x"))
    for shift in stride(from: 28, through: 0, by: -4) { store(HexText.digit(Int((value >> UInt32(shift)) & 0xF))) }
    store(UInt8(ascii: "\""))
    needsComma = true
  }

  /// Every byte as two lowercase hex digits, quoted (`HexText.bytes`).
  mutating func hexString(_ data: [UInt8]) {
    reserve(data.count * 2 + 3)
    separate()
    store(UInt8(ascii: "\""))
    for byte in data {
      store(HexText.digit(Int(byte >> 4)))
      store(HexText.digit(Int(byte & 0xF)))
    }
    store(UInt8(ascii: "\""))
    needsComma = true
  }

  /// The first 16 bytes (zero-padded) as an uppercase dashed UUID, quoted (`HexText.uuid`).
  mutating func uuidString(_ data: [UInt8]) {
    reserve(39)
    separate()
    store(UInt8(ascii: "\""))
    for index in 0..<16 {
      if index == 4 || index == 6 || index == 8 || index == 10 { store(UInt8(ascii: "-")) }
      let byte = index < data.count ? data[index] : 0
      store(HexText.upperDigit(Int(byte >> 4)))
      store(HexText.upperDigit(Int(byte & 0xF)))
    }
    store(UInt8(ascii: "\""))
    needsComma = true
  }

  /// A value of the tree form (a format's own members).
  mutating func value(_ value: JSONValue) {
    reserve(1)
    separate()
    var text: [UInt8] = []
    value.write(into: &text)
    text.withUnsafeBufferPointer { putAll($0) }
    needsComma = true
  }

  /// Writes a comma when a value came before; the caller reserved room for it.
  @inline(__always)
  private mutating func separate() {
    if needsComma { store(UInt8(ascii: ",")) }
  }

  /// Makes room for `extra` more bytes: every `store` below is preceded by a `reserve` that counts it.
  @inline(__always)
  private mutating func reserve(_ extra: Int) {
    if extra > capacity - count { grow(extra) }
  }

  private mutating func grow(_ extra: Int) {
    let newCapacity = max(capacity * 2, count + extra)
    let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
    grown.initialize(from: base, count: count)
    base.deallocate()
    base = grown
    capacity = newCapacity
  }

  @inline(__always)
  private mutating func store(_ byte: UInt8) {
    base[count] = byte
    count += 1
  }

  @inline(__always)
  private mutating func storeAll(_ bytes: UnsafePointer<UInt8>, _ length: Int) {
    // One copy: a literal's length is known where this is inlined, and the copy becomes a few moves.
    UnsafeMutableRawPointer(base + count).copyMemory(from: bytes, byteCount: length)
    count &+= length
  }

  private mutating func putAll(_ bytes: UnsafeBufferPointer<UInt8>) {
    reserve(bytes.count)
    if let start = bytes.baseAddress { storeAll(start, bytes.count) }
  }

  /// True when no byte is a control character, `"` or `\\` (nothing to escape). Eight bytes at a
  /// time: a word has such a byte when a byte of it is below 0x20, or is 0 after an XOR with `"` or
  /// `\\` repeated; the test "some byte of `x` is below `n`" is `(x - n…n) & ~x & 0x80…80 != 0`, exact
  /// for n <= 0x80. Paths and library names are printed by the thousand.
  static func needsNoEscape(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highBits: UInt64 = 0x8080_8080_8080_8080
    @inline(__always) func hasByteBelow(_ word: UInt64, _ limit: UInt64) -> Bool {
      (word &- ones &* limit) & ~word & highBits != 0
    }
    var index = 0
    while index + 8 <= bytes.count {
      // A String's own UTF-8 in memory, not file bytes: ByteReader's rule is for the parsers.
      let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
      if hasByteBelow(word, 0x20) || hasByteBelow(word ^ (ones &* 0x22), 1) || hasByteBelow(word ^ (ones &* 0x5C), 1) {
        return false
      }
      index += 8
    }
    while index < bytes.count {
      let byte = bytes[index]
      if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
      index += 1
    }
    return true
  }

  /// `string` quoted, with `"`, `\\` and control characters escaped as `JSONValue.writeString` does.
  private mutating func putString(_ string: String) {
    var contiguous = string
    contiguous.withUTF8 { utf8 in
      if Self.needsNoEscape(UnsafeRawBufferPointer(utf8)) {
        reserve(utf8.count + 2)
        store(UInt8(ascii: "\""))
        if let start = utf8.baseAddress { storeAll(start, utf8.count) }
        store(UInt8(ascii: "\""))
      } else {
        var text: [UInt8] = []
        JSONValue.writeString(string, into: &text)
        text.withUnsafeBufferPointer { putAll($0) }
      }
    }
  }
}
