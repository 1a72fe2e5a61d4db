/// A binary's call frame information: `.eh_frame` (found through `.eh_frame_hdr`'s sorted table when
/// there is one) and `.debug_frame`, and for an address the unwind row that holds it. The engine under
/// the unwinder: bytes may come from a mapped file, another process or our own memory.
///
/// Valid only while the bytes its readers cover are.
public struct CallFrameInfo {
  /// `.eh_frame`, when present.
  public var ehFrame: CallFrameSection?
  /// `.eh_frame_hdr`'s search table, when present and usable.
  public var header: EHFrameHeader?
  /// `.debug_frame`, when present (decompressed by the caller).
  public var debugFrame: CallFrameSection?

  /// The sections as given: `ehFrameHeader` and `ehFrame` at their addresses (link-time for a file,
  /// run-time for memory), `debugFrame` with absolute addresses. A broken `.eh_frame_hdr` is not an
  /// error here: lookups then walk `.eh_frame` (the header is only an index).
  public init(ehFrame: CallFrameSection?, ehFrameHeader: ByteReader?, ehFrameHeaderVMAddress: UInt64 = 0,
              debugFrame: CallFrameSection?) {
    self.ehFrame = ehFrame
    self.debugFrame = debugFrame
    if let ehFrameHeader, let ehFrame {
      header = try? EHFrameHeader(ehFrameHeader, vmAddress: ehFrameHeaderVMAddress, addressSize: ehFrame.addressSize)
    }
  }

  /// The call frame sections of an ELF file in `file` (the bytes `elf` was decoded from), at their
  /// link-time addresses. Sections without file contents (a debug file's `.eh_frame` is `NOBITS`)
  /// and compressed ones (`SHF_COMPRESSED`: decompress with the DWARF reader) are left out.
  public init(elf: ELFFile, file: ByteReader) throws(FormatError) {
    let addressSize = elf.header.is64Bit ? 8 : 4
    let compressed: UInt64 = 0x800  // SHF_COMPRESSED
    func contents(_ name: String) throws(FormatError) -> (ByteReader, ELFSection)? {
      guard let section = elf.section(named: name), section.occupiesFile, section.flags & compressed == 0 else { return nil }
      return (try elf.contents(of: section, in: file), section)
    }
    let text = elf.section(named: ".text")?.vmAddress ?? 0
    let got = elf.section(named: ".got")?.vmAddress ?? 0
    var ehFrame: CallFrameSection?
    if let (bytes, section) = try contents(".eh_frame") {
      ehFrame = CallFrameSection(bytes: bytes, kind: .ehFrame,
                                 bases: PointerBases(sectionVMAddress: section.vmAddress, textVMAddress: text, dataVMAddress: got),
                                 addressSize: addressSize)
    }
    var debugFrame: CallFrameSection?
    if let (bytes, _) = try contents(".debug_frame") {
      debugFrame = CallFrameSection(bytes: bytes, kind: .debugFrame, bases: PointerBases(sectionVMAddress: 0),
                                    addressSize: addressSize)
    }
    let header = try contents(".eh_frame_hdr")
    self.init(ehFrame: ehFrame, ehFrameHeader: header?.0, ehFrameHeaderVMAddress: header?.1.vmAddress ?? 0,
              debugFrame: debugFrame)
  }

  /// The FDE holding `pc` and its CIE: through `.eh_frame_hdr`'s table when there is one (then
  /// `.eh_frame` is not walked), else by walking `.eh_frame`; then `.debug_frame`. `nil` when none.
  public func entry(containing pc: UInt64) throws(FormatError) -> (FrameDescriptionEntry, CommonInformationEntry)? {
    try locate(pc).map { ($0.1, $0.2) }
  }

  /// The unwind row that holds `pc` (a PC in the frame's function: for a caller's frame, the return
  /// address minus one unless the row is a signal frame's), or `nil` when no FDE covers it.
  public func row(at pc: UInt64) throws(FormatError) -> UnwindRow? {
    guard let (section, fde, cie) = try locate(pc) else { return nil }
    return try section.rows(fde, cie, upTo: pc).first
  }

  func locate(_ pc: UInt64) throws(FormatError) -> (CallFrameSection, FrameDescriptionEntry, CommonInformationEntry)? {
    if let ehFrame {
      if let header, header.count > 0 {
        if let offset = try header.fdeOffset(for: pc, in: ehFrame) {
          let (fde, cie) = try ehFrame.entry(at: offset)
          if fde.pcRange.contains(pc) { return (ehFrame, fde, cie) }
        }
      } else if let (fde, cie) = try ehFrame.linearSearch(pc) {
        return (ehFrame, fde, cie)
      }
    }
    if let debugFrame, let (fde, cie) = try debugFrame.linearSearch(pc) { return (debugFrame, fde, cie) }
    return nil
  }
}

