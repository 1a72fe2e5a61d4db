/// An ELF file decoded from bytes: header, program headers, sections, build-id, dynamic linking
/// information, interpreter and debug-info presence. 32 and 64-bit, either byte order.
///
/// A value: nothing here refers back to the bytes it was read from. Reading is strict about bounds
/// (every table, segment and section that occupies file space must lie inside the file, every count
/// is bounded by the bytes present) and tolerant about meaning (unknown types are kept as numbers).
public struct ELFFile: Sendable {
  /// What kind of ELF file this is, as `file(1)` and crash tooling name it.
  public enum Kind: Sendable, Equatable {
    /// `ET_REL`
    case relocatable
    /// `ET_EXEC`: a position-dependent executable.
    case executable
    /// `ET_DYN` with `DF_1_PIE` in `DT_FLAGS_1`: a position-independent program.
    case pie
    /// `ET_DYN` without `DF_1_PIE`: a library, even with a `PT_INTERP` (glibc's `libc.so.6` and PAM's
    /// `pam_cap.so` have one; readelf and file(1) call them shared objects too).
    case sharedObject
    /// `ET_CORE`
    case core
    /// Any other `e_type`.
    case other(UInt16)

    /// The short name used in summaries: `relocatable`, `executable`, `pie`, `shared-object`, `core`.
    public var name: String {
      switch self {
      case .relocatable: "relocatable"
      case .executable: "executable"
      case .pie: "pie"
      case .sharedObject: "shared-object"
      case .core: "core"
      case .other(let type): "elf-type-\(type)"
      }
    }
  }

  /// Where the debug information for this file is, as far as the file itself says.
  public struct DebugInfo: Sendable, Equatable {
    /// True when a `.debug_info` (or compressed `.zdebug_info`) section has contents in this file.
    public var hasDebugInfo: Bool
    /// The separate debug file's name from `.gnu_debuglink`, or `nil` when there is no such section.
    public var debugLinkFileName: String?
    /// The CRC-32 of the separate debug file from `.gnu_debuglink`.
    public var debugLinkCRC: UInt32?
    /// True when a `.gnu_debugdata` section (an xz-compressed MiniDebugInfo ELF) is present.
    public var hasGNUDebugData: Bool

    /// A value with the given facts; the defaults say "nothing found".
    public init(hasDebugInfo: Bool = false, debugLinkFileName: String? = nil, debugLinkCRC: UInt32? = nil,
                hasGNUDebugData: Bool = false) {
      self.hasDebugInfo = hasDebugInfo
      self.debugLinkFileName = debugLinkFileName
      self.debugLinkCRC = debugLinkCRC
      self.hasGNUDebugData = hasGNUDebugData
    }
  }

  /// The file header.
  public var header: ELFHeader
  /// The program headers, in table order (`PN_XNUM` resolved from section 0's `sh_info`).
  public var programHeaders: [ProgramHeader]
  /// The section headers with their names, in table order (index 0 is the null section). Empty when
  /// the file has no section header table (`e_shoff` 0), as core files and some stripped files.
  /// Decoded with `names: .lookedFor`, only the names this reader itself looks for are filled in
  /// (`.dynamic`, `.dynstr`, `.note.gnu.build-id`, the debug-info sections); the others are "".
  public var sections: [ELFSection]
  /// Executable, PIE, shared object, core or relocatable.
  public var kind: Kind
  /// The architecture name crash tooling uses (`x86_64`, `arm64`, `i386`, `ppc64`, `ppc64le`, ...).
  public var architecture: String
  /// The GNU build-id (`NT_GNU_BUILD_ID`) from a `PT_NOTE` segment, else from a `SHT_NOTE` section
  /// (`.note.gnu.build-id` first); `nil` when the file has none.
  public var buildID: BuildID?
  /// The spans the file covers once loaded, or `nil` without `PT_LOAD` (relocatable objects, some cores).
  public var layout: LoadLayout?
  /// The program interpreter from `PT_INTERP` (`/lib64/ld-linux-x86-64.so.2`), or `nil`.
  public var interpreter: String?
  /// `DT_SONAME`, or `nil`.
  public var soname: String?
  /// `DT_NEEDED` entries in order.
  public var needed: [String]
  /// `DT_RPATH` (colon-separated as stored; several entries joined with `:`), or `nil`.
  public var rpath: String?
  /// `DT_RUNPATH` (colon-separated as stored; several entries joined with `:`), or `nil`.
  public var runpath: String?
  /// `DT_FLAGS_1` (`DF_1_PIE` is `0x08000000`), or `nil` when absent.
  public var dynamicFlags1: UInt64?
  /// The whole dynamic array up to `DT_NULL` (`DT_SYMTAB`, `DT_GNU_HASH`, ... for symbol readers).
  public var dynamicEntries: [ELFDynamicEntry]
  /// `.debug_info`, `.gnu_debuglink` and `.gnu_debugdata`.
  public var debugInfo: DebugInfo

