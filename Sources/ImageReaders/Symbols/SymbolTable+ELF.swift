extension SymbolTable {
  /// The symbol table of a decoded ELF file: `.symtab` when present, else `.dynsym` (what a stripped
  /// library still exports). Empty when the file has neither. `bytes` are the bytes `file` was decoded
  /// from.
  public static func elf(_ file: ELFFile, bytes: ByteReader) throws(FormatError) -> SymbolTable {
    let chosen = file.sections.first { $0.type == ELFSection.symbolTableType && $0.occupiesFile }
      ?? file.sections.first { $0.type == ELFSection.dynamicSymbolTableType && $0.occupiesFile }
    guard let table = chosen else { return SymbolTable() }
    guard let stringIndex = file.sections.firstIndex(where: { $0.index == Int(table.link) }) else {
      throw .elf("symbol table section \(table.index): sh_link \(table.link) is not a section")
    }
    guard let entrySize = Int(exactly: table.entrySize) else {
      throw .elf("symbol table section \(table.index): sh_entsize \(table.entrySize) is too large")
    }
    return try elf(symbols: try file.contents(of: table, in: bytes),
                   strings: try file.contents(of: file.sections[stringIndex], in: bytes),
                   entrySize: entrySize, is64Bit: file.header.is64Bit)
  }
}
