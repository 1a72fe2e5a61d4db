extension SymbolTable {
  /// The symbol table of an ELF file: `.symtab` when present, else `.dynsym` (what a stripped
  /// library still exports). Empty when the file has neither.
  ///
  /// Reads only the section headers it needs (type, link, offset, size, entsize).
  public static func elf(file bytes: ByteReader) throws(FormatError) -> SymbolTable {
    let header = try ELFHeader(bytes)
    var file = bytes
    file.endian = header.endian
    let sections = try minimalSections(file, header: header)
    let chosen = sections.first { $0.type == 2 } ?? sections.first { $0.type == 11 }  // SHT_SYMTAB, SHT_DYNSYM
    guard let table = chosen else { return SymbolTable() }
    guard Int(table.link) < sections.count else {
      throw .elf("symbol table sh_link \(table.link) is not a section index (\(sections.count) sections)")
    }
    let strings = sections[Int(table.link)]
    let symbolRange = try ByteReader.checkedRange(offset: table.offset, size: table.size, limit: file.count, "symbol table")
    let stringRange = try ByteReader.checkedRange(offset: strings.offset, size: strings.size, limit: file.count, "string table")
    guard let entrySize = Int(exactly: table.entrySize) else {
      throw .elf("symbol table sh_entsize \(table.entrySize) is too large")
    }
    return try elf(symbols: try file.slice(at: symbolRange.lowerBound, length: symbolRange.count),
                   strings: try file.slice(at: stringRange.lowerBound, length: stringRange.count),
                   entrySize: entrySize, is64Bit: header.is64Bit)
  }

  /// The section header fields a symbol lookup needs (`sh_name`, `sh_type`, `sh_offset`, `sh_size`,
  /// `sh_link`, `sh_entsize`); `SHT_NOBITS` sections have size 0 (they have no bytes in the file).
  public struct MinimalSection: Sendable {
    public var nameOffset: UInt32
    public var type: UInt32
    public var offset: UInt64
    public var size: UInt64
    public var link: UInt32
    public var entrySize: UInt64
  }

  /// The section headers of an ELF file, only the fields symbol lookups need. Empty when there are none.
  public static func minimalSections(_ file: ByteReader, header: ELFHeader) throws(FormatError) -> [MinimalSection] {
    guard header.sectionHeaderOffset != 0, header.sectionHeaderCount > 0 else { return [] }
    let entrySize = Int(header.sectionHeaderEntrySize)
    guard entrySize >= header.expectedSectionHeaderSize else {
      throw .elf("e_shentsize \(entrySize) is smaller than \(header.expectedSectionHeaderSize)")
    }
    let count = Int(header.sectionHeaderCount)
    // Both are UInt16: the product fits.
    let range = try ByteReader.checkedRange(offset: header.sectionHeaderOffset, size: UInt64(count * entrySize),
                                            limit: file.count, "section header table")
    var result: [MinimalSection] = []
    result.reserveCapacity(count)
    for index in 0..<count {
      var reader = try file.slice(at: range.lowerBound + index * entrySize, length: entrySize)  // inside range
      let nameOffset = try reader.read(UInt32.self)
      let type = try reader.read(UInt32.self)
      _ = try reader.readWord(is64Bit: header.is64Bit)  // sh_flags
      _ = try reader.readWord(is64Bit: header.is64Bit)  // sh_addr
      let offset = try reader.readWord(is64Bit: header.is64Bit)
      let size = try reader.readWord(is64Bit: header.is64Bit)
      let link = try reader.read(UInt32.self)
      _ = try reader.read(UInt32.self)  // sh_info
      _ = try reader.readWord(is64Bit: header.is64Bit)  // sh_addralign
      let entry = try reader.readWord(is64Bit: header.is64Bit)
      result.append(MinimalSection(nameOffset: nameOffset, type: type, offset: offset, size: type == 8 ? 0 : size, link: link, entrySize: entry))
    }
    return result
  }
}

extension SymbolTable {
  /// The names of the sections (a set; for `.debug_info` checks) (from `e_shstrndx`); empty names for what cannot be read.
  public static func sectionNames(_ file: ByteReader, header: ELFHeader, sections: [MinimalSection]) -> Set<String> {
    let index = Int(header.sectionNameTableIndex)
    guard index < sections.count, index > 0,
          let range = try? ByteReader.checkedRange(offset: sections[index].offset, size: sections[index].size,
                                                   limit: file.count, "section names"),
          let table = try? file.slice(at: range.lowerBound, length: range.count) else { return [] }
    var names = Set<String>()
    for section in sections { if let name = try? table.cString(at: Int(section.nameOffset)) { names.insert(name) } }
    return names
  }
}
