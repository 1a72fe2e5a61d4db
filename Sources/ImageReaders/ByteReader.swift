/// A cursor over bytes we do not trust. Every read is checked and throws; nothing
/// traps or reads past `count`. Valid only inside the scope that lent the buffer.
///
/// This is the only place in the readers that loads from raw memory: every parser
/// (mapped files, ranges copied out of another process, our own PT_NOTE in memory)
/// sits on top of it.
public struct ByteReader {
  /// The byte order multi-byte fields are decoded in.
  public enum Endian: Sendable, Equatable { case little, big }

  // The lender guarantees the bytes outlive the reader; see the type's doc. Usable from inlined code so
  // that `read` and `peek` are specialized in the modules that call them (generic otherwise).
  @usableFromInline let bytes: UnsafeRawBufferPointer
  /// The byte order `read` decodes with.
  public var endian: Endian
  /// The position of the next `read`, from the start of this reader's bytes.
  @usableFromInline package internal(set) var offset = 0
  /// The number of bytes this reader covers.
  public var count: Int { bytes.count }
  /// The bytes left after `offset`.
  package var remaining: Int { bytes.count - offset }

  /// A reader over `bytes`, decoding with `endian`.
  @inline(__always)
  public init(_ bytes: UnsafeRawBufferPointer, endian: Endian = .little) {
    self.bytes = bytes
    self.endian = endian
  }

  /// Reads a fixed-width integer at `offset` and advances past it.
  @inlinable @inline(__always)
  package mutating func read<T: FixedWidthInteger>(_: T.Type) throws(FormatError) -> T {
    let value = try peek(T.self, at: offset)
    offset += MemoryLayout<T>.size  // peek proved size <= remaining
    return value
  }

  /// Reads a fixed-width integer at an absolute position without moving `offset`.
  @inlinable @inline(__always)
  package func peek<T: FixedWidthInteger>(_: T.Type, at position: Int) throws(FormatError) -> T {
    let size = MemoryLayout<T>.size
    guard position >= 0, position <= bytes.count, size <= bytes.count - position else {
      throw .truncated(at: position, needed: size, available: max(0, bytes.count - max(position, 0)))
    }
    let raw = bytes.loadUnaligned(fromByteOffset: position, as: T.self)
    return endian == .little ? T(littleEndian: raw) : T(bigEndian: raw)
  }

  /// Reads a fixed-width integer at `position` inside a record whose extent the caller has already
  /// checked against `count` (one check per table entry instead of one per field). A position outside
  /// the bytes is a programmer error and traps; input cannot reach it once the extent is checked.
  @inline(__always)
  func field<T: FixedWidthInteger>(_: T.Type, at position: Int) -> T {
    // A negative position wraps to a huge unsigned value and fails the second comparison too.
    precondition(MemoryLayout<T>.size <= bytes.count
                   && UInt(bitPattern: position) <= UInt(bitPattern: bytes.count - MemoryLayout<T>.size),
                 "field outside a checked record")
    let raw = bytes.loadUnaligned(fromByteOffset: position, as: T.self)
    return endian == .little ? T(littleEndian: raw) : T(bigEndian: raw)
  }

  /// `field` decoded little-endian whatever the reader's byte order (bytes compared as one integer).
  @inline(__always)
  func field<T: FixedWidthInteger>(_: T.Type, littleEndianAt position: Int) -> T {
    precondition(MemoryLayout<T>.size <= bytes.count
                   && UInt(bitPattern: position) <= UInt(bitPattern: bytes.count - MemoryLayout<T>.size),
                 "field outside a checked record")
    return T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
  }

  /// True when the bytes at `position` are `expected`'s (all of them inside this reader).
  func hasBytes(_ expected: StaticString, at position: Int) -> Bool {
    let length = expected.utf8CodeUnitCount
    guard position >= 0, position <= bytes.count, length <= bytes.count - position else { return false }
    return expected.withUTF8Buffer { $0.elementsEqual(UnsafeRawBufferPointer(rebasing: bytes[position..<position + length])) }
  }

  /// `field` of a 32- or 64-bit value as `UInt64`.
  @inline(__always)
  func field(is64Bit: Bool, at position: Int) -> UInt64 {
    is64Bit ? field(UInt64.self, at: position) : UInt64(field(UInt32.self, at: position))
  }

