extension ELFFile {
  /// The link-time address of the defined data object (`STT_OBJECT`, `STT_TLS` excluded) `name` in
  /// `.dynsym`: what a library exports for others to read, as glibc's `__abort_msg`
  /// (`GLIBC_PRIVATE`). `nil` when the file has no `.dynsym` or no such symbol; `bytes` are the bytes
  /// the file was decoded from. The symbol table's own symbol reading (`SymbolTable.elf`) keeps code
  /// only.
  package func dataSymbolAddress(named name: String, in bytes: ByteReader) throws(FormatError) -> UInt64? {
    guard let table = sections.first(where: { $0.type == ELFSection.dynamicSymbolTableType && $0.occupiesFile }) else {
      return nil
    }
    guard let stringSection = sections.first(where: { $0.index == Int(table.link) }) else {
      throw .elf("symbol table section \(table.index): sh_link \(table.link) is not a section")
    }
    let is64Bit = header.is64Bit
    let expected = is64Bit ? 24 : 16
    guard let entrySize = Int(exactly: table.entrySize), entrySize >= expected else {
      throw .elf("symbol table section \(table.index): sh_entsize \(table.entrySize) is smaller than \(expected)")
    }
    let symbols = try contents(of: table, in: bytes)
    let strings = try contents(of: stringSection, in: bytes)
    let wanted = Array(name.utf8) + [0]
    // count * entrySize <= symbols.count: every entry's slice is inside the table.
    for index in 0..<(symbols.count / entrySize) {
      var entry = try symbols.slice(at: index * entrySize, length: expected)
      let nameOffset = try entry.read(UInt32.self)
      let value: UInt64, info: UInt8, sectionIndex: UInt16
      if is64Bit {
        info = try entry.read(UInt8.self)
        _ = try entry.read(UInt8.self)
        sectionIndex = try entry.read(UInt16.self)
        value = try entry.read(UInt64.self)
      } else {
        value = UInt64(try entry.read(UInt32.self))
        _ = try entry.read(UInt32.self)
        info = try entry.read(UInt8.self)
        _ = try entry.read(UInt8.self)
        sectionIndex = try entry.read(UInt16.self)
      }
      guard info & 0xF == 1, sectionIndex != 0, let start = Int(exactly: nameOffset),
            start <= strings.count, wanted.count <= strings.count - start,
            try strings.bytes(at: start, length: wanted.count) == wanted else { continue }
      return value
    }
    return nil
  }
}