  /// `ET_REL`, `ET_EXEC`, `ET_DYN`, `ET_CORE`
  public static let relocatableType: UInt16 = 1, executableType: UInt16 = 2, dynamicType: UInt16 = 3,
                    coreType: UInt16 = 4
  /// `DF_1_PIE`
  public static let pieFlag: UInt64 = 0x0800_0000
  /// `PN_XNUM`: `e_phnum` value meaning "the count is in section 0's `sh_info`".
  public static let extendedProgramHeaderCount: UInt16 = 0xFFFF
  /// `SHN_XINDEX`: `e_shstrndx` value meaning "the index is in section 0's `sh_link`".
  public static let extendedSectionIndex: UInt16 = 0xFFFF

  /// Decodes the ELF file in `bytes` (the whole file: offsets are file offsets).
  public init(_ bytes: ByteReader) throws(FormatError) {
    try self.init(source: bytes)
  }

  /// Which section names a decode turns into Strings.
  public enum SectionNames: Sendable {
    /// Every section's name.
    case all
    /// Only the names the reader itself looks for (`.dynamic`, `.dynstr`, `.note.gnu.build-id`,
    /// `.debug_info`, `.zdebug_info`, `.gnu_debuglink`, `.gnu_debugdata`); the others are "". Every
    /// name is still checked (inside the name table, NUL-terminated), so the value is the same as with
    /// `.all` but for those names, and so is any error. For callers that print summaries of thousands
    /// of files and no section names (`imagelog file`).
    case lookedFor
  }

  /// Decodes the ELF file whose bytes `source` fetches (offsets are file offsets): the same checks
  /// and the same values or errors as `init(_:)` over the whole file in memory, reading only the
  /// header, the program and section header tables and what they point to.
  public init<Source: RandomAccessBytes>(source: Source, names: SectionNames = .all) throws(FormatError) {
    // An ELF header is at most 64 bytes; a shorter file is passed whole, so errors name its size.
    header = try ELFHeader(source.slice(at: 0, length: min(source.count, 64)))
    var file = source
    file.endian = header.endian
    let tables = try Self.readTables(file, header: header, names: names)
    programHeaders = tables.programHeaders
    sections = tables.sections
    layout = try LoadLayout(programHeaders)
    architecture = elfArchitectureName(machine: header.machine, is64Bit: header.is64Bit, endian: header.endian)
    interpreter = try Self.readInterpreter(file, programHeaders: programHeaders)
    buildID = try Self.readBuildID(file, programHeaders: programHeaders, sections: sections)
    let dynamic = try ELFDynamicInfo(source: file, header: header, programHeaders: programHeaders, sections: sections)
    soname = dynamic.soname
    needed = dynamic.needed
    rpath = dynamic.rpath
    runpath = dynamic.runpath
    dynamicFlags1 = dynamic.flags1
    dynamicEntries = dynamic.entries
    debugInfo = try Self.readDebugInfo(file, sections: sections)
    switch header.type {
    case Self.relocatableType: kind = .relocatable
    case Self.executableType: kind = .executable
    case Self.coreType: kind = .core
    case Self.dynamicType:
      kind = (dynamic.flags1 ?? 0) & Self.pieFlag != 0 ? .pie : .sharedObject
    default: kind = .other(header.type)
    }
  }

  /// Link-time text span: the first `PT_LOAD` (page-aligned) to the end of the last executable
  /// `PT_LOAD`, as `Image.textRange` is before the load bias is added. Empty without `PT_LOAD`.
  public var textVMRange: Range<UInt64> {
    guard let layout else { return 0..<0 }
    return layout.firstVMAddress..<layout.textEndVMAddress
  }

  /// Link-time span of every `PT_LOAD`, from the first (page-aligned) to the end of the last.
  public var loadVMRange: Range<UInt64> {
    guard let layout else { return 0..<0 }
    return layout.firstVMAddress..<max(layout.loadEndVMAddress, layout.firstVMAddress)
  }

