internal import CImageLog
internal import Glibc

/// Runs a program with the rtld-audit module in `LD_AUDIT` and hands over every record it writes:
/// each image the dynamic loader adds or removes, from the executable, the loader and the vDSO on,
/// before `main` runs. The Linux counterpart of `DYLD_PRINT_LIBRARIES`.
///
/// The module writes to a socket whose descriptor it gets in `IMAGELOG_AUDIT_FD`, so the program's
/// standard streams are untouched. It takes itself out of `LD_AUDIT` (and the descriptor is
/// close-on-exec), so programs the command executes run without it. A child that forks without
/// executing keeps the module; its records carry its own PID.
public enum AuditedLaunch {
  /// How the program ended, as `waitpid(2)` says.
  public enum Termination: Sendable, Equatable {
    /// `exit(status)` or a return from `main`.
    case exited(Int32)
    /// Killed by a signal (`coreDumped` when it left a core).
    case signaled(Int32, coreDumped: Bool)
  }

  /// Why the program could not be run. `description` is one line.
  public enum LaunchError: Error, Equatable, Sendable, CustomStringConvertible {
    case moduleNotFound(searched: [String])
    case commandNotFound(String)
    case cannotStart(String, errno: Int32)
    case system(operation: String, errno: Int32)

    public var description: String {
      switch self {
      case .moduleNotFound(let searched):
        "cannot find the audit module libImageLogAudit.so (looked at \(searched.joined(separator: ", "))); "
          + "build it with 'swift build --product ImageLogAudit' or install with 'make install'"
      case .commandNotFound(let command): "\(command): command not found"
      case let .cannotStart(command, code): "\(command): cannot run: \(String(cString: strerror(code)))"
      case let .system(operation, code): "\(operation): \(String(cString: strerror(code)))"
      }
    }
  }

  /// The module's file name, as SwiftPM builds the `ImageLogAudit` product and `make install` copies it.
  public static let moduleFileName = "libImageLogAudit.so"

  /// Where the module is looked for: next to `executable` (`.build/debug/`), then in
  /// `PREFIX/lib/imagelog/` for an executable in `PREFIX/bin/`. Symbolic links are resolved first.
  public static func moduleCandidates(forExecutable executable: String) -> [String] {
    // The kernel's link is already the resolved path: one readlink instead of realpath's walk.
    let real = (executable == "/proc/self/exe" ? readLink(executable) : nil) ?? realPath(executable) ?? executable
    guard let slash = real.lastIndex(of: "/") else { return [moduleFileName] }
    let directory = String(real[..<slash])
    var candidates = ["\(directory)/\(moduleFileName)"]
    if let parentSlash = directory.lastIndex(of: "/") {
      candidates.append("\(directory[..<parentSlash])/lib/imagelog/\(moduleFileName)")
    }
    return candidates
  }

  /// The first of `moduleCandidates` that exists, as an absolute path.
  public static func findModule(forExecutable executable: String) throws(LaunchError) -> String {
    let candidates = moduleCandidates(forExecutable: executable)
    for candidate in candidates where access(candidate, R_OK) == 0 {
      return realPath(candidate) ?? candidate
    }
    throw .moduleNotFound(searched: candidates)
  }

