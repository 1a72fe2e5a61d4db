import Glibc

/// One thread of `eu-stack -p PID`: its tid and frames (address, name; nil name when eu-stack has none).
public struct EuStackThread: Equatable, Sendable {
  public var tid: Int32
  public var frames: [(address: UInt64, name: String?)]

  public static func == (a: EuStackThread, b: EuStackThread) -> Bool {
    a.tid == b.tid && a.frames.elementsEqual(b.frames) { $0.address == $1.address && $0.name == $1.name }
  }

  /// Parses eu-stack's text: `TID n:` then `#k  0xADDR name` lines (`PID n - process` and anything
  /// else is skipped).
  public static func parse(_ text: String) -> [EuStackThread] {
    var threads: [EuStackThread] = []
    for line in text.split(separator: "\n") {
      if line.hasPrefix("TID "), line.hasSuffix(":"), let tid = Int32(line.dropFirst(4).dropLast()) {
        threads.append(EuStackThread(tid: tid, frames: []))
        continue
      }
      guard line.hasPrefix("#"), !threads.isEmpty else { continue }
      let words = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
      guard words.count >= 2, words[1].hasPrefix("0x"), let address = UInt64(words[1].dropFirst(2), radix: 16) else { continue }
      threads[threads.count - 1].frames.append((address, words.count > 2 ? String(words[2]) : nil))
    }
    return threads
  }
}

/// A symbol name without its ELF symbol version (`pthread_cond_wait@@GLIBC_2.3.2` -> `pthread_cond_wait`),
/// the form symbol tables are compared in.
public func unversionedSymbol(_ name: String) -> String {
  guard let at = name.firstIndex(of: "@"), at > name.startIndex else { return name }
  return String(name[..<at])
}

/// The thread IDs of `pid` (/proc/PID/task), in its order.
public func threadIDs(of pid: pid_t) -> [pid_t] {
  directoryNames("/proc/\(pid)/task").compactMap { pid_t($0) }
}

/// The state letter of a thread (/proc/PID/task/TID/stat), or nil.
public func threadState(_ pid: pid_t, _ tid: pid_t) -> String? {
  guard let stat = readFile("/proc/\(pid)/task/\(tid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
  return stat[stat.index(after: close)...].split(separator: " ").first.map(String.init)
}

/// Waits until `pid` has `count` threads and every one is asleep in a system call (state S and a
/// number in /proc/PID/task/TID/syscall): their stacks then stay put until something wakes them.
public func waitUntilThreadsBlocked(_ pid: pid_t, count: Int, timeoutSeconds: Double = 60) throws {
  try waitUntil("pid \(pid) has \(count) threads, each asleep in a system call (/proc/\(pid)/task/*/syscall)",
                timeoutSeconds: timeoutSeconds) {
    let tids = threadIDs(of: pid)
    return tids.count == count && tids.allSatisfy { tid in
      guard threadState(pid, tid) == "S", let text = readFile("/proc/\(pid)/task/\(tid)/syscall"),
            let first = text.split(separator: " ").first, let number = Int(first) else { return false }
      return number >= 0
    }
  }
}

/// True when no thread of `pid` is stopped (no `T` or `t` state): what a target must be after imagelog
/// let it go.
public func noThreadStopped(_ pid: pid_t) -> Bool {
  threadIDs(of: pid).allSatisfy { tid in
    let state = threadState(pid, tid)
    return state != "T" && state != "t"
  }
}

/// `Tests/Programs/process-threads.c` built with `gcc -O2 -fomit-frame-pointer` into `directory`
/// (symbols kept, so peers name its functions).
public func buildThreadsProgram(in directory: String) throws -> String {
  let program = directory + "/process-threads"
  let build = try runChild(["cc", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                            packageRoot + "/Tests/Programs/process-threads.c", "-o", program])
  guard build.exitCode == 0 else { throw TestSupportError("cc process-threads.c: \(build.error)") }
  return program
}

/// A process held by another tracer: Tests/Programs/process-tracer.c (a debugger in miniature) built in
/// `directory`, started, and waited for until /proc shows its child traced. The child dies with its
/// tracer (PR_SET_PDEATHSIG); the caller kills it too, never leaving it behind.
public func startTracedProcess(in directory: String) throws -> (tracer: RunningChild, traced: pid_t) {
  let tracer = directory + "/process-tracer"
  let build = try runChild(["cc", "-O2", packageRoot + "/Tests/Programs/process-tracer.c", "-o", tracer])
  guard build.exitCode == 0 else { throw TestSupportError("cc: \(build.error)") }
  let parent = try RunningChild([tracer])
  guard let traced = parent.readLine().flatMap({ pid_t($0) }) else { throw TestSupportError("process-tracer printed no pid") }
  try waitUntil("pid \(traced) shows TracerPid \(parent.pid)") {
    (readFile("/proc/\(traced)/status") ?? "").contains("TracerPid:\t\(parent.pid)\n")
  }
  return (parent, traced)
}

/// A Python program whose two daemon threads start and join threads without end (threads coming and
/// going while a process is read); it prints `ready`, then runs `ending` (its modules os, signal, sys and
/// threading imported).
public func threadChurnScript(then ending: String) -> String {
  """
  import os, signal, sys, threading
  def churn():
      while True:
          t = threading.Thread(target=lambda: None); t.start(); t.join()
  for _ in range(2): threading.Thread(target=churn, daemon=True).start()
  print('ready', flush=True)
  \(ending)
  """
}
