/// One entry of a symbol table in the file's order, for tools that keep every entry (a Breakpad
/// symbol file's `PUBLIC` records) rather than look addresses up (`SymbolTable`).
package struct SymbolEntry: Sendable, Equatable {
  /// The name as stored (a Mach-O name keeps its leading `_`).
  package var name: String
  /// `st_value` / `n_value`: the link-time address.
  package var address: UInt64
  /// `st_size`; 0 for Mach-O, which has none.
  package var size: UInt64
  /// ELF: `STT_*` (the low 4 bits of `st_info`). Mach-O: `n_type`.
  package var type: UInt8
  /// ELF: `st_shndx`. Mach-O: `n_sect` (1-based, 0 for `NO_SECT`).
  package var section: Int
}

extension SymbolEntry {
  /// `STT_FUNC`
  package static let functionType: UInt8 = 2

  /// The entries of an ELF symbol table section (`SHT_SYMTAB` or `SHT_DYNSYM`, with its string table)
  /// that `keep` accepts, in table order. `keep` sees each entry's type, section index and value before
  /// its name is read; a kept entry whose name is not a NUL-terminated string of `strings` gets "".
  /// `entrySize` is `sh_entsize`; a table whose size is not a multiple of it ignores the tail.
  package static func elf(symbols: ByteReader, strings: ByteReader, entrySize: Int, is64Bit: Bool,
                         keep: (_ type: UInt8, _ section: Int, _ address: UInt64) -> Bool) throws(FormatError) -> [SymbolEntry] {
    let expected = is64Bit ? 24 : 16
    guard entrySize >= expected else {
      throw .elf("symbol table sh_entsize \(entrySize) is smaller than \(expected)")
    }
    let count = symbols.count / entrySize  // bounded by the bytes present
    var result: [SymbolEntry] = []
    for index in 0..<count {
      let base = index * entrySize  // index < count = symbols.count / entrySize
      // Each field lies within the entry's first `expected` bytes, inside the table.
      let type = symbols.field(UInt8.self, at: base + (is64Bit ? 4 : 12)) & 0xF
      let section: Int, address: UInt64, size: UInt64
      if is64Bit {
        section = Int(symbols.field(UInt16.self, at: base + 6))
        address = symbols.field(UInt64.self, at: base + 8)
        size = symbols.field(UInt64.self, at: base + 16)
      } else {
        address = UInt64(symbols.field(UInt32.self, at: base + 4))
        size = UInt64(symbols.field(UInt32.self, at: base + 8))
        section = Int(symbols.field(UInt16.self, at: base + 14))
      }
      guard keep(type, section, address) else { continue }
      let nameOffset = Int(symbols.field(UInt32.self, at: base))  // UInt32 -> Int is exact on 64-bit
      let name = (try? strings.cString(at: nameOffset)) ?? ""
      result.append(SymbolEntry(name: name, address: address, size: size, type: type, section: section))
    }
    return result
  }

  /// The entries of a Mach-O `LC_SYMTAB` table (`nlist` / `nlist_64`) that `keep` accepts, in table
  /// order; `keep` sees each entry's `n_type`, `n_sect` and `n_value` before its name is read. A kept
  /// entry whose name is not a NUL-terminated string of `strings` gets "".
  package static func machO(symbols: ByteReader, count: Int, strings: ByteReader, is64Bit: Bool,
                           keep: (_ type: UInt8, _ section: Int, _ address: UInt64) -> Bool) throws(FormatError) -> [SymbolEntry] {
    let entrySize = is64Bit ? 16 : 12
    guard count >= 0, count <= symbols.count / entrySize else {
      throw .machO("LC_SYMTAB nsyms \(count) needs \(UInt64(count) &* UInt64(entrySize)) bytes, \(symbols.count) available")
    }
    var result: [SymbolEntry] = []
    for index in 0..<count {
      let base = index * entrySize  // index < count <= symbols.count / entrySize
      let type = symbols.field(UInt8.self, at: base + 4)
      let section = Int(symbols.field(UInt8.self, at: base + 5))
      let address = is64Bit ? symbols.field(UInt64.self, at: base + 8) : UInt64(symbols.field(UInt32.self, at: base + 8))
      guard keep(type, section, address) else { continue }
      let nameOffset = Int(symbols.field(UInt32.self, at: base))  // UInt32 -> Int is exact on 64-bit
      let name = (try? strings.cString(at: nameOffset)) ?? ""
      result.append(SymbolEntry(name: name, address: address, size: 0, type: type, section: section))
    }
    return result
  }
}

extension MachOFile {
  /// `LC_SYMTAB`'s symbol entries (`nsyms` of them) and string table in `slice` (the slice's bytes, its
  /// endianness set), each range checked against it; `nil` when the file has no `LC_SYMTAB`.
  package func symbolTableBytes(in slice: ByteReader) throws(FormatError) -> (symbols: ByteReader, count: Int, strings: ByteReader)? {
    guard let command = symbolTable else { return nil }
    let entrySize: UInt64 = header.is64Bit ? 16 : 12
    // nsyms is a UInt32: the product with 16 fits in UInt64.
    let symbolRange = try ByteReader.checkedRange(offset: UInt64(command.symbolOffset),
                                                  size: UInt64(command.symbolCount) * entrySize,
                                                  limit: slice.count, "LC_SYMTAB symbol table")
    let stringRange = try ByteReader.checkedRange(offset: UInt64(command.stringOffset), size: UInt64(command.stringSize),
                                                  limit: slice.count, "LC_SYMTAB string table")
    return (try slice.slice(at: symbolRange.lowerBound, length: symbolRange.count),
            Int(command.symbolCount),  // UInt32 -> Int is exact on 64-bit
            try slice.slice(at: stringRange.lowerBound, length: stringRange.count))
  }
}