  /// The size of `textVMRange` in bytes.
  public var textSize: UInt64 { textVMRange.upperBound - textVMRange.lowerBound }  // Range keeps lower <= upper

  /// The crash-tooling view of this file.
  public var summary: SliceSummary {
    SliceSummary(architecture: architecture, fileType: kind.name, buildID: buildID, textVMRange: textVMRange,
                 loadVMRange: loadVMRange, installName: soname, dependencies: needed)
  }

  /// The first section called `name`, or `nil`.
  public func section(named name: String) -> ELFSection? {
    sections.first { $0.name == name }
  }

  /// The file offset that holds link-time address `address`, when a `PT_LOAD`'s file-backed part covers
  /// it (the loader's view, as `DT_STRTAB` is resolved); `nil` otherwise (bss, unmapped, no segments).
  public func fileOffset(forVMAddress address: UInt64) -> UInt64? {
    ELFDynamicInfo.fileOffset(ofVMAddress: address, programHeaders: programHeaders)?.fileOffset
  }

  /// A reader over `section`'s contents inside `file` (the same bytes this value was decoded from;
  /// offsets restart at 0, byte order is the file's). Throws for sections without file space.
  public func contents(of section: ELFSection, in file: ByteReader) throws(FormatError) -> ByteReader {
    guard section.occupiesFile else {
      throw .elf("section \(section.index) (\(section.name)) has no contents in the file")
    }
    let range = try ByteReader.checkedRange(offset: section.fileOffset, size: section.size, limit: file.count,
                                            "section \(section.index) (\(section.name))")
    var reader = try file.slice(at: range.lowerBound, length: range.count)
    reader.endian = header.endian
    return reader
  }
}

extension ELFFile {
  struct Tables {
    var programHeaders: [ProgramHeader]
    var sections: [ELFSection]
  }

  /// Reads the section header table (with names) and the program header table.
  static func readTables<Source: RandomAccessBytes>(_ file: Source, header: ELFHeader,
                                                    names: SectionNames = .all) throws(FormatError) -> Tables {
    var sections: [ELFSection] = []
    var first: ELFSection?
    // e_shoff set with e_shnum and e_shentsize both 0 is a table that was cut away (sstrip), not one
    // whose count lives in section 0: there are no sections, as readelf says.
    let noTable = header.sectionHeaderCount == 0 && header.sectionHeaderEntrySize == 0
    if header.sectionHeaderOffset != 0 && !noTable {
      let entrySize = Int(header.sectionHeaderEntrySize)
      guard entrySize >= header.expectedSectionHeaderSize else {
        throw .elf("e_shentsize \(entrySize) is smaller than \(header.expectedSectionHeaderSize), the ELF class's section header")
      }
      _ = try ByteReader.checkedRange(offset: header.sectionHeaderOffset, size: UInt64(entrySize),
                                      limit: file.count, "section header table (e_shoff)")
      // checkedRange proved e_shoff + e_shentsize <= file.count, so e_shoff fits in Int.
      let zero = try file.slice(at: Int(header.sectionHeaderOffset), length: entrySize)
      let section0 = try ELFSection(zero, at: 0, index: 0, is64Bit: header.is64Bit)
      first = section0
      // e_shnum 0 with a table present: the real count is section 0's sh_size (more than 0xff00 sections).
      let count = header.sectionHeaderCount == 0 ? section0.size : UInt64(header.sectionHeaderCount)
      let (tableSize, overflow) = count.multipliedReportingOverflow(by: UInt64(entrySize))
      guard !overflow else {
        throw .limitExceeded("section count", value: count, limit: UInt64(file.count / entrySize))
      }
      let table = try ByteReader.checkedRange(offset: header.sectionHeaderOffset, size: tableSize,
                                              limit: file.count, "section header table (\(count) entries of \(entrySize) bytes)")
      let tableReader = try file.slice(at: table.lowerBound, length: table.count)
      let total = table.count / entrySize  // == count: tableSize = count * entrySize fits in the file
      sections.reserveCapacity(total)
      let limit = UInt64(file.count)  // a count is never negative
      for index in 0..<total {
        // index * entrySize < table.count, so the product fits in Int.
        var section = try ELFSection(tableReader, at: index * entrySize, index: index, is64Bit: header.is64Bit)
        // checkedRange's test in subtraction form, inline: it runs for every section of every file.
        if section.occupiesFile && (section.fileOffset > limit || section.size > limit - section.fileOffset) {
          // A section nothing loads (debug, symbol table, comment) costs only itself: its contents are
          // refused when asked for, while the symbols or DWARF in other sections stay readable, as
          // llvm-nm and llvm-symbolizer read them. A loaded section past the end is a broken file.
          if section.flags & ELFSection.allocFlag != 0 {
            _ = try ByteReader.checkedRange(offset: section.fileOffset, size: section.size, limit: file.count,
                                            "section \(index) contents")
          }
          section.contentsInFile = false
        }
        sections.append(section)
      }
      try nameSections(&sections, file: file, header: header, names: names)
    }

    var programHeaders: [ProgramHeader] = []
    var count = UInt64(header.programHeaderCount)
    if header.programHeaderCount == extendedProgramHeaderCount, let first {
      count = UInt64(first.info)
    }
    if header.programHeaderOffset != 0 && count > 0 {
      let entrySize = Int(header.programHeaderEntrySize)
      guard entrySize >= header.expectedProgramHeaderSize else {
        throw .elf("e_phentsize \(entrySize) is smaller than \(header.expectedProgramHeaderSize), the ELF class's program header")
      }
      // count <= UInt32.max and entrySize <= UInt16.max: the product cannot overflow UInt64.
      let table = try ByteReader.checkedRange(offset: header.programHeaderOffset, size: count * UInt64(entrySize),
                                              limit: file.count, "program header table (\(count) entries of \(entrySize) bytes)")
      let tableReader = try file.slice(at: table.lowerBound, length: table.count)
      programHeaders = try ProgramHeader.table(tableReader, count: table.count / entrySize, entrySize: entrySize,
                                               is64Bit: header.is64Bit)
    }
    return Tables(programHeaders: programHeaders, sections: sections)
  }

