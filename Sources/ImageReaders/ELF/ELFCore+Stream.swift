/// A core read in one pass, in file order, by a reader that cannot seek (a `core_pattern` handler reads
/// it from a pipe): where the program header table lies, and which parts of the file are notes and
/// which are memory, so the reader knows what to keep before it has passed it. The notes themselves are
/// decoded by `ELFCore(source:)` from the bytes kept, as from a file.
extension ELFCore {
  /// One segment with bytes in the file, as a one-pass reader meets it.
  public struct StreamSegment: Sendable, Equatable {
    /// What the segment holds.
    public enum Kind: Sendable, Equatable {
      /// `PT_NOTE`: the threads, the signal, the process, the mapped files.
      case notes
      /// `PT_LOAD`: the process's memory at `vmAddress`.
      case memory
    }

    /// What the segment holds.
    public var kind: Kind
    /// `p_offset ..< p_offset + p_filesz`.
    public var fileRange: Range<Int>
    /// `p_vaddr`: the address of the segment's first byte in the process (memory segments).
    public var vmAddress: UInt64
  }

  /// The byte range of the program header table of the core whose ELF header is `header`: what a
  /// one-pass reader reads after the header. Throws when the file is not a core, has no table, or
  /// says `PN_XNUM` (more than 65534 mappings): the real count is then in section header 0, which the
  /// kernel writes after all the memory, where a one-pass reader comes too late for it.
  public static func streamProgramHeaderTable(_ header: ELFHeader) throws(FormatError) -> Range<Int> {
    guard header.type == ELFFile.coreType else {
      throw .elf("e_type \(header.type) is not ET_CORE (4): not a core file")
    }
    guard header.programHeaderCount != ELFFile.extendedProgramHeaderCount else {
      throw .elf("e_phnum is PN_XNUM (more than 65534 mappings): the count is in a section header at the end of "
                   + "the core, which a reader of a stream cannot go back for")
    }
    guard header.programHeaderOffset != 0, header.programHeaderCount > 0 else {
      throw .elf("core has no program headers (e_phoff \(header.programHeaderOffset), e_phnum \(header.programHeaderCount))")
    }
    let entrySize = Int(header.programHeaderEntrySize)
    guard entrySize >= header.expectedProgramHeaderSize else {
      throw .elf("e_phentsize \(entrySize) is smaller than \(header.expectedProgramHeaderSize), the ELF class's program header")
    }
    // e_phnum and e_phentsize are UInt16: the product cannot overflow UInt64, and the range is checked
    // against Int.max by checkedRange.
    return try ByteReader.checkedRange(offset: header.programHeaderOffset,
                                       size: UInt64(header.programHeaderCount) * UInt64(entrySize),
                                       limit: Int.max, "program header table")
  }

  /// The program headers of a core, decoded from `source` (which holds at least the table).
  public static func programHeaders<Source: RandomAccessBytes>(in source: Source,
                                                               header: ELFHeader) throws(FormatError) -> [ProgramHeader] {
    var file = source
    file.endian = header.endian
    return try readProgramHeaders(file, header: header)
  }

  /// The notes and memory segments with bytes in the file, in file order (ties: notes first); a
  /// segment whose file range overflows is left out, and a note segment larger than `noteLimit` throws.
  public static func streamSegments(_ programHeaders: [ProgramHeader]) throws(FormatError) -> [StreamSegment] {
    var result: [StreamSegment] = []
    result.reserveCapacity(programHeaders.count)
    for header in programHeaders where header.fileSize > 0 {
      let kind: StreamSegment.Kind
      switch header.type {
      case ProgramHeader.note: kind = .notes
      case ProgramHeader.load: kind = .memory
      default: continue
      }
      if kind == .notes, header.fileSize > UInt64(noteLimit) {
        throw .limitExceeded("PT_NOTE size", value: header.fileSize, limit: UInt64(noteLimit))
      }
      // A load's p_filesz may exceed p_memsz only in a broken core: the memory is p_memsz long.
      let size = kind == .memory ? min(header.fileSize, header.vmSize) : header.fileSize
      guard size > 0, let range = try? ByteReader.checkedRange(offset: header.fileOffset, size: size, limit: Int.max,
                                                               "segment") else { continue }
      result.append(StreamSegment(kind: kind, fileRange: range, vmAddress: header.vmAddress))
    }
    result.sort { a, b in
      a.fileRange.lowerBound != b.fileRange.lowerBound ? a.fileRange.lowerBound < b.fileRange.lowerBound
        : a.kind == .notes && b.kind != .notes
    }
    return result
  }
}
