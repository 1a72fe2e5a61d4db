/// The one JSON writer and escaper: `JSONWriter` writes compact JSON into bytes, `JSONWriter.appendString`
/// escapes a string for it, `jsonStringLiteral` and `JSONValue.serialized` use the same escaping.

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped, everything
/// else kept as is (RFC 8259 section 7).
package func jsonStringLiteral(_ text: String) -> String {
  var bytes: [UInt8] = []
  JSONWriter.appendString(text, to: &bytes)
  return String(decoding: bytes, as: UTF8.self)
}

/// "00", "01", ... "99" in one literal: the pair for n (0...99) starts at 2n.
@usableFromInline let decimalDigitPairs: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

/// Writes compact JSON straight into bytes, with no tree of values in between: the views of files
/// that are printed by the thousand (ELF's, and the members every slice has) are written with it.
/// Commas are placed by the writer: a value or key after another value gets one. The bytes live in
/// one buffer that each write first makes room in, then stores into through a pointer (an `Array`
/// append per byte checks uniqueness and capacity every time).
public struct JSONWriter: ~Copyable {
  @usableFromInline var base: UnsafeMutablePointer<UInt8>
  @usableFromInline var capacity: Int
  @usableFromInline var count = 0
  @usableFromInline var needsComma = false

  /// An empty writer whose buffer starts with room for `capacity` bytes (it grows as needed).
  @inlinable
  public init(capacity: Int = 2048) {
    self.capacity = max(capacity, 64)
    base = UnsafeMutablePointer<UInt8>.allocate(capacity: self.capacity)
  }

  @inlinable
  deinit { base.deallocate() }

  /// The JSON text written so far.
  public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

  /// `{`: members follow, each a `key` and a value.
  @inlinable @inline(__always)
  public mutating func beginObject() { open(UInt8(ascii: "{")) }

  /// `}`.
  @inlinable @inline(__always)
  public mutating func endObject() { close(UInt8(ascii: "}")) }

  /// `[`: values follow.
  @inlinable @inline(__always)
  public mutating func beginArray() { open(UInt8(ascii: "[")) }

  /// `]`.
  @inlinable @inline(__always)
  public mutating func endArray() { close(UInt8(ascii: "]")) }

  @inlinable @inline(__always)
  mutating func open(_ bracket: UInt8) {
    reserve(2)
    separate()
    store(bracket)
    needsComma = false
  }

  @inlinable @inline(__always)
  mutating func close(_ bracket: UInt8) {
    reserve(1)
    store(bracket)
    needsComma = true
  }

  /// `"key":` and the string, or `null` when absent.
  @inlinable @inline(__always)
  public mutating func member(_ key: StaticString, string value: String?) {
    self.key(key)
    string(value)
  }

  /// `"key":` and `"0x…"` (`address`).
  @inlinable @inline(__always)
  public mutating func member(_ key: StaticString, address value: UInt64) {
    self.key(key)
    address(value)
  }

  /// `"key":` and the number.
  @inlinable @inline(__always)
  public mutating func member(_ key: StaticString, number value: UInt64) {
    self.key(key)
    number(value)
  }

  /// `"key":` and `true` or `false`.
  @inlinable @inline(__always)
  public mutating func member(_ key: StaticString, bool value: Bool) {
    self.key(key)
    bool(value)
  }

  /// `"key":` and an array of strings.
  @inlinable @inline(__always)
  public mutating func member(_ key: StaticString, strings values: [String]) {
    self.key(key)
    beginArray()
    for value in values { string(value) }
    endArray()
  }

  /// `"key":` (keys are identifiers: nothing to escape); the value comes next.
  @inlinable @inline(__always)
  public mutating func key(_ key: StaticString) {
    quoted(key, extra: 1)
    store(UInt8(ascii: ":"))
    needsComma = false
  }

  /// A string, escaped as JSON requires.
  @inlinable @inline(__always)
  public mutating func string(_ string: String) {
    reserve(1)
    separate()
    putString(string)
    needsComma = true
  }

  /// A string literal that needs no escaping (ASCII letters, digits and punctuation other than `"` and `\\`).
  @inlinable @inline(__always)
  package mutating func literal(_ text: StaticString) {
    quoted(text, extra: 0)
    needsComma = true
  }

  /// A comma when due, then `text` quoted, with room reserved for `extra` more bytes.
  @inlinable @inline(__always)
  mutating func quoted(_ text: StaticString, extra: Int) {
    let length = text.utf8CodeUnitCount
    reserve(length + 3 + extra)
    separate()
    store(UInt8(ascii: "\""))
    storeAll(text.utf8Start, length)
    store(UInt8(ascii: "\""))
  }

