import ImageReaders

extension SymbolFile {
  /// A thin Mach-O file, or every readable slice of a universal file (a slice that does not decode is
  /// skipped: one bad slice stops nothing else).
  static func machO(_ reader: ByteReader, path: String, withSymbols: Bool) throws(FormatError) -> [SymbolFile] {
    switch try BinaryFile.parse(reader) {
    case .elf: return [try elf(reader, path: path, reading: withSymbols ? .table : .none)]
    case .machO(let file): return [try machOSlice(file, bytes: reader, path: path, universal: false, withSymbols: withSymbols)]
    case .fat(let fat):
      var result: [SymbolFile] = []
      for member in fat.members {
        guard let file = member.decoded,
              let range = try? ByteReader.checkedRange(offset: member.fileOffset, size: member.size, limit: reader.count,
                                                       "slice \(member.architecture)"),
              let bytes = try? reader.slice(at: range.lowerBound, length: range.count),
              let slice = try? machOSlice(file, bytes: bytes, path: path, universal: true, withSymbols: withSymbols)
        else { continue }
        result.append(slice)
      }
      guard !result.isEmpty else { throw .fat("no readable slice") }
      return result
    }
  }

  /// One Mach-O slice: `LC_UUID`, `__TEXT` vmaddr (where a report's load address maps), `LC_SYMTAB`
  /// with `LC_FUNCTION_STARTS`, and whether a `__DWARF` segment (a dSYM) is there.
  static func machOSlice(_ file: MachOFile, bytes: ByteReader, path: String, universal: Bool,
                         withSymbols: Bool) throws(FormatError) -> SymbolFile {
    var slice = bytes
    slice.endian = file.header.endian
    let segments = file.segments.filter { $0.name != "__PAGEZERO" }
    let textVMAddress = file.segment(named: "__TEXT")?.vmAddress ?? segments.map(\.vmAddress).min() ?? 0
    let loadEnd = segments.filter { $0.name != "__DWARF" }.map { $0.vmAddress &+ $0.vmSize }.max()
    var symbols = SymbolTable()
    if withSymbols, let table = try file.symbolTableBytes(in: slice) {
      var starts: ByteReader?
      if let functionStarts = file.functionStarts, functionStarts.dataSize > 0 {
        let range = try ByteReader.checkedRange(offset: UInt64(functionStarts.dataOffset), size: UInt64(functionStarts.dataSize),
                                                limit: slice.count, "LC_FUNCTION_STARTS")
        starts = try slice.slice(at: range.lowerBound, length: range.count)
      }
      symbols = try SymbolTable.machO(symbols: table.symbols, count: table.count, strings: table.strings,
                                      is64Bit: file.header.is64Bit, functionStarts: starts, textVMAddress: textVMAddress)
    } else if withSymbols, let functionStarts = file.functionStarts, functionStarts.dataSize > 0 {
      let range = try ByteReader.checkedRange(offset: UInt64(functionStarts.dataOffset), size: UInt64(functionStarts.dataSize),
                                              limit: slice.count, "LC_FUNCTION_STARTS")
      symbols = try SymbolTable.machO(symbols: slice, count: 0, strings: try slice.slice(at: 0, length: 0),
                                      is64Bit: file.header.is64Bit,
                                      functionStarts: try slice.slice(at: range.lowerBound, length: range.count),
                                      textVMAddress: textVMAddress)
    }
    return SymbolFile(path: path, architecture: file.architecture, isUniversalSlice: universal, buildID: file.uuid,
                      imageBaseVMAddress: textVMAddress, loadSize: loadEnd.map { $0 &- textVMAddress },
                      symbols: symbols, hasDebugInfo: file.segment(named: "__DWARF") != nil,
                      hasFullSymbolTable: file.symbolTable != nil)
  }
}
