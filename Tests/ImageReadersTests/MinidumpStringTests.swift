import Testing
@testable import ImageReaders

/// MINIDUMP_STRING's UTF-16LE, transcoded by hand to UTF-8 (`MinidumpDecoder.utf16`): the same text as the
/// standard library's `String(decoding:as: UTF16.self)` gives, unpaired surrogates (U+FFFD each) included,
/// up to the first NUL.
@Suite struct MinidumpStringTests {
  static let cases: [[UInt16]] = [
    [], Array("C:\\Windows\\System32\\kernel32.dll".utf16), Array("libc.so.6".utf16) + [0] + Array("after".utf16),
    Array("é ß ю 漢字 €".utf16), Array("😀 𝄞 x".utf16), [0xD800], [0xDC00], [0xD83D, 0x41], [0x41, 0xD83D],
    [0xDE00, 0xD83D], [0xD83D, 0xD83D, 0xDE00], [0xFFFF, 0xFFFE, 0xE000, 0x7FF, 0x800, 0x80, 0x7F], [0x41, 0, 0xD800],
  ]

  @Test(arguments: cases)
  func sameAsTheStandardLibrary(_ units: [UInt16]) {
    let bytes = units.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
    let expected = String(decoding: units.prefix { $0 != 0 }, as: UTF16.self)
    let decoded = bytes.withUnsafeBytes { MinidumpDecoder<ByteReader>.utf16(ByteReader($0), count: units.count) }
    #expect(decoded == expected)
    #expect(Array(decoded.unicodeScalars) == Array(expected.unicodeScalars))
  }
}

/// `spaceSeparatedWords`, the UTF-8 walk STACK CFI rules are split with: the words `split(separator: " ")`
/// gives, for runs of spaces, spaces at the ends, tabs (not separators) and other than ASCII.
@Suite struct SpaceSeparatedWordsTests {
  @Test(arguments: ["", " ", "   ", ".cfa: $rsp 16 + .ra: .cfa -8 + ^", "  $rbp:  .cfa -16 + ^  ", "a\tb c", "é ß  漢字 😀", "x"])
  func sameAsCharacterSplit(_ text: String) {
    #expect(text.spaceSeparatedWords == text.split(separator: " "))
    #expect(text[...].spaceSeparatedWords == text.split(separator: " "))
  }
}
