extension MinidumpFile {
  /// The most bytes of strings, CodeView records, annotations and Linux streams copied out of one dump,
  /// beyond the dump's own size: each lies in the file once in a dump any writer makes, so a hostile one
  /// whose entries all point at one long string cannot multiply it.
  static let copySlack = 1 << 20
  /// The largest CodeView record decoded (a build-id is 20 bytes; a PDB record a path).
  static let codeViewLimit: UInt32 = 64 * 1024

  /// Decodes the dump whose bytes `source` fetches: the header, the stream directory and every stream
  /// this reader knows; memory stays in the file. Throws when the file is not a minidump, its header is
  /// short, its version is not `0xA793`, or its directory does not lie inside it; a broken stream is
  /// left out and named in `problems`.
  package init<Source: RandomAccessBytes>(source: Source) throws(FormatError) {
    var file = source
    file.endian = .little
    guard file.count >= 4 else { throw .tooShort(count: file.count) }
    let magic = try file.slice(at: 0, length: 4).peek(UInt32.self, at: 0)
    guard magic == Self.signature else {
      throw .minidump("not a minidump: signature 0x\(hexDigits(UInt64(magic), width: 8)) is not MDMP")
    }
    guard file.count >= 32 else {
      throw .minidump("minidump header truncated: 32 bytes needed, the file has \(file.count)")
    }
    let head = try file.slice(at: 0, length: 32)
    // 32 bytes are present: every field below lies in them.
    header = Header(signature: magic, version: head.field(UInt32.self, at: 4), streamCount: head.field(UInt32.self, at: 8),
                    streamDirectoryRVA: head.field(UInt32.self, at: 12), checksum: head.field(UInt32.self, at: 16),
                    timeDateStamp: head.field(UInt32.self, at: 20), flags: head.field(UInt64.self, at: 24))
    guard header.version & 0xFFFF == Self.formatVersion else {
      throw .minidump("minidump version 0x\(hexDigits(UInt64(header.version & 0xFFFF))) is not 0xa793")
    }
    fileSize = file.count
    // streamCount is a UInt32: times 12 it cannot overflow UInt64.
    let directory = try ByteReader.checkedRange(offset: UInt64(header.streamDirectoryRVA),
                                                size: UInt64(header.streamCount) * 12, limit: file.count,
                                                "stream directory (\(header.streamCount) entries of 12 bytes)")
    let entries = try file.slice(at: directory.lowerBound, length: directory.count)
    var streams: [Stream] = []
    streams.reserveCapacity(directory.count / 12)
    for index in 0..<directory.count / 12 {
      // index * 12 + 12 <= directory.count: each entry lies in `entries`.
      streams.append(Stream(type: entries.field(UInt32.self, at: index * 12),
                            location: Location(dataSize: entries.field(UInt32.self, at: index * 12 + 4),
                                               rva: entries.field(UInt32.self, at: index * 12 + 8))))
    }
    self.streams = streams
    var decoder = MinidumpDecoder(file: file, streams: streams, budget: file.count + Self.copySlack)
    systemInfo = decoder.decode(Self.systemInfoType) { d, reader, _ throws(FormatError) in try d.systemInfo(reader) }
    decoder.architecture = systemInfo?.processorArchitecture
    miscInfo = decoder.decode(Self.miscInfoType) { d, reader, _ throws(FormatError) in try d.miscInfo(reader) }
    var threads = decoder.decode(Self.threadListType) { d, reader, name throws(FormatError) in try d.threads(reader, name) } ?? []
    let threadNames = decoder.decode(Self.threadNamesType) { d, reader, name throws(FormatError) in
      try d.threadNames(reader, name)
    } ?? []
    modules = decoder.decode(Self.moduleListType) { d, reader, name throws(FormatError) in try d.modules(reader, name) } ?? []
    unloadedModules = decoder.decode(Self.unloadedModuleListType) { d, reader, name throws(FormatError) in
      try d.unloadedModules(reader, name)
    } ?? []
    memoryInfo = decoder.decode(Self.memoryInfoListType) { d, reader, _ throws(FormatError) in try d.memoryInfo(reader) } ?? []
    _ = decoder.decode(Self.memoryListType) { d, reader, name throws(FormatError) in try d.memoryList(reader, name) }
    _ = decoder.decode(Self.memory64ListType) { d, reader, name throws(FormatError) in try d.memory64List(reader, name) }
    exception = decoder.decode(Self.exceptionType) { d, reader, name throws(FormatError) in try d.exception(reader, name) }
    breakpadInfo = decoder.decode(Self.breakpadInfoType) { _, reader, _ throws(FormatError) in
      guard reader.count >= 12 else { throw .minidump("\(reader.count) bytes, MDRawBreakpadInfo needs 12") }
      let validity = reader.field(UInt32.self, at: 0)
      return BreakpadInfo(validity: validity, dumpThreadID: validity & 1 != 0 ? reader.field(UInt32.self, at: 4) : nil,
                          requestingThreadID: validity & 2 != 0 ? reader.field(UInt32.self, at: 8) : nil)
    }
    crashpadInfo = decoder.decode(Self.crashpadInfoType) { d, reader, name throws(FormatError) in try d.crashpadInfo(reader, name) }
    var linux = LinuxStreams()
    linux.cpuInfo = decoder.decode(Self.linuxCPUInfoType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.procStatus = decoder.decode(Self.linuxProcStatusType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.lsbRelease = decoder.decode(Self.linuxLSBReleaseType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.commandLine = decoder.decode(Self.linuxCommandLineType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.environment = decoder.decode(Self.linuxEnvironmentType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.auxiliaryVector = decoder.decode(Self.linuxAuxvType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.maps = decoder.decode(Self.linuxMapsType) { d, reader, _ throws(FormatError) in try d.copy(reader) }
    linux.dsoDebug = decoder.decode(Self.linuxDSODebugType) { d, reader, name throws(FormatError) in try d.dsoDebug(reader, name) }
    self.linux = linux
    // ThreadNames may come before or after ThreadList: names are joined once both are read.
    if !threadNames.isEmpty {
      var names: [UInt32: String] = [:]
      names.reserveCapacity(threadNames.count)
      for entry in threadNames where names[entry.tid] == nil { names[entry.tid] = entry.name }  // the first name of a tid wins
      for index in threads.indices { threads[index].name = names[threads[index].tid] }
    }
    self.threads = threads
    self.threadNames = threadNames
    memoryRanges = decoder.memoryRanges(threads: threads)
    problems = decoder.problems
  }

  /// Decodes `bytes` held in memory: the same values and problems as `init(source:)` over them.
  package init(bytes: [UInt8]) throws(FormatError) {
    self = try ByteReader.reading(bytes) { reader throws(FormatError) in try MinidumpFile(source: reader) }
  }
}

extension MinidumpFile {
  /// `ThreadListStream` and the other stream types this reader decodes.
  package static let threadListType: UInt32 = 3, moduleListType: UInt32 = 4, memoryListType: UInt32 = 5,
                    exceptionType: UInt32 = 6, systemInfoType: UInt32 = 7, memory64ListType: UInt32 = 9,
                    unloadedModuleListType: UInt32 = 14, miscInfoType: UInt32 = 15, memoryInfoListType: UInt32 = 16,
                    threadNamesType: UInt32 = 24, breakpadInfoType: UInt32 = 0x4767_0001,
                    linuxCPUInfoType: UInt32 = 0x4767_0003, linuxProcStatusType: UInt32 = 0x4767_0004,
                    linuxLSBReleaseType: UInt32 = 0x4767_0005, linuxCommandLineType: UInt32 = 0x4767_0006,
                    linuxEnvironmentType: UInt32 = 0x4767_0007, linuxAuxvType: UInt32 = 0x4767_0008,
                    linuxMapsType: UInt32 = 0x4767_0009, linuxDSODebugType: UInt32 = 0x4767_000A,
                    crashpadInfoType: UInt32 = 0x4350_0001

  /// The name of stream type `type` (`MINIDUMP_STREAM_TYPE` without `Stream`), or `0x...` when unknown.
  package static func streamName(_ type: UInt32) -> String {
    switch type {
    case 0: "Unused"
    case 3: "ThreadList"
    case 4: "ModuleList"
    case 5: "MemoryList"
    case 6: "Exception"
    case 7: "SystemInfo"
    case 8: "ThreadExList"
    case 9: "Memory64List"
    case 10: "CommentA"
    case 11: "CommentW"
    case 12: "HandleData"
    case 13: "FunctionTable"
    case 14: "UnloadedModuleList"
    case 15: "MiscInfo"
    case 16: "MemoryInfoList"
    case 17: "ThreadInfoList"
    case 18: "HandleOperationList"
    case 21: "SystemMemoryInfo"
    case 22: "ProcessVmCounters"
    case 24: "ThreadNames"
    case 0x4767_0001: "BreakpadInfo"
    case 0x4767_0002: "AssertionInfo"
    case 0x4767_0003: "LinuxCpuInfo"
    case 0x4767_0004: "LinuxProcStatus"
    case 0x4767_0005: "LinuxLsbRelease"
    case 0x4767_0006: "LinuxCmdLine"
    case 0x4767_0007: "LinuxEnviron"
    case 0x4767_0008: "LinuxAuxv"
    case 0x4767_0009: "LinuxMaps"
    case 0x4767_000A: "LinuxDsoDebug"
    case 0x4350_0001: "CrashpadInfo"
    case 0x4D7A_0003: "MozLinuxLimits"
    case 0x4D7A_0004: "MozSoftErrors"
    default: "0x" + hexDigits(UInt64(type), width: 8)
    }
  }

  /// The name crash tooling gives `PROCESSOR_ARCHITECTURE` value `value`.
  package static func architectureName(_ value: UInt16) -> String {
    switch value {
    case 0: "i386"
    case 1: "mips"
    case 3: "ppc"
    case 5: "arm"
    case 6: "ia64"
    case 9: "x86_64"
    case 10: "i386 (WoW64)"
    case 12, 0x8003: "arm64"
    case 0x8001: "sparc"
    case 0x8002: "ppc64"
    case 0x8004: "mips64"
    case 0x8005: "riscv32"
    case 0x8006: "riscv64"
    default: "architecture 0x" + hexDigits(UInt64(value))
    }
  }

  /// `PlatformId`'s operating system as minidump-stackwalk names it (`Windows NT`, `Mac OS X`, `iOS`,
  /// `Linux`, `Android`, `Solaris`, `PS3`, `NaCl`, `Fuchsia`), or `0x…` for another value.
  package static func platformName(_ value: UInt32) -> String {
    switch value {
    case 1, 2: "Windows NT"  // VER_PLATFORM_WIN32_WINDOWS, VER_PLATFORM_WIN32_NT
    case 0x8101: "Mac OS X"
    case 0x8102: "iOS"
    case 0x8201: "Linux"
    case 0x8202: "Solaris"
    case 0x8203: "Android"
    case 0x8204: "PS3"
    case 0x8205: "NaCl"
    case 0x8206: "Fuchsia"
    default: "0x" + hexDigits(UInt64(value), width: 8)
    }
  }
}
