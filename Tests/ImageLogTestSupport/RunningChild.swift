import Glibc

/// A program a test starts and talks to while it runs: standard output on a pipe (read line by line),
/// standard error inherited or sent to `errorPath`. Signals are unblocked and at their defaults in the
/// child (test threads block some, and a spawned child inherits the mask), so SIGTERM and SIGINT reach
/// it as they would from a shell. Killed and reaped when dropped.
public final class RunningChild {
  public let pid: pid_t
  private let output: Int32
  private var reaped = false
  /// The raw `waitpid` status, once reaped.
  public private(set) var rawStatus: Int32 = 0

  /// Starts `arguments` (the first searched on PATH) with `environment` (the whole environment; the
  /// current one when nil).
  public init(_ arguments: [String], environment: [String]? = nil, errorPath: String? = nil) throws {
    guard let program = arguments.first else { throw TestSupportError("RunningChild: no program") }
    var ends: [Int32] = [0, 0]
    guard closeOnExecPipe(&ends) else { throw TestSupportError("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
    if let errorPath { posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
    var attributes = posix_spawnattr_t()
    initDefaultSignalAttributes(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    let argv = arguments.map { strdup($0) } + [nil]
    let envp = (environment ?? ImageLogTestSupport.environment(applying: [:])).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
    var child: pid_t = 0
    let status = posix_spawnp(&child, program, &actions, &attributes, argv, envp)
    close(ends[1])
    guard status == 0 else {
      close(ends[0])
      throw TestSupportError("cannot start \(program): \(String(cString: strerror(status)))")
    }
    pid = child
    output = ends[0]
  }

  /// Reads standard output up to the next newline (not included); nil at end of file.
  public func readLine() -> String? {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while true {
      let count = read(output, &byte, 1)
      if count < 0 && errno == EINTR { continue }
      guard count == 1 else { break }
      if byte == 0x0A { return String(decoding: bytes, as: UTF8.self) }
      bytes.append(byte)
    }
    return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
  }

  /// Every remaining line of standard output, until the program closes it.
  public func readAll() -> [String] {
    var lines: [String] = []
    while let line = readLine() { lines.append(line) }
    return lines
  }

  /// Reads lines until one equals `line` (the program's "I am set up" signal).
  public func wait(for line: String) throws {
    while let next = readLine() { if next == line { return } }
    throw TestSupportError("program \(pid) ended before printing \(line)")
  }

  /// Sends `number` unless the program has been reaped.
  public func signal(_ number: Int32) { if !reaped { kill(pid, number) } }

  /// Kills (SIGKILL unless told otherwise) and reaps the program.
  public func stop(signal number: Int32 = SIGKILL) {
    guard !reaped else { return }
    kill(pid, number)
    reap()
  }

  /// Waits for the program to exit by itself.
  public func reap() {
    guard !reaped else { return }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    rawStatus = status
    reaped = true
    close(output)
  }

  deinit { stop() }
}
