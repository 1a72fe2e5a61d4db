// Support for the process command tests (pid, watch, run): starting programs, running the built
// imagelog, building the C test programs. Names are prefixed so they stay out of other suites' way.
import Glibc
import Testing

/// The built `imagelog`, next to this test bundle in .build/<triple>/debug.
let processTestImagelog: String = {
  var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
  let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
  let me = String(decoding: buffer[0..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  return String(me[..<(me.lastIndex(of: "/") ?? me.startIndex)]) + "/imagelog"
}()

struct ProcessTestError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// What a finished program did: exit status or terminating signal, standard output and error.
struct ProcessTestResult {
  var rawStatus: Int32
  var output: String
  var error: String
  var exitStatus: Int32? { rawStatus & 0x7f == 0 ? (rawStatus >> 8) & 0xff : nil }
  var signal: Int32? { rawStatus & 0x7f == 0 ? nil : rawStatus & 0x7f }
}

/// A started program with standard output (and optionally standard error) on pipes; killed and
/// reaped when dropped. Signals are reset to their defaults and unblocked in the child (test threads
/// block them, and a spawned child would inherit the mask).
final class ProcessTestProgram {
  let pid: pid_t
  private let output: Int32
  private var reaped = false
  private(set) var rawStatus: Int32 = 0

  init(_ arguments: [String], environment: [String]? = nil, errorPath: String? = nil) throws {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { throw ProcessTestError("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
    posix_spawn_file_actions_addclose(&actions, ends[0])
    posix_spawn_file_actions_addclose(&actions, ends[1])
    if let errorPath { posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var envp: [UnsafeMutablePointer<CChar>?] = (environment ?? currentEnvironment()).map { strdup($0) } + [nil]
    defer { for pointer in envp { free(pointer) } }
    var child: pid_t = 0
    let status = posix_spawnp(&child, arguments[0], &actions, &attributes, &argv, &envp)
    close(ends[1])
    guard status == 0 else { close(ends[0]); throw ProcessTestError("cannot start \(arguments[0]): \(status)") }
    pid = child
    output = ends[0]
  }

  func readLine() -> String? {
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

  func readAll() -> [String] {
    var lines: [String] = []
    while let line = readLine() { lines.append(line) }
    return lines
  }

  func wait(for line: String) throws {
    while let next = readLine() { if next == line { return } }
    throw ProcessTestError("program \(pid) ended before printing \(line)")
  }

  func signal(_ number: Int32) { if !reaped { kill(pid, number) } }

  func reap() {
    guard !reaped else { return }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    rawStatus = status
    reaped = true
    close(output)
  }

  deinit {
    if !reaped { kill(pid, SIGKILL); reap() }
  }
}

func currentEnvironment() -> [String] {
  var result: [String] = []
  var entry = environ
  while let pointer = entry.pointee { result.append(String(cString: pointer)); entry += 1 }
  return result
}

/// Runs a program to completion: standard output through a pipe, standard error through a file.
func runProcessTest(_ arguments: [String], environment: [String]? = nil) throws -> ProcessTestResult {
  let errorPath = "/tmp/imagelog-process-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).err"
  defer { unlink(errorPath) }
  let program = try ProcessTestProgram(arguments, environment: environment, errorPath: errorPath)
  let lines = program.readAll()
  program.reap()
  return ProcessTestResult(rawStatus: program.rawStatus, output: lines.map { $0 + "\n" }.joined(),
                           error: processTestReadFile(errorPath))
}

func processTestReadFile(_ path: String) -> String {
  guard let file = fopen(path, "r") else { return "" }
  defer { fclose(file) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = fread(&buffer, 1, buffer.count, file)
    if count <= 0 { break }
    bytes += buffer[0..<count]
  }
  return String(decoding: bytes, as: UTF8.self)
}

func processTestToolExists(_ tool: String) -> Bool {
  (try? runProcessTest(["sh", "-c", "command -v \(tool) >/dev/null"]).exitStatus) == 0
}

/// The repository root, from this file's path (Tests/imagelogTests/RunSupport.swift).
func processTestRoot(_ file: String = #filePath) -> String {
  var parts = file.split(separator: "/", omittingEmptySubsequences: false)
  parts.removeLast(3)
  return parts.joined(separator: "/")
}

/// A temporary directory with the dlopen test program (`loop`) and two tiny libraries
/// (`liba.so`, `libb.so`, each with a build-id and a constructor). Removed by `remove()`.
struct ProcessTestPrograms {
  let directory: String
  var loop: String { directory + "/loop" }
  var libraryA: String { directory + "/liba.so" }
  var libraryB: String { directory + "/libb.so" }

  init() throws {
    var template = Array("/tmp/imagelog-process-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
      throw ProcessTestError("mkdtemp failed")
    }
    directory = String(cString: made)
    let source = processTestRoot() + "/Tests/Programs/process-dlopen-loop.c"
    let script = """
      set -e
      cd '\(directory)'
      cc -O1 -o loop '\(source)' -ldl
      printf 'static int v; __attribute__((constructor)) static void init(void) { v = 1; } int a(void) { return v; }\\n' > a.c
      printf 'static int v; __attribute__((constructor)) static void init(void) { v = 2; } int b(void) { return v; }\\n' > b.c
      cc -shared -fPIC -Wl,--build-id -o liba.so a.c
      cc -shared -fPIC -Wl,--build-id -o libb.so b.c
      """
    let built = try runProcessTest(["sh", "-c", script])
    guard built.exitStatus == 0 else { throw ProcessTestError("building test programs failed: \(built.error)") }
  }

  func remove() { _ = try? runProcessTest(["rm", "-rf", directory]) }
}

let processTestHaveCC = processTestToolExists("cc")

/// Where `needle` first occurs in `text` (no Foundation here).
func processTestRange(of needle: String, in text: Substring) -> Range<String.Index>? {
  var index = text.startIndex
  while index < text.endIndex {
    if text[index...].hasPrefix(needle) {
      return index..<text.utf8.index(index, offsetBy: needle.utf8.count)
    }
    index = text.index(after: index)
  }
  return nil
}
