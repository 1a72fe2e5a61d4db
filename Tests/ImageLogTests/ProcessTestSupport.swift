import Glibc
import Testing

/// A program the process tests start, talk to through its standard output, and always reap.
final class ProcessTestChild {
  let pid: pid_t
  private let output: Int32
  private var reaped = false
  private(set) var exitStatus: Int32 = 0

  /// Starts `arguments` (searched on PATH) with standard output on a pipe; standard error inherited.
  init(_ arguments: [String], environment: [String]? = nil) throws {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { throw ProcessTestFailure("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
    posix_spawn_file_actions_addclose(&actions, ends[0])
    posix_spawn_file_actions_addclose(&actions, ends[1])
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
    defer { for pointer in envp ?? [] { free(pointer) } }
    // Test threads run with signals blocked, and a spawned child inherits the mask: reset it and
    // the dispositions so SIGTERM/SIGINT reach the child as they would from a shell.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var defaults = sigset_t()
    sigfillset(&defaults)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var child: pid_t = 0
    let status = envp == nil
      ? posix_spawnp(&child, arguments[0], &actions, &attributes, &argv, environ)
      : posix_spawnp(&child, arguments[0], &actions, &attributes, &argv, &envp!)
    close(ends[1])
    guard status == 0 else { close(ends[0]); throw ProcessTestFailure("cannot start \(arguments[0]): \(status)") }
    pid = child
    output = ends[0]
  }

  /// Reads standard output up to and including the next newline; nil at end of file.
  func readLine() -> String? {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while read(output, &byte, 1) == 1 {
      if byte == 0x0A { return String(decoding: bytes, as: UTF8.self) }
      bytes.append(byte)
    }
    return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
  }

  /// Reads lines until one equals `line` (the child's "I am set up" signal).
  func wait(for line: String) throws {
    while let next = readLine() { if next == line { return } }
    throw ProcessTestFailure("child \(pid) ended before printing \(line)")
  }

  /// Kills (SIGKILL unless told otherwise) and reaps the child.
  func stop(signal: Int32 = SIGKILL) {
    guard !reaped else { return }
    kill(pid, signal)
    reap()
  }

  /// Waits for the child to exit by itself.
  func reap() {
    guard !reaped else { return }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    exitStatus = status
    reaped = true
    close(output)
  }

  deinit { stop() }
}

struct ProcessTestFailure: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// Runs a command to completion and returns (status, stdout, stderr) — stderr through a temp file.
func processRunTool(_ arguments: [String]) throws -> (status: Int32, output: String) {
  let child = try ProcessTestChild(arguments)
  var lines: [String] = []
  while let line = child.readLine() { lines.append(line) }
  child.reap()
  return (child.exitStatus, lines.joined(separator: "\n"))
}

/// True when `tool` is on PATH.
func processToolExists(_ tool: String) -> Bool {
  (try? processRunTool(["sh", "-c", "command -v \(tool) >/dev/null"]).status) == 0
}

/// A fresh directory under /tmp, removed by the caller with `processRemoveTree`.
func processTemporaryDirectory(_ prefix: String) throws -> String {
  var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
  guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
    throw ProcessTestFailure("mkdtemp failed")
  }
  return String(cString: made)
}

func processRemoveTree(_ path: String) { _ = try? processRunTool(["rm", "-rf", path]) }

/// The repository root, from this file's path.
func processRepositoryRoot(_ file: String = #filePath) -> String {
  var parts = file.split(separator: "/", omittingEmptySubsequences: false)
  parts.removeLast(3)  // Tests/ImageLogTests/File.swift
  return parts.joined(separator: "/")
}

/// One module line of `eu-unstrip -n -p PID`: start, size, build-id (nil for "-"), build-id address.
struct ProcessUnstripModule: Hashable, CustomStringConvertible {
  var start: UInt64
  var size: UInt64
  var buildID: String?
  var buildIDAddress: UInt64?
  var name: String

  var description: String {
    "0x\(String(start, radix: 16))+0x\(String(size, radix: 16)) \(buildID ?? "-")\(buildIDAddress.map { "@0x" + String($0, radix: 16) } ?? "") \(name)"
  }

  static func parse(_ text: String) -> [ProcessUnstripModule] {
    text.split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ", maxSplits: 4)
      guard fields.count >= 5, let plus = fields[0].firstIndex(of: "+") else { return nil }
      guard let start = UInt64(fields[0][fields[0].index(fields[0].startIndex, offsetBy: 2)..<plus], radix: 16),
            let size = UInt64(fields[0][fields[0].index(plus, offsetBy: 3)...], radix: 16) else { return nil }
      var buildID: String?
      var address: UInt64?
      if fields[1] != "-" {
        let parts = fields[1].split(separator: "@")
        buildID = String(parts[0])
        if parts.count == 2 { address = UInt64(parts[1].dropFirst(2), radix: 16) }
      }
      return ProcessUnstripModule(start: start, size: size, buildID: buildID, buildIDAddress: address, name: String(fields[4]))
    }
  }
}
