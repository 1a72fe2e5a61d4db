
/// Output text built as UTF-8 bytes: appending a name, a number or a fixed-width address costs a copy
/// and no intermediate strings, for outputs of thousands of lines.
package struct UTF8Output {
  private(set) var bytes: [UInt8] = []

  package init(capacity: Int) { bytes.reserveCapacity(capacity) }

  package mutating func append(_ text: String) {
    // Native and small strings lend their bytes; others (bridged) go through the view.
    if text.utf8.withContiguousStorageIfAvailable({ bytes.append(contentsOf: $0) }) == nil {
      bytes.append(contentsOf: text.utf8)
    }
  }

  /// `text` escaped with `TextEscaping` (names and paths from files are data); copied when plain.
  package mutating func appendEscaped(_ text: String) {
    var text = text
    text.withUTF8 { utf8 in
      if TextEscaping.isPlain(UnsafeRawBufferPointer(utf8)) { bytes.append(contentsOf: utf8) } else { TextEscaping.append(utf8, to: &bytes) }
    }
  }

  package mutating func append(_ text: StaticString) {
    text.withUTF8Buffer { bytes.append(contentsOf: $0) }
  }

  package mutating func append(byte: UInt8) { bytes.append(byte) }

  /// `value` in decimal.
  package mutating func appendDecimal(_ value: UInt64) {
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes for 20 digits at most, written from the right
    withUnsafeMutableBytes(of: &digits) { buffer in
      var remaining = value
      var index = buffer.count
      repeat {
        index -= 1
        buffer[index] = UInt8(ascii: "0") + UInt8(remaining % 10)  // a digit: < 10
        remaining /= 10
      } while remaining > 0
      // Rebased: a raw buffer is copied whole, a slice of one a byte at a time.
      bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
    }
  }

  /// `value` in decimal, with a `-` when negative (as `String(value)`).
  package mutating func appendDecimal(_ value: Int) {
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    appendDecimal(UInt64(value.magnitude))  // UInt is at most 64 bits: exact
  }

  /// `0x` and `value` as 16 lowercase hex digits.
  package mutating func appendPaddedHex(_ value: UInt64) {
    bytes.append(UInt8(ascii: "0"))
    bytes.append(UInt8(ascii: "x"))
    for shift in stride(from: 60, through: 0, by: -4) {
      let digit = UInt8((value >> UInt64(shift)) & 0xF)
      bytes.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
    }
  }

  /// `value` in lowercase hex without leading zeros or `0x` (one digit for 0).
  package mutating func appendHex(_ value: UInt64) {
    var digits: (UInt64, UInt64) = (0, 0)  // 16 bytes for 16 digits at most, written from the right
    withUnsafeMutableBytes(of: &digits) { buffer in
      var remaining = value
      var index = buffer.count
      repeat {
        index -= 1
        buffer[index] = HexText.digit(Int(truncatingIfNeeded: remaining & 0xF))
        remaining >>= 4
      } while remaining > 0
      bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
    }
  }

  /// The number of bytes gathered.
  package var count: Int { bytes.count }

  /// Drops what was appended after the first `count` bytes (a record that turned out to say nothing).
  package mutating func truncate(to count: Int) {
    if count < bytes.count { bytes.removeLast(bytes.count - count) }
  }

  /// Hands the bytes to `write` and empties the buffer (keeping its capacity) once there are more
  /// than `limit` of them.
  package mutating func drain(over limit: Int, to write: (UnsafeRawBufferPointer) -> Void) {
    guard bytes.count > limit else { return }
    bytes.withUnsafeBytes { write($0) }
    bytes.removeAll(keepingCapacity: true)
  }

  /// The text, decoded once.
  package var text: String { String(decoding: bytes, as: UTF8.self) }
}
