import ImageReaders

/// The one writer of the minidump layout: plain values about a process in, the bytes of a dump out.
///
/// It writes what Breakpad's Linux writer writes — `ThreadList` with each thread's stack memory,
/// `ModuleList` with `'BpEL'` CodeView build-ids, `MemoryList` (the stacks and any other ranges),
/// `SystemInfo`, the Linux streams given as bytes — plus `MiscInfo` (the process id and start time),
/// `ThreadNames`, an `Exception` stream when there is one, and `UnloadedModuleList` when modules were
/// removed before the dump. Every structure starts 4-byte aligned,
/// strings are `MINIDUMP_STRING`s (UTF-16LE with a NUL), and the directory lists the streams in that
/// order. The result is read by `MinidumpFile` and by `minidump-stackwalk` (the tests hold both to it).
package enum MinidumpWriter {
  /// Everything a dump holds.
  package struct Contents: Sendable {
    /// The header's `TimeDateStamp`: when the dump was taken, seconds since 1970 (UTC).
    package var timeDateStamp: UInt32
    /// The `SystemInfo` stream.
    package var systemInfo: SystemInfo
    /// `MiscInfo`'s `ProcessId`, or `nil` (with no start time either, no `MiscInfo` stream is written).
    package var processID: UInt32?
    /// `MiscInfo`'s `ProcessCreateTime`: when the process started, seconds since 1970 (UTC).
    package var processCreateTime: UInt32?
    /// The threads, in the order the `ThreadList` lists them.
    package var threads: [Thread]
    /// The modules, in the order the `ModuleList` lists them.
    package var modules: [Module]
    /// Memory besides the stacks (`MemoryList`): the address of each range's first byte and its bytes.
    package var memory: [(address: UInt64, bytes: [UInt8])]
    /// Other streams given as their bytes, in order: the Linux streams (`MinidumpFile.linuxMapsType`, ...)
    /// read from `/proc`, or any other.
    package var extraStreams: [(type: UInt32, bytes: [UInt8])]
    /// The exception, or `nil` for a dump of a process that did not crash.
    package var exception: Exception?
    /// The modules the process removed before the dump (`UnloadedModuleList`, written when there is one),
    /// newest first.
    package var unloadedModules: [UnloadedModule] = []

    package init(timeDateStamp: UInt32, systemInfo: SystemInfo, processID: UInt32? = nil, processCreateTime: UInt32? = nil,
                 threads: [Thread], modules: [Module], memory: [(address: UInt64, bytes: [UInt8])] = [],
                 extraStreams: [(type: UInt32, bytes: [UInt8])] = [], exception: Exception? = nil) {
      self.timeDateStamp = timeDateStamp
      self.systemInfo = systemInfo
      self.processID = processID
      self.processCreateTime = processCreateTime
      self.threads = threads
      self.modules = modules
      self.memory = memory
      self.extraStreams = extraStreams
      self.exception = exception
    }
  }

  /// `MINIDUMP_SYSTEM_INFO`'s fields.
  package struct SystemInfo: Sendable {
    /// `ProcessorArchitecture`: 9 for x86_64, 12 for aarch64 (the values `MinidumpContext`'s `amd64` and
    /// `arm64` layouts go with), 0 for i386, 5 for 32-bit ARM.
    package var processorArchitecture: UInt16
    /// `ProcessorLevel`: the x86 family, the ARM architecture version.
    package var processorLevel: UInt16 = 0
    /// `ProcessorRevision`: x86 model << 8 | stepping.
    package var processorRevision: UInt16 = 0
    /// `NumberOfProcessors`
    package var processorCount: UInt8 = 0
    /// The kernel's version numbers (`MajorVersion`, `MinorVersion`, `BuildNumber`).
    package var osVersion: (major: UInt32, minor: UInt32, build: UInt32) = (0, 0, 0)
    /// `PlatformId`: Breakpad's `MD_OS_LINUX`.
    package var platformID: UInt32 = 0x8201
    /// `CSDVersion`: on Linux, `uname -srvm` as Breakpad writes it.
    package var csdVersion: String = ""
    /// `Cpu` (`CPU_INFORMATION`): 24 bytes, zero-padded (the x86 vendor id's 12 bytes first).
    package var cpuInformation: [UInt8] = []

    package init(processorArchitecture: UInt16) { self.processorArchitecture = processorArchitecture }
  }

  /// One thread.
  package struct Thread: Sendable {
    /// The Linux tid.
    package var tid: UInt32
    /// Its name (written to `ThreadNames`), or `nil`.
    package var name: String?
    /// Its registers.
    package var context: Context
    /// The address of `stack`'s first byte (at or below the stack pointer).
    package var stackAddress: UInt64
    /// The stack's bytes the dump keeps.
    package var stack: [UInt8]
    /// `Teb`: the thread pointer, or 0.
    package var teb: UInt64

    package init(tid: UInt32, name: String? = nil, context: Context, stackAddress: UInt64, stack: [UInt8], teb: UInt64 = 0) {
      self.tid = tid
      self.name = name
      self.context = context
      self.stackAddress = stackAddress
      self.stack = stack
      self.teb = teb
    }
  }

  /// A CPU context: named registers in one of `MinidumpContext`'s layouts, or the bytes of a whole
  /// context structure as another tool made them (written as they are).
  package enum Context: Sendable {
    case registers(MinidumpContext)
    case bytes([UInt8])

    var encoded: [UInt8] {
      switch self {
      case .registers(let context): context.encoded()
      case .bytes(let bytes): bytes
      }
    }
  }

  /// One module.
  /// One `MINIDUMP_UNLOADED_MODULE`: `CheckSum` and `TimeDateStamp` (the PE header's, on Windows) are 0,
  /// as Breakpad's Linux writer leaves them in its modules.
  package struct UnloadedModule: Sendable {
    /// `BaseOfImage`: where its first mapping started.
    package var baseAddress: UInt64
    /// `SizeOfImage`: the bytes from `baseAddress` it spanned.
    package var size: UInt64
    /// `ModuleNameRva`: its path.
    package var path: String

    package init(baseAddress: UInt64, size: UInt64, path: String) {
      self.baseAddress = baseAddress
      self.size = size
      self.path = path
    }
  }

  package struct Module: Sendable {
    /// Where its first mapping starts.
    package var baseAddress: UInt64
    /// The bytes from `baseAddress` it spans.
    package var size: UInt64
    /// Its path.
    package var path: String
    /// Its GNU build-id (the whole note descriptor), or `nil`: then the CodeView record is empty.
    package var buildID: [UInt8]?
    /// True for the main executable: `VS_FIXEDFILEINFO.dwFileType` `VFT_APP` instead of `VFT_DLL`.
    package var isMainExecutable: Bool

    package init(baseAddress: UInt64, size: UInt64, path: String, buildID: [UInt8]?, isMainExecutable: Bool = false) {
      self.baseAddress = baseAddress
      self.size = size
      self.path = path
      self.buildID = buildID
      self.isMainExecutable = isMainExecutable
    }
  }

  /// The exception: on Linux, the signal and the thread that received it.
  package struct Exception: Sendable {
    /// The thread that received the signal.
    package var tid: UInt32
    /// The signal number (`ExceptionCode`).
    package var signal: UInt32
    /// Its `si_code` (`ExceptionFlags`).
    package var code: UInt32
    /// The faulting address (`si_addr`), or 0.
    package var address: UInt64
    /// `ExceptionInformation`, at most 15.
    package var parameters: [UInt64]
    /// The registers when the signal arrived; `nil` to point at the thread's own context (as Breakpad
    /// does, whose crashing thread's context is the signal's).
    package var context: Context?

    package init(tid: UInt32, signal: UInt32, code: UInt32, address: UInt64, parameters: [UInt64] = [], context: Context? = nil) {
      self.tid = tid
      self.signal = signal
      self.code = code
      self.address = address
      self.parameters = parameters
      self.context = context
    }
  }

  /// The dump of `contents`. Throws `.minidump` when it cannot be written in the 32-bit layout: more
  /// than 4 GiB, a stack or range over 4 GiB, a module over 4 GiB, more than 15 exception parameters,
  /// or an exception thread that is not in `threads` (without a context of its own).
  package static func write(_ contents: Contents) throws(FormatError) -> [UInt8] {
    var out = Output()
    let streamCount = 4 + (contents.exception == nil ? 0 : 1) + (hasMiscInfo(contents) ? 1 : 0)
      + (contents.unloadedModules.isEmpty ? 0 : 1)
      + (contents.threads.contains { $0.name != nil } ? 1 : 0) + contents.extraStreams.count
    out.bytes.reserveCapacity(4096 + contents.threads.reduce(0) { $0 + $1.stack.count + 1300 })
    // Header: the directory follows it at 32.
    out.u32(MinidumpFile.signature); out.u32(MinidumpFile.formatVersion); out.u32(UInt32(streamCount)); out.u32(32)
    out.u32(0); out.u32(contents.timeDateStamp); out.u64(0)
    let directoryStart = out.bytes.count
    out.zeros(streamCount * 12)
    var directory: [(type: UInt32, location: MinidumpFile.Location)] = []

    // The threads' contexts and stacks, then the other memory.
    var threadContexts: [MinidumpFile.Location] = []
    var stacks: [MinidumpFile.MemoryDescriptor] = []
    for thread in contents.threads {
      threadContexts.append(try out.block(thread.context.encoded, "thread \(thread.tid) context"))
      stacks.append(MinidumpFile.MemoryDescriptor(startAddress: thread.stackAddress,
                                                  location: try out.block(thread.stack, "thread \(thread.tid) stack")))
    }
    var ranges = stacks.filter { $0.location.dataSize > 0 }
    for (index, range) in contents.memory.enumerated() where !range.bytes.isEmpty {
      ranges.append(MinidumpFile.MemoryDescriptor(startAddress: range.address, location: try out.block(range.bytes, "memory range \(index)")))
    }

    // ThreadList.
    var list = [UInt8]()
    list.append32(UInt32(contents.threads.count))
    for (index, thread) in contents.threads.enumerated() {
      list.append32(thread.tid); list.append32(0); list.append32(0); list.append32(0); list.append64(thread.teb)
      list.append64(stacks[index].startAddress); list.appendLocation(stacks[index].location); list.appendLocation(threadContexts[index])
    }
    directory.append((MinidumpFile.threadListType, try out.block(list, "ThreadList")))

    // ModuleList: names and CodeView records first, then the list.
    var moduleEntries = [UInt8]()
    moduleEntries.append32(UInt32(contents.modules.count))
    for (index, module) in contents.modules.enumerated() {
      guard let size = UInt32(exactly: module.size) else {
        throw .minidump("module \(index) (\(module.path)): size 0x\(hexDigits(module.size)) does not fit SizeOfImage")
      }
      let name = try out.string(module.path, "module \(index) name")
      var codeView = MinidumpFile.Location(dataSize: 0, rva: 0)
      if let buildID = module.buildID {
        var record = [UInt8]()
        record.append32(0x4270_454C)  // 'BpEL'
        codeView = try out.block(record + buildID, "module \(index) CodeView record")
      }
      moduleEntries.append64(module.baseAddress); moduleEntries.append32(size); moduleEntries.append32(0)
      moduleEntries.append32(0); moduleEntries.append32(name.rva)
      // VS_FIXEDFILEINFO: the signature and version filled in, as Crashpad does, and the file type.
      moduleEntries.append32(0xFEEF_04BD); moduleEntries.append32(0x0001_0000)
      for _ in 0..<7 { moduleEntries.append32(0) }
      moduleEntries.append32(module.isMainExecutable ? 1 : 2)
      for _ in 0..<3 { moduleEntries.append32(0) }
      moduleEntries.appendLocation(codeView); moduleEntries.appendLocation(MinidumpFile.Location(dataSize: 0, rva: 0))
      for _ in 0..<4 { moduleEntries.append32(0) }
    }
    directory.append((MinidumpFile.moduleListType, try out.block(moduleEntries, "ModuleList")))

    // UnloadedModuleList: SizeOfHeader, SizeOfEntry, NumberOfEntries, then the entries.
    if !contents.unloadedModules.isEmpty {
      var unloaded = [UInt8]()
      unloaded.append32(12); unloaded.append32(24); unloaded.append32(UInt32(contents.unloadedModules.count))
      for (index, module) in contents.unloadedModules.enumerated() {
        guard let size = UInt32(exactly: module.size) else {
          throw .minidump("unloaded module \(index) (\(module.path)): size 0x\(hexDigits(module.size)) does not fit SizeOfImage")
        }
        let name = try out.string(module.path, "unloaded module \(index) name")
        unloaded.append64(module.baseAddress); unloaded.append32(size); unloaded.append32(0); unloaded.append32(0)
        unloaded.append32(name.rva)
      }
      directory.append((MinidumpFile.unloadedModuleListType, try out.block(unloaded, "UnloadedModuleList")))
    }

    // MemoryList.
    var memoryList = [UInt8]()
    memoryList.append32(UInt32(ranges.count))
    for range in ranges { memoryList.append64(range.startAddress); memoryList.appendLocation(range.location) }
    directory.append((MinidumpFile.memoryListType, try out.block(memoryList, "MemoryList")))

    // Exception.
    if let exception = contents.exception {
      guard exception.parameters.count <= 15 else {
        throw .minidump("exception: \(exception.parameters.count) parameters, at most 15 fit")
      }
      let context: MinidumpFile.Location
      if let own = exception.context {
        context = try out.block(own.encoded, "exception context")
      } else if let index = contents.threads.firstIndex(where: { $0.tid == exception.tid }) {
        context = threadContexts[index]
      } else {
        throw .minidump("exception: thread \(exception.tid) is not among the threads and has no context of its own")
      }
      var stream = [UInt8]()
      stream.append32(exception.tid); stream.append32(0); stream.append32(exception.signal); stream.append32(exception.code)
      stream.append64(0); stream.append64(exception.address); stream.append32(UInt32(exception.parameters.count)); stream.append32(0)
      for index in 0..<15 { stream.append64(index < exception.parameters.count ? exception.parameters[index] : 0) }
      stream.appendLocation(context)
      directory.append((MinidumpFile.exceptionType, try out.block(stream, "Exception")))
    }

    // SystemInfo.
    let system = contents.systemInfo
    let csd = try out.string(system.csdVersion, "CSDVersion")
    var systemStream = [UInt8]()
    systemStream.append16(system.processorArchitecture); systemStream.append16(system.processorLevel)
    systemStream.append16(system.processorRevision); systemStream.append(system.processorCount); systemStream.append(0)
    systemStream.append32(system.osVersion.major); systemStream.append32(system.osVersion.minor)
    systemStream.append32(system.osVersion.build); systemStream.append32(system.platformID); systemStream.append32(csd.rva)
    systemStream.append16(0); systemStream.append16(0)
    systemStream += system.cpuInformation.prefix(24) + [UInt8](repeating: 0, count: max(0, 24 - system.cpuInformation.count))
    directory.append((MinidumpFile.systemInfoType, try out.block(systemStream, "SystemInfo")))

    // MiscInfo: the first version, which has the process id and times.
    if hasMiscInfo(contents) {
      var misc = [UInt8]()
      misc.append32(24)
      misc.append32((contents.processID == nil ? 0 : 1) | (contents.processCreateTime == nil ? 0 : 2))
      misc.append32(contents.processID ?? 0); misc.append32(contents.processCreateTime ?? 0); misc.append32(0); misc.append32(0)
      directory.append((MinidumpFile.miscInfoType, try out.block(misc, "MiscInfo")))
    }

    // ThreadNames.
    let named = contents.threads.filter { $0.name != nil }
    if !named.isEmpty {
      var names = [UInt8]()
      names.append32(UInt32(named.count))
      for thread in named {
        let name = try out.string(thread.name ?? "", "thread \(thread.tid) name")
        names.append32(thread.tid); names.append64(UInt64(name.rva))
      }
      directory.append((MinidumpFile.threadNamesType, try out.block(names, "ThreadNames")))
    }

    // The streams given as bytes.
    for (type, bytes) in contents.extraStreams {
      directory.append((type, try out.block(bytes, MinidumpFile.streamName(type))))
    }

    precondition(directory.count == streamCount, "the stream count is computed from the same contents")
    for (index, entry) in directory.enumerated() {
      var raw = [UInt8]()
      raw.append32(entry.type); raw.appendLocation(entry.location)
      out.bytes.replaceSubrange(directoryStart + index * 12..<directoryStart + index * 12 + 12, with: raw)
    }
    return out.bytes
  }

  static func hasMiscInfo(_ contents: Contents) -> Bool { contents.processID != nil || contents.processCreateTime != nil }

  /// The file being written: blocks appended 4-byte aligned, their locations checked to fit 32 bits.
  struct Output {
    var bytes: [UInt8] = []

    mutating func zeros(_ count: Int) { bytes += repeatElement(0, count: count) }
    mutating func u32(_ value: UInt32) { bytes.append32(value) }
    mutating func u64(_ value: UInt64) { bytes.append64(value) }

    /// Appends `block` at the next 4-byte boundary; its location.
    mutating func block(_ block: [UInt8], _ what: @autoclosure () -> String) throws(FormatError) -> MinidumpFile.Location {
      zeros((4 - bytes.count % 4) % 4)
      guard let rva = UInt32(exactly: bytes.count), let size = UInt32(exactly: block.count),
            UInt64(rva) + UInt64(size) <= UInt64(UInt32.max) else {
        throw .minidump("\(what()): the dump would pass 4 GiB, past what 32-bit locations reach")
      }
      bytes += block
      return MinidumpFile.Location(dataSize: size, rva: rva)
    }

    /// Appends `text` as a `MINIDUMP_STRING` (byte length, UTF-16LE, NUL); its location.
    mutating func string(_ text: String, _ what: @autoclosure () -> String) throws(FormatError) -> MinidumpFile.Location {
      var units = [UInt8]()
      for unit in text.utf16 { units.append16(unit) }
      var record = [UInt8]()
      record.append32(UInt32(truncatingIfNeeded: units.count))  // block() refuses anything past 4 GiB
      return try block(record + units + [0, 0], what())
    }
  }
}

extension Array where Element == UInt8 {
  /// Appends `value`'s bytes, least significant first. Three names, no generic: an integer literal
  /// must not pick its own width.
  mutating func append16(_ value: UInt16) { appendLittleEndian(value) }
  mutating func append32(_ value: UInt32) { appendLittleEndian(value) }
  mutating func append64(_ value: UInt64) { appendLittleEndian(value) }

  private mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
    for index in 0..<MemoryLayout<T>.size { append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
  }

  /// Appends a `MINIDUMP_LOCATION_DESCRIPTOR`.
  mutating func appendLocation(_ location: MinidumpFile.Location) {
    append32(location.dataSize)
    append32(location.rva)
  }
}
