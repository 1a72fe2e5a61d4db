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
    try MutationTests.mutateDebugSections(seed: 0xB2EA_2026, what: "has no functions") { bytes in
      let result = Self.walk(bytes)
      return (result.functions > 0, result.threw)
    }
  }
}
