extension SymbolTable {
  /// The symbol table of a decoded ELF file: `.symtab` when present, else `.dynsym` (what a stripped
  /// library still exports). Empty when the file has neither. `bytes` are the bytes `file` was decoded
  /// from. With `addresses` (link-time), only what looking those up needs (see
  /// `elf(symbols:strings:entrySize:is64Bit:for:)`).
  public static func elf(_ file: ELFFile, bytes: ByteReader, for addresses: [UInt64]? = nil) throws(FormatError) -> SymbolTable {
    guard let (symbols, strings, entrySize) = try elfSections(file, bytes: bytes) else { return SymbolTable() }
    if let addresses {
      return try elf(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: file.header.is64Bit, for: addresses)
    }
    return try elf(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: file.header.is64Bit)
  }

  /// Whether the table `elf(_:bytes:)` would make has a symbol, without making it.
  public static func elfHasCodeSymbols(_ file: ELFFile, bytes: ByteReader) throws(FormatError) -> Bool {
    guard let (symbols, strings, entrySize) = try elfSections(file, bytes: bytes) else { return false }
    return try elfHasCodeSymbols(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: file.header.is64Bit)
  }

  /// The chosen symbol table's bytes, its string table's and its entry size; `nil` when there is none.
  private static func elfSections(_ file: ELFFile, bytes: ByteReader)
    throws(FormatError) -> (symbols: ByteReader, strings: ByteReader, entrySize: Int)? {
    let full = file.sections.first { $0.type == ELFSection.symbolTableType && $0.occupiesFile }
    let chosen = full.flatMap { elfSymbolTableProblem(file, bytes: bytes) == nil ? $0 : nil }
      ?? file.sections.first { $0.type == ELFSection.dynamicSymbolTableType && $0.occupiesFile }
    guard let table = chosen else { return nil }
    guard let stringIndex = file.sections.firstIndex(where: { $0.index == Int(table.link) }) else {
      throw .elf("symbol table section \(table.index): sh_link \(table.link) is not a section")
    }
    guard let entrySize = Int(exactly: table.entrySize) else {
      throw .elf("symbol table section \(table.index): sh_entsize \(table.entrySize) is too large")
    }
    return (try file.contents(of: table, in: bytes), try file.contents(of: file.sections[stringIndex], in: bytes), entrySize)
  }

  /// The bounds error of a `.symtab`, or of the string table it links to, whose header points past the
  /// end of the file (`ELFSection.contentsInFile`); `nil` when there is none such. The symbols read are
  /// then `.dynsym`'s, the exported ones, as `llvm-nm -D` reads them.
  public static func elfSymbolTableProblem(_ file: ELFFile, bytes: ByteReader) -> FormatError? {
    guard let table = file.sections.first(where: { $0.type == ELFSection.symbolTableType && $0.occupiesFile }) else {
      return nil
    }
    let strings = file.sections.first { $0.index == Int(table.link) }
    for section in [table] + (strings.map { [$0] } ?? []) where !section.contentsInFile {
      do { _ = try file.contents(of: section, in: bytes) } catch { return error }
    }
    return nil
  }
}

extension SymbolTable {
  /// Every code symbol of `file`'s `.symtab` and `.dynsym` that `wanted` accepts, given its start
  /// address and its raw name's bytes (valid during the call only): aliases included, which the lookup
  /// table drops (it keeps one name an address). For checking names a crash report gives against a file.
  public static func elfSymbols(_ file: ELFFile, bytes: ByteReader,
                                where wanted: (UInt64, UnsafeRawBufferPointer) -> Bool) throws(FormatError) -> [Symbol] {
    var found: [Symbol] = []
    for table in file.sections where table.occupiesFile
      && (table.type == ELFSection.symbolTableType || table.type == ELFSection.dynamicSymbolTableType) {
      guard let stringIndex = file.sections.firstIndex(where: { $0.index == Int(table.link) }) else {
        throw .elf("symbol table section \(table.index): sh_link \(table.link) is not a section")
      }
      guard let entrySize = Int(exactly: table.entrySize) else {
        throw .elf("symbol table section \(table.index): sh_entsize \(table.entrySize) is too large")
      }
      let symbols = try file.contents(of: table, in: bytes)
      let strings = try file.contents(of: file.sections[stringIndex], in: bytes)
      try strings.withUnsafeBytes { names throws(FormatError) in
        try forEachCodeSymbol(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: file.header.is64Bit) { entry in
          // forEachCodeSymbol checked that a NUL ends the name inside `names`.
          let start = Int(entry.nameOffset)
          guard let length = names[start...].firstIndex(of: 0).map({ $0 - start }) else { return true }
          let name = UnsafeRawBufferPointer(rebasing: names[start..<start + length])
          if wanted(entry.address, name) {
            found.append(Symbol(name: String(decoding: name, as: UTF8.self), address: entry.address, size: entry.size))
          }
          return true
        }
      }
    }
    return found
  }
}