  /// Fills in section names from the section name table; a name must start inside the table and end
  /// with a NUL inside it.
  static func nameSections<Source: RandomAccessBytes>(_ sections: inout [ELFSection], file: Source, header: ELFHeader,
                                                      names wanted: SectionNames = .all) throws(FormatError) {
    var nameIndex = Int(header.sectionNameTableIndex)
    if header.sectionNameTableIndex == extendedSectionIndex, let first = sections.first {
      nameIndex = Int(first.link)  // UInt32 -> Int is exact on 64-bit
    }
    guard nameIndex != 0 else { return }  // SHN_UNDEF: no names
    guard nameIndex < sections.count else {
      throw .elf("e_shstrndx \(nameIndex) is not a section (\(sections.count) sections)")
    }
    let nameTable = sections[nameIndex]
    if !nameTable.contentsInFile {  // no names without it: the bounds error, as for any other broken table
      _ = try ByteReader.checkedRange(offset: nameTable.fileOffset, size: nameTable.size, limit: file.count,
                                      "section \(nameIndex) contents")
    }
    guard let range = nameTable.fileRange else {
      throw .elf("section name table \(nameIndex) has no contents in the file")
    }
    let names = try file.slice(at: range.lowerBound, length: range.count)
    // A table whose last byte is NUL ends every name that starts inside it: no name needs a scan
    // for its end to be checked (`.lookedFor` then compares only the names it looks for).
    var terminated = false
    if names.count > 0 { terminated = try names.peek(UInt8.self, at: names.count - 1) == 0 }
    for index in sections.indices {
      let offset = Int(sections[index].nameOffset)  // UInt32 -> Int is exact on 64-bit
      if offset == 0 && index == 0 { continue }
      guard offset < names.count else {
        throw .elf("section \(index): sh_name \(offset) is past the section name table (\(names.count) bytes)")
      }
      switch wanted {
      case .all: sections[index].name = try sectionName(names, at: offset)
      case .lookedFor where terminated:
        if let name = lookedForName(inTerminated: names, at: offset) { sections[index].name = name }
      case .lookedFor:
        if let name = try lookedForName(names, at: offset) { sections[index].name = name }
      }
    }
  }

