/// The notes of a core's `PT_NOTE` segments, decoded field by field from the layouts the Linux kernel
/// (`fs/binfmt_elf.c`, `compat_binfmt_elf.c`) and gdb's `gcore` write: `struct elf_prstatus`,
/// `struct elf_prpsinfo`, `siginfo_t`, the auxiliary vector and `NT_FILE`.
struct ELFCoreNotes {
  var threads: [ELFCore.Thread] = []
  var process: ELFCore.ProcessInfo?
  var signalInfo: ELFCore.SignalInfo?
  var auxiliaryVector: [(type: UInt64, value: UInt64)] = []
  var mappedFiles: ELFCore.MappedFiles?

  /// Decodes every note in `area` (one `PT_NOTE`); notes of other owners and types are skipped.
  mutating func decode(_ area: ByteReader, header: ELFHeader) throws(FormatError) {
    // Core notes are 4-aligned in both classes (the kernel's and gdb's writers).
    for note in try ELFNote.notes(in: area, alignment: 4) where note.name == "CORE" {
      let context = "note \(Self.typeName(note.type)) at offset \(note.descriptorOffset)"
      try ByteReader.reading(note.descriptor, endian: header.endian) { (reader: ByteReader) throws(FormatError) in
        switch note.type {
        case ELFCore.prstatusType: threads.append(try Self.prstatus(reader, header: header, context))
        case ELFCore.prpsinfoType: if process == nil { process = try Self.prpsinfo(reader, is64Bit: header.is64Bit, context) }
        case ELFCore.siginfoType: if signalInfo == nil { signalInfo = try Self.siginfo(reader, is64Bit: header.is64Bit, context) }
        case ELFCore.auxvType: if auxiliaryVector.isEmpty { auxiliaryVector = try Self.auxv(reader, is64Bit: header.is64Bit) }
        case ELFCore.fileType: if mappedFiles == nil { mappedFiles = try Self.files(reader, is64Bit: header.is64Bit, context) }
        default: break
        }
      }
    }
  }

  static func typeName(_ type: UInt32) -> String {
    switch type {
    case ELFCore.prstatusType: "NT_PRSTATUS"
    case ELFCore.prpsinfoType: "NT_PRPSINFO"
    case ELFCore.siginfoType: "NT_SIGINFO"
    case ELFCore.auxvType: "NT_AUXV"
    case ELFCore.fileType: "NT_FILE"
    default: "type \(type)"
    }
  }

  /// `struct elf_prstatus`: `pr_info` (signo, code, errno), `pr_cursig`, then (after the signal masks)
  /// `pr_pid`, `pr_ppid`, `pr_pgrp`, `pr_sid`, four `timeval`s, and `pr_reg`. 64-bit longs put `pr_pid`
  /// at 32 and `pr_reg` at 112; i386's 32-bit longs at 24 and 72.
  static func prstatus(_ reader: ByteReader, header: ELFHeader, _ context: String) throws(FormatError) -> ELFCore.Thread {
    let is64Bit = header.is64Bit
    let pidOffset = is64Bit ? 32 : 24, registerOffset = is64Bit ? 112 : 72
    guard reader.count >= registerOffset else {
      throw .elf("\(context): \(reader.count) bytes, too short for struct elf_prstatus (\(registerOffset) before pr_reg)")
    }
    // registerOffset bytes are present (checked above): every field below lies in them.
    var thread = ELFCore.Thread(tid: Int32(bitPattern: reader.field(UInt32.self, at: pidOffset)),
                                signal: Int32(reader.field(Int16.self, at: 12)),
                                signalCode: Int32(bitPattern: reader.field(UInt32.self, at: 4)),
                                parentPID: Int32(bitPattern: reader.field(UInt32.self, at: pidOffset + 4)),
                                processGroup: Int32(bitPattern: reader.field(UInt32.self, at: pidOffset + 8)),
                                registers: nil)
    let layout: Registers.Architecture?
    switch (header.machine, is64Bit) {
    case (62, true): layout = .x86_64
    case (183, true): layout = .aarch64
    case (3, false): layout = .i386
    default: layout = nil  // another machine: the thread without registers
    }
    if let layout {
      let count = Registers.kernelCount(layout)
      let width = is64Bit ? 8 : 4
      // count <= 34 and width <= 8: the product and the sum are small.
      if reader.count - registerOffset >= count * width {
        var values: [UInt64?] = []
        values.reserveCapacity(count)
        for index in 0..<count {
          values.append(reader.field(is64Bit: is64Bit, at: registerOffset + index * width))
        }
        thread.registers = Registers(layout, values: values)
      }
    }
    return thread
  }

