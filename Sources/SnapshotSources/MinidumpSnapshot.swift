public import ProcessInspection
public import ImageReaders
public import Snapshot

/// A minidump's memory, read from its file: the ranges it holds (each thread's stack, and whatever
/// else its writer kept). The snapshot carries it (`memoryToWalk`); the unwinder reads stacks through it.
struct MinidumpMemory: MemoryReading, @unchecked Sendable {
  // FileBytes is for one thread at a time: `minidump(_:)` fetched the whole dump first, so a read finds
  // its bytes in that one fetch and adds none; and one walk, on one thread, reads one dump.
  let file: FileBytes
  let dump: MinidumpFile

  /// Copies the dump's bytes at `address`; false when the dump does not hold all of them.
  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
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
  /// The process a minidump holds, from any writer (Crashpad, Breakpad, rust-minidump, imagelog): its
  /// threads with their names and registers (the crashed thread's from the exception, where its signal
  /// arrived), the exception, the modules as images with their build-ids, what the dump says of the
  /// process and the system. Threads are not unwound yet: their frames need the modules' files, which
  /// symbolication finds, so the snapshot carries the dump's memory and `Symbolicator.symbolicate`
  /// walks them first, as for any other snapshot. The dump's problems (a stream that could not be
  /// read) are in `problems`.
  public static func minidump(_ file: FileBytes) throws(FormatError) -> ProcessSnapshot {
    // The whole dump fetched first, as one mapping (or one read, for a small one): every later range is
    // found in it. Fetched piece by piece, a dump of thousands of threads made thousands of fetches, and
    // FileBytes looks through its fetches one by one for each range.
    _ = try? file.withRanges { ranges throws(FormatError) in try ranges.slice(at: 0, length: ranges.count) }
    let dump = try file.withRanges { ranges throws(FormatError) in try MinidumpFile(source: ranges) }
    let architecture = dump.systemInfo.map { Architecture(commandLine: $0.architectureName).name }
    // The main executable: the module that holds the program headers the auxiliary vector points at.
    let phdr = dump.auxiliaryVector?.first { $0.type == ELFCore.auxPHDR }?.value
    let mainIndex = dump.modules.firstIndex { module in phdr.map { module.addressRange.contains($0) } ?? false }
      ?? (dump.modules.isEmpty ? nil : 0)
    let system = dump.systemInfo
    let images = dump.modules.enumerated().map { index, module in
      Image(module, architecture: architecture ?? "???", isMainExecutable: index == mainIndex, platformID: system?.platformID)
    }
    // The thread the exception names (or, without one, Breakpad's requesting thread) is the one that
    // crashed, unless the writer was only asked for a dump: then it is the one that asked.
    let dumpRequested = dump.exception.map { $0.isDumpRequested(system) } ?? false
    let requestingTID = dump.exception?.tid ?? dump.breakpadInfo?.requestingThreadID
    let crashAddress = dump.exception?.crashAddress(system) ?? 0
    // Threads naming the same stack bytes share one copy of them (a hostile dump names one range from
    // thousands of threads); the copies together are capped at the file's size.
    let (stacks, stackProblem) = file.withRanges { ranges in dump.stackCopies(in: ranges) }
    var threads: [Thread] = []
    for (number, entry) in dump.threads.enumerated() {
      let requesting = requestingTID == entry.tid
      let crashed = requesting && dump.exception != nil && !dumpRequested
      // A crashed thread's own context is where its signal handler waited; the exception's is the fault.
      let context = requesting ? dump.exception?.context ?? entry.context : entry.context
      var thread = Thread(number: number, tid: UInt64(entry.tid), name: entry.name, crashed: crashed)
      thread.requestedDump = requesting && !crashed
      thread.registers = context?.registers
      // The fault address is x86's cr2 (0 without one), as Apple's rows show it.
      if requesting { thread.registers?["cr2"] = crashAddress }
      if context == nil { thread.problem = "the dump holds no registers for this thread" }
      if let dumpThread = dump.breakpadInfo?.dumpThreadID, entry.tid == dumpThread, !requesting {
        // Breakpad's own handler thread, caught writing the dump: its stack is the writer's, not the
        // program's, and minidump-stackwalk does not walk it either.
        thread.registers = nil
        thread.frames = []
        thread.problem = "Breakpad's dump-writing thread, which minidump-stackwalk skips too"
      }
      thread.stack = stacks[number].map { BufferMemory($0.bytes, at: $0.address) }
      threads.append(thread)
    }
    let main = mainIndex.map { images[$0] }
    let status = dump.linux.procStatusValue("Name")
    var process = Process(
      name: status ?? dump.linux.arguments?.first.map(ProcessInspection.Image.shortName(of:)) ?? main?.name,
      pid: dump.miscInfo?.processID.flatMap { Int32(exactly: $0) } ?? dump.linux.procStatusValue("Pid").flatMap { Int32($0) },
      path: main?.path, osVersion: system.flatMap(Self.osVersion), architecture: architecture,
      date: Int64(dump.header.timeDateStamp), threadCount: threads.count)
    process.linuxFiles = dump.linux
    var exception: Exception?
    if let raw = dump.exception {
      var made = Exception(signal: Int32(bitPattern: raw.code), code: Int32(bitPattern: raw.flags), address: crashAddress)
      // A Linux or Android exception is a signal (its number and si_code); any other is named as its
      // platform names it.
      made.isDumpRequested = dumpRequested
      if system?.family != .linux || dumpRequested { made.reason = raw.reason(system) }
      exception = made
    }
    var snapshot = ProcessSnapshot(format: .minidump, process: process, exception: exception, threads: threads,
                                   images: images, problems: (dump.problems + [stackProblem].compactMap { $0 }).map(\.description))
    snapshot.unloadedImages = Self.unloadedImages(dump.unloadedModules)
    snapshot.placeFrames()
    if let exception = dump.exception, !threads.contains(where: { $0.crashed || $0.requestedDump }) {
      snapshot.problems.append("the exception names thread \(exception.tid), which the thread list does not hold")
    }
    snapshot.memoryToWalk = MinidumpMemory(file: file, dump: dump)
    return snapshot
  }