  /// `lookedForName(_:at:)` in a name table whose last byte is NUL (so the name at `offset`, inside
  /// the table, ends inside it): the name's first eight bytes, taken as one integer, pick the one
  /// candidate they can start (every looked-for name has eight bytes before its NUL or is eight bytes
  /// with it), and only that candidate's remaining bytes and NUL are compared. Most names are passed
  /// over after one comparison.
  static func lookedForName(inTerminated names: ByteReader, at offset: Int) -> String? {
    guard offset >= 0, offset <= names.count - 9 else {
      // Fewer than nine bytes from `offset` to the table's end: too short for any looked-for name but
      // `.dynstr` (seven bytes and its NUL), compared here byte by byte.
      guard offset >= 0, offset <= names.count - 8, (try? names.bytes(at: offset, length: 8)) == Array(".dynstr\0".utf8)
      else { return nil }
      return ".dynstr"
    }
    // offset + 9 <= names.count: the eight bytes below and the byte after them are inside the table.
    let prefix = names.field(UInt64.self, littleEndianAt: offset)
    let rest: StaticString
    let name: String
    switch prefix {
    case LookedForPrefix.dynamic: rest = "\0"; name = ".dynamic"
    case LookedForPrefix.dynstr: return ".dynstr"  // the NUL is the eighth byte
    case LookedForPrefix.noteGNU: rest = "u.build-id\0"; name = ".note.gnu.build-id"
    case LookedForPrefix.debugInfo: rest = "nfo\0"; name = ".debug_info"
    case LookedForPrefix.zdebug: rest = "info\0"; name = ".zdebug_info"
    case LookedForPrefix.gnuDebug:
      // `.gnu_debuglink` and `.gnu_debugdata` share their first eight bytes.
      if names.hasBytes("uglink\0", at: offset + 8) { return ".gnu_debuglink" }
      rest = "ugdata\0"; name = ".gnu_debugdata"
    default: return nil
    }
    return names.hasBytes(rest, at: offset + 8) ? name : nil
  }

  /// The first eight bytes of each looked-for name as a little-endian integer (`ELFFileTests` checks
  /// them against the names).
  enum LookedForPrefix {
    static let dynamic: UInt64 = 0x6369_6D61_6E79_642E  // ".dynamic"
    static let dynstr: UInt64 = 0x0072_7473_6E79_642E  // ".dynstr\0"
    static let noteGNU: UInt64 = 0x6E67_2E65_746F_6E2E  // ".note.gn"
    static let debugInfo: UInt64 = 0x695F_6775_6265_642E  // ".debug_i"
    static let zdebug: UInt64 = 0x5F67_7562_6564_7A2E  // ".zdebug_"
    static let gnuDebug: UInt64 = 0x6265_645F_756E_672E  // ".gnu_deb"
  }

  /// The names `ELFFile` and `ELFDynamicInfo` compare section names with.
  static let lookedForNames: [StaticString] = [".dynamic", ".dynstr", ".note.gnu.build-id", ".debug_info",
                                               ".zdebug_info", ".gnu_debuglink", ".gnu_debugdata"]
  /// `lookedForNames` as Strings, made once.
  static let lookedForStrings: [String] = lookedForNames.map { $0.description }

  /// The name at `offset` when it is one of `lookedForNames`, else nil; with `cString(at:)`'s checks
  /// and errors either way (the name must start inside the table and end with a NUL inside it).
  static func lookedForName(_ names: ByteReader, at offset: Int) throws(FormatError) -> String? {
    let length = try names.cStringLength(at: offset)
    // Only lengths 7, 8, 11, 12, 14 and 18 can match: most names are passed over here.
    switch length {
    case 7, 8, 11, 12, 14, 18: break
    default: return nil
    }
    let match = names.withUnsafeBytes { bytes -> Int? in
      // offset + length < bytes.count: cStringLength found the NUL inside the table.
      let name = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
      for (index, candidate) in lookedForNames.enumerated() where candidate.utf8CodeUnitCount == length {
        if candidate.withUTF8Buffer({ $0.elementsEqual(name) }) { return index }
      }
      return nil
    }
    return match.map { lookedForStrings[$0] }
  }

  /// The name at `offset` in the section name table, with `ByteReader.cString(at:)`'s checks and
  /// errors. A String keeps up to 15 bytes of UTF-8 in itself; the longer names toolchains write are
  /// the same in every file, so those come from literals, matched in place by their bytes, instead of
  /// a new allocation each (a library has dozens of sections, and thousands of libraries are read in a
  /// run). A list of literals rather than a table built at first use: that build, its hashing and its
  /// generic types, cost more than one file's names.
  static func sectionName(_ names: ByteReader, at offset: Int) throws(FormatError) -> String {
    let length = try names.cStringLength(at: offset)
    if length > 15, let known = names.withUnsafeBytes({ bytes -> String? in
      // offset + length < bytes.count: cStringLength found the NUL inside the table.
      let name = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
      // String literals: contiguous UTF-8, and copied without an allocation.
      return longSectionNames.first { $0.utf8.count == length && $0.utf8.withContiguousStorageIfAvailable { $0.elementsEqual(name) } == true }
    }) {
      return known
    }
    return try names.cString(at: offset)
  }

