internal import CImageLogProcess
internal import Glibc
package import ImageReaders

/// Every thread of another running process, stopped for an instant: each one's registers and the
/// live part of its stack, copied while the process was stopped, with its name and state.
///
/// All threads are stopped together (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`), so the stacks are one
/// consistent moment of the process, as a debugger shows it; they are let go as soon as the copies
/// are made, and unwinding (`ProcessThreads+Unwinding.swift`) works on the copies afterwards. The
/// kernel lets a seized thread go if imagelog dies, so the target is never left stopped.
package struct ProcessThreads: Sendable {
  /// The part of a thread's stack copied at the stop: from its stack pointer (less the x86_64 red
  /// zone) to the end of the mapping that holds it, at most `ProcessThreads.maxStackBytes`.
  package struct StackCopy: Sendable {
    /// The run-time address of `bytes[0]`.
    package var address: Address
    package var bytes: [UInt8]
  }

  /// One thread as it was at the stop.
  package struct Thread: Sendable {
    package var tid: Int32
    /// The thread's `comm` (`/proc/PID/task/TID/comm`); nil when it could not be read.
    package var name: String?
    /// The state letter of `/proc/PID/task/TID/stat` just before the stop (`R`, `S`, `D`, `T`...).
    package var state: String?
    /// DWARF register numbers to values (as `CImageLogUnwind.h` numbers them); nil when the thread
    /// was not read (`problem` says why).
    package var registerValues: [UInt64?]?
    /// The stack bytes copied at the stop; nil when none could be read.
    package var stack: StackCopy?
    /// The thread's whole general register set as `PTRACE_GETREGSET` gave it (what a minidump's context
    /// holds); nil when the thread was not read.
    package var registers: Registers?
    /// Why the thread has no registers ("the thread exited while it was being read"), or nil.
    package var problem: String?
    /// True when the thread has no registers because it exited (it no longer exists: not a failure).
    package var exited = false
  }

  /// The process whose threads these are.
  package var pid: Int32
  /// Every thread, in `/proc/PID/task` order (the main thread first); threads created while the
  /// others were being stopped come last.
  package var threads: [Thread]
  /// How long the process was stopped: from the first thread's interrupt to the last thread's release.
  package var stoppedNanoseconds: UInt64
  /// The architecture of the registers: `x86_64` or `aarch64` (the one imagelog runs on), or `i386`
  /// (a 32-bit process on an x86_64 kernel).
  package var architecture: String

  /// The problem of a thread that exited between being listed and being read.
  package static let vanished = "the thread exited while it was being read"
  /// The problem of a zombie main thread whose process runs on in other threads (it called pthread_exit).
  package static let mainThreadExited = "the main thread has exited; the process lives on in its other threads"

  /// How long a thread may take to stop before it is reported as not answering.
  package static let answerNanoseconds: UInt64 = 100_000_000
  /// The most stack copied per thread; frames deeper than this are read from the live process.
  package static let maxStackBytes: UInt64 = 1 << 20

  /// Stops every thread of `pid`, copies its registers and stack, and lets it go.
  ///
  /// Needs the access `ptrace(2)` calls `PTRACE_MODE_ATTACH`: the same user, Yama's `ptrace_scope`
  /// allowing it (0, or 1 for a descendant), or `CAP_SYS_PTRACE`; and no other tracer. Threads that
  /// vanish, do not stop within `answerNanoseconds`, or cannot be read are kept with a `problem`.
  package static func capture(of pid: Int32) throws(ProcessError) -> ProcessThreads {
    guard pid != getpid() else { throw .ownProcess(pid: pid) }
    // The threads with their names and states before the stop: during it every thread shows `t`
    // (tracing stop).
    var capture = il_threads_capture()
    guard il_list_threads(pid, &capture) == 0 else {
      let failure = errno
      if failure == ENOENT || failure == ESRCH { throw ProcessImages.processGone(pid) ? .noSuchProcess(pid: pid) : .exited(pid: pid, reading: .threads) }
      throw .system(pid: pid, SystemError("cannot list the threads", errno: failure))
    }
    do {
      try checkStoppable(pid, capture)
    } catch {
      il_free_threads_capture(&capture)
      throw error
    }
    // The mappings bound each stack copy; without them (refused) a smaller fixed size is copied.
    let mappings = (try? ProcessImages.readMappings(of: pid)) ?? []
    var bounds: [UInt64] = []
    bounds.reserveCapacity(mappings.count * 2)
    for mapping in mappings { bounds += [mapping.start, mapping.end] }
    let status = bounds.withUnsafeBufferPointer { pairs in
      il_capture_threads(pid, pairs.baseAddress, mappings.count, maxStackBytes, answerNanoseconds, 1_000_000_000, &capture)
    }
    guard status == 0 else {
      throw .system(pid: pid, SystemError("cannot stop the threads", errno: errno))
    }
    defer { il_free_threads_capture(&capture) }
    var threads: [Thread] = []
    threads.reserveCapacity(capture.count)
    for index in 0..<capture.count {
      let raw = capture.threads[index]
      let read = raw.stat.state != 0
      var thread = Thread(tid: raw.tid, name: read ? Self.name(raw.stat) : nil, state: read ? Self.stateLetter(raw.stat) : nil)
      switch Int32(raw.status) {
      case Int32(IL_THREAD_CAPTURED):
        thread.registerValues = registerValues(raw.registers)
        thread.registers = registers(raw)
        if let base = raw.stack, raw.stack_size > 0 {
          thread.stack = StackCopy(address: raw.stack_address,
                                   bytes: Array(UnsafeRawBufferPointer(start: base, count: raw.stack_size)))
        }
      case Int32(IL_THREAD_VANISHED):
        thread.problem = Self.vanished
        thread.exited = true
      case Int32(IL_THREAD_NO_ANSWER):
        thread.problem = "the thread did not answer within \(answerNanoseconds / 1_000_000) ms"
      case Int32(IL_THREAD_UNSUPPORTED): thread.problem = "a 32-bit thread: imagelog unwinds x86_64, aarch64 and i386"
      case Int32(IL_THREAD_REFUSED):
        thread.problem = refusalProblem(pid: pid, tid: raw.tid, errno: raw.error)
        thread.exited = thread.problem == Self.vanished || thread.problem == Self.mainThreadExited
      default: thread.problem = "its registers could not be read: \(String(cString: strerror(raw.error)))"
      }
      threads.append(thread)
    }
    // No thread read: the process as a whole is out of reach (gone, a zombie, a tracer, permissions).
    if threads.allSatisfy({ $0.registerValues == nil }) {
      let states = threads.map { threadState(pid, $0.tid) }
      if states.allSatisfy({ $0 == nil }) { throw .exited(pid: pid, reading: .threads) }
      if states.allSatisfy({ $0 == nil || $0 == "Z" || $0 == "X" }) {
        throw .zombie(pid: pid, command: commandName(of: pid) ?? "?", reading: .threads)
      }
      if let refused = (0..<capture.count).first(where: { capture.threads[$0].status == Int32(IL_THREAD_REFUSED) }),
         capture.threads[refused].error == EPERM {
        throw refusal(pid: pid, tid: capture.threads[refused].tid)
      }
    }
    if threads.isEmpty { throw .exited(pid: pid, reading: .threads) }
    #if arch(x86_64)
    // A 32-bit process on the x86_64 kernel: its threads' registers are i386's.
    let i386 = (0..<capture.count).contains {
      capture.threads[$0].status == Int32(IL_THREAD_CAPTURED) && capture.threads[$0].registers.arch == 3
    }
    let architecture = i386 ? "i386" : "x86_64"
    #else
    let architecture = "aarch64"
    #endif
    return ProcessThreads(pid: pid, threads: threads, stoppedNanoseconds: capture.stopped_ns, architecture: architecture)
  }

  /// Kernel threads and zombies are refused before anything is stopped: they have nothing to unwind.
  /// `listed`: the threads as `il_list_threads` read them.
  static func checkStoppable(_ pid: Int32, _ listed: il_threads_capture) throws(ProcessError) {
    let threads = UnsafeBufferPointer(start: listed.threads, count: listed.count)
    guard let leader = threads.first(where: { $0.tid == pid })?.stat, leader.state != 0 else {
      // Listed, but its main thread's stat is gone: it exited meanwhile.
      throw ProcessImages.processGone(pid) ? .noSuchProcess(pid: pid) : .exited(pid: pid, reading: .threads)
    }
    if isKernelThread(leader) { throw .kernelThread(pid: pid, command: name(leader), reading: .threads) }
    // A zombie leader with live threads (the main thread called pthread_exit) still has stacks.
    func gone(_ state: CChar) -> Bool { state == 0 || state == CChar(UInt8(ascii: "Z")) || state == CChar(UInt8(ascii: "X")) }
    if gone(leader.state), threads.allSatisfy({ gone($0.stat.state) }) {
      throw .zombie(pid: pid, command: name(leader), reading: .threads)
    }
  }

  /// What an `EPERM` from `PTRACE_SEIZE` on the whole process means: a tracer, or missing access.
  static func refusal(pid: Int32, tid: Int32) -> ProcessError {
    if let tracer = tracerPID(pid, tid) { return .traced(pid: pid, tracer: tracer, tracerCommand: commandName(of: tracer)) }
    return .ptraceRefused(pid: pid, hint: ptraceHint(for: pid))
  }

  /// Why one thread (of a process whose other threads were read) was refused.
  static func refusalProblem(pid: Int32, tid: Int32, errno: Int32) -> String {
    // The kernel refuses an exiting thread with EPERM too (its exit_state is set): gone is gone.
    let now = threadState(pid, tid)
    if now == nil || now == "Z" || now == "X" {
      return tid == pid && now != nil ? mainThreadExited : vanished
    }
    if errno == EPERM, let tracer = tracerPID(pid, tid) {
      return "already traced by pid \(tracer)" + (commandName(of: tracer).map { " (\($0))" } ?? "")
    }
    return "ptrace refused: \(String(cString: strerror(errno)))"
  }

  /// Why `PTRACE_SEIZE` is refused, in words a person can act on: Yama's `ptrace_scope` first (it
  /// decides before the credentials), then the uid and capability checks `accessHint` compares.
  static func ptraceHint(for pid: Int32) -> String {
    let ptraceBit: UInt64 = 1 << 19  // CAP_SYS_PTRACE
    let capable = AccessStatus(path: "/proc/self/status").map { $0.effectiveCapabilities & ptraceBit != 0 } ?? false
    var yama: String?
    if let scope = try? ProcFile.read("/proc/sys/kernel/yama/ptrace_scope"), let level = scope.first {
      let path = "/proc/sys/kernel/yama/ptrace_scope"
      switch level {
      case UInt8(ascii: "1") where !capable && !isDescendant(pid):
        yama = "\(path) is 1: only an ancestor may trace a process (0 lifts that; or CAP_SYS_PTRACE)"
      case UInt8(ascii: "2") where !capable:
        yama = "\(path) is 2: only a process with CAP_SYS_PTRACE may trace"
      case UInt8(ascii: "3"):
        yama = "\(path) is 3: tracing is disabled until the next boot"
      default: break
      }
    }
    let access = ProcessImages.accessHint(for: pid)
    guard let yama else { return access }
    // accessHint's fallback says only that CAP_SYS_PTRACE is missing, which yama's line already covers.
    return access.hasPrefix("imagelog lacks") ? yama : yama + "; " + access
  }

  /// Whether `pid` descends from this process (Yama's `ptrace_scope` 1 allows those).
  static func isDescendant(_ pid: Int32) -> Bool {
    var current = pid
    let me = getpid()
    for _ in 0..<4096 {
      guard current > 1, let parent = taskStat("/proc/\(current)/stat")?.parent else {
        return false
      }
      if parent == me { return true }
      current = parent
    }
    return false
  }

  /// `TracerPid:` of the thread (or the process) when it is non-zero.
  static func tracerPID(_ pid: Int32, _ tid: Int32) -> Int32? {
    for path in ["/proc/\(pid)/task/\(tid)/status", "/proc/\(pid)/status"] {
      guard let bytes = try? ProcFile.read(path) else { continue }
      for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("TracerPid:".utf8)) {
        let value = String(decoding: line.dropFirst(10), as: UTF8.self).filter { $0 != "\t" && $0 != " " }
        if let tracer = Int32(value), tracer > 0 { return tracer }
      }
    }
    return nil
  }

  /// The thread's state letter now, from `/proc/PID/task/TID/stat`; nil when it is gone.
  static func threadState(_ pid: Int32, _ tid: Int32) -> String? {
    taskStat("/proc/\(pid)/task/\(tid)/stat").map { stateLetter($0) }
  }

  /// The process's command (the `comm` in `/proc/PID/stat`), nil when it cannot be read.
  package static func commandName(of pid: Int32) -> String? {
    taskStat("/proc/\(pid)/stat").map { name($0) }
  }

  /// A `/proc` stat file's fields (`il_read_task_stat`), nil when it cannot be read.
  static func taskStat(_ path: String) -> il_task_stat? {
    var stat = il_task_stat()
    return il_read_task_stat(AT_FDCWD, path, &stat) == 1 ? stat : nil
  }

  /// A stat's state letter (`S`, `Z`, ...).
  static func stateLetter(_ stat: il_task_stat) -> String { String(UnicodeScalar(UInt8(bitPattern: stat.state))) }

  /// A stat's command, as the file wrote it (its bytes kept: `PathBytes`).
  static func name(_ stat: il_task_stat) -> String {
    withUnsafeBytes(of: stat.name) { raw in PathBytes.string(raw.prefix { $0 != 0 }) }
  }

  /// `PF_KTHREAD`: the stat of a kernel thread.
  static func isKernelThread(_ stat: il_task_stat) -> Bool { stat.flags & 0x0020_0000 != 0 }

  /// `architecture` as the unwinder numbers registers.
  var registerArchitecture: RegisterSet.Architecture {
    #if arch(x86_64)
    architecture == "i386" ? .i386 : .x86_64
    #else
    .aarch64
    #endif
  }

  /// The DWARF-numbered registers of a capture, nil where the thread did not give a value.
  /// The registers `il_capture_threads` copied as the kernel gave them; nil for an unknown register set.
  static func registers(_ raw: il_thread_capture) -> Registers? {
    let layout: Registers.Architecture
    switch raw.registers.arch {
    case 1: layout = .x86_64
    case 2: layout = .aarch64
    case 3: layout = .i386
    default: return nil
    }
    let count = Registers.kernelCount(layout)
    guard Int(raw.machine_count) == count else { return nil }
    // Our own memory in the machine's byte order, read through the one reader.
    let values = withUnsafeBytes(of: raw.machine) { words in
      var reader = ByteReader(words)
      return (0..<count).compactMap { _ in try? reader.read(UInt64.self) }
    }
    return values.count == count ? Registers(layout, values: values) : nil
  }

  static func registerValues(_ registers: il_thread_registers) -> [UInt64?] {
    withUnsafeBytes(of: registers.value) { raw in
      (0..<33).map { number in
        registers.known & (1 << UInt64(number)) != 0 ? raw.load(fromByteOffset: number * 8, as: UInt64.self) : nil
      }
    }
  }
}

extension ProcessImages {
  /// True when `/proc/PID` is gone (the process does not exist, rather than exited meanwhile).
  static func processGone(_ pid: Int32) -> Bool { access("/proc/\(pid)", F_OK) != 0 }
}
