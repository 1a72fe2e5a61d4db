import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// `ELFFile(source:names: .lookedFor)` (what `imagelog file` decodes with) is the `.all` decode with
/// the names nobody looks for left empty: the same value otherwise, and exactly the same errors,
/// for every ELF fixture, thousands of mutations of them, and hand-broken name tables.
@Suite struct ELFSectionNamesTests {
  typealias Ranged = ELFRangedSourceTests

  static let lookedFor: Set<String> = [".dynamic", ".dynstr", ".note.gnu.build-id", ".debug_info", ".zdebug_info",
                                       ".gnu_debuglink", ".gnu_debugdata"]

  /// The `.all` decode with every other name blanked, as text; or the error.
  static func expected(_ bytes: [UInt8]) -> String {
    bytes.withUnsafeBytes { raw in
      do throws(FormatError) {
        var file = try ELFFile(ByteReader(raw))
        for index in file.sections.indices where !lookedFor.contains(file.sections[index].name) {
          file.sections[index].name = ""
        }
        return String(describing: file)
      } catch {
        return "error: \(error)"
      }
    }
  }

  static func lookedForDecode(_ bytes: [UInt8]) -> String {
    let source = Ranged.CopyingSource(bytes)
    do throws(FormatError) {
      return String(describing: try ELFFile(source: Ranged.Ranges(source: source), names: .lookedFor))
    } catch {
      return "error: \(error)"
    }
  }

  @Test func fixturesDecodeAlike() throws {
    let names = Ranged.elfFixtures
    try #require(!names.isEmpty)
    var named = 0
    for name in names {
      let bytes = try Fixtures.bytes(name)
      #expect(Self.lookedForDecode(bytes) == Self.expected(bytes), "\(name)")
      let file = try ELFFile(source: Ranged.Ranges(source: Ranged.CopyingSource(bytes)), names: .lookedFor)
      named += file.sections.filter { !$0.name.isEmpty }.count
    }
    #expect(named > 0, "some fixture has a looked-for section")
  }

  @Test func mutationsDecodeAlike() throws {
    try MutationTests.expectSameUnderMutation(Ranged.elfFixtures, seed: 0x5EC7_10A5,
                                              decode: Self.lookedForDecode, reference: Self.expected)
  }

  /// Name tables without a final NUL (checked name by name) and names ending exactly at the table's
  /// end, on a real fixture: the last byte of `.shstrtab` overwritten, and a name offset moved.
  @Test func unterminatedNameTables() throws {
    let name = try #require(Ranged.elfFixtures.first { $0.hasSuffix("libfixture-x86_64.so") })
    let original = try Fixtures.bytes(name)
    let file = try ELFFile(original.withUnsafeBytes { ByteReader($0) })
    let header = file.header
    let table = file.sections[Int(header.sectionNameTableIndex)]
    let tableEnd = Int(table.fileOffset + table.size)
    for byte: UInt8 in [0x41, 0x00, 0x2E] {
      var bytes = original
      bytes[tableEnd - 1] = byte
      #expect(Self.lookedForDecode(bytes) == Self.expected(bytes), "last name-table byte \(byte)")
      // Point section 1's name at the table's last byte.
      var moved = bytes
      let entry = Int(header.sectionHeaderOffset) + Int(header.sectionHeaderEntrySize)
      let offset = UInt32(table.size - 1)
      for index in 0..<4 { moved[entry + index] = UInt8(truncatingIfNeeded: offset >> (8 * UInt32(index))) }
      #expect(Self.lookedForDecode(moved) == Self.expected(moved), "name at the last byte, which is \(byte)")
    }
  }

  /// The eight-byte prefixes the terminated-table lookup switches on are the names' first bytes.
  @Test func prefixesAreTheNamesFirstBytes() {
    func word(_ text: String) -> UInt64 {
      Array(text.utf8).prefix(8).enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
    }
    typealias Prefix = ELFFile.LookedForPrefix
    #expect(Prefix.dynamic == word(".dynamic"))
    #expect(Prefix.dynstr == word(".dynstr\0"))
    #expect(Prefix.noteGNU == word(".note.gnu.build-id"))
    #expect(Prefix.debugInfo == word(".debug_info"))
    #expect(Prefix.zdebug == word(".zdebug_info"))
    #expect(Prefix.gnuDebug == word(".gnu_debuglink"))
    #expect(Prefix.gnuDebug == word(".gnu_debugdata"))
  }

  /// At every offset of a NUL-terminated table of looked-for names, near misses and names cut by the
  /// table's end, the fast lookup answers as the checked one (which measures each name first).
  @Test func terminatedLookupAgreesWithTheCheckedOne() throws {
    let names = Self.lookedFor.sorted() + [".dynamicx", ".dynst", ".dyn", ".note.gnu.build-i", ".note.gnu.build-idx",
                                           ".debug_infox", ".zdebug_inf", ".gnu_debuglin", ".gnu_debugdatax", ".gnu_debug",
                                           ".text", ".data", "", ".dynsym", "x.dynamic"]
    var compared = 0
    for ending in Self.lookedFor.sorted() + [".dynstr"] {
      // Each table ends with one of the names, so names that end at the table's last byte are covered.
      let table = Array((names + [ending]).joined(separator: "\0").utf8) + [0]
      try table.withUnsafeBytes { raw in
        let reader = ByteReader(raw)
        for offset in 0..<table.count {
          let checked = try ELFFile.lookedForName(reader, at: offset)
          #expect(ELFFile.lookedForName(inTerminated: reader, at: offset) == checked, "offset \(offset) ending \(ending)")
          compared += 1
        }
      }
    }
    #expect(compared > 1000)
  }
}
