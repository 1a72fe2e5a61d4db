import Glibc

/// How a child process of a test ended, and what it wrote.
public struct ChildResult: Sendable {
  /// The child's process id (reaped: for matching it in what the child wrote).
  public var pid: pid_t
  /// The raw `waitpid` status.
  public var status: Int32
  /// Standard output, decoded as UTF-8.
  public var output: String
  /// Standard error, decoded as UTF-8.
  public var error: String
  /// True when the child was still running after the timeout and was killed (a hang guard).
  public var timedOut: Bool

  /// The exit code when the child exited normally (WEXITSTATUS), else nil.
  public var exitCode: Int32? { status & 0x7F == 0 ? (status >> 8) & 0xFF : nil }
  /// The signal that ended the child (WTERMSIG), else nil.
  public var signal: Int32? { status & 0x7F != 0 && status & 0x7F != 0x7F ? status & 0x7F : nil }
}

/// A failure of the test machinery itself (not of the code under test).
public struct TestSupportError: Error, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}

/// The current environment with `changes` applied: a key in `changes` replaces the variable of that name.
public func environment(applying changes: [String: String]) -> [String] {
  var changes = changes
  // imagelog keeps a symbol cache under XDG_CACHE_HOME: the children of a test run get a folder of the
  // run's own, so no test reads or fills the user's cache (a test about the cache passes its own).
  if changes["XDG_CACHE_HOME"] == nil, let folder = testSymbolCacheHome { changes["XDG_CACHE_HOME"] = folder }
  // A test process started as a child keeps its temporary folders in this one's (TestFiles.swift).
  if changes[temporaryParentVariable] == nil, case .success(let parent) = temporaryParent {
    changes[temporaryParentVariable] = parent.path
  }
  var variables: [String] = []
  var index = 0
  while let entry = environ[index] {
    let text = String(cString: entry)
    let key = text.split(separator: "=", maxSplits: 1).first.map(String.init) ?? text
    if changes[key] == nil { variables.append(text) }
    index += 1
  }
  return variables + changes.map { "\($0.key)=\($0.value)" }.sorted()
}

/// A temporary folder made once per test process for its children's XDG_CACHE_HOME (nil if it cannot be made).
let testSymbolCacheHome: String? = try? makeTemporaryDirectory("imagelog-test-cache")

/// Runs `arguments` (the first searched on PATH) to completion with standard input from /dev/null
/// (or `input`), both outputs captured, the environment changed by `environment` (or replaced whole by
/// `replacingEnvironment`). The child starts with no signal blocked and every signal at its default:
/// test threads block some, and a spawned child inherits the spawning thread's mask. A child still
/// running after `timeoutSeconds` is killed and reported with `timedOut` (a hang guard, not a timing
/// assertion).
public func runChild(_ arguments: [String], environment changes: [String: String] = [:],
                     replacingEnvironment: [String]? = nil, input: String? = nil,
                     timeoutSeconds: Int = 300) throws -> ChildResult {
  guard let program = arguments.first else { throw TestSupportError("runChild: no program") }
  var outPipe: [Int32] = [0, 0], errPipe: [Int32] = [0, 0], inPipe: [Int32] = [-1, -1]
  guard closeOnExecPipe(&outPipe), closeOnExecPipe(&errPipe) else { throw TestSupportError("pipe failed") }
  if input != nil, !closeOnExecPipe(&inPipe) { throw TestSupportError("pipe failed") }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  if input != nil {
    posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
  }
  posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
  posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
  var attributes = posix_spawnattr_t()
  initDefaultSignalAttributes(&attributes)
  defer { posix_spawnattr_destroy(&attributes) }
  let variables = replacingEnvironment ?? environment(applying: changes)
  let argv = arguments.map { strdup($0) } + [nil]
  let envp = variables.map { strdup($0) } + [nil]
  defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
  var pid: pid_t = 0
  let spawned = posix_spawnp(&pid, program, &actions, &attributes, argv, envp)
  close(outPipe[1]); close(errPipe[1])
  if input != nil { close(inPipe[0]) }
  guard spawned == 0 else {
    close(outPipe[0]); close(errPipe[0])
    if input != nil { close(inPipe[1]) }
    throw TestSupportError("cannot run \(program): \(String(cString: strerror(spawned)))")
  }
  if let input {
    // Written before reading: inputs in tests are small (a pipe holds 64 KiB); a child that exits
    // early gets EPIPE here, not a signal.
    let previous = signal(SIGPIPE, SIG_IGN)
    var bytes = Array(input.utf8)[...]
    while !bytes.isEmpty {
      let written = bytes.withUnsafeBytes { write(inPipe[1], $0.baseAddress, $0.count) }
      if written < 0 && errno == EINTR { continue }
      guard written > 0 else { break }
      bytes = bytes.dropFirst(written)
    }
    close(inPipe[1])
    signal(SIGPIPE, previous)
  }
  var out: [UInt8] = [], err: [UInt8] = []
  var fds = [pollfd(fd: outPipe[0], events: Int16(POLLIN), revents: 0),
             pollfd(fd: errPipe[0], events: Int16(POLLIN), revents: 0)]
  var open = 2
  var timedOut = false
  var buffer = [UInt8](repeating: 0, count: 65536)
  let deadline = monotonicSeconds() + Double(timeoutSeconds)
  while open > 0 {
    let left = deadline - monotonicSeconds()
    if left <= 0 { timedOut = true; kill(pid, SIGKILL); break }
    let ready = poll(&fds, 2, Int32(min(left, 1) * 1000) + 1)
    if ready < 0 { if errno == EINTR { continue }; break }
    for i in 0..<2 where fds[i].fd >= 0 && fds[i].revents != 0 {
      let n = buffer.withUnsafeMutableBytes { read(fds[i].fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n > 0 {
        if i == 0 { out += buffer[0..<n] } else { err += buffer[0..<n] }
      } else {
        close(fds[i].fd); fds[i].fd = -1; open -= 1
      }
    }
  }
  for entry in fds where entry.fd >= 0 { close(entry.fd) }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  return ChildResult(pid: pid, status: status, output: String(decoding: out, as: UTF8.self),
                     error: String(decoding: err, as: UTF8.self), timedOut: timedOut)
}

/// Spawn attributes under which the child starts with no signal blocked and every signal at its
/// default: test threads block some, and a spawned child inherits the spawning thread's mask.
func initDefaultSignalAttributes(_ attributes: inout posix_spawnattr_t) {
  posix_spawnattr_init(&attributes)
  var none = sigset_t(), all = sigset_t()
  sigemptyset(&none)
  sigfillset(&all)
  posix_spawnattr_setsigmask(&attributes, &none)
  posix_spawnattr_setsigdefault(&attributes, &all)
  posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
}

/// A pipe whose ends close on exec, so children that tests start at the same time on other threads
/// do not inherit (and hold open) each other's pipes. (pipe2 is not visible to Swift without _GNU_SOURCE.)
func closeOnExecPipe(_ ends: inout [Int32]) -> Bool {
  guard pipe(&ends) == 0 else { return false }
  _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
  _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
  return true
}

func monotonicSeconds() -> Double {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Runs `arguments` (searched on PATH) to completion, as `runChild`, and returns its status (128 + the
/// signal when one ended it), standard output and standard error.
public func runTool(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
  let result = try runChild(arguments)
  return (result.exitCode ?? 128 + (result.signal ?? 0), result.output, result.error)
}
