import Glibc

/// Checks `condition` until it holds, and throws naming `what` when it still does not after
/// `timeoutSeconds` (a hang guard, not a timing assertion: the condition is what is waited for).
public func waitUntil(_ what: @autoclosure () -> String, timeoutSeconds: Double = 60,
                      _ condition: () throws -> Bool) throws {
  let deadline = monotonicSeconds() + timeoutSeconds
  while try !condition() {
    guard monotonicSeconds() < deadline else {
      throw TestSupportError("gave up after \(Int(timeoutSeconds)) s waiting until \(what())")
    }
    // No timed pause: the processor goes to whatever can run (on a busy machine, most likely the
    // process whose state is awaited), and the condition is checked again as soon as it comes back.
    sched_yield()
  }
}

/// The canonical path of what `pid` runs (/proc/PID/exe), or nil when it cannot be read.
public func executablePath(of pid: pid_t) -> String? {
  canonicalPathOrNil("/proc/\(pid)/exe")
}

/// The system call `pid`'s main thread is blocked in (the first field of /proc/PID/syscall), or nil
/// while it runs, is blocked outside a system call, or cannot be read.
public func blockedSystemCall(of pid: pid_t) -> Int? {
  guard let text = readFile("/proc/\(pid)/syscall") else { return nil }
  guard let first = text.split(separator: " ").first, let number = Int(first), number >= 0 else { return nil }
  return number
}

/// The system calls a program blocks in while it sleeps or waits for a signal: `clock_nanosleep`,
/// `nanosleep`, and `pause` (glibc's `pause` is `ppoll` with nothing to poll on arm64).
public let sleepSystemCalls: Set<Int> = {
  #if arch(x86_64)
  [230, 35, 34]
  #elseif arch(arm64)
  [115, 101, 73]
  #else
  []
  #endif
}()

/// Waits until `pid` runs `program` (a path, or a name searched on PATH) and sleeps or pauses in it: the exec
/// is done and, for a dynamically linked program, the loader has mapped every library (a program
/// started as `sh -c "echo ready; exec PROGRAM"` prints "ready" before the exec).
public func waitUntilSleeping(_ pid: pid_t, in program: String, timeoutSeconds: Double = 60) throws {
  guard let path = which(program).flatMap(canonicalPathOrNil) else {
    throw TestSupportError("\(program) is not on PATH")
  }
  guard !sleepSystemCalls.isEmpty else { throw TestSupportError("no sleep system call numbers for this architecture") }
  try waitUntil("pid \(pid) runs \(path) and sleeps in it (/proc/\(pid)/exe, /proc/\(pid)/syscall)",
                timeoutSeconds: timeoutSeconds) {
    executablePath(of: pid) == path && blockedSystemCall(of: pid).map(sleepSystemCalls.contains) == true
  }
}

func canonicalPathOrNil(_ path: String) -> String? {
  guard let resolved = realpath(path, nil) else { return nil }
  defer { free(resolved) }
  return String(cString: resolved)
}

/// System call numbers a test waits to see a process blocked in.
public enum SystemCallNumber {
  #if arch(x86_64)
  public static let write = 1, futex = 202
  #elseif arch(arm64)
  public static let write = 64, futex = 98
  #else
  public static let write = -1, futex = -1
  #endif
}

/// The children of `pid` (/proc/PID/task/PID/children: those of its main thread).
public func childProcesses(of pid: pid_t) -> [pid_t] {
  (readFile("/proc/\(pid)/task/\(pid)/children") ?? "").split(separator: " ").compactMap { pid_t($0) }
}