  /// Section names longer than 15 bytes that linkers and compilers write.
  static let longSectionNames: [String] = [
    ".note.gnu.build-id", ".note.gnu.property", ".gnu_debugaltlink", ".gcc_except_table", ".data.rel.ro.local",
    ".debug_str_offsets", ".debug_gnu_pubnames", ".debug_gnu_pubtypes",
  ]

  static func readInterpreter<Source: RandomAccessBytes>(_ file: Source, programHeaders: [ProgramHeader]) throws(FormatError) -> String? {
    guard let segment = programHeaders.first(where: { $0.type == ProgramHeader.interpreter }) else { return nil }
    let range = try ByteReader.checkedRange(offset: segment.fileOffset, size: segment.fileSize, limit: file.count,
                                            "PT_INTERP")
    return try file.slice(at: range.lowerBound, length: range.count).fixedString(at: 0, width: range.count)
  }

  /// The build-id from the `PT_NOTE` segments (what the loader maps), else from the note sections.
  /// A broken note segment is an error unless a note section still yields a build-id (separate debug
  /// files keep program headers whose note offsets no longer point at notes).
  static func readBuildID<Source: RandomAccessBytes>(_ file: Source, programHeaders: [ProgramHeader],
                          sections: [ELFSection]) throws(FormatError) -> BuildID? {
    var segmentError: FormatError?
    for segment in programHeaders where segment.type == ProgramHeader.note && segment.fileSize > 0 {
      do {
        let range = try ByteReader.checkedRange(offset: segment.fileOffset, size: segment.fileSize,
                                                limit: file.count, "PT_NOTE")
        let area = try file.slice(at: range.lowerBound, length: range.count)
        if let note = try ELFNote.buildIDNote(in: area, alignment: Int(clamping: segment.alignment)) {
          return BuildID(note.descriptor)
        }
      } catch {
        segmentError = segmentError ?? error
      }
    }
    let notes = sections.filter { $0.type == ELFSection.noteType && $0.occupiesFile }
    let preferred = notes.filter { $0.name == ".note.gnu.build-id" } + notes.filter { $0.name != ".note.gnu.build-id" }
    for section in preferred {
      guard let range = section.fileRange else { continue }
      let area = try file.slice(at: range.lowerBound, length: range.count)
      do {
        if let note = try ELFNote.buildIDNote(in: area, alignment: Int(clamping: section.alignment)) {
          return BuildID(note.descriptor)
        }
      } catch {
        segmentError = segmentError ?? error
      }
    }
    if let segmentError { throw segmentError }
    return nil
  }

  static func readDebugInfo<Source: RandomAccessBytes>(_ file: Source, sections: [ELFSection]) throws(FormatError) -> DebugInfo {
    var info = DebugInfo()
    // By index: iterating the elements copies each section (and retains its name).
    for index in sections.indices {
      // Only names of 11, 12 or 14 bytes can match below: most sections are passed over without
      // comparing strings (a library has dozens of sections, and thousands are read in a run).
      let nameLength = sections[index].name.utf8.count
      guard nameLength == 11 || nameLength == 12 || nameLength == 14 else { continue }
      let section = sections[index]
      switch section.name {
      case ".debug_info", ".zdebug_info":
        if section.occupiesFile { info.hasDebugInfo = true }
      case ".gnu_debugdata":
        info.hasGNUDebugData = true
      case ".gnu_debuglink":
        guard let range = section.fileRange, info.debugLinkFileName == nil else { continue }
        var contents = try file.slice(at: range.lowerBound, length: range.count)
        let name = try contents.cString(at: 0)
        // The file name, its NUL, padding to 4 bytes, then the CRC-32 in the file's byte order.
        // length < contents.count (the NUL is inside), so the sum cannot overflow.
        let crcOffset = (try contents.cStringLength(at: 0) + 1 + 3) & ~3
        try contents.seek(to: min(crcOffset, contents.count))
        guard contents.remaining >= 4 else {
          throw .elf("section \(section.index) (.gnu_debuglink): no room for the CRC after \"\(name)\"")
        }
        info.debugLinkFileName = name
        info.debugLinkCRC = try contents.read(UInt32.self)
      default:
        continue
      }
    }
    return info
  }
}
