import Glibc
import Synchronization
import Testing

/// Runs `arguments` (searched on PATH) and returns its status, standard output and standard error.
func runTool(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
  var out: [Int32] = [0, 0]
  var err: [Int32] = [0, 0]
  guard pipe(&out) == 0, pipe(&err) == 0 else { throw CoreTestError("pipe failed") }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_adddup2(&actions, out[1], 1)
  posix_spawn_file_actions_adddup2(&actions, err[1], 2)
  for fd in [out[0], out[1], err[0], err[1]] { posix_spawn_file_actions_addclose(&actions, fd) }
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { for pointer in argv { free(pointer) } }
  var pid: pid_t = 0
  let spawned = posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ)
  close(out[1])
  close(err[1])
  defer { close(out[0]); close(err[0]) }
  guard spawned == 0 else { throw CoreTestError("cannot run \(arguments[0])") }
  // Read both pipes without blocking one on the other: poll until both close.
  var output: [UInt8] = []
  var errors: [UInt8] = []
  var open = [true, true]
  var buffer = [UInt8](repeating: 0, count: 65536)
  while open[0] || open[1] {
    var fds = [pollfd(fd: open[0] ? out[0] : -1, events: Int16(POLLIN), revents: 0),
               pollfd(fd: open[1] ? err[0] : -1, events: Int16(POLLIN), revents: 0)]
    if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { break } }
    for index in 0..<2 where open[index] && fds[index].revents != 0 {
      let count = buffer.withUnsafeMutableBytes { read(fds[index].fd, $0.baseAddress, $0.count) }
      if count <= 0 { open[index] = false } else if index == 0 { output += buffer[0..<count] } else { errors += buffer[0..<count] }
    }
  }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
  return (exitStatus, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self))
}

/// True when `tool` is on PATH.
func haveTool(_ tool: String) -> Bool {
  (try? runTool(["sh", "-c", "command -v \(tool)"]).status) == 0
}

struct CoreTestError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// The repository root, from this file's path (no Bundle, no Foundation).
let repositoryRoot: String = {
  var path = #filePath
  for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
  return path
}()

/// A fresh directory under /tmp, removed when the test process exits.
func makeTemporaryDirectory(_ prefix: String) throws -> String {
  var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
  guard let result = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
    throw CoreTestError("mkdtemp failed")
  }
  let directory = String(cString: result)
  let first = temporaryDirectories.withLock { list in
    list.append(directory)
    return list.count == 1
  }
  if first { atexit { removeTemporaryDirectories() } }
  return directory
}

private let temporaryDirectories = Mutex<[String]>([])

/// Libraries may still be mapped at exit: unlinking their files is harmless on Linux.
private func removeTemporaryDirectories() {
  for directory in temporaryDirectories.withLock({ $0 }) where directory.hasPrefix("/tmp/imagelog-") {
    _ = try? runTool(["rm", "-rf", directory])
  }
}

/// The canonical path of `path` (symlinks resolved), or `path` itself when it cannot be resolved.
func canonicalPath(_ path: String) -> String {
  guard let resolved = realpath(path, nil) else { return path }
  defer { free(resolved) }
  return String(cString: resolved)
}

/// Reads a whole file (small text files under /proc included).
func readTextFile(_ path: String) throws -> String {
  let fd = open(path, O_RDONLY)
  guard fd >= 0 else { throw CoreTestError("cannot open \(path)") }
  defer { close(fd) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if count <= 0 { break }
    bytes += buffer[0..<count]
  }
  return String(decoding: bytes, as: UTF8.self)
}

/// Parses lowercase or uppercase hex (without 0x).
func parseHex(_ text: some StringProtocol) -> UInt64? {
  UInt64(text.hasPrefix("0x") ? text.dropFirst(2) : text[...], radix: 16)
}

/// The small C libraries the observer tests load, built once per test run with cc:
/// `dir/libcore_first.so` (RUNPATH `$ORIGIN/deps`), `dir/deps/libcore_second.so`,
/// `dir/libcore_reenter.so` (RUNPATH `$ORIGIN/deps`, dlopens libcore_second.so from its constructor),
/// `dir/deps/libcore_ctorhook.so` and `dir/libcore_ctorcall.so` (its constructor calls the hook).
struct CoreTestLibraries: Sendable {
  var directory: String
  var first: String { directory + "/libcore_first.so" }
  var second: String { directory + "/deps/libcore_second.so" }
  var reenter: String { directory + "/libcore_reenter.so" }
  var ctorHook: String { directory + "/deps/libcore_ctorhook.so" }
  var ctorCall: String { directory + "/libcore_ctorcall.so" }

  static let built: Result<CoreTestLibraries, CoreTestError> = {
    do {
      let directory = try makeTemporaryDirectory("imagelog-core")
      let programs = repositoryRoot + "/Tests/Programs"
      let script = """
        set -e
        mkdir -p '\(directory)/deps'
        cc -shared -fPIC -o '\(directory)/deps/libcore_second.so' '\(programs)/core-second.c'
        cc -shared -fPIC -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/deps' -o '\(directory)/libcore_first.so' '\(programs)/core-first.c'
        cc -shared -fPIC -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/deps' -o '\(directory)/libcore_reenter.so' '\(programs)/core-reenter.c'
        cc -shared -fPIC -o '\(directory)/deps/libcore_ctorhook.so' '\(programs)/core-ctorhook.c'
        cc -shared -fPIC -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/deps' -o '\(directory)/libcore_ctorcall.so' '\(programs)/core-ctorcall.c' -L'\(directory)/deps' -lcore_ctorhook
        """
      let result = try runTool(["sh", "-c", script])
      guard result.status == 0 else { return .failure(CoreTestError("cc failed: \(result.error)")) }
      return .success(CoreTestLibraries(directory: directory))
    } catch let error as CoreTestError {
      return .failure(error)
    } catch {
      return .failure(CoreTestError("\(error)"))
    }
  }()

  static func get() throws -> CoreTestLibraries { try built.get() }

  /// Copies the libraries into a fresh directory (so each test sees only its own images).
  static func fresh(_ tag: String) throws -> CoreTestLibraries {
    let source = try get()
    let directory = try makeTemporaryDirectory("imagelog-core-\(tag)")
    let copy = try runTool(["sh", "-c", "cp -R '\(source.directory)/.' '\(directory)/'"])
    guard copy.status == 0 else { throw CoreTestError("cp failed: \(copy.error)") }
    return CoreTestLibraries(directory: directory)
  }
}

let haveCC = haveTool("cc")
