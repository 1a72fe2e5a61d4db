import Glibc

/// What a child process of the symbolicate CLI tests did.
struct SymbolicateRun {
  var status: Int32
  var output: String
  var error: String
  var exitCode: Int32 { (status >> 8) & 0xFF }
}

/// Runs `arguments` (searched on PATH) with standard input from /dev/null, capturing both outputs.
func symbolicateRun(_ arguments: [String], environment: [String: String] = [:]) throws -> SymbolicateRun {
  var outPipe: [Int32] = [0, 0]
  var errPipe: [Int32] = [0, 0]
  guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw SymbolicateTestError("pipe failed") }
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
  guard spawned == 0 else { close(outPipe[0]); close(errPipe[0]); throw SymbolicateTestError("cannot run \(arguments[0])") }
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
  return SymbolicateRun(status: status, output: String(decoding: out, as: UTF8.self), error: String(decoding: err, as: UTF8.self))
}

struct SymbolicateTestError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

enum SymbolicateCLI {
  /// The package's root folder, from this file's path.
  static let packageRoot: String = {
    var path = #filePath
    for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) }
    return path
  }()

  /// The built `imagelog`, next to the test bundle.
  static let executable: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let me = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    let directory = String(me[..<(me.lastIndex(of: "/") ?? me.endIndex)])
    return directory + "/imagelog"
  }()

  static func have(_ tool: String) -> Bool {
    (try? symbolicateRun(["sh", "-c", "command -v \(tool)"]).status) == 0
  }

  static func temporaryDirectory() throws -> String {
    var template = Array("/tmp/imagelog-symbolicate-cli-XXXXXX".utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
      throw SymbolicateTestError("mkdtemp failed")
    }
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  static func write(_ path: String, _ text: String) throws {
    guard let file = fopen(path, "w") else { throw SymbolicateTestError("cannot write \(path)") }
    fputs(text, file)
    fclose(file)
  }

  /// Function symbols (`T`/`t`) of `path` from `llvm-nm --defined-only`, as (address, name) pairs.
  static func functionSymbols(_ path: String) throws -> [(UInt64, String)] {
    let nm = try symbolicateRun(["llvm-nm", "--defined-only", path])
    var result: [(UInt64, String)] = []
    for line in nm.output.split(separator: "\n") {
      let words = line.split(separator: " ", maxSplits: 2)
      guard words.count == 3, words[1] == "T" || words[1] == "t", let address = UInt64(words[0], radix: 16) else { continue }
      result.append((address, String(words[2])))
    }
    return result
  }

  /// The virtual address of the first PT_LOAD segment of `path` (`readelf -lW`): where the load address
  /// of a crash report's image line sits in the file's own addresses (0 for a PIE or a shared object,
  /// 0x400000 for a classic x86-64 executable such as imagelog itself).
  static func firstLoadAddress(_ path: String) throws -> UInt64 {
    let headers = try symbolicateRun(["readelf", "-lW", path])
    for line in headers.output.split(separator: "\n") {
      let words = line.split(separator: " ")
      if words.first == "LOAD", words.count > 3, let address = UInt64(words[2].dropFirst(2), radix: 16) { return address }
    }
    throw SymbolicateTestError("readelf -lW \(path) lists no LOAD segment")
  }

  /// `llvm-symbolizer`'s answers for `addresses` in `object`: the function (linkage name) of each.
  static func llvmSymbolizerNames(_ object: String, _ addresses: [UInt64]) throws -> [String] {
    let arguments = ["llvm-symbolizer", "--no-demangle", "--functions=linkage", "--no-inlines", "--obj=" + object]
      + addresses.map { "0x" + String($0, radix: 16) }
    let result = try symbolicateRun(arguments)
    return result.output.split(separator: "\n", omittingEmptySubsequences: true).enumerated()
      .filter { $0.offset % 2 == 0 }.map { String($0.element) }
  }
}
