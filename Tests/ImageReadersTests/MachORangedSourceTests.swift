import Testing
@testable import ImageReaders

/// `BinaryFile.parse(source:)` over Mach-O and universal files, fed by a source that copies each
/// asked-for range into its own buffer (as `FileBytes` does with pread), decodes to exactly what
/// `BinaryFile.parse(_:)` decodes from the whole file in memory, and throws exactly the same errors,
/// for every Mach-O fixture and thousands of mutations; it fetches only ranges inside the file, and
/// of a universal file far less than the whole.
@Suite struct MachORangedSourceTests {
  typealias Ranged = ELFRangedSourceTests

  /// The whole decoded value as text (every stored property), or the error.
  static func decodeWhole(_ bytes: [UInt8]) -> String {
    do throws(FormatError) { return String(describing: try BinaryFile.parse(bytes)) } catch { return "error: \(error)" }
  }

  static func decodeRanged(_ bytes: [UInt8]) -> (text: String, requests: [Range<Int>]) {
    let source = Ranged.CopyingSource(bytes)
    do throws(FormatError) {
      return (String(describing: try BinaryFile.parse(source: Ranged.Ranges(source: source))), source.requests)
    } catch {
      return ("error: \(error)", source.requests)
    }
  }

  /// Every Mach-O and universal fixture (the DWARF files inside the dSYM too).
  static var machOFixtures: [String] {
    Fixtures.all(in: "macho").filter { name in
      guard let bytes = try? Fixtures.bytes(name), bytes.count >= 4 else { return false }
      let magic = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
      return MachOFile.isMagic(magic) || MachOFile.isMagic(magic.byteSwapped) || FatFile.isMagic(magic)
    }
  }

  @Test func rangedDecodeEqualsWholeFileDecode() throws {
    let names = Self.machOFixtures
    try #require(names.count >= 10, "too few Mach-O fixtures under \(Fixtures.directory)")
    var universal = 0
    for name in names {
      let bytes = try Fixtures.bytes(name)
      let ranged = Self.decodeRanged(bytes)
      #expect(ranged.text == Self.decodeWhole(bytes), "\(name)")
      #expect(ranged.requests.allSatisfy { $0.lowerBound >= 0 && $0.upperBound <= bytes.count }, "\(name)")
      if case .fat? = try? BinaryFile.parse(bytes) {
        universal += 1
        // Headers, load commands and code signatures: a small part of a file of whole slices.
        let fetched = ranged.requests.reduce(0) { $0 + $1.count }
        #expect(fetched < bytes.count / 2, "\(name): \(fetched) of \(bytes.count) bytes fetched")
      }
    }
    #expect(universal >= 3, "FAT_MAGIC and FAT_MAGIC_64 fixtures")
  }

  @Test func rangedDecodeEqualsWholeFileDecodeUnderMutation() throws {
    try MutationTests.expectSameUnderMutation(Self.machOFixtures, seed: 0x3AC0_2026,
                                              decode: { Self.decodeRanged($0).text }, reference: Self.decodeWhole)
  }

  @Test func shortFilesGiveTheSameErrors() throws {
    for name in Self.machOFixtures where name.contains("universal") || name.hasSuffix("x86_64-macos.dylib") {
      let original = try Fixtures.bytes(name)
      for length in [0, 1, 3, 4, 7, 8, 27, 28, 31, 32, 47, 48, 100, 4095, 4096, 4097, 16384] where length <= original.count {
        let bytes = Array(original.prefix(length))
        #expect(Self.decodeRanged(bytes).text == Self.decodeWhole(bytes), "\(name): first \(length) bytes")
      }
    }
  }
}
