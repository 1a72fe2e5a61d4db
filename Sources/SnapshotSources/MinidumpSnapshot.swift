public import ImageLog
public import ImageReaders
public import Snapshot

/// A minidump's memory, read from its file: the ranges it holds (each thread's stack, and whatever
/// else its writer kept). The unwinder reads stacks through it.
public struct MinidumpMemory: MemoryReading, @unchecked Sendable {
  // FileBytes reads on the calling thread only; one walk reads one dump.
  let file: FileBytes
  let dump: MinidumpFile

  /// Copies the dump's bytes at `address`; false when the dump does not hold all of them.
  public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard buffer.count > 0 else { return true }
    guard let range = dump.fileRange(ofMemory: address, length: buffer.count) else { return false }
    return file.withRanges { ranges in
      guard let reader = try? ranges.slice(at: range.lowerBound, length: range.count) else { return false }
      reader.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<range.count])) }
      return true
    }
  }
}

extension ProcessSnapshot {
  /// True when `header` (a file's first bytes) starts a minidump (`MDMP`).
  package static func isMinidump(_ header: ByteReader) -> Bool { MinidumpFile.isMinidump(header) }

  /// The process a minidump holds, from any writer (Crashpad, Breakpad, rust-minidump, imagelog): its
  /// threads with their names and registers (the crashed thread's from the exception, where its signal
  /// arrived), the exception, the modules as images with their build-ids, what the dump says of the
  /// process and the system; and the dump's memory. Threads are not unwound yet: their frames need
  /// the modules' files (`Symbolicator.walkStacks`). The dump's problems (a stream that could not be
  /// read) are in `problems`.
  public static func minidump(_ file: FileBytes) throws(FormatError) -> (snapshot: ProcessSnapshot, memory: MinidumpMemory) {
    let dump = try file.withRanges { ranges throws(FormatError) in try MinidumpFile(source: ranges) }
    let architecture = dump.systemInfo.map { Architecture(commandLine: $0.architectureName).name }
    // The main executable: the module that holds the program headers the auxiliary vector points at.
    let phdr = dump.auxiliaryVector?.first { $0.type == ELFCore.auxPHDR }?.value
    let mainIndex = dump.modules.firstIndex { module in phdr.map { module.addressRange.contains($0) } ?? false }
      ?? (dump.modules.isEmpty ? nil : 0)
    let images = dump.modules.enumerated().map { index, module in
      Image(module, architecture: architecture ?? "???", isMainExecutable: index == mainIndex)
    }
    var threads: [Thread] = []
    for (number, entry) in dump.threads.enumerated() {
      let crashed = dump.exception?.tid == entry.tid
      // A crashed thread's own context is where its signal handler waited; the exception's is the fault.
      let context = crashed ? dump.exception?.context ?? entry.context : entry.context
      var thread = Thread(number: number, tid: UInt64(entry.tid), name: entry.name, crashed: crashed)
      thread.kernelRegisters = context.flatMap(Self.kernelRegisters)
      if crashed, let context { thread.registers = Self.registerState(context, faultAddress: dump.exception?.address ?? 0) }
      if context == nil { thread.problem = "the dump holds no registers for this thread" }
      if let (address, bytes) = try? file.withRanges({ ranges throws(FormatError) in
        try dump.stack(of: entry, in: ranges).map { ($0.address, $0.bytes.withUnsafeBytes { Array($0) }) }
      }) ?? nil {
        thread.stack = BufferMemory(bytes, at: address)
      }
      threads.append(thread)
    }
    let main = mainIndex.map { images[$0] }
    let status = dump.linux.procStatusValue("Name")
    var process = Process(
      name: status ?? dump.linux.arguments?.first.map(ImageLog.Image.shortName(of:)) ?? main?.name,
      pid: dump.miscInfo?.processID.flatMap { Int32(exactly: $0) } ?? dump.linux.procStatusValue("Pid").flatMap { Int32($0) },
      path: main?.path, osVersion: dump.systemInfo.flatMap(Self.osVersion), architecture: architecture,
      date: Int64(dump.header.timeDateStamp), threadCount: threads.count)
    process.linuxFiles = dump.linux
    var exception: Exception?
    if let signal = dump.exception {
      exception = Exception(signal: Int32(bitPattern: signal.code), code: Int32(bitPattern: signal.flags), address: signal.address)
    }
    var snapshot = ProcessSnapshot(format: .minidump, process: process, exception: exception, threads: threads,
                                   images: images, problems: dump.problems.map(\.description))
    snapshot.unloadedImages = Self.unloadedImages(dump.unloadedModules)
    if let exception = dump.exception, !threads.contains(where: \.crashed) {
      snapshot.problems.append("the exception names thread \(exception.tid), which the thread list does not hold")
    }
    return (snapshot, MinidumpMemory(file: file, dump: dump))
  }

