#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageLogSymbolication
import ImageReaders

/// `imagelog symbolicate CORE`: the dead process's report (imagelog's crash-report layout, README.md's
/// "Crash reports"), built from the core and then symbolicated by the same pipeline as a report file.
extension SymbolicateCommand {
  /// True when `path` is a readable file whose first bytes are an ELF core's header.
  static func isCoreFile(_ path: String) -> Bool {
    guard let file = try? FileBytes(path: path) else { return false }
    return file.withRanges { ranges in
      guard let header = try? ranges.slice(at: 0, length: min(ranges.count, 64)) else { return false }
      return CoreDump.isCore(header)
    }
  }

  /// The report of the process the core at `path` holds, in imagelog's layout, the lines to say on
  /// standard error (files that changed since the core was written), and the images no file holds
  /// (the vDSO) as the core's memory has them, to symbolicate their frames with.
  static func coreReport(_ path: String) throws(CoreDump.OpenError)
    -> (text: String, problems: [String], inMemoryImages: [InMemoryImage]) {
    let dump = try CoreDump(path: path)
    let (images, problems) = dump.images()
    let report = threadsReport(dump, images: images, written: modificationTime(path))
    return (report.text(), problems, InMemoryImage.copies(of: images, in: dump))
  }

  /// The core's threads (main thread first, then by tid), each unwound in the
  /// core's memory; the crashed thread's registers; the images.
  static func threadsReport(_ dump: CoreDump, images: [Image], written: Int64) -> ThreadsReport {
    let core = dump.core
    let pid = core.process?.pid ?? core.threads.first?.tid ?? 0
    // The signal the process died of. gdb stops a live process with SIGSTOP before it writes the core
    // and records that; SIGSTOP never dumps core, so it is no crash.
    var exception: ThreadsReport.Exception?
    var crashedIndex = core.crashedThreadIndex
    if let signal = core.signal, signal != 19 {
      let info = core.signalInfo.flatMap { $0.signal == signal ? $0 : nil }
      let code = info?.code ?? crashedIndex.map { core.threads[$0].signalCode } ?? 0
      exception = ThreadsReport.Exception(signal: signal, code: code, address: info?.faultAddress ?? 0)
    } else {
      crashedIndex = nil
    }
    // /proc/PID/task order, as `pid --threads` and the crash handler number threads: the main thread,
    // then by tid (the kernel writes the dumping thread first, gdb the threads in its own order).
    let order = core.threads.indices.sorted { a, b in
      let (x, y) = (core.threads[a].tid, core.threads[b].tid)
      return x == pid ? y != pid : y == pid ? false : x < y
    }
    let unwinder = CoreUnwinder(dump: dump, images: images)
    let threads = order.map { index in
      let thread = core.threads[index]
      let (frames, problem) = unwinder.frames(thread)
      return ThreadsReport.Thread(tid: thread.tid, name: thread.tid == pid ? core.process?.name : nil,
                                  crashed: index == crashedIndex, frames: frames, problem: problem)
    }
    var registers: RegisterState?
    if let crashedIndex, let values = core.threads[crashedIndex].registers {
      registers = registerState(values, faultAddress: exception?.address ?? 0)
    }
    let main = images.first { $0.isMainExecutable }
    let machine = core.architecture == "arm64" ? "aarch64" : core.architecture
    let release = dump.kernelVersion.map { "Linux \($0) \(machine)" } ?? "Linux \(machine)"
    return ThreadsReport(processName: core.process?.name ?? main?.name ?? "???", path: main?.path ?? "???", pid: pid,
                         date: written, osVersion: release, exception: exception, threads: threads,
                         registers: registers, images: images)
  }

  /// The register section of a crash report (Apple's rows) from a thread's `NT_PRSTATUS` registers.
  static func registerState(_ registers: ELFCore.Registers, faultAddress: UInt64) -> RegisterState? {
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

/// Unwinds a core's threads: the images' call frame information located once, then each thread from
/// its registers.
struct CoreUnwinder {
  let dump: CoreDump
  let images: [UnwindImage]

  init(dump: CoreDump, images: [Image]) {
    self.dump = dump
    self.images = dump.unwindImages(images)
  }

  /// The thread's frames as the report writes them, or why there are none.
  func frames(_ thread: ELFCore.Thread) -> ([ThreadsReport.Frame], String?) {
    let (frames, problem) = dump.unwind(thread, images: images)
    return (frames.map { frame in
      let trust: String? = switch frame.trust {
      case .framePointer: "frame-pointer"
      case .stackScan: "scan"
      case .context, .callFrameInfo: nil
      }
      return ThreadsReport.Frame(address: frame.pc, trust: trust)
    }, problem)
  }
}
