internal import Glibc

/// Why the threads of another process could not be stopped and read. `description` is one line
/// that names the PID and the cause.
public enum ProcessThreadsError: Error, Equatable, Sendable, CustomStringConvertible {
  /// `/proc/PID` does not exist (`ESRCH`).
  case noSuchProcess(pid: Int32)
  /// The process went away before any thread could be stopped.
  case exited(pid: Int32)
  /// A kernel thread (`PF_KTHREAD`): no user address space, so no user-space stack.
  case kernelThread(pid: Int32, command: String)
  /// A zombie: every thread has exited and the parent has not reaped the process.
  case zombie(pid: Int32, command: String)
  /// Another tracer (a debugger, strace) holds the process: `TracerPid` in `/proc/PID/status`.
  case traced(pid: Int32, tracer: Int32, tracerCommand: String?)
  /// `PTRACE_SEIZE` was refused (`EPERM`); `hint` says what is missing (ptrace_scope, uid,
  /// capabilities, `CAP_SYS_PTRACE`).
  case permissionDenied(pid: Int32, hint: String)
  /// The PID is imagelog's own process: a thread cannot stop its own process with ptrace.
  case ownProcess(pid: Int32)
  /// Any other system call failure.
  case system(pid: Int32, SystemError)

  /// The PID the error is about.
  public var pid: Int32 {
    switch self {
    case .noSuchProcess(let pid), .exited(let pid), .ownProcess(let pid): pid
    case .kernelThread(let pid, _), .zombie(let pid, _), .permissionDenied(let pid, _), .system(let pid, _): pid
    case .traced(let pid, _, _): pid
    }
  }

  public var description: String {
    switch self {
    case .noSuchProcess(let pid):
      "pid \(pid): no such process"
    case .exited(let pid):
      "pid \(pid): the process exited before its threads could be stopped"
    case let .kernelThread(pid, command):
      "pid \(pid): \(command) is a kernel thread: it has no user-space stack to unwind"
    case let .zombie(pid, command):
      "pid \(pid): \(command) is a zombie (exited, not yet reaped): it has no threads to stop"
    case let .traced(pid, tracer, command):
      "pid \(pid): already traced by pid \(tracer)\(command.map { " (\($0))" } ?? ""): a process has one tracer "
        + "at a time; detach the debugger first"
    case let .permissionDenied(pid, hint):
      "pid \(pid): ptrace refused (PTRACE_SEIZE: permission denied): \(hint)"
    case .ownProcess(let pid):
      "pid \(pid): that is imagelog itself: a process cannot stop its own threads with ptrace"
    case let .system(pid, error):
      "pid \(pid): \(error)"
    }
  }
}
