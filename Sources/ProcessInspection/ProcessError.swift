internal import Glibc

/// Why another process could not be read: its images (`ProcessImages`) or its threads
/// (`ProcessThreads`). `description` is one line that names the PID and the cause.
public enum ProcessError: Error, Equatable, Sendable, CustomStringConvertible {
  /// What was being read when the process was lost: the sentence says so.
  public enum Reading: Sendable, Equatable {
    /// Its mappings and image headers (`ProcessImages`).
    case images
    /// Its threads' registers and stacks (`ProcessThreads`).
    case threads
  }

  /// `/proc/PID` does not exist (`ESRCH`).
  case noSuchProcess(pid: Int32)
  /// The kernel refused to show the process's mappings or memory (`EACCES`/`EPERM`); `hint` says
  /// what is missing (a uid, capabilities the target holds, `CAP_SYS_PTRACE`), found when refused.
  case permissionDenied(pid: Int32, reading: String, hint: String)
  /// `PTRACE_SEIZE` was refused (`EPERM`); `hint` says what is missing (ptrace_scope, uid,
  /// capabilities, `CAP_SYS_PTRACE`).
  case ptraceRefused(pid: Int32, hint: String)
  /// The process went away while it was being read.
  case exited(pid: Int32, reading: Reading)
  /// The maps list no image: the process is starting (inside `execve`) or exiting.
  case noImages(pid: Int32)
  /// A kernel thread (`PF_KTHREAD`): no user address space, so no images and no user-space stack.
  case kernelThread(pid: Int32, command: String, reading: Reading)
  /// A zombie: it exited and its parent has not reaped it, so its address space and threads are gone.
  case zombie(pid: Int32, command: String, reading: Reading)
  /// Another tracer (a debugger, strace) holds the process: `TracerPid` in `/proc/PID/status`.
  case traced(pid: Int32, tracer: Int32, tracerCommand: String?)
  /// The PID is imagelog's own process: a thread cannot stop its own process with ptrace.
  case ownProcess(pid: Int32)
  /// Any other system call failure.
  case system(pid: Int32, SystemError)

  /// The PID the error is about.
  public var pid: Int32 {
    switch self {
    case .noSuchProcess(let pid), .noImages(let pid), .ownProcess(let pid), .exited(let pid, _): pid
    case .permissionDenied(let pid, _, _), .ptraceRefused(let pid, _), .kernelThread(let pid, _, _): pid
    case .zombie(let pid, _, _), .traced(let pid, _, _), .system(let pid, _): pid
    }
  }

  /// One line naming the PID and what could not be read.
  public var description: String {
    switch self {
    case .noSuchProcess(let pid):
      "pid \(pid): no such process"
    case let .permissionDenied(pid, reading, hint):
      "pid \(pid): permission denied reading \(reading): \(hint)"
    case let .ptraceRefused(pid, hint):
      "pid \(pid): ptrace refused (PTRACE_SEIZE: permission denied): \(hint)"
    case .exited(let pid, .images):
      "pid \(pid): the process exited while its images were being read"
    case .exited(let pid, .threads):
      "pid \(pid): the process exited before its threads could be stopped"
    case .noImages(let pid):
      "pid \(pid): no images mapped: the process is starting (in exec) or exiting"
    case let .kernelThread(pid, command, .images):
      "pid \(pid): \(command) is a kernel thread: it has no images"
    case let .kernelThread(pid, command, .threads):
      "pid \(pid): \(command) is a kernel thread: it has no user-space stack to unwind"
    case let .zombie(pid, command, .images):
      "pid \(pid): \(command) is a zombie (exited, not yet reaped): it has no images"
    case let .zombie(pid, command, .threads):
      "pid \(pid): \(command) is a zombie (exited, not yet reaped): it has no threads to stop"
    case let .traced(pid, tracer, command):
      "pid \(pid): already traced by pid \(tracer)\(command.map { " (\($0))" } ?? ""): a process has one tracer "
        + "at a time; detach the debugger first"
    case .ownProcess(let pid):
      "pid \(pid): that is imagelog itself: a process cannot stop its own threads with ptrace"
    case let .system(pid, error):
      "pid \(pid): \(error)"
    }
  }
}