  /// `Linux RELEASE ...` from SystemInfo: Breakpad's CSD version is the whole `uname` line (`Linux
  /// 6.1.0-18-amd64 #1 SMP ... x86_64`); Crashpad's is what follows the version numbers in the release
  /// (`-18-amd64 #1 SMP ... x86_64`).
  static func osVersion(_ system: MinidumpFile.SystemInfo) -> String? {
    // Other systems (Android too) as minidump-stackwalk names them: `Windows NT 10.0.19042`,
    // `Mac OS X 11.6.7 20G630`.
    guard system.platformID == 0x8201 else { return system.platformName + " " + system.osVersionText }
    let numbers = "\(system.majorVersion).\(system.minorVersion).\(system.buildNumber)"
    guard let csd = system.csdVersion, !csd.isEmpty else { return system.majorVersion == 0 ? nil : "Linux \(numbers)" }
    return csd.hasPrefix("Linux") ? csd : "Linux \(numbers)\(csd.hasPrefix(" ") || csd.hasPrefix("-") ? "" : " ")\(csd)"
  }

}

extension ProcessSnapshot.Image {
  /// A minidump's module as an image: where it was mapped, its name (the last component of its path,
  /// after a `/` or a Windows `\`) and its identity in whichever CodeView form the dump has: an ELF
  /// build-id; a PDB 7.0 GUID (a Windows PDB's, a Mach-O UUID on macOS and iOS, the GUID old Breakpad
  /// made of a Linux module's text), shown as Breakpad's debug id. Its load bias and text range are the
  /// module's whole span until its file is found (the walk of its threads places it then).
  init(_ module: MinidumpFile.Module, architecture: String, isMainExecutable: Bool, platformID: UInt32?) {
    let range = module.addressRange
    let name = module.codeFileName
    var identity = module.buildID.map(ImageIdentity.init)
    if case .pdb70(let guid, _, _) = module.codeView, guid.contains(where: { $0 != 0 }) {
      // The GUID is stored as little-endian fields: in printed (UUID) order, a Mach-O's LC_UUID. It is
      // no ELF build-id: the loaded image (which the unwinder places by its ELF file) keeps none.
      let printed = BuildID(BuildID.swappingGUIDFields(guid))
      identity = ImageIdentity(printed)
      identity?.text = module.debugIdentifier ?? printed.hex
    }
    var loaded = ProcessInspection.Image(path: module.name, loadAddress: range.lowerBound, loadBias: range.lowerBound,
                                textRange: range, loadRange: range, buildID: module.buildID,
                                architecture: architecture, isMainExecutable: isMainExecutable)
    if name != ProcessInspection.Image.shortName(of: module.name) { loaded.name = name }
    self.init(name: name, path: module.name, loadAddress: range.lowerBound,
              endAddress: range.isEmpty ? range.lowerBound : range.upperBound - 1,
              identity: identity, architecture: architecture)
    self.loaded = loaded
    debugFileName = module.debugFileName.isEmpty ? nil : module.debugFileName
    debugID = module.debugIdentifier
    codeID = module.codeIdentifier(platformID: platformID)
  }
}