  /// Reads a 32- or 64-bit field as `UInt64`, as ELF's class-dependent fields are.
  @inline(__always)
  package mutating func readWord(is64Bit: Bool) throws(FormatError) -> UInt64 {
    is64Bit ? try read(UInt64.self) : UInt64(try read(UInt32.self))
  }

  /// Reads an unsigned LEB128 number (DWARF, Mach-O opcode streams) and advances past it. The loop
  /// ends at the end of the bytes at the latest; a value with significant bits beyond 64 throws.
  @inline(__always)
  package mutating func readULEB128() throws(FormatError) -> UInt64 {
    var result: UInt64 = 0
    var shift: UInt64 = 0
    var position = offset
    while position < bytes.count {
      let byte = bytes[position]
      position += 1  // position < bytes.count
      let payload = UInt64(byte & 0x7F)
      if shift < 64 {
        guard shift < 63 || payload <= 1 else { throw .leb128TooLong(at: offset) }
        result |= payload << shift
      } else if payload != 0 {
        throw .leb128TooLong(at: offset)
      }
      if byte & 0x80 == 0 {
        offset = position
        return result
      }
      shift &+= 7  // grows by 7 per byte read: bounded by 7 * bytes.count
    }
    throw .truncated(at: offset, needed: position - offset + 1, available: remaining)
  }

  /// Reads a signed LEB128 number and advances past it (see `readULEB128`).
  @inline(__always)
  mutating func readSLEB128() throws(FormatError) -> Int64 {
    var result: UInt64 = 0
    var shift: UInt64 = 0
    var position = offset
    while position < bytes.count {
      let byte = bytes[position]
      position += 1  // position < bytes.count
      let payload = UInt64(byte & 0x7F)
      if shift < 64 {
        result |= payload << shift
      } else if payload != 0 && payload != 0x7F {
        throw .leb128TooLong(at: offset)
      }
      shift &+= 7
      if byte & 0x80 == 0 {
        if shift < 64 && byte & 0x40 != 0 { result |= ~0 << shift }
        offset = position
        return Int64(bitPattern: result)
      }
    }
    throw .truncated(at: offset, needed: position - offset + 1, available: remaining)
  }

  /// Skips an LEB128 number (signed or unsigned) without decoding it.
  @inline(__always)
  mutating func skipLEB128() throws(FormatError) {
    var position = offset
    while position < bytes.count {
      let byte = bytes[position]
      position += 1  // position < bytes.count
      if byte & 0x80 == 0 { offset = position; return }
    }
    throw .truncated(at: offset, needed: position - offset + 1, available: remaining)
  }

  /// Reads an unsigned integer of `size` bytes (1, 2, 3, 4 or 8), as DWARF's sized forms are.
  @inline(__always)
  mutating func readUnsigned(size: Int) throws(FormatError) -> UInt64 {
    switch size {
    case 1: return UInt64(try read(UInt8.self))
    case 2: return UInt64(try read(UInt16.self))
    case 3:
      let low = UInt64(try read(UInt16.self)), high = UInt64(try read(UInt8.self))
      return endian == .little ? low | high << 16 : (low << 8) | high
    case 4: return UInt64(try read(UInt32.self))
    default: return try read(UInt64.self)
    }
  }

