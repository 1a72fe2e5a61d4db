/// An ELF core file (`ET_CORE`) decoded from bytes: the dead process's threads (`NT_PRSTATUS`), its
/// name and arguments (`NT_PRPSINFO`), the signal that killed it (`NT_SIGINFO`), its auxiliary vector
/// (`NT_AUXV`), the files it had mapped (`NT_FILE`) and its memory (`PT_LOAD`).
///
/// Cores are big (gigabytes) and often cut short (`RLIMIT_CORE`, a full disk): the value keeps only
/// the program headers and the notes, and memory is read later, range by range, through the same
/// source (`memory(at:length:in:)`). Memory the core does not hold — a segment the kernel left out
/// (`p_filesz` 0: file-backed text by default), the part of a segment past `p_filesz`, or bytes past
/// the end of a truncated core — reads as unavailable, never as zeros.
///
/// Strict about the bounds of what it decodes (the note segment must lie in the file, every note and
/// descriptor inside it), tolerant about meaning: unknown notes are skipped, and a thread whose
/// `NT_PRSTATUS` has a size this reader does not know keeps its tid and signal without registers.
package struct ELFCore: Sendable {
  /// The file header (`e_type` is `ET_CORE`).
  package var header: ELFHeader
  /// The architecture name crash tooling uses (`x86_64`, `arm64`, `i386`, ...).
  package var architecture: String
  /// The program headers, in table order.
  package var programHeaders: [ProgramHeader]
  /// The process's memory the core describes, one per `PT_LOAD`, in address order.
  package var segments: [MemorySegment]
  /// One per `NT_PRSTATUS`, in note order (the kernel writes the thread that dumped first).
  package var threads: [Thread]
  /// `NT_PRPSINFO`, or `nil` when the core has none.
  package var process: ProcessInfo?
  /// The first `NT_SIGINFO`, or `nil` when the core has none (gdb's `gcore` of a live process writes one
  /// with signal 0 on some versions, none on others).
  package var signalInfo: SignalInfo?
  /// `NT_AUXV`: (`a_type`, `a_val`) pairs up to `AT_NULL`, which is not kept.
  package var auxiliaryVector: [(type: UInt64, value: UInt64)]
  /// `NT_FILE`: the file mappings, or `nil` when the core has no such note (cores before Linux 3.7).
  package var mappedFiles: MappedFiles?
  /// The size of the core file in bytes (the limit every segment is clipped to).
  package var fileSize: Int

  /// One `PT_LOAD`: `vmRange` of the process's memory, of which the first `availableSize` bytes are in
  /// the core at `fileOffset`.
  package struct MemorySegment: Sendable, Equatable {
    /// `p_vaddr ..< p_vaddr + p_memsz`.
    package var vmRange: Range<UInt64>
    /// `p_offset`
    package var fileOffset: UInt64
    /// `p_filesz`: how many bytes the writer put in the core.
    package var fileSize: UInt64
    /// How many bytes from `vmRange.lowerBound` can be read: `p_filesz`, clipped to `p_memsz` and to the
    /// end of the core file (a truncated core holds fewer).
    package var availableSize: UInt64
    /// `p_flags`: `PF_X` 1, `PF_W` 2, `PF_R` 4.
    package var flags: UInt32
  }

  /// One thread, from its `NT_PRSTATUS`.
  package struct Thread: Sendable, Equatable {
    /// `pr_pid`: the thread's id (the process's pid for the main thread).
    package var tid: Int32
    /// `pr_cursig`: the signal the thread was handling when the core was written, 0 for none.
    package var signal: Int32
    /// `pr_info.si_code`.
    package var signalCode: Int32
    /// `pr_ppid`
    package var parentPID: Int32
    /// `pr_pgrp`
    package var processGroup: Int32
    /// The general registers (`pr_reg`), in the kernel's order for `registers.architecture`; `nil` when the
    /// note's size is not the one this reader knows for the core's machine.
    package var registers: Registers?
  }

  /// `NT_PRPSINFO`: the process as `ps` saw it.
  package struct ProcessInfo: Sendable, Equatable {
    /// `pr_pid`
    package var pid: Int32
    /// `pr_ppid`
    package var parentPID: Int32
    /// `pr_uid`
    package var uid: UInt32
    /// `pr_fname`: the executable's name, cut to 15 bytes by the kernel.
    package var name: String
    /// `pr_psargs`: the command line, arguments separated by spaces, cut to 79 bytes by the kernel
    /// (trailing spaces removed).
    package var arguments: String
  }

  /// `NT_SIGINFO`: the `siginfo_t` of the signal that killed the process.
  package struct SignalInfo: Sendable, Equatable {
    /// `si_signo`
    package var signal: Int32
    /// `si_errno`
    package var errno: Int32
    /// `si_code`: `SEGV_MAPERR` 1, `SI_USER` 0, `SI_TKILL` -6, ...
    package var code: Int32
    /// `si_addr` for the signals that carry one (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP`)
    /// when the kernel raised them (`si_code` > 0); `nil` otherwise (`si_pid`/`si_uid` share the place).
    package var faultAddress: UInt64?
  }

  /// `NT_FILE`: which file each file-backed mapping showed, as `/proc/PID/maps` did.
  package struct MappedFiles: Sendable, Equatable {
    /// The page size the offsets are counted in.
    package var pageSize: UInt64
    /// The mappings, in note order (address order, as the kernel writes them).
    package var mappings: [Mapping]

    /// One mapping of a file.
    package struct Mapping: Sendable, Equatable {
      /// `start ..< end` in the process.
      package var vmRange: Range<UInt64>
      /// The offset in the file of `vmRange.lowerBound`, in bytes (the note counts pages).
      package var fileOffset: UInt64
      /// The file's path when the core was written (` (deleted)` appended for an unlinked file).
      package var path: String
    }
  }

  /// `NT_PRSTATUS`, `NT_PRPSINFO`, `NT_AUXV` (owner `CORE`), `NT_SIGINFO` and `NT_FILE` (owner `CORE`).
  package static let prstatusType: UInt32 = 1, prpsinfoType: UInt32 = 3, auxvType: UInt32 = 6,
                    siginfoType: UInt32 = 0x5349_4749, fileType: UInt32 = 0x4649_4C45
  /// `AT_PHDR`, `AT_PHENT`, `AT_PHNUM`, `AT_PAGESZ`, `AT_BASE`, `AT_ENTRY`, `AT_SYSINFO_EHDR`, `AT_EXECFN`
  package static let auxPHDR: UInt64 = 3, auxPHEntrySize: UInt64 = 4, auxPHCount: UInt64 = 5, auxPageSize: UInt64 = 6,
                    auxBase: UInt64 = 7, auxEntry: UInt64 = 9, auxSysinfoEHDR: UInt64 = 33, auxExecFN: UInt64 = 31
  /// The largest note segment decoded (the notes of a process with thousands of threads and mappings
  /// are a few megabytes; more is not a core this reader was made for).
  package static let noteLimit = 256 * 1024 * 1024

  /// Decodes the core whose bytes `source` fetches: the header, the program header table and the note
  /// segments; memory is left in the file. Throws when the file is not an ELF core, when a table or
  /// the notes do not lie inside the file, or when a note is malformed.
  package init<Source: RandomAccessBytes>(source: Source) throws(FormatError) {
    header = try ELFHeader(source.slice(at: 0, length: min(source.count, 64)))
    guard header.type == ELFFile.coreType else {
      throw .elf("e_type \(header.type) is not ET_CORE (4): not a core file")
    }
    var file = source
    file.endian = header.endian
    fileSize = file.count
    architecture = elfArchitectureName(machine: header.machine, is64Bit: header.is64Bit, endian: header.endian)
    programHeaders = try Self.readProgramHeaders(file, header: header)
    segments = Self.memorySegments(programHeaders, fileSize: file.count)
    var notes = ELFCoreNotes()
    for segment in programHeaders where segment.type == ProgramHeader.note && segment.fileSize > 0 {
      let range = try ByteReader.checkedRange(offset: segment.fileOffset, size: segment.fileSize,
                                              limit: file.count, "PT_NOTE (the core is truncated or damaged)")
      guard range.count <= Self.noteLimit else {
        throw .limitExceeded("PT_NOTE size", value: segment.fileSize, limit: UInt64(Self.noteLimit))
      }
      try notes.decode(file.slice(at: range.lowerBound, length: range.count), header: header)
    }
    threads = notes.threads
    process = notes.process
    signalInfo = notes.signalInfo
    auxiliaryVector = notes.auxiliaryVector
    mappedFiles = notes.mappedFiles
  }

  /// The value of auxiliary vector entry `type` (`AT_PHDR`, `AT_SYSINFO_EHDR`, ...), or `nil`.
  package func auxiliaryValue(_ type: UInt64) -> UInt64? {
    auxiliaryVector.first { $0.type == type }?.value
  }

  /// The process's page size: `AT_PAGESZ` when it is a plausible one (a power of two from 512 bytes to
  /// 1 GiB), else 4 KiB.
  package var pageSize: UInt64 {
    guard let size = auxiliaryValue(Self.auxPageSize), size >= 512, size <= 1 << 30, size & (size - 1) == 0 else {
      return 4096
    }
    return size
  }

  /// The signal that killed the process (`NT_SIGINFO`, else the first thread's `pr_cursig`), or `nil`
  /// for a core of a live process (gcore).
  package var signal: Int32? {
    if let signalInfo, signalInfo.signal != 0 { return signalInfo.signal }
    return threads.first.map(\.signal).flatMap { $0 != 0 ? $0 : nil }
  }

  /// The index in `threads` of the thread that was handling the signal: the kernel writes it first and
  /// gives every thread the signal number, so the first one with `pr_cursig` set; `nil` without a signal.
  package var crashedThreadIndex: Int? {
    guard signal != nil else { return nil }
    return threads.firstIndex { $0.signal != 0 } ?? (threads.isEmpty ? nil : 0)
  }

  /// The segment holding `address`, or `nil`. Binary search: segments are sorted and do not overlap.
  package func segment(containing address: UInt64) -> MemorySegment? {
    segmentIndex(containing: address).map { segments[$0] }
  }

  /// The index in `segments` of the segment holding `address`, or `nil`.
  func segmentIndex(containing address: UInt64) -> Int? {
    segments.sortedRangeIndex(containing: address) { $0.vmRange }
  }

  /// The byte range of the core file that holds the process's memory `address ..< address + length`,
  /// when one segment holds all of it; `nil` when any of it is unmapped or was not written.
  package func fileRange(ofMemory address: UInt64, length: Int) -> Range<Int>? {
    guard length >= 0, let segment = segment(containing: address) else { return nil }
    let delta = address - segment.vmRange.lowerBound  // segment contains address
    guard delta <= segment.availableSize, UInt64(length) <= segment.availableSize - delta else { return nil }
    // A segment with bytes in the core lies inside the file (memorySegments clips availableSize), so
    // with delta + length <= availableSize the range fits in Int; an empty read of an empty segment
    // may start anywhere and is refused here.
    guard length > 0, let start = Int(exactly: segment.fileOffset + delta) else { return nil }
    return start..<start + length
  }

  /// A reader over the process's memory `address ..< address + length`, when one segment holds all of
  /// it (see `fileRange(ofMemory:length:)`); `nil` when it is not in the core.
  package func memory<Source: RandomAccessBytes>(at address: UInt64, length: Int,
                                                in source: Source) throws(FormatError) -> ByteReader? {
    guard let range = fileRange(ofMemory: address, length: length) else { return nil }
    var reader = try source.slice(at: range.lowerBound, length: range.count)
    reader.endian = header.endian
    return reader
  }

  /// How many bytes from `address` on the core holds without a gap (across adjacent segments).
  package func availableBytes(from address: UInt64) -> UInt64 {
    var total: UInt64 = 0
    var next = address
    // Each step moves to the next segment: bounded by the segment count.
    for _ in 0..<segments.count {
      guard let segment = segment(containing: next) else { break }
      let delta = next - segment.vmRange.lowerBound
      guard delta < segment.availableSize else { break }
      total &+= segment.availableSize - delta
      guard segment.availableSize == segment.vmRange.upperBound - segment.vmRange.lowerBound else { break }
      next = segment.vmRange.upperBound
    }
    return total
  }
}