  /// The file `command` runs: itself when it contains a `/`, else the first executable on `PATH`.
  public static func resolve(_ command: String) -> String? {
    if command.contains("/") { return access(command, X_OK) == 0 ? command : nil }
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":", omittingEmptySubsequences: false) {
      let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
      var info = stat()
      if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
        return candidate
      }
    }
    return nil
  }

  /// True when running `path` changes the user or group ID (set-user-ID or set-group-ID to someone
  /// else): the kernel sets `AT_SECURE`, and the loader then ignores `LD_AUDIT`.
  public static func isSecureExecution(_ path: String) -> Bool {
    var info = stat()
    guard stat(path, &info) == 0 else { return false }
    return (info.st_mode & S_ISUID != 0 && info.st_uid != getuid())
      || (info.st_mode & S_ISGID != 0 && info.st_gid != getgid())
  }

  /// Starts `arguments` (the first is searched on `PATH`) with the module at `module`, calls
  /// `onRecord` for every record of the program's own PID (in the order written) and `afterRecords`
  /// after each batch of them (a caller that buffers its output writes it there), and returns how
  /// the program ended. While it runs, SIGINT and SIGQUIT are left to the program, and SIGTERM and
  /// SIGHUP sent to this process are passed on to it.
  ///
  /// With `followingExec`, the module stays in the environment and its descriptor open across
  /// `exec`, so programs the command runs (a wrapper script's real program, a shell's commands)
  /// report too, each with its own PID, and every record is delivered. The wait still ends when the
  /// command itself exits.
  public static func run(_ arguments: [String], module: String, followingExec: Bool = false,
                         onRecord: (AuditRecord) -> Void,
                         afterRecords: () -> Void = {}) throws(LaunchError) -> Termination {
    guard let command = arguments.first else { throw .commandNotFound("") }
    guard let executable = resolve(command) else { throw .commandNotFound(command) }
    // A socket pair rather than a pipe: the module sends with MSG_NOSIGNAL, so if imagelog dies
    // (say its output pipe closed) the program gets EPIPE, not a SIGPIPE that would kill it.
    var readEnd: Int32 = -1
    var writeEnd: Int32 = -1
    guard il_record_socket(&readEnd, &writeEnd) == 0 else { throw .system(operation: "socketpair", errno: errno) }

    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    let startNanoseconds = UInt64(start.tv_sec) * 1_000_000_000 + UInt64(start.tv_nsec)  // a monotonic clock is non-negative
    let existingAudit = getenv("LD_AUDIT").map { String(cString: $0) }
    let audit = existingAudit.map { $0.isEmpty ? module : "\(module):\($0)" } ?? module
    var added = ["LD_AUDIT=\(audit)", "IMAGELOG_AUDIT_FD=\(writeEnd)", "IMAGELOG_AUDIT_START_NS=\(startNanoseconds)"]
    added.append(followingExec ? "IMAGELOG_AUDIT_FOLLOW=1" : "IMAGELOG_AUDIT_MODULE=\(module)")
    // The ring the program's own process writes its records into (CImageLogRing.h): no system call
    // per batch, and what it wrote is here even when it crashes or calls _exit. Without it (no
    // memfd), everything goes through the socket.
    var ringDescriptor: Int32 = -1
    let ring = il_ring_create(1 << 20, &ringDescriptor)
    defer { il_ring_destroy(ring) }
    if ring != nil { added.append("IMAGELOG_AUDIT_RING=\(ringDescriptor)") }

    // Arguments and added variables as NUL-terminated strings one after another; the C side builds
    // the pointer tables and passes the rest of our environment through.
    func joined(_ strings: [String]) -> [UInt8] {
      var bytes: [UInt8] = []
      for string in strings { bytes += string.utf8; bytes.append(0) }
      return bytes
    }
    let argumentBytes = joined(arguments)
    let addedBytes = joined(added)
    var child: Int32 = 0
    let spawned = argumentBytes.withUnsafeBufferPointer { argumentPointer in
      addedBytes.withUnsafeBufferPointer { addedPointer in
        executable.withCString { path in
          il_spawn_audited(&child, path, argumentPointer.baseAddress, arguments.count, addedPointer.baseAddress, added.count)
        }
      }
    }
    close(writeEnd)
    if ringDescriptor >= 0 { close(ringDescriptor) }  // the module maps it; the mapping here stays
    guard spawned == 0 else {
      close(readEnd)
      throw .cannotStart(command, errno: spawned)
    }
    il_forward_termination_signals(child)
    defer { close(readEnd) }

    // The ring and the socket are two streams: each keeps its own partial last line (a read from
    // the ring can end inside a record while the socket delivers a doorbell or a fork's records).
    var pendingFromRing: [UInt8] = []
    var pendingFromSocket: [UInt8] = []
    func deliver(_ bytes: UnsafeRawBufferPointer, after pending: inout [UInt8]) {
      pending.append(contentsOf: bytes)
      // Whole lines go to the parser as bytes; a partial last line waits for the next read.
      let consumed = pending.withUnsafeBufferPointer { all -> Int in
        var lineStart = 0
        for index in all.indices where all[index] == 0x0A {
          if index > lineStart, let record = AuditRecord(utf8: UnsafeBufferPointer(rebasing: all[lineStart..<index])),
             followingExec || record.pid == child {
            onRecord(record)
          }
          lineStart = index + 1
        }
        return lineStart
      }
      pending.removeFirst(consumed)
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    let exitNotifier = il_pidfd_open(child)
    defer { if exitNotifier >= 0 { close(exitNotifier) } }
    // Reads never block: once the program has exited, a forked child that still holds the socket
    // open must not hold up the end.
    _ = fcntl(readEnd, F_SETFL, O_NONBLOCK)
    var socketOpen = true
    var exited = false
    /// Takes every record waiting in the ring and on the socket; true when there were any.
    func drain() -> Bool {
      var any = false
      if let ring {
        while true {
          let count = buffer.withUnsafeMutableBytes { il_ring_read(ring, $0.baseAddress, $0.count) }
          if count == 0 { break }
          buffer.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[..<count]), after: &pendingFromRing) }
          any = true
        }
      }
      while socketOpen {
        let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
        if count > 0 {
          buffer.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[..<count]), after: &pendingFromSocket) }
          any = true
          continue
        }
        if count < 0 && errno == EINTR { continue }
        if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { socketOpen = false }
        break
      }
      if any { afterRecords() }
      return any
    }
    while true {
      let any = drain()
      // Without a pidfd (Linux before 5.3) the socket's end is the program's end.
      if exited || (exitNotifier < 0 && !socketOpen) { break }
      if any {
        // Let records gather for a millisecond before the next look: waking for each dlopen would
        // take the CPU from the program at every one. The wait is on the exit notifier, so the
        // program's exit ends it at once.
        if exitNotifier >= 0 {
          if il_wait_readable(-1, exitNotifier, 1) > 0 { exited = true }
        } else {
          var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
          nanosleep(&pause, nil)
        }
        continue
      }
      // Nothing waiting: sleep until the module rings (a byte on the socket at the end of a batch,
      // sent only because the ring says the reader sleeps), a forked child writes, or the exit.
      if let ring, il_ring_prepare_to_sleep(ring) != 0 { continue }
      let ready = il_wait_readable(socketOpen ? readEnd : -1, exitNotifier, -1)
      if let ring { il_ring_awake(ring) }
      if ready < 0 && errno != EINTR { exited = true }  // cannot wait: take what is there and stop
      if ready > 0 && ready & 2 != 0 { exited = true }
    }
    var status: Int32 = 0
    while waitpid(child, &status, 0) < 0 {
      guard errno == EINTR else { throw .system(operation: "waitpid", errno: errno) }
    }
    // WIFEXITED / WTERMSIG / WCOREDUMP, spelled out: they are macros.
    let signal = status & 0x7f
    return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal, coreDumped: status & 0x80 != 0)
  }

  /// The target of the symbolic link at `path`.
  static func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink(path, &buffer, 4096)
    guard count > 0, count < 4096 else { return nil }
    return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)  // not terminated
  }

  static func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }
}