  /// `Linux RELEASE ...` from SystemInfo: Breakpad's CSD version is the whole `uname` line (`Linux
  /// 6.1.0-18-amd64 #1 SMP ... x86_64`); Crashpad's is what follows the version numbers in the release
  /// (`-18-amd64 #1 SMP ... x86_64`).
  static func osVersion(_ system: MinidumpFile.SystemInfo) -> String? {
    let numbers = "\(system.majorVersion).\(system.minorVersion).\(system.buildNumber)"
    guard let csd = system.csdVersion, !csd.isEmpty else { return system.majorVersion == 0 ? nil : "Linux \(numbers)" }
    return csd.hasPrefix("Linux") ? csd : "Linux \(numbers)\(csd.hasPrefix(" ") || csd.hasPrefix("-") ? "" : " ")\(csd)"
  }

  /// A minidump context as the kernel's register set (the names the unwinder and the writers share).
  static func kernelRegisters(_ context: MinidumpContext) -> KernelRegisters? {
    let layout: KernelRegisters.Layout
    switch context.layout {
    case .amd64: layout = .x86_64
    case .arm64, .arm64Old: layout = .aarch64
    case .x86: layout = .i386
    case .arm: return nil
    }
    return KernelRegisters(layout: layout, values: KernelRegisters.names(layout).map { name in
      context[name == "pstate" ? "cpsr" : name] ?? 0
    })
  }

  /// The crashed thread's registers in Apple's rows, as imagelog's report writes them.
  static func registerState(_ context: MinidumpContext, faultAddress: UInt64) -> RegisterState? {
    switch context.layout {
    case .amd64:
      return RegisterState.x86_64 { name in
        switch name {
        case "rfl": context["eflags"] ?? 0
        case "cr2": faultAddress
        default: context[name] ?? 0
        }
      }
    case .arm64, .arm64Old: return RegisterState.aarch64 { name in context[name] ?? 0 }
    case .x86:
      return RegisterState.i386 { name in
        switch name {
        case "efl": context["eflags"] ?? 0
        case "cr2": faultAddress
        default: context[name] ?? 0
        }
      }
    case .arm: return nil
    }
  }
}

extension ProcessSnapshot.Image {
  /// A minidump's module as an image: where it was mapped and its build-id. Its load bias and text range
  /// are the module's whole span until its file is found (`Symbolicator.walkStacks` places it then).
  init(_ module: MinidumpFile.Module, architecture: String, isMainExecutable: Bool) {
    let range = module.addressRange
    let loaded = ImageLog.Image(path: module.name, loadAddress: range.lowerBound, loadBias: range.lowerBound,
                                textRange: range, loadRange: range, buildID: module.buildID,
                                architecture: architecture, isMainExecutable: isMainExecutable)
    self.init(name: ImageLog.Image.shortName(of: module.name), path: module.name, loadAddress: range.lowerBound,
              endAddress: range.isEmpty ? range.lowerBound : range.upperBound - 1,
              identity: module.buildID.map(ImageIdentity.init), architecture: architecture)
    self.loaded = loaded
  }
}
