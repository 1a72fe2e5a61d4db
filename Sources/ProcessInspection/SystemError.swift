internal import Glibc

/// A system call that failed: what was being done and the `errno` it left. The one system error of
/// ImageLog: every error type that can meet one carries it in its `system` case (or, for
/// `CrashReporter.InstallError`, as its reason), beside its own domain cases.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
  /// What was being done: "cannot open", "cannot map", "socketpair"...
  public var operation: String
  /// The `errno` value (`<errno.h>`).
  public var errno: Int32

  package init(_ operation: String, errno: Int32) {
    self.operation = operation
    self.errno = errno
  }

  /// `operation` with the calling thread's current `errno`: call it right after the failed call.
  package static func current(_ operation: String) -> SystemError {
    SystemError(operation, errno: Glibc.errno)
  }

  /// `operation: strerror(errno)`, as `perror(3)` writes it.
  public var description: String { "\(operation): \(reason)" }

  /// `strerror(errno)` alone.
  public var reason: String { String(cString: strerror(errno)) }
}