extension CallFrameSection {
  /// Every row of `fde`'s table, in order (as `readelf --debug-dump=frames-interp` lists them).
  public func rows(of fde: FrameDescriptionEntry, _ cie: CommonInformationEntry) throws(FormatError) -> [UnwindRow] {
    try rows(fde, cie, upTo: nil)
  }

  /// The row of `fde`'s table that holds `pc`, `nil` when `pc` is outside it.
  public func row(of fde: FrameDescriptionEntry, _ cie: CommonInformationEntry, at pc: UInt64) throws(FormatError) -> UnwindRow? {
    try rows(fde, cie, upTo: pc).first
  }
}

/// `.eh_frame_hdr`: a pointer to `.eh_frame` and, usually, a table of (initial location, FDE address)
/// pairs sorted by location, for a binary search (what glibc's `_Unwind_Find_FDE` uses).
public struct EHFrameHeader {
  /// The address of `.eh_frame` the header gives.
  public var ehFrameVMAddress: UInt64
  /// The number of table entries (0 when there is no usable table).
  public var count: Int
  private var table: ByteReader
  private var tableStart: Int
  private var tableEncoding: UInt8
  private var entrySize: Int
  private var bases: PointerBases
  private var addressSize: Int

  /// Decodes the header at `vmAddress`. Throws for a version other than 1 or pointers it cannot
  /// decode; a table with a variable-size encoding is treated as absent (no binary search on it).
  public init(_ bytes: ByteReader, vmAddress: UInt64, addressSize: Int) throws(FormatError) {
    var reader = bytes
    let version = try reader.read(UInt8.self)
    guard version == 1 else { throw .dwarf(section: ".eh_frame_hdr", offset: 0, "version \(version) (1 expected)") }
    let frameEncoding = try reader.read(UInt8.self)
    let countEncoding = try reader.read(UInt8.self)
    tableEncoding = try reader.read(UInt8.self)
    self.addressSize = addressSize
    // datarel in .eh_frame_hdr is relative to the header's start.
    bases = PointerBases(sectionVMAddress: vmAddress, dataVMAddress: vmAddress)
    let section = CallFrameSection(bytes: bytes, kind: .ehFrame, bases: bases, addressSize: addressSize)
    ehFrameVMAddress = try section.readPointer(&reader, encoding: frameEncoding, addressSize: addressSize, functionStart: 0)
    count = 0
    table = try bytes.slice(at: 0, length: 0)
    tableStart = 0
    entrySize = 0
    guard countEncoding != PointerEncoding.omit, tableEncoding != PointerEncoding.omit,
          let size = PointerEncoding.fixedSize(tableEncoding, addressSize: addressSize) else { return }
    let claimed = try section.readPointer(&reader, encoding: countEncoding, addressSize: addressSize, functionStart: 0)
    entrySize = 2 * size
    let tableStart = reader.offset
    let fits = reader.remaining / entrySize
    guard let claimedCount = Int(exactly: claimed), claimedCount <= fits else {
      throw .dwarf(section: ".eh_frame_hdr", offset: tableStart,
                   "\(claimed) table entries of \(entrySize) bytes do not fit in the \(reader.remaining) left")
    }
    count = claimedCount
    self.tableStart = tableStart
    table = try bytes.slice(at: 0, length: tableStart + count * entrySize)  // count * entrySize <= remaining
  }

  /// The `.eh_frame` offset of the FDE the table gives for `pc` (the last entry at or below it), or
  /// `nil` when the table has none. The caller checks that FDE's range holds `pc`.
  func fdeOffset(for pc: UInt64, in ehFrame: CallFrameSection) throws(FormatError) -> Int? {
    guard count > 0 else { return nil }
    let section = CallFrameSection(bytes: table, kind: .ehFrame, bases: bases, addressSize: addressSize)
    func entry(_ index: Int) throws(FormatError) -> (UInt64, UInt64) {
      var reader = table
      try reader.seek(to: tableStart + index * entrySize)  // index < count: inside the table
      let location = try section.readPointer(&reader, encoding: tableEncoding, addressSize: addressSize, functionStart: 0)
      let address = try section.readPointer(&reader, encoding: tableEncoding, addressSize: addressSize, functionStart: 0)
      return (location, address)
    }
    // The last entry whose location is <= pc: at most log2(count) + 1 probes.
    var low = 0, high = count
    while low < high {
      let middle = low + (high - low) / 2
      if try entry(middle).0 <= pc { low = middle + 1 } else { high = middle }
    }
    guard low > 0 else { return nil }
    let (_, address) = try entry(low - 1)
    let (offset, below) = address.subtractingReportingOverflow(ehFrame.bases.sectionVMAddress)
    guard !below, let position = Int(exactly: offset), position < ehFrame.bytes.count else {
      throw .dwarf(section: ".eh_frame_hdr", offset: tableStart + (low - 1) * entrySize,
                   "FDE address 0x\(hexDigits(address)) is outside .eh_frame")
    }
    return position
  }
}
