import ProcessInspection
import ImageReaders

/// One architecture slice of a binary or debug file on disk, decoded for symbolication: its identity,
/// the link-time address a report's load address corresponds to, and its symbol table.
package struct SymbolFile: Sendable {
  /// The file's path.
  package var path: String
  /// For a slice of a universal file, the architecture that picks it.
  package var architecture: String
  /// True when the file came from a universal file (several slices).
  package var isUniversalSlice: Bool
  /// GNU build-id or `LC_UUID`.
  package var buildID: BuildID?
  /// The link-time address of a report's image load address: ELF's first `PT_LOAD`, page-aligned
  /// (where the ELF header maps); Mach-O's `__TEXT` `vmaddr`.
  package var imageBaseVMAddress: UInt64
  /// The span the image covers once loaded (from its load address), when the file says.
  package var loadSize: UInt64?
  /// The function symbols.
  package var symbols: SymbolTable
  /// True when the file has DWARF (`.debug_info`, or `__DWARF` in a dSYM), so lines can be looked up.
  package var hasDebugInfo: Bool
  /// True when the symbols came from a full symbol table (`.symtab`, `LC_SYMTAB` with locals) rather
  /// than only exported symbols.
  package var hasFullSymbolTable: Bool

  /// The `.gnu_debuglink` file name of a stripped ELF file, when it has one.
  package var debugLink: String?
  /// The CRC-32 `.gnu_debuglink` records for that file (a file found by the name must have it).
  package var debugLinkCRC: UInt32?
  /// The `.gnu_debugaltlink` of this file: a dwz supplementary file holding DWARF shared with others.
  package var debugAltLink: DebugAltLink?
  /// Why a `.gnu_debugaltlink` present in the file could not be read, when so.
  package var debugAltLinkProblem: String?
  /// Why a full symbol table present in the file could not be read, when so (its names are then
  /// the exported ones).
  package var symbolTableProblem: String?
  /// The dwz supplementary file of the file with this slice's DWARF (`debugInfoPath ?? path`), found
  /// by `DebugFileLocator` and checked against the `.gnu_debugaltlink` build-id.
  package var supplementaryPath: String?
  /// A separate file with this slice's DWARF (a dSYM or `.debug` file with the same identity), when
  /// the symbols came from one file and the debug info from another.
  package var debugInfoPath: String?
  /// True when `debugInfoPath` is a universal file (its slice is named `path:arch`).
  package var debugInfoIsUniversal = false
  /// True for an ELF executable linked at fixed addresses (`ET_EXEC`, not PIE): loaded where it was
  /// linked, so its load bias is 0 and a report's address is its link-time address.
  package var isFixedAddress = false

  /// For an ELF file loaded with `.presence`: whether it has function symbols, found without reading
  /// its table (`symbols` holds what `readSymbols` has read since). `nil` when the table was read at load
  /// or not asked for.
  var presentSymbols: Bool?
  /// What `readSymbols` has read into `symbols`.
  var symbolsRead = SymbolsRead.nothing
  /// For an ELF file loaded with `.presence`: its mapping and its decoded headers, kept so that
  /// `readSymbols` reads the table from the bytes already mapped and decoded, not from the file again.
  var symbolSource: (mapped: MappedFile, file: ELFFile)?
  /// Whether the file has function symbols, read or not.
  var hasSymbols: Bool { presentSymbols ?? (symbols.count > 0) }

  /// What a `.presence` load's later `readSymbols` calls have read.
  enum SymbolsRead: Sendable {
    case nothing
    /// The whole table.
    case all
    /// A table cut down to these link-time addresses (it answers for them alone). A few per image:
    /// searched in a list (a Set's first use costs more than the searches).
    case addresses([UInt64])
  }

  /// How much of a file's symbol table `load` reads.
  package enum SymbolReading {
    /// The whole table, sorted for any lookup.
    case table
    /// None: identities only.
    case none
    /// For ELF, only whether there are symbols; `readSymbols` reads what some addresses need later, for
    /// one report's few addresses (Mach-O reads the table).
    case presence
  }

  /// Reads every slice of the file at `path`. Throws when the file cannot be mapped or is neither ELF
  /// nor Mach-O.
  package static func load(path: String, withSymbols: Bool = true) throws -> [SymbolFile] {
    try load(path: path, reading: withSymbols ? .table : .none)
  }

  static func load(path: String, reading: SymbolReading) throws -> [SymbolFile] {
    let mapped = try MappedFile(path: path)
    return try mapped.withReader { reader throws -> [SymbolFile] in
      try load(reader, path: path, reading: reading, mapped: mapped)
    }
  }

  /// `mapped`: the mapping `reader` reads, kept by a `.presence` ELF load for `readSymbols`.
  static func load(_ reader: ByteReader, path: String, reading: SymbolReading,
                   mapped: MappedFile? = nil) throws(FormatError) -> [SymbolFile] {
    guard reader.count >= 4 else { throw .tooShort(count: reader.count) }
    if try reader.peek(UInt32.self, at: 0) == ELFHeader.magic {
      return [try elf(reader, path: path, reading: reading, mapped: mapped)]
    }
    return try machO(reader, path: path, withSymbols: reading != .none)
  }

  /// Reads the symbol table a `.presence` load left unread, from the bytes that load mapped and
  /// decoded: only what looking up `addresses` (link-time) needs, or the whole table when `nil`.
  /// A table already read for a set of addresses holding all of `addresses` is kept: it answers for them.
  mutating func readSymbols(for addresses: [UInt64]?) throws(FormatError) {
    guard let (mapped, file) = symbolSource else { return }
    switch (symbolsRead, addresses) {
    case (.all, _): return
    case (.addresses(let read), let wanted?) where wanted.allSatisfy(read.contains): return
    default: break
    }
    symbols = try mapped.withReader { reader throws(FormatError) in try SymbolTable.elf(file, bytes: reader, for: addresses) }
    symbolsRead = addresses.map { .addresses($0) } ?? .all
  }

  /// The slice of `slices` for `architecture` (exact, then `arm64e`/`arm64` and `x86_64h`/`x86_64`
  /// as equivalents); a lone slice when the architecture is unknown.
  package static func slice(_ slices: [SymbolFile], architecture: String?) -> SymbolFile? {
    guard let architecture else { return slices.count == 1 ? slices[0] : nil }
    if let exact = slices.first(where: { $0.architecture == architecture }) { return exact }
    if let other = Architecture(architecture).sibling, let near = slices.first(where: { $0.architecture == other.name }) {
      return near
    }
    return slices.count == 1 && !slices[0].isUniversalSlice ? slices[0] : nil
  }
}
