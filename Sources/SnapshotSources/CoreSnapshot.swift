internal import Glibc
public import ImageLog
import ImageReaders
public import Snapshot

extension ProcessSnapshot {
  /// The process a core holds: the signal it died of, every thread unwound in the core's memory with
  /// the call frame information of the mapped files, the crashed thread's registers, the images; and
  /// one line per image whose file could not stand in for what the core left out (without the
  /// `imagelog: CORE: ` prefix).
  public static func core(_ dump: CoreDump) -> (snapshot: ProcessSnapshot, problems: [String]) {
    let (images, problems) = dump.images()
    let machine = Architecture(dump.core.architecture).kernelMachine
    let release = dump.kernelVersion.map { "Linux \($0) \(machine)" } ?? "Linux \(machine)"
    let snapshot = core(dump.core, images: images, memory: dump, osVersion: release, date: modificationTime(dump.path))
    return (snapshot, problems)
  }

  /// The process `core`'s notes describe (the signal, the threads and the crashed thread's registers),
  /// each thread unwound in `memory` with the call frame information of `images`: the core's memory, or
  /// the dumping process's own while a core handler is given its core (`DumpingProcess`).
  static func core(_ core: ELFCore, images: [ImageLog.Image], memory: some MemoryReading, osVersion: String,
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
      if index == crashedIndex, let values = thread.registers {
        entry.registers = registerState(values, faultAddress: exception?.address ?? 0)
      }
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
    return snapshot
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