  /// JSON text written as it is, with no comma before it: the fixed parts of an object whose members
  /// are always the same (`,"offset":"0x`), between the values `hexDigits` and `decimalDigits` write.
  /// The caller keeps the text well formed; the next value or key gets no comma either.
  @inlinable @inline(__always)
  package mutating func fragment(_ text: StaticString) {
    let length = text.utf8CodeUnitCount
    reserve(length)
    storeAll(text.utf8Start, length)
    needsComma = false
  }

  /// `value` in lowercase hex without leading zeros, unquoted and without `0x` (after a `fragment`).
  @inlinable @inline(__always)
  package mutating func hexDigits(_ value: UInt64) {
    reserve(16)
    count = Self.writeHex(value, to: base, at: count)
  }

  /// `value` in decimal (after a `fragment`).
  @inlinable @inline(__always)
  package mutating func decimalDigits(_ value: UInt64) {
    reserve(20)
    count = Self.writeDecimal(value, to: base, at: count)
  }

  /// A string, or `null` when absent.
  @inlinable @inline(__always)
  public mutating func string(_ string: String?) {
    if let string { self.string(string) } else { null() }
  }

  /// A number, in decimal.
  @inlinable @inline(__always)
  public mutating func number(_ number: UInt64) {
    reserve(21)  // a comma and UInt64.max's 20 digits
    separate()
    count = Self.writeDecimal(number, to: base, at: count)
    needsComma = true
  }

  /// The fixed-point number `units` / 10^`scale` in decimal (`number(1234, scale: 3)` is `1.234`), with
  /// no floating point to round: a share or a ratio written exactly. `scale` is at most 19.
  package mutating func number(_ units: UInt64, scale: Int) {
    let scale = max(0, min(scale, 19))
    var divisor: UInt64 = 1
    for _ in 0..<scale { divisor *= 10 }  // 10^19 < 2^64
    number(units / divisor)
    guard scale > 0 else { return }
    let fraction = String(units % divisor)
    reserve(scale + 1)
    store(UInt8(ascii: "."))
    for byte in (String(repeating: "0", count: scale - fraction.utf8.count) + fraction).utf8 { store(byte) }
  }

  /// `value`'s decimal digits at `base + position`, which has room for 20; returns the position after them.
  @usableFromInline @inline(__always)
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

  /// `true` or `false`.
  @inlinable @inline(__always)
  public mutating func bool(_ value: Bool) {
    reserve(6)
    separate()
    let text: StaticString = value ? "true" : "false"
    storeAll(text.utf8Start, text.utf8CodeUnitCount)
    needsComma = true
  }

  /// `null`.
  @inlinable @inline(__always)
  public mutating func null() {
    reserve(5)
    separate()
    let text: StaticString = "null"
    storeAll(text.utf8Start, text.utf8CodeUnitCount)
    needsComma = true
  }

