import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// `PathBytes`: bytes to `String` and back exactly, for every byte and for random byte strings; the
/// text styles and JSON write a byte that is not UTF-8 as `\xHH`.
@Suite struct PathBytesTests {
  /// The exact bytes `withCString` hands a system call.
  static func cBytes(_ text: String) -> [UInt8] {
    PathBytes.withCString(text) { pointer in
      var result: [UInt8] = []
      var index = 0
      while pointer[index] != 0 { result.append(UInt8(bitPattern: pointer[index])); index += 1 }
      return result
    }
  }

  /// Every single byte (but NUL, which no path or name holds) round-trips, and is written as the
  /// scheme says: ASCII as it is, 0x80-0xFF alone (never UTF-8) as one scalar U+F700 + byte.
  @Test func everySingleByte() {
    for value in 1...255 {
      let byte = UInt8(value)
      let text = PathBytes.string([byte])
      #expect(PathBytes.bytes(text) == [byte], "byte \(byte)")
      #expect(Self.cBytes(text) == [byte], "byte \(byte)")
      if byte >= 0x80 {
        #expect(text.unicodeScalars.map(\.value) == [0xF700 + UInt32(byte)], "byte \(byte)")
        let hex = String(byte, radix: 16)
        #expect(TextEscaping.escaped(text) == "\\x\(hex)")
        #expect(jsonStringLiteral(text) == "\"\\\\x\(hex)\"")
      } else {
        #expect(text.unicodeScalars.map(\.value) == [UInt32(byte)])
      }
      #expect(PathBytes.string(PathBytes.bytes(text)) == text)
    }
  }

  /// Every pair of non-NUL bytes: some are well-formed two-byte UTF-8 (kept as their scalar), the rest
  /// are one or two byte scalars; all round-trip.
  @Test func everyPairOfBytes() {
    for first in 1...255 {
      for second in 1...255 {
        let bytes = [UInt8(first), UInt8(second)]
        let text = PathBytes.string(bytes)
        #expect(PathBytes.bytes(text) == bytes)
        #expect(PathBytes.string(PathBytes.bytes(text)) == text)
      }
    }
  }

  /// A well-formed sequence of a byte scalar (U+F780-U+F7FF, `EF 9E 80`-`EF 9F BF`) in the input is
  /// decoded byte by byte, so the String it gives cannot be mistaken for the one byte it would stand for.
  @Test func byteScalarsInTheInputStayUnambiguous() {
    for third in 0x80...0xBF {
      for second: UInt8 in [0x9E, 0x9F] {
        let bytes: [UInt8] = [0x61, 0xEF, second, UInt8(third), 0x62]
        let text = PathBytes.string(bytes)
        #expect(text.unicodeScalars.map(\.value) == [0x61, 0xF7EF, 0xF700 + UInt32(second), 0xF700 + UInt32(third), 0x62])
        #expect(PathBytes.bytes(text) == bytes)
        #expect(TextEscaping.escaped(text) == TextEscaping.escaped(bytes: bytes))
      }
    }
    // Neighbours of the range are ordinary text.
    #expect(PathBytes.string([0xEF, 0x9D, 0xBF]).unicodeScalars.map(\.value) == [0xF77F])
    #expect(PathBytes.string([0xEF, 0xA0, 0x80]).unicodeScalars.map(\.value) == [0xF800])
  }

  /// Random byte strings, biased towards the bytes that matter (high bytes, UTF-8 lead bytes, 0xEF):
  /// bytes -> String -> bytes is the identity, and so is String -> bytes -> String; the escaped text
  /// unescapes to the bytes.
  @Test func randomByteStrings() {
    var generator = SeededGenerator(seed: 0x9A7B)
    let interesting: [UInt8] = [0x2F, 0x5C, 0x61, 0x80, 0x9E, 0x9F, 0xBF, 0xC2, 0xC3, 0xE9, 0xED, 0xEF, 0xF0, 0xF4, 0xFF]
    for _ in 0..<20_000 {
      let length = Int.random(in: 0...24, using: &generator)
      let bytes = (0..<length).map { _ in
        Bool.random(using: &generator) ? interesting.randomElement(using: &generator)! : UInt8.random(in: 1...255, using: &generator)
      }
      let text = PathBytes.string(bytes)
      #expect(PathBytes.bytes(text) == bytes, "\(bytes)")
      #expect(Self.cBytes(text) == bytes, "\(bytes)")
      #expect(PathBytes.string(PathBytes.bytes(text)) == text, "\(bytes)")
      #expect(TextEscaping.unescaped(TextEscaping.escaped(text)) == bytes, "\(bytes)")
    }
  }

  /// Well-formed UTF-8 is decoded as `String(decoding:as:)` decodes it.
  @Test func utf8IsUnchanged() {
    for text in ["", "/usr/lib/libc.so.6", "/tmp/café/prog", "名前/😀", "back\\slash"] {
      #expect(PathBytes.string(Array(text.utf8)) == text)
      #expect(PathBytes.bytes(text) == Array(text.utf8))
    }
  }

  /// The escaped form of a path under `caf\xe9`, in the text styles and in JSON (expected text written
  /// from the rules).
  @Test func escapedOutput() {
    let text = PathBytes.string(Array("/tmp/caf".utf8) + [0xE9] + Array("/back\\slash\n".utf8))
    #expect(TextEscaping.escaped(text) == "/tmp/caf\\xe9/back\\\\slash\\n")
    #expect(jsonStringLiteral(text) == "\"/tmp/caf\\\\xe9/back\\\\slash\\n\"")
    var writer = JSONWriter()
    writer.string(text)
    #expect(String(decoding: writer.bytes, as: UTF8.self) == "\"/tmp/caf\\\\xe9/back\\\\slash\\n\"")
  }

  /// Fixed-width and NUL-terminated fields of files keep their bytes too (a `pr_fname`, a DT_NEEDED name).
  @Test func byteReaderStringsKeepBytes() throws {
    let bytes: [UInt8] = [0x6D, 0xE9, 0x69, 0x6E, 0x00, 0x00, 0x77, 0xFF, 0x00]
    try ByteReader.reading(bytes) { reader throws(FormatError) in
      #expect(PathBytes.bytes(try reader.fixedString(at: 0, width: 6)) == [0x6D, 0xE9, 0x69, 0x6E])
      #expect(PathBytes.bytes(try reader.cString(at: 6)) == [0x77, 0xFF])
    }
  }
}
