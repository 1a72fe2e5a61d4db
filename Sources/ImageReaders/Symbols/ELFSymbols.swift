extension SymbolTable {
  /// `STT_NOTYPE`, `STT_FUNC`, `STT_GNU_IFUNC`: the symbol types that can name code.
  static func isCodeType(_ type: UInt8) -> Bool { type == 0 || type == 2 || type == 10 }

  /// Decodes an ELF symbol table section (`SHT_SYMTAB` or `SHT_DYNSYM`) with its linked string table.
  ///
  /// Keeps defined (`st_shndx` not `SHN_UNDEF`, not `SHN_ABS` for `STT_NOTYPE`) symbols of function type
  /// or no type with a non-empty name, leaving out ARM/AArch64 mapping symbols (`$x`, `$d`, `$a`, `$t`).
  /// `entrySize` is `sh_entsize`; a table whose size is not a multiple of it ignores the tail.
  public static func elf(symbols: ByteReader, strings: ByteReader, entrySize: Int,
                         is64Bit: Bool) throws(FormatError) -> SymbolTable {
    let expected = is64Bit ? 24 : 16
    guard entrySize >= expected else {
      throw .elf("symbol table sh_entsize \(entrySize) is smaller than \(expected)")
    }
    let names = copyStrings(strings)
    guard names.count <= Int(UInt32.max) else {
      throw .limitExceeded("string table size", value: UInt64(names.count), limit: UInt64(UInt32.max))
    }
    let count = symbols.count / entrySize
    var entries: [Entry] = []
    entries.reserveCapacity(count)  // count <= bytes / entrySize: sized by the data, not a field
    for index in 0..<count {
      // index < count = symbols.count / entrySize, so the product is within symbols.count.
      var reader = try symbols.slice(at: index * entrySize, length: entrySize)
      let nameOffset = try reader.read(UInt32.self)
      let info: UInt8, sectionIndex: UInt16, value: UInt64, size: UInt64
      if is64Bit {
        info = try reader.read(UInt8.self)
        _ = try reader.read(UInt8.self)
        sectionIndex = try reader.read(UInt16.self)
        value = try reader.read(UInt64.self)
        size = try reader.read(UInt64.self)
      } else {
        value = UInt64(try reader.read(UInt32.self))
        size = UInt64(try reader.read(UInt32.self))
        info = try reader.read(UInt8.self)
        _ = try reader.read(UInt8.self)
        sectionIndex = try reader.read(UInt16.self)
      }
      let type = info & 0xF
      let binding = info >> 4
      guard isCodeType(type), sectionIndex != 0, sectionIndex != 0xFFF1, nameOffset != 0 else { continue }
      // UInt32 -> Int is exact on 64-bit; nameLength checks the offset against the table.
      guard let length = nameLength(in: names, at: Int(nameOffset)), length > 0 else { continue }
      let first = names[Int(nameOffset)]
      if first == UInt8(ascii: "$"), length == 2 || (length > 2 && names[Int(nameOffset) + 2] == UInt8(ascii: ".")) {
        continue  // mapping symbols: `$x`, `$d`, `$x.123`
      }
      // Prefer functions over untyped labels, then global/weak over local (as llvm-symbolizer does).
      let rank: UInt8 = (type == 0 ? 2 : 0) + (binding == 0 ? 1 : 0)
      // length < names.count <= UInt32.max; `order` only breaks ties between aliases.
      entries.append(Entry(address: value, size: size, nameOffset: nameOffset, nameLength: UInt32(length), rank: rank,
                           order: UInt32(truncatingIfNeeded: index)))
    }
    return SymbolTable(entries: entries, names: names)
  }
}
