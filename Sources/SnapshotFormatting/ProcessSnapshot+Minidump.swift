public import ImageReaders
public import Snapshot

extension ProcessSnapshot {
  /// The snapshot as a minidump, through the one `MinidumpWriter`: what Breakpad's Linux writer writes
  /// (every thread with its registers and the stack copied when the snapshot was taken, the modules with
  /// their build-ids, SystemInfo, MiscInfo, the Linux files the snapshot holds) plus ThreadNames, an
  /// Exception stream for a crash, and the images removed before it (UnloadedModuleList: base, size and
  /// path; the stream has no place for a build-id). A thread whose registers were not read is listed with an empty
  /// context, so the dump names every thread the process had.
  ///
  /// Throws when the snapshot's architecture has no minidump layout here, or the dump would not fit the
  /// format's 32-bit sizes.
  public func minidumpBytes() throws(FormatError) -> [UInt8] {
    guard let (layout, processorArchitecture) = Self.minidumpLayout(threads.lazy.compactMap(\.registers).first?.architecture,
                                                                     architecture: process.architecture) else {
      throw .minidump("no minidump layout for the \(process.architecture ?? "unknown") architecture")
    }
    var system = MinidumpWriter.SystemInfo(processorArchitecture: processorArchitecture)
    if let version = process.osVersion {
      system.csdVersion = version
      system.osVersion = Self.kernelVersionNumbers(version)
    }
    if let cpuInfo = process.linuxFiles.cpuInfo { Self.describeProcessor(cpuInfo, into: &system) }
    var dumpThreads: [MinidumpWriter.Thread] = []
    dumpThreads.reserveCapacity(threads.count)
    for thread in threads {
      guard let tid = thread.tid.flatMap({ UInt32(exactly: $0) }) else { continue }
      let registers = thread.registers
      dumpThreads.append(MinidumpWriter.Thread(
        tid: tid, name: thread.name, context: .registers(MinidumpContext(layout: layout, holding: registers)),
        stackAddress: thread.stack?.address ?? 0, stack: thread.stack?.bytes ?? [], teb: registers?["fs_base"] ?? 0))
    }
    let modules = images.map { image in
      MinidumpWriter.Module(baseAddress: image.loadAddress,
                            size: image.loaded?.loadSize ?? image.endAddress.map { $0 &- image.loadAddress &+ 1 } ?? 0,
                            path: image.path ?? image.name,
                            buildID: image.loaded?.buildID?.bytes ?? image.identity?.bytes,
                            isMainExecutable: image.loaded?.isMainExecutable ?? false)
    }
    var exception: MinidumpWriter.Exception?
    if let signal = self.exception, let crashed = crashedThreadIndex ?? threads.firstIndex(where: \.requestedDump),
       let tid = threads[crashed].tid.flatMap({ UInt32(exactly: $0) }) {
      exception = MinidumpWriter.Exception(tid: tid, signal: UInt32(bitPattern: signal.signal),
                                           code: UInt32(bitPattern: signal.code), address: signal.address)
    }
    var contents = MinidumpWriter.Contents(
      timeDateStamp: UInt32(clamping: process.date ?? 0), systemInfo: system,
      processID: process.pid.flatMap { UInt32(exactly: $0) }, threads: dumpThreads, modules: modules,
      extraStreams: Self.linuxStreams(process.linuxFiles), exception: exception)
    contents.unloadedModules = unloadedImages.map {
      MinidumpWriter.UnloadedModule(baseAddress: $0.baseAddress, size: $0.size, path: $0.path)
    }
    return try MinidumpWriter.write(contents)
  }

  /// The minidump context layout and `ProcessorArchitecture` for the threads' registers (or, without
  /// any, the snapshot's architecture name).
  static func minidumpLayout(_ registers: Registers.Architecture?, architecture: String?) -> (MinidumpContext.Layout, UInt16)? {
    switch registers {
    case .x86_64?: return (.amd64, 9)
    case .aarch64?: return (.arm64, 12)
    case .i386?: return (.x86, 0)
    case .arm?: return (.arm, 5)
    case nil:
      switch architecture.map({ Architecture(commandLine: $0).name }) {
      case "x86_64": return (.amd64, 9)
      case "arm64": return (.arm64, 12)
      case "i386": return (.x86, 0)
      default: return nil
      }
    }
  }

  /// `MAJOR.MINOR.PATCH` of `Linux RELEASE MACHINE`, as SystemInfo's version numbers.
  static func kernelVersionNumbers(_ version: String) -> (major: UInt32, minor: UInt32, build: UInt32) {
    let words = version.split(separator: " ")
    guard words.count >= 2 else { return (0, 0, 0) }
    let numbers = words[1].split(whereSeparator: { !$0.isASCII || !$0.isNumber }).prefix(3).map { UInt32($0) ?? 0 }
    return (numbers.count > 0 ? numbers[0] : 0, numbers.count > 1 ? numbers[1] : 0, numbers.count > 2 ? numbers[2] : 0)
  }

  /// The processor count, the x86 vendor id, family, model and stepping (the first processor's), from
  /// `/proc/cpuinfo`, as Breakpad's writer fills them: the family is `processor_level`, and
  /// `processor_revision` is the model and the stepping, a byte each.
  static func describeProcessor(_ cpuInfo: [UInt8], into system: inout MinidumpWriter.SystemInfo) {
    var processors = 0
    var family: UInt16?, model: UInt16?, stepping: UInt16?
    for line in cpuInfo.split(separator: UInt8(ascii: "\n")) {
      let text = String(decoding: line, as: UTF8.self)
      guard let colon = text.firstIndex(of: ":") else { continue }
      // `key\t: value`: the key padded with tabs, the value after one space.
      let key = text[..<colon].prefix { $0 != "\t" && $0 != " " }
      let value = text[text.index(after: colon)...].drop { $0 == " " }
      if key == "processor" { processors += 1 }
      if key == "vendor_id", system.cpuInformation.isEmpty { system.cpuInformation = Array(value.utf8.prefix(12)) }
      // `cpu family`, `model`, `stepping` (the key is cut at its first space: `cpu`); `model name` is not `model`.
      if text.hasPrefix("cpu family\t") { family = family ?? UInt16(value) }
      if key == "model", text.hasPrefix("model\t") { model = model ?? UInt16(value) }
      if key == "stepping" { stepping = stepping ?? UInt16(value) }
    }
    system.processorCount = UInt8(clamping: processors)
    if let family { system.processorLevel = family }
    if let model, let stepping, model <= 0xFF, stepping <= 0xFF { system.processorRevision = model << 8 | stepping }
  }

  /// The Linux files as the streams Breakpad's writer writes them.
  static func linuxStreams(_ files: MinidumpFile.LinuxStreams) -> [(type: UInt32, bytes: [UInt8])] {
    let streams: [(UInt32, [UInt8]?)] = [
      (MinidumpFile.linuxCPUInfoType, files.cpuInfo), (MinidumpFile.linuxProcStatusType, files.procStatus),
      (MinidumpFile.linuxLSBReleaseType, files.lsbRelease), (MinidumpFile.linuxCommandLineType, files.commandLine),
      (MinidumpFile.linuxEnvironmentType, files.environment), (MinidumpFile.linuxAuxvType, files.auxiliaryVector),
      (MinidumpFile.linuxMapsType, files.maps),
    ]
    return streams.compactMap { type, bytes in bytes.map { (type, $0) } }
  }
}
