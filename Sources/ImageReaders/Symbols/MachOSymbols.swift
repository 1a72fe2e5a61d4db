extension SymbolTable {
  /// Decodes a Mach-O `LC_SYMTAB` symbol table (`nlist`/`nlist_64` entries) and, when given, the
  /// `LC_FUNCTION_STARTS` data, into one table of link-time addresses.
  ///
  /// Keeps section-defined symbols (`N_SECT`, not `N_STAB`); drops the one leading `_` the C ABI adds.
  /// Function starts not named by a symbol become unnamed entries (`func_0xADDR`), so a stripped
  /// binary still resolves to function granularity. When the table still has local symbols (it was
  /// not stripped), a start after a named symbol lies in that symbol's code (a loop label of
  /// hand-written assembly gets a start of its own) and is left out: the symbol and an offset name
  /// it, as llvm-symbolizer and atos do. `textVMAddress` is `__TEXT`'s `vmaddr`, where
  /// the function-start deltas begin.
  package static func machO(symbols: ByteReader, count: Int, strings: ByteReader, is64Bit: Bool,
                           functionStarts: ByteReader? = nil,
                           textVMAddress: UInt64 = 0) throws(FormatError) -> SymbolTable {
    let entrySize = is64Bit ? 16 : 12
    guard count >= 0, count <= symbols.count / entrySize else {
      throw .machO("LC_SYMTAB nsyms \(count) needs \(UInt64(count) &* UInt64(entrySize)) bytes, \(symbols.count) available")
    }
    let names = copyStrings(strings)
    guard names.count <= Int(UInt32.max) else {
      throw .limitExceeded("string table size", value: UInt64(names.count), limit: UInt64(UInt32.max))
    }
    var entries: [Entry] = []
    entries.reserveCapacity(count)  // checked against the table's bytes above
    var named = Set<UInt64>()
    var hasLocalSymbols = false  // a local (not N_EXT) symbol: the table was not stripped
    for index in 0..<count {
      var reader = try symbols.slice(at: index * entrySize, length: entrySize)  // index < count <= bytes / size
      let nameOffset = try reader.read(UInt32.self)
      let type = try reader.read(UInt8.self)
      let section = try reader.read(UInt8.self)
      let description = try reader.read(UInt16.self)
      let value = is64Bit ? try reader.read(UInt64.self) : UInt64(try reader.read(UInt32.self))
      // N_STAB 0xe0, N_TYPE 0x0e, N_SECT 0x0e
      guard type & 0xE0 == 0, type & 0x0E == 0x0E, section != 0, nameOffset != 0 else { continue }
      // UInt32 -> Int is exact on 64-bit; nameLength checks the offset against the table.
      guard var length = nameLength(in: names, at: Int(nameOffset)), length > 0 else { continue }
      var offset = Int(nameOffset)
      if names[offset] == UInt8(ascii: "_"), length > 1 { offset += 1; length -= 1 }
      // Thumb functions have N_ARM_THUMB_DEF (0x0008); their addresses are as written.
      _ = description
      let external: UInt8 = type & 0x01 != 0 ? 0 : 1  // N_EXT
      if external == 1 { hasLocalSymbols = true }
      entries.append(Entry(address: value, size: 0, nameOffset: UInt32(offset),
                           nameLength: UInt32(length), rank: external, order: UInt32(truncatingIfNeeded: index)))
      named.insert(value)
    }
    if let functionStarts {
      // With local symbols kept, only starts below every named symbol have no symbol to belong to.
      let lowestNamed = hasLocalSymbols ? entries.lazy.map(\.address).min() : nil
      for start in try functionStartAddresses(functionStarts, textVMAddress: textVMAddress) where !named.contains(start) {
        if let lowestNamed, start > lowestNamed { continue }
        entries.append(Entry(address: start, size: 0, nameOffset: 0, nameLength: 0, rank: 9))
      }
    }
    return SymbolTable(entries: entries, names: names)
  }

  /// Decodes `LC_FUNCTION_STARTS`: ULEB128 deltas, the first from `textVMAddress`, ending at a 0 delta
  /// or the end of the data. Each delta takes at least one byte, so the loop is bounded by the size.
  package static func functionStartAddresses(_ data: ByteReader, textVMAddress: UInt64) throws(FormatError) -> [UInt64] {
    var reader = data
    var address = textVMAddress
    var result: [UInt64] = []
    while reader.remaining > 0 {
      let start = reader.offset
      let delta: UInt64
      do throws(FormatError) {
        delta = try reader.readULEB128()
      } catch {
        guard case .leb128TooLong = error else { throw error }
        throw .machO("LC_FUNCTION_STARTS: ULEB128 longer than 64 bits at offset \(start)")
      }
      if delta == 0 { break }
      let (next, overflow) = address.addingReportingOverflow(delta)
      guard !overflow else { throw .machO("LC_FUNCTION_STARTS: address overflows at offset \(reader.offset)") }
      address = next
      result.append(address)
    }
    return result
  }
}
