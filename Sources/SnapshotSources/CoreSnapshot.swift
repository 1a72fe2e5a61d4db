internal import Glibc
public import ProcessInspection
import ImageReaders
public import Snapshot

extension ProcessSnapshot {
  /// The process a core holds: the signal it died of, every thread unwound in the core's memory with
  /// the call frame information of the mapped files, the crashed thread's registers, the images; and
  /// one line per image whose file could not stand in for what the core left out (without the
  /// `imagelog: CORE: ` prefix).
  ///
  /// `stacks` also copies each thread's stack out of the core (from its stack pointer, at most
  /// `ProcessThreads.maxStackBytes`) and keeps the files a core can give a minidump (the auxiliary
  /// vector, the command line the kernel recorded): what writing the snapshot as a minidump needs.
  public static func core(_ dump: CoreDump, stacks: Bool = false) -> (snapshot: ProcessSnapshot, problems: [String]) {
    let (images, problems) = dump.images()
    let machine = Architecture(dump.core.architecture).kernelMachine
    let release = dump.kernelVersion.map { "Linux \($0) \(machine)" } ?? "Linux \(machine)"
    var snapshot = core(dump.core, images: images, memory: dump, osVersion: release, date: modificationTime(dump.path))
    if stacks { snapshot.keepStacks(of: dump.core, in: dump) }
    return (snapshot, problems)
  }

  /// The process `core`'s notes describe (the signal, the threads and the crashed thread's registers),
  /// each thread unwound in `memory` with the call frame information of `images`: the core's memory, or
  /// the dumping process's own while a core handler is given its core (`DumpingProcess`).
  static func core(_ core: ELFCore, images: [ProcessInspection.Image], memory: some MemoryReading, osVersion: String,
                           date: Int64) -> ProcessSnapshot {
    let pid = core.process?.pid ?? core.threads.first?.tid ?? 0
    // The signal the process died of. gdb stops a live process with SIGSTOP before it writes the core
    // and records that; SIGSTOP never dumps core, so it is no crash.
    var exception: Exception?
    var crashedIndex = core.crashedThreadIndex
    if let signal = core.signal, signal != SIGSTOP {
      let info = core.signalInfo.flatMap { $0.signal == signal ? $0 : nil }
      let code = info?.code ?? crashedIndex.map { core.threads[$0].signalCode } ?? 0
      exception = Exception(signal: signal, code: code, address: info?.faultAddress ?? 0)
    } else {
      crashedIndex = nil
    }
    // /proc/PID/task order, as `pid --threads` and the crash handler number threads: the main thread,
    // then by tid (the kernel writes the dumping thread first, gdb the threads in its own order).
    let order = core.threads.indices.sorted { a, b in
      let (x, y) = (core.threads[a].tid, core.threads[b].tid)
      return x == pid ? y != pid : y == pid ? false : x < y
    }
    let unwindImages = UnwindImage.locate(images, in: memory)
    var threads: [Thread] = []
    for (number, index) in order.enumerated() {
      let thread = core.threads[index]
      let (frames, problem) = thread.unwind(in: memory, images: unwindImages)
      var entry = Thread(number: number, tid: UInt64(UInt32(bitPattern: thread.tid)),
                         name: thread.tid == pid ? core.process?.name : nil, crashed: index == crashedIndex,
                         problem: problem)
      entry.registers = thread.registers
      // The fault address is x86's cr2 (0 without one), as Apple's rows show it.
      if index == crashedIndex { entry.registers?["cr2"] = exception?.address ?? 0 }
      entry.frames = frames.enumerated().map { Frame(number: $0.offset, $0.element) }
      threads.append(entry)
    }
    let main = images.first { $0.isMainExecutable }
    var snapshot = ProcessSnapshot(
      format: .imagelog,
      process: Process(name: core.process?.name ?? main?.name ?? "???", pid: pid, path: main?.path ?? "???",
                       osVersion: osVersion, architecture: Architecture(core.architecture).kernelMachine, date: date,
                       threadCount: threads.count),
      exception: exception, threads: threads, images: images.map(Image.init))
    snapshot.placeFrames()
    // While `memory` can be read (a dumping process's is only inside `CoreStream.read`).
    snapshot.inMemoryImages = InMemoryImage.copies(of: images, in: memory)
    if exception != nil { snapshot.abortMessage = glibcAbortMessage(images: images, memory: memory) }
    return snapshot
  }

  /// Copies each thread's stack out of `memory` (from its stack pointer, less x86_64's red zone, to the end
  /// of the core's segment holding it, as a live capture stops at the end of the mapping, as far as
  /// `memory` holds it a page at a time, at most `ProcessThreads.maxStackBytes`) and keeps the files a
  /// core gives a minidump (the auxiliary vector, the command line the kernel recorded): what writing
  /// the snapshot as a minidump needs beyond the report.
  package mutating func keepStacks(of core: ELFCore, in memory: some MemoryReading) {
    for index in threads.indices where threads[index].stack == nil {
      guard let sp = threads[index].registers?.sp else { continue }
      // The segment's end, not the memory's: memory falls back to the mapped files, so a thread's stack
      // read on would run into the next mapping (a library's text) up to the limit.
      threads[index].stack = Self.stack(at: sp, end: core.segment(containing: sp)?.vmRange.upperBound, in: memory)
    }
    var auxv: [UInt8] = []
    for entry in core.auxiliaryVector {
      for value in [entry.type, entry.value] { withUnsafeBytes(of: value.littleEndian) { auxv += $0 } }
    }
    process.linuxFiles.auxiliaryVector = auxv.isEmpty ? nil : auxv
    // pr_psargs: the arguments with spaces between them, where /proc/PID/cmdline has NULs.
    process.linuxFiles.commandLine = core.process.map { Array($0.arguments.utf8).map { $0 == 0x20 ? 0 : $0 } + [0] }
  }

  /// The stack from `sp` (less x86_64's red zone) up to `end` (when known), as far as `memory` holds it
  /// without a gap, a page at a time, at most `ProcessThreads.maxStackBytes`.
  static func stack(at sp: UInt64, end: UInt64?, in memory: some MemoryReading) -> BufferMemory? {
    let start = sp >= 128 ? sp - 128 : sp
    let limit = min(ProcessThreads.maxStackBytes, end.map { $0 > start ? $0 - start : 0 } ?? .max)
    let page: UInt64 = 4096
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: Int(page))
    var address = start
    // Each step reads up to the next page boundary: bounded by maxStackBytes / 4096 + 1 reads.
    while UInt64(bytes.count) < limit {
      let length = Int(min(page - address % page, limit - UInt64(bytes.count)))
      guard chunk.withUnsafeMutableBytes({ memory.read(address, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<length])) })
      else { break }
      bytes += chunk[0..<length]
      let (next, overflow) = address.addingReportingOverflow(UInt64(length))
      if overflow { break }
      address = next
    }
    return bytes.isEmpty ? nil : BufferMemory(bytes, at: start)
  }

  /// When the core was written (its file's modification time), seconds since the epoch; 0 if unknown.
  /// `-`, a core read from standard input: its file's, or its pipe's (when it was last written to).
  static func modificationTime(_ path: String) -> Int64 {
    var info = stat()
    guard (path == "-" ? fstat(0, &info) : PathBytes.withCString(path, { stat($0, &info) })) == 0 else { return 0 }
    return Int64(info.st_mtim.tv_sec)
  }
}
