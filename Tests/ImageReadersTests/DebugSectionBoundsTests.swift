import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Debug sections whose headers are broken or lie (Fixtures/hostile, from Scripts/make-hostile-fixtures):
/// a section nothing loads that points past the end costs only itself, and compressed sections are
/// bounded together before anything is inflated.
@Suite struct DebugSectionBoundsTests {
  /// Counts a decompressor's calls; it fills nothing and says it filled the whole output.
  final class Calls: @unchecked Sendable {
    var count = 0
    var decompressor: DWARFDecompressor {
      { (_, _, output) throws(FormatError) -> Int in self.count += 1; return output.count }
    }
  }

  /// A non-allocated `.debug_info` whose offset is past the end: the file decodes (build-id, symbols),
  /// the section is kept with its header as readelf shows it, and asking for its contents, or for the
  /// file's DWARF, is the bounds error naming it. The same header with `SHF_ALLOC` is a broken file.
  @Test(.enabled(if: haveTool("readelf"), "needs readelf"))
  func unloadedSectionPastTheEndCostsOnlyItself() throws {
    let path = Fixtures.path("hostile/debug-info-past-end")
    var bytes = try Fixtures.bytes("hostile/debug-info-past-end")
    let theirs = try readelfSection(path, ".debug_info")
    let expected = FormatError.fieldOutOfRange("section \(theirs.index) (.debug_info)", offset: theirs.fileOffset,
                                               size: theirs.size, limit: bytes.count)
    try bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      let file = try ELFFile(reader)
      let section = try #require(file.section(named: ".debug_info"))
      #expect(section.index == theirs.index && section.fileOffset == theirs.fileOffset && section.size == theirs.size)
      #expect(!section.contentsInFile && section.fileRange == nil)
      #expect(file.sections.filter { !$0.contentsInFile }.map(\.index) == [theirs.index])
      #expect(file.buildID != nil)
      #expect(try SymbolTable.elf(file, bytes: reader).count > 0)
      #expect(throws: expected) { _ = try file.contents(of: section, in: reader) }
      let calls = Calls()
      #expect(throws: expected) {
        _ = try DWARFSections.elf(file, bytes: reader, owner: nil, decompress: calls.decompressor)
      }
    }
    // SHF_ALLOC set in its sh_flags (little-endian ELF64: e_shoff at 0x28, 64-byte headers, flags at +8).
    let tableOffset = Int(bytes[0x28..<0x30].reversed().reduce(0) { $0 << 8 | UInt64($1) })
    bytes[tableOffset + theirs.index * 64 + 8] |= UInt8(ELFSection.allocFlag)
    #expect(throws: FormatError.fieldOutOfRange("section \(theirs.index) contents", offset: theirs.fileOffset,
                                                size: theirs.size, limit: bytes.count)) {
      _ = try bytes.withUnsafeBytes { try ELFFile(ByteReader($0)) }
    }
  }

  /// A library whose `.symtab` points past the end: its symbols are `.dynsym`'s, which binutils'
  /// `nm -D` lists, and the problem is the `.symtab`'s bounds error.
  @Test(.enabled(if: haveTool("nm") && haveTool("readelf"), "needs nm and readelf (binutils)"))
  func symbolTablePastTheEndLeavesTheDynamicSymbols() throws {
    let path = Fixtures.path("hostile/libsymtab-past-end.so")
    let bytes = try Fixtures.bytes("hostile/libsymtab-past-end.so")
    let nm = try runChild(["nm", "-D", "--defined-only", path])
    let exported = nm.output.split(separator: "\n").compactMap { line -> String? in
      let words = line.split(separator: " ")
      return words.count == 3 && words[1] == "T" ? String(words[2]) : nil
    }
    try #require(exported.contains("middle_function"), "nm -D: \(nm.output)")
    let theirs = try readelfSection(path, ".symtab")
    try bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      let file = try ELFFile(reader)
      #expect(SymbolTable.elfSymbolTableProblem(file, bytes: reader)
              == .fieldOutOfRange("section \(theirs.index) (.symtab)", offset: theirs.fileOffset, size: theirs.size, limit: bytes.count))
      let table = try SymbolTable.elf(file, bytes: reader)
      #expect(Set(table.symbols.map(\.name)) == Set(exported))
    }
  }

  /// 66 compressed headers over one 16 KB zlib stream, each claiming 16 MiB (within the per-section
  /// limit and zlib's ratio): 1056 MiB together, refused before any section is inflated.
  @Test func compressedClaimsOverTheTotalInflateNothing() throws {
    let bytes = try Fixtures.bytes("hostile/debug-inflate-past-total")
    let calls = Calls()
    #expect(throws: FormatError.limitExceeded("compressed debug sections: uncompressed total", value: 1_107_296_754,
                                              limit: DWARFSections.maximumInflatedTotal)) {
      try ByteReader.reading(bytes) { reader throws(FormatError) in
        _ = try DWARFSections.elf(try ELFFile(reader), bytes: reader, owner: nil, decompress: calls.decompressor)
      }
    }
    #expect(calls.count == 0)
    #expect(DWARFSections.maximumInflatedTotal == 1 << 30)
  }

  /// A dwz supplementary file's claims add to its main file's (`inflatedBefore`): a zlib-compressed
  /// program whose sections inflate to what objcopy's decompressed copy holds is read when they fit in
  /// what is left of the total, and refused, inflating nothing, one byte past it.
  @Test(.enabled(if: haveTool("objcopy") && haveTool("readelf"), "needs objcopy and readelf (binutils)"))
  func supplementaryClaimsAddToTheMainFiles() throws {
    let path = packageRoot + "/Tests/ImageLogSymbolicationTests/Fixtures/dwarf/gcc-c-O2-dwarf5-zlib"
    let directory = try makeTemporaryDirectory("imagelog-inflate-total")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let copy = directory + "/decompressed"
    let made = try runChild(["objcopy", "--decompress-debug-sections", path, copy])
    try #require(made.exitCode == 0, "objcopy: \(made.error)")
    let compressed = try readelfSections(path).filter { $0.name.hasPrefix(".debug_") && $0.flags.contains("C") }.map(\.name)
    let read = [".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str", ".debug_str_offsets",
                ".debug_addr", ".debug_ranges", ".debug_rnglists", ".debug_aranges", ".debug_frame"]
    let names = compressed.filter(read.contains)
    try #require(names.count >= 3, "readelf lists the compressed sections \(compressed)")
    var claims: UInt64 = 0
    for name in names { claims += try readelfSection(copy, name).size }
    let bytes = try Fixtures.bytes(path)
    let limit = DWARFSections.maximumInflatedTotal
    let calls = Calls()
    try bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      let file = try ELFFile(reader)
      let sections = try DWARFSections.elf(file, bytes: reader, owner: nil, decompress: calls.decompressor,
                                           inflatedBefore: limit - claims)
      #expect(sections.inflatedByteCount == claims)
      #expect(calls.count == names.count)
      #expect(throws: FormatError.limitExceeded("compressed debug sections: uncompressed total with the main file's",
                                                value: limit + 1, limit: limit)) {
        _ = try DWARFSections.elf(file, bytes: reader, owner: nil, decompress: calls.decompressor,
                                  inflatedBefore: limit - claims + 1)
      }
      #expect(calls.count == names.count)
    }
  }
}
