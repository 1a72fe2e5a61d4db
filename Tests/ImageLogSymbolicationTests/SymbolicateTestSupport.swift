import Glibc
import Testing

/// What a child process did.
struct ProcessResult {
  var status: Int32
  var output: String
  var error: String
  /// The signal that ended the process, if any.
  var signal: Int32? { status & 0x7F != 0 ? status & 0x7F : nil }
}

/// Runs `arguments` (searched on PATH) with extra environment variables, capturing both outputs.
func runProcess(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
  var outPipe: [Int32] = [0, 0]
  var errPipe: [Int32] = [0, 0]
  guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw TestError("pipe failed") }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
  posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
  posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
  posix_spawn_file_actions_addclose(&actions, outPipe[0])
  posix_spawn_file_actions_addclose(&actions, errPipe[0])
  var env: [String] = []
  var index = 0
  while let entry = environ[index] { env.append(String(cString: entry)); index += 1 }
  env.removeAll { entry in environment.keys.contains { entry.hasPrefix($0 + "=") } }
  env += environment.map { "\($0.key)=\($0.value)" }
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  var envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
  defer { for p in argv { free(p) }; for p in envp { free(p) } }
  var pid: pid_t = 0
  let spawned = posix_spawnp(&pid, arguments[0], &actions, nil, &argv, &envp)
  close(outPipe[1]); close(errPipe[1])
  guard spawned == 0 else { close(outPipe[0]); close(errPipe[0]); throw TestError("cannot run \(arguments[0])") }
  // Read stderr on a thread-free loop: poll both pipes until both close.
  var out: [UInt8] = [], err: [UInt8] = []
  var fds = [pollfd(fd: outPipe[0], events: Int16(POLLIN), revents: 0), pollfd(fd: errPipe[0], events: Int16(POLLIN), revents: 0)]
  var open = 2
  var buffer = [UInt8](repeating: 0, count: 65536)
  while open > 0 {
    guard poll(&fds, 2, -1) >= 0 else { if errno == EINTR { continue }; break }
    for i in 0..<2 where fds[i].fd >= 0 && fds[i].revents != 0 {
      let n = buffer.withUnsafeMutableBytes { read(fds[i].fd, $0.baseAddress, $0.count) }
      if n > 0 { if i == 0 { out += buffer[0..<n] } else { err += buffer[0..<n] } } else { close(fds[i].fd); fds[i].fd = -1; open -= 1 }
    }
  }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  return ProcessResult(status: status, output: String(decoding: out, as: UTF8.self), error: String(decoding: err, as: UTF8.self))
}

struct TestError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// True when `tool` is on PATH.
func haveTool(_ tool: String) -> Bool {
  (try? runProcess(["sh", "-c", "command -v \(tool)"]).status) == 0
}

/// A new empty temporary folder.
func makeTemporaryDirectory() throws -> String {
  var template = Array("/tmp/imagelog-symbolicate-test-XXXXXX".utf8CString)
  guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { throw TestError("mkdtemp failed") }
  return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func writeFile(_ path: String, _ text: String) throws {
  guard let file = fopen(path, "w") else { throw TestError("cannot write \(path)") }
  fputs(text, file)
  fclose(file)
}

/// The package's root folder, from this file's path.
let packageRoot: String = {
  var path = #filePath
  for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) }
  return path
}()

/// Whole-file reads and writes for test inputs made by patching fixtures.
enum SymbolFileBytes {
  static func read(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw TestError("cannot read \(path)") }
    defer { fclose(file) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = fread(&buffer, 1, buffer.count, file)
      if count == 0 { break }
      result += buffer[0..<count]
    }
    return result
  }

  static func write(_ bytes: [UInt8], to path: String) throws {
    guard let file = fopen(path, "wb") else { throw TestError("cannot write \(path)") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw TestError("short write to \(path)") }
  }
}
