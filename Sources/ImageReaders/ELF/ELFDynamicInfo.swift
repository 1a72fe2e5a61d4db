/// One entry of an ELF dynamic array (`ElfN_Dyn`).
public struct ELFDynamicEntry: Sendable, Equatable {
  /// `d_tag` (signed in the format; processor- and OS-specific tags are large positive values here).
  public var tag: UInt64
  /// `d_un`: a value or a link-time address, depending on the tag.
  public var value: UInt64

  /// `DT_NULL`, `DT_NEEDED`, `DT_STRTAB`, `DT_STRSZ`, `DT_SONAME`, `DT_RPATH`, `DT_DEBUG`, `DT_RUNPATH`, `DT_FLAGS_1`
  package static let null: UInt64 = 0, needed: UInt64 = 1, stringTable: UInt64 = 5, stringTableSize: UInt64 = 10,
                    soname: UInt64 = 14, rpath: UInt64 = 15, debug: UInt64 = 21, runpath: UInt64 = 29,
                    flags1: UInt64 = 0x6FFF_FFFB

  /// An entry with `tag` and `value` (tests and hand-built tables).
  package init(tag: UInt64, value: UInt64) {
    self.tag = tag
    self.value = value
  }
}

/// The dynamic linking facts of an ELF file: `DT_SONAME`, `DT_NEEDED`, `DT_RPATH`, `DT_RUNPATH`,
/// `DT_FLAGS_1`, read from `PT_DYNAMIC` (else the `.dynamic` section), with strings from
/// `DT_STRTAB` mapped through the `PT_LOAD` that contains it (else the `.dynstr` section).
package struct ELFDynamicInfo: Sendable, Equatable {
  /// The dynamic array up to (not including) `DT_NULL`.
  package var entries: [ELFDynamicEntry] = []
  /// `DT_SONAME`
  package var soname: String?
  /// `DT_NEEDED`, in order.
  package var needed: [String] = []
  /// `DT_RPATH` (several joined with `:`).
  package var rpath: String?
  /// `DT_RUNPATH` (several joined with `:`).
  package var runpath: String?
  /// `DT_FLAGS_1`
  package var flags1: UInt64?

  /// Reads the dynamic information of `file`; empty when there is no dynamic array. A separate debug
  /// file (whose `.dynamic` is `SHT_NOBITS`) has none, as readelf says.
  package init(_ file: ByteReader, header: ELFHeader, programHeaders: [ProgramHeader],
              sections: [ELFSection]) throws(FormatError) {
    try self.init(source: file, header: header, programHeaders: programHeaders, sections: sections)
  }

  /// Reads the dynamic information from the file bytes `file` fetches, as `init(_:header:programHeaders:sections:)`.
  package init<Source: RandomAccessBytes>(source file: Source, header: ELFHeader, programHeaders: [ProgramHeader],
                                         sections: [ELFSection]) throws(FormatError) {
    // Index loops: a closure over the elements copies each section (and retains its name).
    var dynamicIndex = sections.indices.first { sections[$0].type == ELFSection.dynamicType }
    if dynamicIndex == nil { dynamicIndex = sections.indices.first { sections[$0].name == ".dynamic" } }
    let dynamicSection = dynamicIndex.map { sections[$0] }
    if let dynamicSection, dynamicSection.type == ELFSection.noBitsType { return }
    let area: Range<Int>
    if let segment = programHeaders.first(where: { $0.type == ProgramHeader.dynamic }) {
      area = try ByteReader.checkedRange(offset: segment.fileOffset, size: segment.fileSize, limit: file.count,
                                         "PT_DYNAMIC")
    } else if let dynamicSection, let range = dynamicSection.fileRange {
      area = range
    } else {
      return
    }
    let entrySize = header.is64Bit ? 16 : 8
    var reader = try file.slice(at: area.lowerBound, length: area.count)
    reader.endian = header.endian
    let count = reader.count / entrySize  // the loop is bounded by the area's size
    entries.reserveCapacity(min(count, 256))
    // One pass notes what the lookups below need: the last DT_FLAGS_1, the first DT_STRTAB and
    // DT_STRSZ, and whether any entry names a string.
    var namesStrings = false
    var stringTableAddress: UInt64?
    var stringTableSize: UInt64?
    for index in 0..<count {
      // index < count = reader.count / entrySize: the entry's bytes are inside the area.
      let position = index &* entrySize
      let tag = reader.field(is64Bit: header.is64Bit, at: position)
      let value = reader.field(is64Bit: header.is64Bit, at: position &+ entrySize / 2)
      if tag == ELFDynamicEntry.null { break }
      entries.append(ELFDynamicEntry(tag: tag, value: value))
      switch tag {
      case ELFDynamicEntry.flags1: flags1 = value
      case ELFDynamicEntry.stringTable: stringTableAddress = stringTableAddress ?? value
      case ELFDynamicEntry.stringTableSize: stringTableSize = stringTableSize ?? value
      case ELFDynamicEntry.needed, ELFDynamicEntry.soname, ELFDynamicEntry.rpath, ELFDynamicEntry.runpath:
        namesStrings = true
      default: break
      }
    }
    guard namesStrings else { return }
    let table = try Self.stringTable(file, address: stringTableAddress, size: stringTableSize,
                                     programHeaders: programHeaders, sections: sections,
                                     dynamicSection: dynamicSection)
    // The names are read from the part of the table that holds them (a big library's table has
    // thousands of symbol names and a few library names): from the lowest name offset to
    // `nameWindowSlack` bytes past the highest. A name that does not end inside that part is read
    // from the whole table, so every result and error is the whole table's.
    var lowest = Int.max
    var highest = -1
    for entry in entries where Self.namesString(entry.tag) {
      guard let offset = Int(exactly: entry.value), offset < table.count else { continue }
      lowest = min(lowest, offset)
      highest = max(highest, offset)
    }
    var part = ByteReader(UnsafeRawBufferPointer(start: nil, count: 0), endian: file.endian)
    if highest >= lowest {
      // lowest <= highest < table.count: the part lies inside the table, which lies inside the file.
      let end = highest + min(Self.nameWindowSlack, table.count - highest)
      part = try file.slice(at: table.lowerBound + lowest, length: end - lowest)
    }
    var whole: ByteReader?
    var rpaths: [String] = []
    var runpaths: [String] = []
    for (index, entry) in entries.enumerated() where Self.namesString(entry.tag) {
      guard let offset = Int(exactly: entry.value), offset < table.count else {
        throw .elf("dynamic entry \(index): string offset 0x\(hexDigits(entry.value)) is past the dynamic string table (\(table.count) bytes)")
      }
      let string: String
      if offset >= lowest, let found = try? part.cString(at: offset - lowest) {
        string = found
      } else {
        let strings: ByteReader
        if let whole { strings = whole } else { strings = try file.slice(at: table.lowerBound, length: table.count) }
        whole = strings
        string = try strings.cString(at: offset)
      }
      switch entry.tag {
      case ELFDynamicEntry.needed: needed.append(string)
      case ELFDynamicEntry.soname: soname = soname ?? string
      case ELFDynamicEntry.rpath: rpaths.append(string)
      default: runpaths.append(string)
      }
    }
    rpath = rpaths.isEmpty ? nil : rpaths.count == 1 ? rpaths[0] : rpaths.joined(separator: ":")
    runpath = runpaths.isEmpty ? nil : runpaths.count == 1 ? runpaths[0] : runpaths.joined(separator: ":")
  }

  /// True for the tags whose value is an offset in the dynamic string table.
  static func namesString(_ tag: UInt64) -> Bool {
    tag == ELFDynamicEntry.needed || tag == ELFDynamicEntry.soname || tag == ELFDynamicEntry.rpath
      || tag == ELFDynamicEntry.runpath
  }

  /// Bytes read past the highest name offset with the names (`init(source:...)`): longer than the
  /// library names and search paths toolchains write.
  static let nameWindowSlack = 256

  /// The file range of the dynamic string table, checked against the file's size (nothing is read):
  /// `DT_STRTAB`/`DT_STRSZ` through the `PT_LOAD` holding that address, else the section `.dynamic`
  /// links to, else `.dynstr`. `address` and `size` are the first `DT_STRTAB` and `DT_STRSZ` values, if any.
  static func stringTable<Source: RandomAccessBytes>(_ file: Source, address: UInt64?, size: UInt64?,
                                                     programHeaders: [ProgramHeader], sections: [ELFSection],
                                                     dynamicSection: ELFSection?) throws(FormatError) -> Range<Int> {
    if let address, let offset = fileOffset(ofVMAddress: address, programHeaders: programHeaders) {
      let available = offset.segmentRemaining
      let size = size ?? available
      return try ByteReader.checkedRange(offset: offset.fileOffset, size: size, limit: file.count,
                                         "dynamic string table (DT_STRTAB 0x\(hexDigits(address)))")
    }
    var table: ELFSection?
    if let dynamicSection, Int(exactly: dynamicSection.link).map({ $0 > 0 && $0 < sections.count }) == true {
      table = sections[Int(dynamicSection.link)]  // UInt32 -> Int is exact; bounds checked above
    }
    table = table ?? sections.first { $0.name == ".dynstr" }
    guard let table, let range = table.fileRange else {
      throw .elf("dynamic entries name strings but no dynamic string table is in the file")
    }
    return range
  }

  /// The file offset of a link-time address inside some `PT_LOAD`'s file-backed part, and how many
  /// file bytes of that segment follow it; `nil` when no `PT_LOAD` holds it.
  static func fileOffset(ofVMAddress address: UInt64,
                         programHeaders: [ProgramHeader]) -> (fileOffset: UInt64, segmentRemaining: UInt64)? {
    for segment in programHeaders where segment.type == ProgramHeader.load {
      guard address >= segment.vmAddress else { continue }
      let delta = address - segment.vmAddress  // address >= vmAddress, checked above
      guard delta < segment.fileSize else { continue }
      let (offset, overflow) = segment.fileOffset.addingReportingOverflow(delta)
      guard !overflow else { continue }
      return (offset, segment.fileSize - delta)  // delta < fileSize, checked above
    }
    return nil
  }
}
