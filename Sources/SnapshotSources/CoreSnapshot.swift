internal import Glibc
public import ImageLog
internal import ImageReaders
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
    let core = dump.core
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
    let unwindImages = dump.unwindImages(images)
    var threads: [Thread] = []
    for (number, index) in order.enumerated() {
      let thread = core.threads[index]
      let (frames, problem) = dump.unwind(thread, images: unwindImages)
      var entry = Thread(number: number, tid: UInt64(UInt32(bitPattern: thread.tid)),
                         name: thread.tid == pid ? core.process?.name : nil, crashed: index == crashedIndex,
                         problem: problem)
      if index == crashedIndex, let values = thread.registers {
        entry.registers = registerState(values, faultAddress: exception?.address ?? 0)
      }
      entry.frames = frames.enumerated().map { Frame(number: $0.offset, $0.element) }
      entry.kernelRegisters = thread.registers
      if stacks, let sp = thread.registers?.sp { entry.stack = Self.stack(at: sp, in: dump) }
      threads.append(entry)
    }
    let main = images.first { $0.isMainExecutable }
    let machine = Architecture(core.architecture).kernelMachine
    let release = dump.kernelVersion.map { "Linux \($0) \(machine)" } ?? "Linux \(machine)"
    var snapshot = ProcessSnapshot(
      format: .imagelog,
      process: Process(name: core.process?.name ?? main?.name ?? "???", pid: pid, path: main?.path ?? "???",
                       osVersion: release, architecture: machine, date: modificationTime(dump.path),
                       threadCount: threads.count),
      exception: exception, threads: threads, images: images.map(Image.init))
    snapshot.placeFrames()
    if stacks {
      var auxv: [UInt8] = []
      for entry in core.auxiliaryVector {
        for value in [entry.type, entry.value] { withUnsafeBytes(of: value.littleEndian) { auxv += $0 } }
      }
      snapshot.process.linuxFiles.auxiliaryVector = auxv.isEmpty ? nil : auxv
      // pr_psargs: the arguments with spaces between them, as /proc/PID/cmdline has NULs.
      snapshot.process.linuxFiles.commandLine = core.process.map { Array($0.arguments.utf8).map { $0 == 0x20 ? 0 : $0 } + [0] }
    }
    return (snapshot, problems)
  }

  /// The stack of a thread whose stack pointer is `sp`: the bytes the core holds from there (less
  /// x86_64's red zone) to the end of the segment, at most `ProcessThreads.maxStackBytes`.
  static func stack(at sp: UInt64, in dump: CoreDump) -> BufferMemory? {
    let start = sp >= 128 ? sp - 128 : sp
    guard let segment = dump.core.segment(containing: start),
          case let offset = start - segment.vmRange.lowerBound, offset < segment.availableSize else { return nil }
    let available = min(segment.availableSize - offset, ProcessThreads.maxStackBytes)  // the bytes the core holds
    var bytes = [UInt8](repeating: 0, count: Int(available))  // at most maxStackBytes (1 MiB)
    guard bytes.withUnsafeMutableBytes({ dump.read(start, into: $0) }) else { return nil }
    return BufferMemory(bytes, at: start)
  }

  /// The register section of a crash report (Apple's rows) from a thread's `NT_PRSTATUS` registers.
  static func registerState(_ registers: ELFCore.Registers, faultAddress: UInt64) -> RegisterState {
    switch registers.layout {
    case .x86_64:
      return RegisterState.x86_64 { name in
        switch name {
        case "rfl": registers["eflags"] ?? 0
        case "cr2": faultAddress
        default: registers[name] ?? 0
        }
      }
    case .aarch64:
      return RegisterState.aarch64 { name in name == "cpsr" ? registers["pstate"] ?? 0 : registers[name] ?? 0 }
    case .i386:
      return RegisterState.i386 { name in
        switch name {
        case "efl": registers["eflags"] ?? 0
        case "cr2": faultAddress
        default: registers[name] ?? 0
        }
      }
    }
  }

  /// When the core was written (its file's modification time), seconds since the epoch; 0 if unknown.
  static func modificationTime(_ path: String) -> Int64 {
    var info = stat()
    guard stat(path, &info) == 0 else { return 0 }
    return Int64(info.st_mtim.tv_sec)
  }
}
