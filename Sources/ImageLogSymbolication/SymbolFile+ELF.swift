import ImageReaders

extension SymbolFile {
  static func elf(_ reader: ByteReader, path: String, withSymbols: Bool) throws(FormatError) -> SymbolFile {
    let header = try ELFHeader(reader)
    var file = reader
    file.endian = header.endian
    let headerTableSize = UInt64(header.programHeaderCount) * UInt64(header.programHeaderEntrySize)  // UInt16s
    var programHeaders: [ProgramHeader] = []
    if header.programHeaderCount > 0 {
      let range = try ByteReader.checkedRange(offset: header.programHeaderOffset, size: headerTableSize,
                                              limit: file.count, "program header table")
      programHeaders = try ProgramHeader.table(try file.slice(at: range.lowerBound, length: range.count),
                                               count: Int(header.programHeaderCount),
                                               entrySize: Int(header.programHeaderEntrySize), is64Bit: header.is64Bit)
    }
    let layout = try LoadLayout(programHeaders)
    var buildID: BuildID?
    for note in programHeaders where note.type == ProgramHeader.note && buildID == nil {
      guard let range = try? ByteReader.checkedRange(offset: note.fileOffset, size: note.fileSize, limit: file.count, "PT_NOTE"),
            let area = try? file.slice(at: range.lowerBound, length: range.count) else { continue }
      if let found = try? ELFNote.buildIDNote(in: area, alignment: note.alignment == 8 ? 8 : 4) {
        buildID = BuildID(found.descriptor)
      }
    }
    let sections = try SymbolTable.minimalSections(file, header: header)
    if buildID == nil {  // a debug file whose program headers lost their file data: use SHT_NOTE sections
      for section in sections where section.type == 7 && buildID == nil {
        guard let range = try? ByteReader.checkedRange(offset: section.offset, size: section.size, limit: file.count, "SHT_NOTE"),
              let area = try? file.slice(at: range.lowerBound, length: range.count) else { continue }
        if let found = try? ELFNote.buildIDNote(in: area) { buildID = BuildID(found.descriptor) }
      }
    }
    let names = SymbolTable.sectionNames(file, header: header, sections: sections)
    let hasDebugInfo = names.contains(".debug_info") || names.contains(".zdebug_info")
    let symbols = withSymbols ? try SymbolTable.elf(file: file) : SymbolTable()
    return SymbolFile(path: path, architecture: elfArchitectureName(machine: header.machine, is64Bit: header.is64Bit),
                      isUniversalSlice: false, buildID: buildID, imageBaseVMAddress: layout?.firstVMAddress ?? 0,
                      loadSize: layout.map { $0.loadEndVMAddress - $0.firstVMAddress },
                      symbols: symbols, hasDebugInfo: hasDebugInfo,
                      hasFullSymbolTable: sections.contains { $0.type == 2 })
  }

  static func machO(_ reader: ByteReader, path: String, withSymbols: Bool) throws(FormatError) -> [SymbolFile] {
    throw .machO("Mach-O symbol reading is not available yet")
  }
}