extension ELFCore {
  /// The program header table (`PN_XNUM` resolved from section 0's `sh_info`, as cores with more than
  /// 65534 mappings store it).
  static func readProgramHeaders<Source: RandomAccessBytes>(_ file: Source,
                                                            header: ELFHeader) throws(FormatError) -> [ProgramHeader] {
    var count = UInt64(header.programHeaderCount)
    if header.programHeaderCount == ELFFile.extendedProgramHeaderCount {
      let entrySize = header.expectedSectionHeaderSize
      let range = try ByteReader.checkedRange(offset: header.sectionHeaderOffset, size: UInt64(entrySize),
                                              limit: file.count, "section header 0 (e_phnum is PN_XNUM)")
      let zero = try ELFSection(file.slice(at: range.lowerBound, length: range.count), at: 0, index: 0,
                                is64Bit: header.is64Bit)
      count = UInt64(zero.info)
    }
    guard header.programHeaderOffset != 0, count > 0 else {
      throw .elf("core has no program headers (e_phoff \(header.programHeaderOffset), e_phnum \(count))")
    }
    let entrySize = Int(header.programHeaderEntrySize)
    guard entrySize >= header.expectedProgramHeaderSize else {
      throw .elf("e_phentsize \(entrySize) is smaller than \(header.expectedProgramHeaderSize), the ELF class's program header")
    }
    // count <= UInt32.max and entrySize <= UInt16.max: the product cannot overflow UInt64.
    let table = try ByteReader.checkedRange(offset: header.programHeaderOffset, size: count * UInt64(entrySize),
                                            limit: file.count, "program header table (\(count) entries of \(entrySize) bytes)")
    return try ProgramHeader.table(file.slice(at: table.lowerBound, length: table.count),
                                   count: table.count / entrySize, entrySize: entrySize, is64Bit: header.is64Bit)
  }

