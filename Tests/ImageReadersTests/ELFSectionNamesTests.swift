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
    let names = Ranged.elfFixtures
    try #require(!names.isEmpty)
    var rng = SplitMix64(seed: 0x5EC7_10A5)
    var errors = 0
    var compared = 0
    for name in names {
      let original = try Fixtures.bytes(name)
      for round in 0..<200 {
        let kind = MutationTests.Mutation.allCases[round % MutationTests.Mutation.allCases.count]
        let bytes = MutationTests.mutate(original, kind, &rng)
        let expected = Self.expected(bytes)
        #expect(Self.lookedForDecode(bytes) == expected, "\(name) round \(round)")
        compared += 1
        if expected.hasPrefix("error: ") { errors += 1 }
      }
    }
    #expect(errors > 0 && errors < compared)
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
}
