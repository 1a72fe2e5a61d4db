import Testing
@testable import ImageReaders

/// The DWARF walk Breakpad symbol files are written from (`DWARFReader.functions(inUnit:)`, line rows,
/// declared names, file paths) under seeded mutations of the DWARF fixtures' debug sections, as
/// MutationTests does for address lookups: it answers or throws `FormatError`, never traps or hangs.
/// (Its answers are checked against dump_syms in BreakpadSymbolsTests.)
@Suite struct BreakpadSymbolFileSourcesTests {
  /// Every unit walked; true when anything threw.
  static func walk(_ bytes: [UInt8]) -> (functions: Int, threw: Bool) {
    bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      guard let file = try? ELFFile(reader),
            let sections = try? DWARFSections.elf(file, bytes: reader, owner: nil, decompress: nil),
            let dwarf = try? DWARFReader(sections, indexed: false) else { return (0, true) }
      var functions = 0, threw = false
      for unit in 0..<min(dwarf.unitCount, 200) {
        do {
          guard let found = try dwarf.functions(inUnit: unit) else { continue }
          let rows = try dwarf.lineRows(inUnit: unit)
          for function in found.functions {
            functions += 1
            _ = try dwarf.declaredName(of: function.nameSource)
            for range in function.ranges { _ = rows?.rows(covering: range) }
            for call in function.inlinedCalls {
              _ = try dwarf.declaredName(of: call.nameSource)
              _ = try dwarf.filePath(inUnit: unit, file: call.callFile ?? 0)
            }
          }
        } catch {
          threw = true
        }
      }
      return (functions, threw)
    }
  }

  @Test func dwarfWalkSurvivesMutationsOfTheDebugSections() throws {
    let names = Fixtures.all.filter { $0.hasPrefix("dwarf/") }
    try #require(names.count >= 2, "no DWARF fixtures under \(Fixtures.directory)/dwarf")
    var rng = SplitMix64(seed: 0xB2EA_2026)
    var spared = 0, broken = 0
    for name in names {
      let original = try Fixtures.bytes(name)
      #expect(Self.walk(original).functions > 0, "\(name): the unmutated fixture has no functions")
      let ranges: [Range<Int>] = try original.withUnsafeBytes { raw in
        try ELFFile(ByteReader(raw)).sections.filter { $0.name.hasPrefix(".debug_") }.compactMap(\.fileRange)
      }
      try #require(!ranges.isEmpty)
      for round in 0..<MutationTests.perFixture {
        var bytes = original
        let range = ranges[round % ranges.count]
        let kind = MutationTests.Mutation.allCases[(round / ranges.count) % MutationTests.Mutation.allCases.count]
        var section = MutationTests.mutate(Array(original[range]), kind, &rng)
        if section.count < range.count { section += [UInt8](repeating: 0, count: range.count - section.count) }
        bytes.replaceSubrange(range, with: section.prefix(range.count))
        if Self.walk(bytes).threw { broken += 1 } else { spared += 1 }
      }
    }
    #expect(broken > 0 && spared > 0, "mutations should both break and spare the DWARF (\(spared) spared, \(broken) broken)")
  }
}