  /// The NUL-terminated string at `offset` (see `cString(at:)`); advances past its NUL.
  mutating func readCString() throws(FormatError) -> String {
    let length = try cStringLength(at: offset)
    let string = PathBytes.string(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]))
    offset += length + 1  // cStringLength proved offset + length < count
    return string
  }

  /// Skips a NUL-terminated string at `offset`, its NUL included.
  mutating func skipCString() throws(FormatError) {
    offset += try cStringLength(at: offset) + 1  // cStringLength proved offset + length < count
  }

  /// Copies `length` bytes at `offset` and advances past them.
  package mutating func readBytes(_ length: Int) throws(FormatError) -> [UInt8] {
    let result = try bytes(at: offset, length: length)
    offset += length  // bytes(at:length:) proved the range fits
    return result
  }

  /// Copies `length` bytes at an absolute position.
  package func bytes(at position: Int, length: Int) throws(FormatError) -> [UInt8] {
    guard position >= 0, length >= 0, position <= bytes.count, length <= bytes.count - position else {
      throw .outOfRange(start: position, length: length, limit: bytes.count)
    }
    return Array(UnsafeRawBufferPointer(rebasing: bytes[position..<position + length]))
  }

  /// Moves `offset` to an absolute position inside the bytes (the end included).
  @inline(__always)
  package mutating func seek(to position: Int) throws(FormatError) {
    guard position >= 0, position <= bytes.count else {
      throw .outOfRange(start: position, length: 0, limit: bytes.count)
    }
    offset = position
  }

  /// Skips `length` bytes.
  package mutating func skip(_ length: Int) throws(FormatError) {
    guard length >= 0, length <= remaining else {
      throw .truncated(at: offset, needed: length, available: remaining)
    }
    offset += length
  }

  /// A reader over `length` bytes at `start`; its offsets restart at 0 and it keeps this endianness.
  @inline(__always)
  public func slice(at start: Int, length: Int) throws(FormatError) -> ByteReader {
    guard start >= 0, length >= 0, start <= bytes.count, length <= bytes.count - start else {
      throw .outOfRange(start: start, length: length, limit: bytes.count)
    }
    return ByteReader(UnsafeRawBufferPointer(rebasing: bytes[start..<start + length]), endian: endian)
  }

  /// The string in the fixed-width field of `width` bytes at `position`, ending at its first NUL
  /// (or at the field's end). Decoded losslessly (`PathBytes`); never reads past the field.
  func fixedString(at position: Int, width: Int) throws(FormatError) -> String {
    let field = try slice(at: position, length: width)
    var end = 0
    while end < field.count, field.bytes[end] != 0 { end += 1 }
    return PathBytes.string(UnsafeRawBufferPointer(rebasing: field.bytes[0..<end]))
  }

  /// The NUL-terminated string at `position`; the NUL must come before the end of the bytes.
  package func cString(at position: Int) throws(FormatError) -> String {
    guard position >= 0, position < bytes.count else {
      throw .outOfRange(start: position, length: 1, limit: bytes.count)
    }
    var end = position
    while end < bytes.count, bytes[end] != 0 { end += 1 }
    guard end < bytes.count else { throw .unterminatedString(at: position) }
    return PathBytes.string(UnsafeRawBufferPointer(rebasing: bytes[position..<end]))
  }

  /// The length in bytes of the NUL-terminated string at `position` (the NUL not counted); the NUL must
  /// come before the end of the bytes.
  func cStringLength(at position: Int) throws(FormatError) -> Int {
    guard position >= 0, position < bytes.count else {
      throw .outOfRange(start: position, length: 1, limit: bytes.count)
    }
    var end = position
    while end < bytes.count, bytes[end] != 0 { end += 1 }
    guard end < bytes.count else { throw .unterminatedString(at: position) }
    return end - position
  }

  /// Calls `body` with the raw bytes; for hashing or copying, never for typed loads.
  package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
    try body(bytes)
  }

  /// Calls `body` with a reader over `bytes`, keeping the typed error (`Array.withUnsafeBytes`
  /// rethrows untyped). Not through `Result`: making `Result<R, FormatError>` for each new `R` looks
  /// `FormatError: Error` up in every conformance record of the executable, at each start.
  package static func reading<R>(_ bytes: [UInt8], endian: Endian = .little,
                                _ body: (ByteReader) throws(FormatError) -> R) throws(FormatError) -> R {
    var failure: FormatError?
    let value: R? = bytes.withUnsafeBytes { raw in
      do throws(FormatError) { return try body(ByteReader(raw, endian: endian)) } catch { failure = error; return nil }
    }
    switch (value, failure) {
    case (let value?, _): return value
    case (nil, let failure?): throw failure
    case (nil, nil): preconditionFailure("body neither returned nor threw")
    }
  }
}

extension ByteReader {
  /// The range `offset..<offset+size` from a file's fields, checked for overflow and for fitting in `limit`.
  package static func checkedRange(offset: UInt64, size: UInt64, limit: Int,
                                  _ field: @autoclosure () -> String) throws(FormatError) -> Range<Int> {
    let (end, overflowed) = offset.addingReportingOverflow(size)
    guard !overflowed, let lower = Int(exactly: offset), let upper = Int(exactly: end), upper <= limit else {
      throw .fieldOutOfRange(field(), offset: offset, size: size, limit: limit)
    }
    return lower..<upper
  }
}