  /// `"0x…"`: the value in lowercase hex without leading zeros (`HexText.address`).
  @inlinable @inline(__always)
  public mutating func address(_ value: UInt64) {
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
  @inlinable @inline(__always)
  package static func writeHex(_ value: UInt64, to base: UnsafeMutablePointer<UInt8>, at position: Int) -> Int {
    HexText.writeHex(value, to: base, at: position)
  }

  /// `"0x"` and `value` as 8 lowercase hex digits, quoted (`"0x" + hexDigits(value, width: 8)`).
  package mutating func hex32(_ value: UInt32) {
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
  package mutating func hexString(_ data: [UInt8]) {
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
  package mutating func uuidString(_ data: [UInt8]) {
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

  /// A value of the tree form (a format's own members), compact.
  public mutating func value(_ value: JSONValue) {
    reserve(1)
    separate()
    var text = value.serialized()
    text.withUTF8 { putAll($0) }
    needsComma = true
  }

  /// Writes a comma when a value came before; the caller reserved room for it.
  @inlinable @inline(__always)
  mutating func separate() {
    if needsComma { store(UInt8(ascii: ",")) }
  }

  /// Makes room for `extra` more bytes: every `store` below is preceded by a `reserve` that counts it.
  @inlinable @inline(__always)
  mutating func reserve(_ extra: Int) {
    if extra > capacity - count { grow(extra) }
  }

  @usableFromInline mutating func grow(_ extra: Int) {
    let newCapacity = max(capacity * 2, count + extra)
    let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
    grown.initialize(from: base, count: count)
    base.deallocate()
    base = grown
    capacity = newCapacity
  }

  @inlinable @inline(__always)
  mutating func store(_ byte: UInt8) {
    base[count] = byte
    count += 1
  }

  @inlinable @inline(__always)
  mutating func storeAll(_ bytes: UnsafePointer<UInt8>, _ length: Int) {
    // One copy: a literal's length is known where this is inlined, and the copy becomes a few moves.
    UnsafeMutableRawPointer(base + count).copyMemory(from: bytes, byteCount: length)
    count &+= length
  }

  @usableFromInline mutating func putAll(_ bytes: UnsafeBufferPointer<UInt8>) {
    reserve(bytes.count)
    if let start = bytes.baseAddress { storeAll(start, bytes.count) }
  }

  /// Appends `string` as a JSON string literal: `"`, `\\` and control characters escaped (`\\n`, `\\r`,
  /// `\\t`, else `\\u00XX`); a scalar U+F780–U+F7FF, which stands for a byte that is not UTF-8
  /// (`PathBytes`), becomes the text `\\xHH`; every other byte of the UTF-8 is copied as is, which
  /// RFC 8259 allows. The one JSON escaper.
  static func appendString(_ string: String, to result: inout [UInt8]) {
    result.append(UInt8(ascii: "\""))
    var string = string
    string.withUTF8 { bytes in
      if needsNoEscape(UnsafeRawBufferPointer(bytes)) {
        result.append(contentsOf: bytes)  // the common case: nothing to escape
        return
      }
      var index = 0
      while index < bytes.count {
        let byte = bytes[index]
        index += 1
        if byte == 0xEF, let raw = PathBytes.byteScalar(UnsafeRawBufferPointer(bytes), at: index - 1) {
          // A byte that is not UTF-8 (a path's, a name's): JSON has no way to hold it, so it is written
          // as the text styles write it, `\xHH`, which reads as a backslash and four characters.
          result += [UInt8(ascii: "\\"), UInt8(ascii: "\\"), UInt8(ascii: "x"),
                     HexText.digit(Int(raw >> 4)), HexText.digit(Int(raw & 0xF))]
          index += 2
          continue
        }
        switch byte {
        case UInt8(ascii: "\""): result += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
        case UInt8(ascii: "\\"): result += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case 0x0A: result += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case 0x0D: result += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        case 0x09: result += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case 0..<0x20:
          result += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                     HexText.digit(Int(byte >> 4)), HexText.digit(Int(byte & 0xF))]
        default: result.append(byte)
        }
      }
    }
    result.append(UInt8(ascii: "\""))
  }

  /// True when no byte is a control character, `"`, `\\` or 0xEF (the lead byte of a byte scalar:
  /// `PathBytes`), so nothing needs escaping. Eight bytes at a
  /// time: a word has such a byte when a byte of it is below 0x20, or is 0 after an XOR with `"` or
  /// `\\` repeated; the test "some byte of `x` is below `n`" is `(x - n…n) & ~x & 0x80…80 != 0`, exact
  /// for n <= 0x80. Paths and library names are printed by the thousand.
  static func needsNoEscape(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    while index + 8 <= bytes.count {
      // A String's own UTF-8 in memory, not file bytes: ByteReader's rule is for the parsers.
      let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
      if ByteScan.hasByte(in: word, below: 0x20) || ByteScan.hasByte(in: word, equalTo: 0x22)
        || ByteScan.hasByte(in: word, equalTo: 0x5C) || ByteScan.hasByte(in: word, equalTo: 0xEF) {
        return false
      }
      index += 8
    }
    while index < bytes.count {
      let byte = bytes[index]
      if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0xEF { return false }
      index += 1
    }
    return true
  }

  /// `string` quoted and escaped (`appendString`).
  @usableFromInline mutating func putString(_ string: String) {
    var contiguous = string
    contiguous.withUTF8 { utf8 in
      if Self.needsNoEscape(UnsafeRawBufferPointer(utf8)) {
        reserve(utf8.count + 2)
        store(UInt8(ascii: "\""))
        if let start = utf8.baseAddress { storeAll(start, utf8.count) }
        store(UInt8(ascii: "\""))
      } else {
        var text: [UInt8] = []
        Self.appendString(string, to: &text)
        text.withUnsafeBufferPointer { putAll($0) }
      }
    }
  }
}