  /// The `PT_LOAD`s as memory, sorted by address; empty and wrapping segments are dropped, and
  /// overlapping ones keep the first (a core from a sane writer has neither).
  static func memorySegments(_ headers: [ProgramHeader], fileSize: Int) -> [MemorySegment] {
    var result: [MemorySegment] = []
    result.reserveCapacity(headers.count)
    let limit = UInt64(fileSize)  // a size is never negative
    for header in headers where header.type == ProgramHeader.load && header.vmSize > 0 {
      let (end, overflow) = header.vmAddress.addingReportingOverflow(header.vmSize)
      guard !overflow else { continue }
      var available = min(header.fileSize, header.vmSize)
      available = header.fileOffset >= limit ? 0 : min(available, limit - header.fileOffset)
      result.append(MemorySegment(vmRange: header.vmAddress..<end, fileOffset: header.fileOffset,
                                  fileSize: header.fileSize, availableSize: available, flags: header.flags))
    }
    result.sort { $0.vmRange.lowerBound < $1.vmRange.lowerBound }
    var kept: [MemorySegment] = []
    kept.reserveCapacity(result.count)
    for segment in result {
      if let last = kept.last, segment.vmRange.lowerBound < last.vmRange.upperBound { continue }
      kept.append(segment)
    }
    return kept
  }
}