  /// `struct elf_prpsinfo`: 64-bit `pr_uid`@16, `pr_pid`@24, `pr_fname[16]`@40, `pr_psargs[80]`@56
  /// (136 bytes); 32-bit with 16-bit ids (i386, 124 bytes) `pr_uid`@8, `pr_pid`@12, `pr_fname`@28, and
  /// with 32-bit ids (128 bytes) `pr_uid`@8, `pr_pid`@16, `pr_fname`@32; `pr_psargs` follows `pr_fname`.
  static func prpsinfo(_ reader: ByteReader, is64Bit: Bool, _ context: String) throws(FormatError) -> ELFCore.ProcessInfo {
    let uid: UInt32, pidOffset: Int, nameOffset: Int
    if is64Bit {
      guard reader.count >= 136 else { throw .elf("\(context): \(reader.count) bytes, too short for struct elf_prpsinfo (136)") }
      uid = reader.field(UInt32.self, at: 16); pidOffset = 24; nameOffset = 40
    } else if reader.count >= 128 {
      uid = reader.field(UInt32.self, at: 8); pidOffset = 16; nameOffset = 32
    } else {
      guard reader.count >= 124 else { throw .elf("\(context): \(reader.count) bytes, too short for struct elf_prpsinfo (124)") }
      uid = UInt32(reader.field(UInt16.self, at: 8)); pidOffset = 12; nameOffset = 28
    }
    return ELFCore.ProcessInfo(pid: Int32(bitPattern: reader.field(UInt32.self, at: pidOffset)),
                               parentPID: Int32(bitPattern: reader.field(UInt32.self, at: pidOffset + 4)), uid: uid,
                               name: try reader.fixedString(at: nameOffset, width: 16),
                               arguments: trimmingTrailingSpaces(try reader.fixedString(at: nameOffset + 16, width: 80)))
  }

  /// `siginfo_t`: `si_signo`, `si_errno`, `si_code`, then the union; `si_addr` is its first member,
  /// at 16 (64-bit: the union is 8-aligned) or 12.
  static func siginfo(_ reader: ByteReader, is64Bit: Bool, _ context: String) throws(FormatError) -> ELFCore.SignalInfo {
    let addressOffset = is64Bit ? 16 : 12, end = is64Bit ? 24 : 16
    guard reader.count >= end else { throw .elf("\(context): \(reader.count) bytes, too short for siginfo_t (\(end))") }
    let signal = Int32(bitPattern: reader.field(UInt32.self, at: 0))
    let code = Int32(bitPattern: reader.field(UInt32.self, at: 8))
    // SIGILL 4, SIGTRAP 5, SIGBUS 7, SIGFPE 8, SIGSEGV 11 carry si_addr when the kernel raised them.
    let carriesAddress = [4, 5, 7, 8, 11].contains(signal) && code > 0
    return ELFCore.SignalInfo(signal: signal, errno: Int32(bitPattern: reader.field(UInt32.self, at: 4)), code: code,
                              faultAddress: carriesAddress ? reader.field(is64Bit: is64Bit, at: addressOffset) : nil)
  }

  /// The auxiliary vector: word pairs up to `AT_NULL` or the end of the note.
  static func auxv(_ reader: ByteReader, is64Bit: Bool) throws(FormatError) -> [(type: UInt64, value: UInt64)] {
    var cursor = reader
    let pair = is64Bit ? 16 : 8
    var result: [(type: UInt64, value: UInt64)] = []
    result.reserveCapacity(reader.count / pair)
    while cursor.remaining >= pair {  // each step reads `pair` bytes
      let type = try cursor.readWord(is64Bit: is64Bit), value = try cursor.readWord(is64Bit: is64Bit)
      if type == 0 { break }
      result.append((type, value))
    }
    return result
  }

  /// `NT_FILE`: `count`, `page_size`, `count` × (`start`, `end`, `file_ofs` in pages), then `count`
  /// NUL-terminated paths.
  static func files(_ reader: ByteReader, is64Bit: Bool, _ context: String) throws(FormatError) -> ELFCore.MappedFiles {
    var cursor = reader
    let count = try cursor.readWord(is64Bit: is64Bit)
    let pageSize = try cursor.readWord(is64Bit: is64Bit)
    let entrySize = is64Bit ? 24 : 12
    guard count <= UInt64(cursor.remaining / entrySize) else {
      throw .elf("\(context): \(count) mappings do not fit in its \(reader.count) bytes")
    }
    let total = Int(count)  // <= remaining / entrySize, checked above
    var ranges: [(start: UInt64, end: UInt64, page: UInt64)] = []
    ranges.reserveCapacity(total)
    for _ in 0..<total {
      ranges.append((try cursor.readWord(is64Bit: is64Bit), try cursor.readWord(is64Bit: is64Bit),
                     try cursor.readWord(is64Bit: is64Bit)))
    }
    var mappings: [ELFCore.MappedFiles.Mapping] = []
    mappings.reserveCapacity(total)
    for (index, range) in ranges.enumerated() {
      guard cursor.remaining > 0 else { throw .elf("\(context): the path of mapping \(index) is missing") }
      let path = try cursor.readCString()
      guard range.start <= range.end else {
        throw .elf("\(context): mapping \(index) ends (0x\(hexDigits(range.end))) before it starts (0x\(hexDigits(range.start)))")
      }
      let (offset, overflow) = range.page.multipliedReportingOverflow(by: pageSize)
      guard !overflow else {
        throw .elf("\(context): mapping \(index): file page \(range.page) times page size \(pageSize) overflows")
      }
      mappings.append(.init(vmRange: range.start..<range.end, fileOffset: offset, path: path))
    }
    return ELFCore.MappedFiles(pageSize: pageSize, mappings: mappings)
  }
}

/// `text` without the spaces at its end (the kernel turns the NULs between arguments into spaces,
/// the last one included).
func trimmingTrailingSpaces(_ text: String) -> String {
  var text = text
  while text.last == " " { text.removeLast() }
  return text
}

