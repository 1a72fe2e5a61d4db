internal import Glibc

/// Why another process's images could not be read. `description` is one line that names the PID.
public enum ProcessImagesError: Error, Equatable, Sendable, CustomStringConvertible {
  /// `/proc/PID` does not exist (`ESRCH`).
  case noSuchProcess(pid: Int32)
  /// The kernel refused to show the process's mappings or memory (`EACCES`/`EPERM`); `hint` says
  /// what is missing (a uid, capabilities the target holds, `CAP_SYS_PTRACE`), found when refused.
  case permissionDenied(pid: Int32, reading: String, hint: String)
  /// The process went away between two reads.
  case exited(pid: Int32)
  /// The maps list no image: the process is starting (inside `execve`) or exiting.
  case noImages(pid: Int32)
  /// A kernel thread: no user address space, so no images.
  case kernelThread(pid: Int32, command: String)
  /// A zombie: it exited and its parent has not reaped it, so its address space is gone.
  case zombie(pid: Int32, command: String)
  /// Any other system call failure.
  case system(pid: Int32, SystemError)

  /// The PID the error is about.
  public var pid: Int32 {
    switch self {
    case .noSuchProcess(let pid), .exited(let pid), .noImages(let pid): pid
    case .permissionDenied(let pid, _, _), .kernelThread(let pid, _), .zombie(let pid, _): pid
    case .system(let pid, _): pid
    }
  }

  public var description: String {
    switch self {
    case .noSuchProcess(let pid):
      "pid \(pid): no such process"
    case let .permissionDenied(pid, reading, hint):
      "pid \(pid): permission denied reading \(reading): \(hint)"
    case .exited(let pid):
      "pid \(pid): the process exited while its images were being read"
    case .noImages(let pid):
      "pid \(pid): no images mapped: the process is starting (in exec) or exiting"
    case let .kernelThread(pid, command):
      "pid \(pid): \(command) is a kernel thread: it has no images"
    case let .zombie(pid, command):
      "pid \(pid): \(command) is a zombie (exited, not yet reaped): it has no images"
    case let .system(pid, error):
      "pid \(pid): \(error)"
    }
  }
}
