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
  public init<Source: RandomAccessBytes>(source: Source) throws(FormatError) {
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
  public init(bytes: [UInt8]) throws(FormatError) {
    self = try ByteReader.reading(bytes) { reader throws(FormatError) in try MinidumpFile(source: reader) }
  }
}

extension MinidumpFile {
  /// `ThreadListStream` and the other stream types this reader decodes.
  public static let threadListType: UInt32 = 3, moduleListType: UInt32 = 4, memoryListType: UInt32 = 5,
                    exceptionType: UInt32 = 6, systemInfoType: UInt32 = 7, memory64ListType: UInt32 = 9,
                    unloadedModuleListType: UInt32 = 14, miscInfoType: UInt32 = 15, memoryInfoListType: UInt32 = 16,
                    threadNamesType: UInt32 = 24, breakpadInfoType: UInt32 = 0x4767_0001,
                    linuxCPUInfoType: UInt32 = 0x4767_0003, linuxProcStatusType: UInt32 = 0x4767_0004,
                    linuxLSBReleaseType: UInt32 = 0x4767_0005, linuxCommandLineType: UInt32 = 0x4767_0006,
                    linuxEnvironmentType: UInt32 = 0x4767_0007, linuxAuxvType: UInt32 = 0x4767_0008,
                    linuxMapsType: UInt32 = 0x4767_0009, linuxDSODebugType: UInt32 = 0x4767_000A,
                    crashpadInfoType: UInt32 = 0x4350_0001

