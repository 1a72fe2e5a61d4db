internal import Glibc
public import ProcessInspection
import ImageReaders
public import Snapshot

extension ProcessSnapshot {
  /// A snapshot of a running process and what went wrong while it was taken.
  public struct Capture: Sendable {
    /// The process as it was at the stop: every thread's frames as unwound, its images after the stop.
    public var snapshot: ProcessSnapshot
    /// One sentence per thing that makes the capture incomplete (without the `imagelog: ` prefix): a
    /// process that exited while it was read, threads that could not be read. Empty when complete.
    public var failures: [String]
  }

  /// Stops every thread of `pid` at once, copies its registers and stack, lets it go, and unwinds the
  /// copies (`ProcessThreads`): the process's threads with their names, states and frames, and its
  /// images (read after the stop: what the threads ran is mapped still; a library unloaded in between
  /// leaves its frames as bare addresses).
  ///
  /// Throws when the process cannot be stopped at all; threads that could not be read are in the
  /// snapshot with their `problem`, and said in `failures`.
  ///
  /// `linuxFiles` also keeps the process's `/proc` files a minidump carries (maps, status, command line,
  /// auxiliary vector) and the system's (`/etc/lsb-release`, `/proc/cpuinfo`); `environment` its
  /// environment too, which may hold secrets.
  ///
  /// With `crash` (what the crashed process's handler recorded: `CrashRecord`), the snapshot is of
  /// that crash: its thread is marked crashed and unwound from the recorded registers rather than
  /// from where its signal handler waits, with those registers and the signal as the exception.
  public static func capture(pid: Int32, linuxFiles: Bool = false, environment: Bool = false,
                             crash: CrashRecord? = nil) throws(ProcessError) -> Capture {
    var captured = try ProcessThreads.capture(of: pid)
    if let crash { crash.replaceRegisters(in: &captured) }
    var failures: [String] = []
    var images: [ProcessInspection.Image] = []
    do {
      images = try ProcessImages.snapshot(of: pid)
    } catch {
      failures.append("pid \(pid): the process exited while its threads were being read: what was read before is shown")
    }
    let stacks = captured.unwind(images: images)
    var threads: [Thread] = []
    threads.reserveCapacity(captured.threads.count)
    var unread = 0
    for (number, (thread, frames)) in zip(captured.threads, stacks).enumerated() {
      var problem = thread.problem
      if problem == nil, frames.isEmpty { problem = "no frame could be read (the process exited meanwhile)" }
      if thread.problem != nil, !thread.exited { unread += 1 }
      var entry = Thread(number: number, tid: UInt64(UInt32(bitPattern: thread.tid)), name: thread.name,
                         state: thread.state, crashed: crash?.tid == thread.tid, problem: problem)
      entry.registers = thread.registers
      // The fault address is x86's cr2, as Apple's rows show it.
      if entry.crashed { entry.registers?["cr2"] = crash?.faultAddress }
      entry.frames = frames.enumerated().map { Frame(number: $0.offset, $0.element) }
      entry.stack = thread.stack.map { BufferMemory($0.bytes, at: $0.address) }
      threads.append(entry)
    }
    if unread > 0 {
      failures.append("pid \(pid): \(unread) of \(captured.threads.count) threads could not be read (listed with the reason)")
    }
    let main = images.first(where: \.isMainExecutable)
    let osVersion = Self.currentOSVersion()
    var snapshot = ProcessSnapshot(
      format: .imagelog,
      process: Process(name: ProcessThreads.commandName(of: pid) ?? main?.name ?? "?", pid: pid, path: main?.path ?? "?",
                       osVersion: osVersion, architecture: Self.machine(ofOSVersion: osVersion),
                       date: crash?.date ?? Int64(time(nil)), threadCount: threads.count,
                       stoppedNanoseconds: captured.stoppedNanoseconds),
      exception: crash.map { Exception(signal: $0.signal, code: $0.code, address: $0.faultAddress) },
      threads: threads, images: images.map(Image.init))
    snapshot.placeFrames()
    // The vDSO is in no file, a deleted or replaced file no longer at its path: both taken while the process
    // is there (a crashed one waits for this capture), copied or held open through its mapping.
    snapshot.inMemoryImages = InMemoryImage.live(images, pid: pid)
    // A crashed process waits for this capture: glibc's message is in its memory still.
    if crash != nil { snapshot.abortMessage = Self.glibcAbortMessage(images: images, memory: ProcessMemory(pid: pid)) }
    if let crash {
      snapshot.unloadedImages = crash.unloadedImages(problems: &failures)
      snapshot.imageTimeline = crash.imageTimeline(problems: &failures)
    }
    if linuxFiles { snapshot.process.linuxFiles = Self.linuxFiles(of: pid, environment: environment) }
    return Capture(snapshot: snapshot, failures: failures)
  }

  /// The files of `pid` (and of the system) a minidump carries, each as it could be read.
  static func linuxFiles(of pid: Int32, environment: Bool) -> MinidumpFile.LinuxStreams {
    func read(_ path: String) -> [UInt8]? { try? ProcFile.read(path) }
    var files = MinidumpFile.LinuxStreams()
    files.maps = read("/proc/\(pid)/maps")
    files.procStatus = read("/proc/\(pid)/status")
    files.commandLine = read("/proc/\(pid)/cmdline")
    files.auxiliaryVector = read("/proc/\(pid)/auxv")
    if environment { files.environment = read("/proc/\(pid)/environ") }
    files.lsbRelease = read("/etc/lsb-release") ?? read("/etc/os-release")
    files.cpuInfo = read("/proc/cpuinfo")
    return files
  }

  /// `Linux RELEASE MACHINE`, as `uname -srm` and the crash handler write it.
  package static func currentOSVersion() -> String {
    var names = utsname()
    uname(&names)
    func field<T>(_ value: T) -> String {
      withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
    return "Linux \(field(names.release)) \(field(names.machine))"
  }

  /// The last word of a `Linux RELEASE MACHINE` version: the machine, as a report's architecture.
  static func machine(ofOSVersion version: String) -> String? {
    version.hasPrefix("Linux") ? version.split(separator: " ").last.map(String.init) : nil
  }
}
