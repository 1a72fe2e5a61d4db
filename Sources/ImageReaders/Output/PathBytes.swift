/// Paths and names as the kernel and the file system hold them: bytes, not text. Linux allows any byte
/// but `/` and NUL in a file name, and any byte but NUL in a thread or process name, so a `String`
/// made with `String(decoding:as:)` loses every byte that is not UTF-8 (each becomes U+FFFD) and the
/// path can no longer be opened. `PathBytes` keeps them: `string(_:)` turns each such byte into one
/// private-use scalar, `withCString(_:_:)` turns it back into the byte for the system call, and
/// `TextEscaping` writes it as `\xHH` (as it writes the raw byte); `JSONWriter` writes the text `\xHH`.
///
/// The scheme: a byte 0x80–0xFF that is not part of a well-formed UTF-8 sequence becomes the scalar
/// U+F700 + byte (U+F780–U+F7FF, private use). So that decoding stays exact both ways, a well-formed
/// sequence that encodes a scalar of that range (`EF 9E 80`–`EF 9F BF`) is decoded as three such
/// scalars, one per byte: every string `string(_:)` returns encodes back to exactly its bytes.
public enum PathBytes {
  /// `bytes` (a path or name from the kernel, a file or the command line) as a `String`, losslessly.
  public static func string(_ bytes: some Collection<UInt8>) -> String {
    if let text = bytes.withContiguousStorageIfAvailable({ decoded(UnsafeRawBufferPointer($0)) }) { return text }
    return Array(bytes).withUnsafeBytes(decoded)
  }

  /// Raw `bytes` (a field of a mapped file) as a `String`, losslessly.
  public static func string(_ bytes: UnsafeRawBufferPointer) -> String { decoded(bytes) }

  /// The NUL-terminated `cString` (an argv entry, a `readlink`, `realpath` or `readdir` result) as a
  /// `String`, losslessly.
  public static func string(cString: UnsafePointer<CChar>) -> String {
    var length = 0
    while cString[length] != 0 { length += 1 }
    return decoded(UnsafeRawBufferPointer(start: cString, count: length))
  }

  /// The exact bytes `string` stands for: each scalar U+F780–U+F7FF becomes its byte, the rest is UTF-8.
  public static func bytes(_ string: String) -> [UInt8] {
    var result: [UInt8] = []
    var contiguous = string
    contiguous.withUTF8 { typed in
      let utf8 = UnsafeRawBufferPointer(typed)
      result.reserveCapacity(utf8.count)
      var index = 0
      while index < utf8.count {
        if let byte = byteScalar(utf8, at: index) {
          result.append(byte)
          index += 3
        } else {
          result.append(utf8[index])
          index += 1
        }
      }
    }
    return result
  }

  /// Calls `body` with `string`'s exact bytes (not NUL-terminated): the string's own UTF-8 when it
  /// holds no byte scalar, else a copy with each one turned back into its byte.
  public static func withBytes<Result>(_ string: String, _ body: (UnsafeRawBufferPointer) throws -> Result)
    rethrows -> Result {
    var contiguous = string
    if contiguous.withUTF8({ !containsByteScalar(UnsafeRawBufferPointer($0)) }) {
      return try contiguous.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }
    return try bytes(string).withUnsafeBytes(body)
  }

  /// Calls `body` with `string`'s exact bytes, NUL-terminated: the one way a path reaches a system call
  /// (`open`, `stat`, `opendir`, `realpath`, `execve`...). A path without byte scalars is passed as it is.
  public static func withCString<Result>(_ string: String, _ body: (UnsafePointer<CChar>) throws -> Result)
    rethrows -> Result {
    var contiguous = string
    if contiguous.withUTF8({ !containsByteScalar(UnsafeRawBufferPointer($0)) }) { return try string.withCString(body) }
    let encoded = bytes(string).map { CChar(bitPattern: $0) } + [0]
    return try encoded.withUnsafeBufferPointer { try body($0.baseAddress!) }  // never empty: it holds the NUL
  }

  /// The byte a scalar U+F780–U+F7FF stands for, when `utf8[index...]` starts with one (`EF 9E 80`–`EF 9F BF`).
  @inline(__always)
  static func byteScalar(_ utf8: UnsafeRawBufferPointer, at index: Int) -> UInt8? {
    guard utf8[index] == 0xEF, index + 2 < utf8.count else { return nil }
    let second = utf8[index + 1], third = utf8[index + 2]
    guard second == 0x9E || second == 0x9F, third & 0xC0 == 0x80 else { return nil }
    return 0x80 | (second & 1) << 6 | third & 0x3F
  }

  /// True when `utf8` holds a scalar U+F780–U+F7FF.
  static func containsByteScalar(_ utf8: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    while index < utf8.count {
      if byteScalar(utf8, at: index) != nil { return true }
      index += 1
    }
    return false
  }

  /// Appends the UTF-8 of the scalar that stands for `byte` (0x80–0xFF).
  @inline(__always)
  static func appendByteScalar(_ byte: UInt8, to result: inout [UInt8]) {
    result += [0xEF, 0x9E | (byte >> 6) & 1, 0x80 | byte & 0x3F]
  }

  static func decoded(_ bytes: UnsafeRawBufferPointer) -> String {
    // Most paths are ASCII or well-formed UTF-8 without byte scalars: decoded as they are.
    var index = 0
    var plain = true
    while index < bytes.count {
      let byte = bytes[index]
      if byte < 0x80 { index += 1; continue }
      let length = TextEscaping.wellFormedLength(bytes, at: index)
      if length == 0 || byteScalar(bytes, at: index) != nil { plain = false; break }
      index += length
    }
    if plain { return String(decoding: bytes, as: UTF8.self) }
    var result: [UInt8] = []
    result.reserveCapacity(bytes.count + 16)
    result.append(contentsOf: bytes[0..<index])
    while index < bytes.count {
      let byte = bytes[index]
      if byte < 0x80 { result.append(byte); index += 1; continue }
      let length = TextEscaping.wellFormedLength(bytes, at: index)
      if length == 0 || byteScalar(bytes, at: index) != nil {
        // A byte scalar's own three bytes are kept one by one, so the scalar stays unambiguous.
        for _ in 0..<max(length, 1) {
          appendByteScalar(bytes[index], to: &result)
          index += 1
        }
      } else {
        result.append(contentsOf: bytes[index..<index + length])  // length <= count - index
        index += length
      }
    }
    return String(decoding: result, as: UTF8.self)
  }
}