  /// The name of stream type `type` (`MINIDUMP_STREAM_TYPE` without `Stream`), or `0x...` when unknown.
  public static func streamName(_ type: UInt32) -> String {
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
  public static func architectureName(_ value: UInt16) -> String {
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

  /// The name of `PlatformId` value `value`.
  public static func platformName(_ value: UInt32) -> String {
    switch value {
    case 0: "Windows 3.1"
    case 1: "Windows 9x"
    case 2: "Windows NT"
    case 3: "Windows CE"
    case 0x8000: "Unix"
    case 0x8101: "Mac OS X"
    case 0x8102: "iOS"
    case 0x8201: "Linux"
    case 0x8202: "Solaris"
    case 0x8203: "Android"
    case 0x8204: "PS3"
    case 0x8205: "NaCl"
    case 0x8206: "Fuchsia"
    default: "platform 0x" + hexDigits(UInt64(value))
    }
  }
}

/// The reading of one dump's streams: each stream's bytes found through the directory, decoded, and
/// what went wrong collected as `problems` (a stream's failure stops no other).
struct MinidumpDecoder<Source: RandomAccessBytes> {
  let file: Source
  let streams: [MinidumpFile.Stream]
  /// Bytes that may still be copied out of the file (strings, records, Linux streams).
  var budget: Int
  var problems: [FormatError] = []
  /// `SystemInfo`'s architecture, which decides the context layout and the word size.
  var architecture: UInt16?
  /// Memory ranges as the streams list them, before sorting: (address, size, file offset, what).
  var memory: [(address: UInt64, size: UInt64, fileOffset: UInt64, what: String)] = []

  init(file: Source, streams: [MinidumpFile.Stream], budget: Int) {
    self.file = file
    self.streams = streams
    self.budget = budget
  }

  /// `stream name (directory N)`: how messages name a stream.
  static func label(_ type: UInt32, _ index: Int) -> String { "\(MinidumpFile.streamName(type)) stream (directory \(index))" }

  /// Decodes the first stream of `type` with `body` (given the stream's bytes and its label); the
  /// error of a broken one becomes a problem and the result `nil`. A second stream of the same type is
  /// named as a problem and not read.
  mutating func decode<T>(_ type: UInt32,
                          _ body: (inout MinidumpDecoder, ByteReader, String) throws(FormatError) -> T) -> T? {
    var result: T?
    var first: Int?
    for (index, stream) in streams.enumerated() where stream.type == type {
      let label = Self.label(type, index)
      if let first {
        note(.minidump("\(label): a second \(MinidumpFile.streamName(type)) stream, not read (directory \(first) was)"))
        continue
      }
      first = index
      do {
        let reader = try bytes(stream.location, "stream")
        result = try body(&self, reader, label)
      } catch {
        note(Self.labelled(error, label))
      }
    }
    return result
  }

  /// `error` with `label` in front, unless it already names where it happened.
  static func labelled(_ error: FormatError, _ label: String) -> FormatError {
    if case .minidump(let text) = error, text.hasPrefix(label) || error == budgetSpent { return error }
    return .minidump("\(label): \(error)")
  }

  /// A reader over the bytes `location` names, checked against the file.
  func bytes(_ location: MinidumpFile.Location, _ what: @autoclosure () -> String) throws(FormatError) -> ByteReader {
    try bytes(at: UInt64(location.rva), size: UInt64(location.dataSize), what())
  }

  func bytes(at offset: UInt64, size: UInt64, _ what: @autoclosure () -> String) throws(FormatError) -> ByteReader {
    let range = try ByteReader.checkedRange(offset: offset, size: size, limit: file.count, "\(what()) at file offset")
    return try file.slice(at: range.lowerBound, length: range.count)
  }

  /// Takes `count` bytes from the copy budget, or throws: the first time with a message, later with
  /// `budgetSpent`, which `note` drops (one line says it, not one per entry).
  mutating func spend(_ count: Int, _ what: @autoclosure () -> String) throws(FormatError) {
    guard count <= budget else {
      if budget < 0 { throw Self.budgetSpent }
      budget = -1
      throw .minidump("\(what()): more bytes copied out of the dump than it holds (entries share their data); "
                      + "this and later copies left out")
    }
    budget -= count
  }

  static var budgetSpent: FormatError { .minidump("") }

  /// Records `error` as a problem (a repeat of the spent budget is not).
  mutating func note(_ error: FormatError) {
    if error != Self.budgetSpent { problems.append(error) }
  }

  /// The bytes of `reader`, copied (a Linux stream).
  mutating func copy(_ reader: ByteReader) throws(FormatError) -> [UInt8] {
    try spend(reader.count, "stream")
    return try reader.bytes(at: 0, length: reader.count)
  }

  /// The `MINIDUMP_STRING` at `rva`: a 32-bit byte length, then that many bytes of UTF-16LE (the NUL
  /// after them is not required). An odd length or one past the end of the file throws.
  mutating func string(at rva: UInt64, _ what: @autoclosure () -> String) throws(FormatError) -> String {
    let lengthBytes = try bytes(at: rva, size: 4, "\(what()) (MINIDUMP_STRING)")
    let length = try lengthBytes.peek(UInt32.self, at: 0)
    guard length % 2 == 0 else { throw .minidump("\(what()): MINIDUMP_STRING length \(length) is odd (UTF-16)") }
    // rva + 4 <= file.count (checked above): the sum cannot overflow.
    let text = try bytes(at: rva + 4, size: UInt64(length), "\(what()) (\(length) bytes of MINIDUMP_STRING)")
    try spend(text.count, what())
    return Self.utf16(text, count: text.count / 2)
  }

  /// `count` UTF-16LE units at the start of `reader` (`reader.count >= 2 * count`), up to the first NUL.
  static func utf16(_ reader: ByteReader, count: Int) -> String {
    var units: [UInt16] = []
    units.reserveCapacity(count)
    for index in 0..<count {
      let unit = reader.field(UInt16.self, littleEndianAt: 2 * index)  // 2 * count <= reader.count
      if unit == 0 { break }
      units.append(unit)
    }
    return String(decoding: units, as: UTF16.self)
  }

  /// Crashpad's `MinidumpUTF8String` at `rva`: a 32-bit length, then that many bytes (and a NUL).
  mutating func utf8String(at rva: UInt32, _ what: @autoclosure () -> String) throws(FormatError) -> String {
    String(decoding: try byteArray(at: rva, what()), as: UTF8.self)
  }

  /// Crashpad's `MinidumpByteArray` (and the body of a UTF-8 string): a 32-bit length and the bytes.
  mutating func byteArray(at rva: UInt32, _ what: @autoclosure () -> String) throws(FormatError) -> [UInt8] {
    let length = try bytes(at: UInt64(rva), size: 4, what()).peek(UInt32.self, at: 0)
    let body = try bytes(at: UInt64(rva) + 4, size: UInt64(length), "\(what()) (\(length) bytes)")
    try spend(body.count, what())
    return try body.bytes(at: 0, length: body.count)
  }

  /// The number of `entrySize`-byte entries after a 32-bit count at the start of `reader`, checked
  /// against its size. A list with 4 bytes of padding after the count (as some writers align the
  /// entries to 8) is accepted; the entries' offset is returned with the count.
  static func listCount(_ reader: ByteReader, entrySize: Int, _ what: String) throws(FormatError) -> (count: Int, start: Int) {
    let count = try reader.peek(UInt32.self, at: 0)
    let available = reader.count - 4  // peek proved 4 <= count
    guard UInt64(count) <= UInt64(available / entrySize) else {
      throw .minidump("\(what): \(count) entries of \(entrySize) bytes do not fit in its \(reader.count) bytes")
    }
    let used = Int(count) * entrySize  // <= available, checked above
    return (Int(count), available - used == 4 ? 8 : 4)
  }

  /// The entries of a counted list (see `listCount`), each given to `body` with its index as a reader
  /// over exactly its bytes; the values `body` returns, `nil`s left out.
  mutating func list<T>(_ reader: ByteReader, entrySize: Int, _ what: String,
                        _ body: (inout MinidumpDecoder, Int, ByteReader) throws(FormatError) -> T?) throws(FormatError) -> [T] {
    let (count, start) = try Self.listCount(reader, entrySize: entrySize, what)
    var values: [T] = []
    values.reserveCapacity(count)
    for index in 0..<count {
      // listCount proved that count entries of entrySize fit after start.
      if let value = try body(&self, index, try reader.slice(at: start + index * entrySize, length: entrySize)) { values.append(value) }
    }
    return values
  }

  /// `list` over the bytes `location` names (an empty location is an empty list).
  mutating func list<T>(at location: MinidumpFile.Location, entrySize: Int, _ what: String,
                        _ body: (inout MinidumpDecoder, Int, ByteReader) throws(FormatError) -> T?) throws(FormatError) -> [T] {
    guard location.dataSize > 0 else { return [] }
    return try list(try bytes(location, what), entrySize: entrySize, what, body)
  }

  // MARK: Streams

  mutating func systemInfo(_ reader: ByteReader) throws(FormatError) -> MinidumpFile.SystemInfo {
    guard reader.count >= 56 else { throw .minidump("\(reader.count) bytes, MINIDUMP_SYSTEM_INFO needs 56") }
    let csdRVA = reader.field(UInt32.self, at: 24)
    return MinidumpFile.SystemInfo(
      processorArchitecture: reader.field(UInt16.self, at: 0), processorLevel: reader.field(UInt16.self, at: 2),
      processorRevision: reader.field(UInt16.self, at: 4), processorCount: reader.field(UInt8.self, at: 6),
      productType: reader.field(UInt8.self, at: 7), majorVersion: reader.field(UInt32.self, at: 8),
      minorVersion: reader.field(UInt32.self, at: 12), buildNumber: reader.field(UInt32.self, at: 16),
      platformID: reader.field(UInt32.self, at: 20),
      csdVersion: csdRVA == 0 ? nil : try string(at: UInt64(csdRVA), "CSDVersion"),
      suiteMask: reader.field(UInt16.self, at: 28), cpuInformation: try reader.bytes(at: 32, length: 24))
  }

  mutating func miscInfo(_ reader: ByteReader) throws(FormatError) -> MinidumpFile.MiscInfo {
    guard reader.count >= 24 else { throw .minidump("\(reader.count) bytes, MINIDUMP_MISC_INFO needs 24") }
    let declared = reader.field(UInt32.self, at: 0)
    let size = min(Int(declared), reader.count)  // UInt32 -> Int is exact on 64-bit
    let flags = reader.field(UInt32.self, at: 4)
    var info = MinidumpFile.MiscInfo(size: declared, flags: flags)
    // Each field is read only when `size` (<= reader.count) reaches past it.
    if flags & 1 != 0 { info.processID = reader.field(UInt32.self, at: 8) }
    if flags & 2 != 0 {
      info.processCreateTime = reader.field(UInt32.self, at: 12)
      info.processUserTime = reader.field(UInt32.self, at: 16)
      info.processKernelTime = reader.field(UInt32.self, at: 20)
    }
    if size >= 44, flags & 4 != 0 {
      info.processorMHz = (reader.field(UInt32.self, at: 24), reader.field(UInt32.self, at: 28), reader.field(UInt32.self, at: 32))
    }
    // The time zone and the build strings are read whenever the size has room for them: Crashpad fills
    // them without setting their flags (rust-minidump reads them the same way).
    if size >= 232 {
      let standard = Self.utf16(try reader.slice(at: 64, length: 64), count: 32)
      let daylight = Self.utf16(try reader.slice(at: 148, length: 64), count: 32)
      info.timeZone = (standard, daylight, Int32(bitPattern: reader.field(UInt32.self, at: 60)))
    }
    if size >= 832 {
      info.buildString = Self.utf16(try reader.slice(at: 232, length: 520), count: 260)
      info.debugBuildString = Self.utf16(try reader.slice(at: 752, length: 80), count: 40)
    }
    if size >= 1364, flags & 0x200 != 0 { info.processCookie = reader.field(UInt32.self, at: 1360) }
    return info
  }

  /// A context at `location`, or `nil` with the problem named (`what` says whose).
  mutating func context(_ location: MinidumpFile.Location, _ what: String) -> MinidumpContext? {
    do {
      let bytes = try bytes(location, "\(what) context")
      return try MinidumpContext.decode(bytes, architecture: architecture, "\(what) context")
    } catch {
      note(error)
      return nil
    }
  }

  mutating func threads(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.Thread] {
    try list(reader, entrySize: 48, label) { d, index, entry throws(FormatError) in
      let tid = entry.field(UInt32.self, at: 0)
      let stack = MinidumpFile.MemoryDescriptor(
        startAddress: entry.field(UInt64.self, at: 24),
        location: MinidumpFile.Location(dataSize: entry.field(UInt32.self, at: 32), rva: entry.field(UInt32.self, at: 36)))
      let contextLocation = MinidumpFile.Location(dataSize: entry.field(UInt32.self, at: 40), rva: entry.field(UInt32.self, at: 44))
      let what = "\(label): thread \(index) (tid \(tid))"
      if stack.location.dataSize > 0 {
        d.memory.append((stack.startAddress, UInt64(stack.location.dataSize), UInt64(stack.location.rva), "\(what) stack"))
      }
      return MinidumpFile.Thread(tid: tid, suspendCount: entry.field(UInt32.self, at: 4),
                                 priorityClass: entry.field(UInt32.self, at: 8), priority: entry.field(UInt32.self, at: 12),
                                 teb: entry.field(UInt64.self, at: 16), stack: stack, contextLocation: contextLocation,
                                 context: d.context(contextLocation, what), name: nil)
    }
  }

  mutating func threadNames(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.ThreadName] {
    try list(reader, entrySize: 12, label) { d, index, entry throws(FormatError) in
      let tid = entry.field(UInt32.self, at: 0)
      do throws(FormatError) {
        return MinidumpFile.ThreadName(tid: tid, name: try d.string(at: entry.field(UInt64.self, at: 4), "\(label): name \(index) (tid \(tid))"))
      } catch {
        d.note(error)
        return nil
      }
    }
  }

  mutating func modules(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.Module] {
    try list(reader, entrySize: 108, label) { d, index, entry throws(FormatError) in
      let what = "\(label): module \(index)"
      var name = ""
      do throws(FormatError) { name = try d.string(at: UInt64(entry.field(UInt32.self, at: 20)), "\(what) name") } catch { d.note(error) }
      func word(_ at: Int) -> UInt32 { entry.field(UInt32.self, at: at) }
      let version = MinidumpFile.VersionInfo(signature: word(24), structVersion: word(28), fileVersion: (word(32), word(36)),
                                             productVersion: (word(40), word(44)), fileFlagsMask: word(48),
                                             fileFlags: word(52), fileOS: word(56), fileType: word(60),
                                             fileSubtype: word(64), fileDate: (word(68), word(72)))
      let codeViewLocation = MinidumpFile.Location(dataSize: word(76), rva: word(80))
      var codeView: MinidumpFile.CodeView?
      if codeViewLocation.dataSize > 0 {
        do throws(FormatError) { codeView = try d.codeView(codeViewLocation, "\(what) (\(name)) CodeView record") } catch { d.note(error) }
      }
      return MinidumpFile.Module(baseAddress: entry.field(UInt64.self, at: 0), size: word(8), checksum: word(12),
                                 timeDateStamp: word(16), name: name, versionInfo: version, codeView: codeView,
                                 miscRecord: MinidumpFile.Location(dataSize: word(84), rva: word(88)))
    }
  }

  mutating func codeView(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> MinidumpFile.CodeView {
    guard location.dataSize <= MinidumpFile.codeViewLimit else {
      throw .limitExceeded("\(what) size", value: UInt64(location.dataSize), limit: UInt64(MinidumpFile.codeViewLimit))
    }
    let record = try bytes(location, what)
    guard record.count >= 4 else { throw .minidump("\(what): \(record.count) bytes, no room for a signature") }
    try spend(record.count, what)
    let signature = record.field(UInt32.self, at: 0)
    func name(from start: Int) throws(FormatError) -> String { try record.fixedString(at: start, width: record.count - start) }
    switch signature {
    case 0x4270_454C:  // 'BpEL'
      return .elf(BuildID(try record.bytes(at: 4, length: record.count - 4)))
    case 0x5344_5352:  // 'RSDS'
      guard record.count >= 24 else { throw .minidump("\(what): \(record.count) bytes, a PDB 7.0 record needs 24") }
      return .pdb70(guid: try record.bytes(at: 4, length: 16), age: record.field(UInt32.self, at: 20), fileName: try name(from: 24))
    case 0x3031_424E:  // 'NB10'
      guard record.count >= 16 else { throw .minidump("\(what): \(record.count) bytes, a PDB 2.0 record needs 16") }
      return .pdb20(signature: record.field(UInt32.self, at: 8), age: record.field(UInt32.self, at: 12), fileName: try name(from: 16))
    default:
      return .other(signature: signature, bytes: try record.bytes(at: 4, length: record.count - 4))
    }
  }

  mutating func unloadedModules(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.UnloadedModule] {
    let (start, entrySize, count) = try Self.extendedList(reader, minimumEntry: 24, countIs64Bit: false, label)
    var modules: [MinidumpFile.UnloadedModule] = []
    modules.reserveCapacity(count)
    for index in 0..<count {
      let entry = try reader.slice(at: start + index * entrySize, length: entrySize)
      var name = ""
      do { name = try string(at: UInt64(entry.field(UInt32.self, at: 20)), "\(label): module \(index) name") } catch {
        note(error)
      }
      modules.append(MinidumpFile.UnloadedModule(baseAddress: entry.field(UInt64.self, at: 0), size: entry.field(UInt32.self, at: 8),
                                                 checksum: entry.field(UInt32.self, at: 12),
                                                 timeDateStamp: entry.field(UInt32.self, at: 16), name: name))
    }
    return modules
  }

  mutating func memoryInfo(_ reader: ByteReader) throws(FormatError) -> [MinidumpFile.MemoryInfo] {
    let (start, entrySize, count) = try Self.extendedList(reader, minimumEntry: 48, countIs64Bit: true, "MINIDUMP_MEMORY_INFO_LIST")
    var regions: [MinidumpFile.MemoryInfo] = []
    regions.reserveCapacity(count)
    for index in 0..<count {
      let entry = try reader.slice(at: start + index * entrySize, length: entrySize)
      regions.append(MinidumpFile.MemoryInfo(baseAddress: entry.field(UInt64.self, at: 0), allocationBase: entry.field(UInt64.self, at: 8),
                                             allocationProtection: entry.field(UInt32.self, at: 16),
                                             regionSize: entry.field(UInt64.self, at: 24), state: entry.field(UInt32.self, at: 32),
                                             protection: entry.field(UInt32.self, at: 36), type: entry.field(UInt32.self, at: 40)))
    }
    return regions
  }

  /// A list with a header of its own sizes (`SizeOfHeader`, `SizeOfEntry`, `NumberOfEntries`): where
  /// the entries start, their size and count, checked against `reader`.
  static func extendedList(_ reader: ByteReader, minimumEntry: Int, countIs64Bit: Bool,
                           _ what: String) throws(FormatError) -> (start: Int, entrySize: Int, count: Int) {
    let headerSize = Int(try reader.peek(UInt32.self, at: 0)), entrySize = Int(try reader.peek(UInt32.self, at: 4))
    let count = countIs64Bit ? try reader.peek(UInt64.self, at: 8) : UInt64(try reader.peek(UInt32.self, at: 8))
    let minimumHeader = countIs64Bit ? 16 : 12
    guard headerSize >= minimumHeader, headerSize <= reader.count else {
      throw .minidump("\(what): header size \(headerSize) is not between \(minimumHeader) and the stream's \(reader.count) bytes")
    }
    guard entrySize >= minimumEntry else { throw .minidump("\(what): entry size \(entrySize) is less than \(minimumEntry)") }
    guard count <= UInt64((reader.count - headerSize) / entrySize) else {
      throw .minidump("\(what): \(count) entries of \(entrySize) bytes do not fit in its \(reader.count) bytes")
    }
    return (headerSize, entrySize, Int(count))  // count <= reader.count: exact
  }

  mutating func exception(_ reader: ByteReader, _ label: String) throws(FormatError) -> MinidumpFile.Exception {
    guard reader.count >= 168 else { throw .minidump("\(label): \(reader.count) bytes, MINIDUMP_EXCEPTION_STREAM needs 168") }
    let tid = reader.field(UInt32.self, at: 0)
    var count = Int(reader.field(UInt32.self, at: 32))
    if count > 15 {
      note(.minidump("\(label): NumberParameters \(count) is more than 15; the first 15 read"))
      count = 15
    }
    let contextLocation = MinidumpFile.Location(dataSize: reader.field(UInt32.self, at: 160), rva: reader.field(UInt32.self, at: 164))
    return MinidumpFile.Exception(tid: tid, code: reader.field(UInt32.self, at: 8), flags: reader.field(UInt32.self, at: 12),
                                  recordAddress: reader.field(UInt64.self, at: 16), address: reader.field(UInt64.self, at: 24),
                                  parameters: (0..<count).map { reader.field(UInt64.self, at: 40 + 8 * $0) },
                                  contextLocation: contextLocation,
                                  context: contextLocation.dataSize == 0 ? nil : context(contextLocation, "\(label): thread \(tid)"))
  }

  /// True when the dumped process had 64-bit pointers (from `SystemInfo`; 64-bit without one).
  var is64Bit: Bool { MinidumpFile.is64Bit(architecture: architecture) }

  mutating func dsoDebug(_ reader: ByteReader, _ label: String) throws(FormatError) -> MinidumpFile.DSODebug {
    let wide = is64Bit
    let headerSize = wide ? 40 : 24, entrySize = wide ? 24 : 12
    guard reader.count >= headerSize else {
      throw .minidump("\(label): \(reader.count) bytes, MDRawDebug\(wide ? 64 : 32) needs \(headerSize)")
    }
    let mapRVA = reader.field(UInt32.self, at: 4), count = reader.field(UInt32.self, at: 8)
    var debug = MinidumpFile.DSODebug(version: reader.field(UInt32.self, at: 0),
                                      breakpointAddress: reader.field(is64Bit: wide, at: wide ? 16 : 12),
                                      linkerBase: reader.field(is64Bit: wide, at: wide ? 24 : 16),
                                      dynamicAddress: reader.field(is64Bit: wide, at: wide ? 32 : 20), linkMaps: [],
                                      dynamicSection: [])
    try spend(reader.count - headerSize, label)
    debug.dynamicSection = try reader.bytes(at: headerSize, length: reader.count - headerSize)
    guard count > 0 else { return debug }
    // count is a UInt32 and entrySize at most 24: the product fits.
    let table = try bytes(at: UInt64(mapRVA), size: UInt64(count) * UInt64(entrySize), "\(label): \(count) link_map entries")
    debug.linkMaps.reserveCapacity(Int(count))
    for index in 0..<Int(count) {
      let entry = try table.slice(at: index * entrySize, length: entrySize)
      var name = ""
      do { name = try string(at: UInt64(entry.field(UInt32.self, at: wide ? 8 : 4)), "\(label): link_map \(index) name") } catch {
        note(error)
      }
      debug.linkMaps.append(MinidumpFile.DSODebug.LinkMap(loadBias: entry.field(is64Bit: wide, at: 0), name: name,
                                                          dynamicAddress: entry.field(is64Bit: wide, at: wide ? 16 : 8)))
    }
    return debug
  }

  mutating func crashpadInfo(_ reader: ByteReader, _ label: String) throws(FormatError) -> MinidumpFile.CrashpadInfo {
    guard reader.count >= 52 else { throw .minidump("\(label): \(reader.count) bytes, MinidumpCrashpadInfo needs 52") }
    let simple = MinidumpFile.Location(dataSize: reader.field(UInt32.self, at: 36), rva: reader.field(UInt32.self, at: 40))
    let moduleList = MinidumpFile.Location(dataSize: reader.field(UInt32.self, at: 44), rva: reader.field(UInt32.self, at: 48))
    var info = MinidumpFile.CrashpadInfo(version: reader.field(UInt32.self, at: 0), reportID: try reader.bytes(at: 4, length: 16),
                                         clientID: try reader.bytes(at: 20, length: 16), simpleAnnotations: [], moduleInfos: [],
                                         addressMask: reader.count >= 64 ? reader.field(UInt64.self, at: 56) : nil)
    info.simpleAnnotations = try dictionary(simple, "\(label): simple_annotations")
    info.moduleInfos = try list(at: moduleList, entrySize: 12, "\(label): module_list") { d, index, link throws(FormatError) in
      let what = "\(label): module_list entry \(index)"
      do throws(FormatError) {
        let body = try d.bytes(MinidumpFile.Location(dataSize: link.field(UInt32.self, at: 4), rva: link.field(UInt32.self, at: 8)), what)
        guard body.count >= 28 else { throw FormatError.minidump("\(what): \(body.count) bytes, MinidumpModuleCrashpadInfo needs 28") }
        func location(_ at: Int) -> MinidumpFile.Location {
          MinidumpFile.Location(dataSize: body.field(UInt32.self, at: at), rva: body.field(UInt32.self, at: at + 4))
        }
        return MinidumpFile.CrashpadInfo.ModuleInfo(
          moduleIndex: link.field(UInt32.self, at: 0), version: body.field(UInt32.self, at: 0),
          listAnnotations: try d.stringList(location(4), "\(what) list_annotations"),
          simpleAnnotations: try d.dictionary(location(12), "\(what) simple_annotations"),
          annotationObjects: try d.annotations(location(20), "\(what) annotation_objects"))
      } catch {
        d.note(error)
        return nil
      }
    }
    return info
  }

  /// A `MinidumpSimpleStringDictionary`: a count and (key, value) string RVAs.
  mutating func dictionary(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> [(key: String, value: String)] {
    try list(at: location, entrySize: 8, what) { d, index, entry throws(FormatError) in
      (key: try d.utf8String(at: entry.field(UInt32.self, at: 0), "\(what) key \(index)"),
       value: try d.utf8String(at: entry.field(UInt32.self, at: 4), "\(what) value \(index)"))
    }
  }

  /// A `MinidumpRVAList` of UTF-8 strings.
  mutating func stringList(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> [String] {
    try list(at: location, entrySize: 4, what) { d, index, entry throws(FormatError) in
      try d.utf8String(at: entry.field(UInt32.self, at: 0), "\(what) \(index)")
    }
  }

  /// A `MinidumpAnnotationList`: a count and (name, type, reserved, value) entries.
  mutating func annotations(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> [MinidumpFile.CrashpadInfo.Annotation] {
    try list(at: location, entrySize: 12, what) { d, index, entry throws(FormatError) in
      MinidumpFile.CrashpadInfo.Annotation(
        name: try d.utf8String(at: entry.field(UInt32.self, at: 0), "\(what) \(index) name"), type: entry.field(UInt16.self, at: 4),
        value: try d.byteArray(at: entry.field(UInt32.self, at: 8), "\(what) \(index) value"))
    }
  }
}
