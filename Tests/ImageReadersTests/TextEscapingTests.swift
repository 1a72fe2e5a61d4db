import Testing
import ImageReaders
import ImageLogTestSupport

/// The text styles' escaping scheme (`TextEscaping`), rule by rule, and its reversal over random bytes.
@Suite struct TextEscapingTests {
  static func escaped(_ bytes: [UInt8]) -> String { TextEscaping.escaped(bytes: bytes) }

  @Test(arguments: [
    // Each rule of the scheme, with its expected text written out by hand from the rule.
    ([UInt8]("plain /usr/lib/libc.so.6".utf8), "plain /usr/lib/libc.so.6"),
    ([UInt8(ascii: "\\")], "\\\\"),
    ([0x0A, 0x0D, 0x09], "\\n\\r\\t"),
    ([0x1B, 0x5B, 0x32, 0x4A], "\\x1b[2J"),
    ([0x00, 0x01, 0x1F, 0x7F], "\\x00\\x01\\x1f\\x7f"),
    ([0xC2, 0x9B], "\\u{9b}"),
    ([0xC2, 0x80, 0xC2, 0x9F], "\\u{80}\\u{9f}"),
    ([0xC2, 0xA0], "\u{A0}"),                        // U+00A0 is not C1: kept
    ([0xE2, 0x82, 0xAC], "€"),
    ([0xF0, 0x9F, 0x98, 0x80], "😀"),
    ([0xFF], "\\xff"),                                // never in UTF-8
    ([0xC3], "\\xc3"),                                // a lead byte with nothing after it
    ([0xE2, 0x82, 0x41], "\\xe2\\x82A"),              // a sequence cut short: each byte escaped
    ([0xC0, 0xAF], "\\xc0\\xaf"),                     // an overlong "/"
    ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),          // a UTF-16 surrogate
    ([0xF4, 0x90, 0x80, 0x80], "\\xf4\\x90\\x80\\x80"), // above U+10FFFF
  ])
  func eachRule(bytes: [UInt8], expected: String) {
    #expect(Self.escaped(bytes) == expected)
    #expect(TextEscaping.unescaped(expected) == bytes)
  }

  @Test func stringsAreEscapedTheSameWayAsTheirBytes() {
    let text = "lib\u{1B}[2J\nRemoved: 0xdead\u{9B}\\x.so"
    #expect(TextEscaping.escaped(text) == Self.escaped(Array(text.utf8)))
    #expect(TextEscaping.escaped(text) == "lib\\x1b[2J\\nRemoved: 0xdead\\u{9b}\\\\x.so")
  }

  @Test func unescapingRejectsWhatTheSchemeNeverWrites() {
    for text in ["\\", "\\q", "\\x1", "\\xZZ", "\\u{41}", "\\u{9b", "raw\u{1B}", "raw\n"] {
      #expect(TextEscaping.unescaped(text) == nil, "\(text.debugDescription)")
    }
  }

  /// Random bytes (seeded, so a failure reproduces), biased to the bytes the scheme treats specially:
  /// the escaped text un-escapes to the original bytes, holds no control character (C0, DEL or C1)
  /// (so no raw line break).
  @Test func randomBytesComeBackExactly() {
    var generator = SeededGenerator(seed: 0x7E57_E5CA)
    func next() -> UInt64 { generator.next() }
    let special: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x1B, 0x5C, 0x7F, 0x80, 0x9B, 0xC2, 0xE2, 0xED, 0xF0, 0xF4, 0xFF, 0x41]
    for _ in 0..<2_000 {
      let count = Int(next() % 24)
      let bytes: [UInt8] = (0..<count).map { _ in
        let random = next()
        return random & 1 == 0 ? special[Int((random >> 8) % UInt64(special.count))] : UInt8(truncatingIfNeeded: random >> 16)
      }
      let text = Self.escaped(bytes)
      #expect(TextEscaping.unescaped(text) == bytes, "\(bytes)")
      #expect(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(bytes)")
    }
  }
}
