/// The one hex formatting: every hex number, byte string and UUID the package prints comes from here
/// (error messages, the image lines, JSON, the views of files, symbolicated reports).

/// Lowercase hex digits of `value`, zero-padded to `width` digits (no `0x`).
public func hexDigits(_ value: UInt64, width: Int = 0) -> String {
  let count = max(HexText.digitCount(value), min(max(width, 0), 16))
  if width > 16 { return String(repeating: "0", count: width - 16) + hexDigits(value, width: 16) }
  return String(unsafeUninitializedCapacity: count) { buffer in
    guard let base = buffer.baseAddress else { return 0 }
    return HexText.writeDigits(value, count: count, to: base, at: 0)
  }
}

/// Hex text written straight into bytes: no `String` per digit or per byte, for the outputs printed by
/// the thousand (file views, JSON, crash lines).
public enum HexText {
  /// The lowercase hex digit for `nibble` (0...15).
  @inlinable @inline(__always)
  package static func digit(_ nibble: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: nibble < 10 ? 48 &+ nibble : 87 &+ nibble)  // "0" is 48, "a" - 10 is 87
  }

  /// The uppercase hex digit for `nibble` (0...15).
  @inlinable @inline(__always)
  static func upperDigit(_ nibble: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: nibble < 10 ? 48 &+ nibble : 55 &+ nibble)  // "A" - 10 is 55
  }

  /// How many hex digits `value` has without leading zeros (1 for 0): 1...16.
  @inlinable @inline(__always)
  static func digitCount(_ value: UInt64) -> Int {
    value == 0 ? 1 : (67 &- value.leadingZeroBitCount) / 4
  }

  /// The last `count` (1...16) hex digits of `value`, lowercase, at `base + position`; returns the
  /// position after them. Written from the last digit back.
  @inlinable @inline(__always)
  static func writeDigits(_ value: UInt64, count: Int, to base: UnsafeMutablePointer<UInt8>, at position: Int) -> Int {
    var rest = value
    var index = position &+ count
    repeat {
      index &-= 1
      base[index] = digit(Int(truncatingIfNeeded: rest & 0xF))
      rest >>= 4
    } while index > position
    return position &+ count
  }

  /// `value` in lowercase hex without leading zeros (one digit for 0) at `base + position`, which has
  /// room for 16; returns the position after them.
  @inlinable @inline(__always)
  package static func writeHex(_ value: UInt64, to base: UnsafeMutablePointer<UInt8>, at position: Int) -> Int {
    writeDigits(value, count: digitCount(value), to: base, at: position)
  }

  /// Every byte as two lowercase hex digits (`BuildID.hex`).
  public static func bytes<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
    String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
      var out = 0
      for byte in bytes {
        buffer[out] = digit(Int(byte >> 4))
        buffer[out + 1] = digit(Int(byte & 0xF))
        out += 2  // the capacity is 2 * bytes.count
      }
      return out
    }
  }

  /// The first 16 bytes (zero-padded) as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX` (`BuildID.uuid`), or
  /// lowercase when `uppercase` is false.
  public static func uuid(_ bytes: [UInt8], uppercase: Bool = true) -> String {
    String(unsafeUninitializedCapacity: 36) { buffer in
      var out = 0
      for index in 0..<16 {
        if index == 4 || index == 6 || index == 8 || index == 10 {
          buffer[out] = UInt8(ascii: "-")
          out += 1
        }
        let byte = index < bytes.count ? bytes[index] : 0
        buffer[out] = uppercase ? upperDigit(Int(byte >> 4)) : digit(Int(byte >> 4))
        buffer[out + 1] = uppercase ? upperDigit(Int(byte & 0xF)) : digit(Int(byte & 0xF))
        out += 2  // 16 * 2 digits and 4 dashes: 36
      }
      return out
    }
  }

  /// `0x` and `value` in lowercase hex without leading zeros.
  public static func address(_ value: UInt64) -> String {
    let width = digitCount(value)
    return String(unsafeUninitializedCapacity: width + 2) { buffer in
      guard let base = buffer.baseAddress else { return 0 }
      base[0] = UInt8(ascii: "0")
      base[1] = UInt8(ascii: "x")
      return writeDigits(value, count: width, to: base, at: 2)
    }
  }
}
