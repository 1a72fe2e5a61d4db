import Glibc
import Testing

/// Child processes, files and tools for the crash tests, without Foundation.
enum CrashTestSupport {
  /// The package root, from this file's path (Tests/ImageLogTests/ -> ../..).
  static let packageRoot: String = {
    var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
  }()

  /// The full path of `tool` on PATH, or nil.
  static func which(_ tool: String) -> String? {
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") {
      let candidate = "\(directory)/\(tool)"
      if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
  }

  static func makeTemporaryDirectory(_ prefix: String = "imagelog-crash") -> String {
    var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(made != nil, "mkdtemp failed: errno \(errno)")
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  static func readFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { break }
      bytes += buffer[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  struct ProcessResult {
    var pid: pid_t
    /// The exit code when the process exited normally.
    var exitCode: Int32?
    /// The signal that ended the process (WIFSIGNALED / WTERMSIG), if one did.
    var terminationSignal: Int32?
    var stdout: String
    var stderr: String
    /// True when the process had to be killed after `timeoutSeconds` (a hang).
    var timedOut: Bool
  }

  struct SpawnError: Error, CustomStringConvertible {
    var description: String
  }

  /// Runs `executable` with `arguments`, the current environment plus `environment`, stdout and
  /// stderr captured. A process still running after `timeoutSeconds` is killed (a hang guard, not
  /// a timing assertion).
  static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                  timeoutSeconds: Int = 120) throws -> ProcessResult {
    let directory = makeTemporaryDirectory("imagelog-run")
    let outPath = "\(directory)/stdout", errPath = "\(directory)/stderr"
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)

    var variables: [String] = []
    var index = 0
    while let entry = environ[index] {
      let text = String(cString: entry)
      let key = text.split(separator: "=", maxSplits: 1).first.map(String.init) ?? text
      if environment[key] == nil { variables.append(text) }
      index += 1
    }
    for (key, value) in environment { variables.append("\(key)=\(value)") }

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = variables.map { strdup($0) } + [nil]
    defer {
      argv.forEach { free($0) }
      envp.forEach { free($0) }
    }
    // The child starts with no signal blocked and every signal at its default: the test runner's
    // threads block some, and a child inherits the mask of the thread that spawns it.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t(), all = sigset_t()
    sigemptyset(&none)
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    guard status == 0 else { throw SpawnError(description: "\(executable): posix_spawn failed: \(status)") }

    var waitStatus: Int32 = 0
    var timedOut = false
    var waited = 0
    while true {
      let result = waitpid(pid, &waitStatus, WNOHANG)
      if result == pid { break }
      if result < 0 && errno != EINTR { throw SpawnError(description: "waitpid failed: \(errno)") }
      if waited >= timeoutSeconds * 100 {
        timedOut = true
        kill(pid, SIGKILL)
        _ = waitpid(pid, &waitStatus, 0)
        break
      }
      usleep(10_000)
      waited += 1
    }
    let low = waitStatus & 0x7f  // WTERMSIG; 0 when exited, 0x7f when stopped
    return ProcessResult(pid: pid,
                         exitCode: low == 0 ? (waitStatus >> 8) & 0xff : nil,
                         terminationSignal: low != 0 && low != 0x7f ? low : nil,
                         stdout: readFile(outPath) ?? "", stderr: readFile(errPath) ?? "",
                         timedOut: timedOut)
  }
}

/// imagelog's crash report (HELPERS.md), parsed strictly enough that a format slip fails a test.
struct ParsedCrashReport {
  struct Frame: Equatable {
    var index: Int
    var imageName: String
    var address: UInt64
    var loadAddress: UInt64
    var offset: UInt64
  }

  struct BinaryImage: Equatable {
    var start: UInt64
    var end: UInt64
    var name: String
    var isMainExecutable: Bool
    var architecture: String
    var uuid: String
    var path: String
  }

  struct FormatProblem: Error, CustomStringConvertible {
    var description: String
  }

  var header: [String: String] = [:]
  var frames: [Frame] = []
  var images: [BinaryImage] = []

  static let headerKeys = ["Process", "Path", "Date/Time", "OS Version", "Exception Type",
                           "Exception Codes", "Crashed Thread"]

  init(_ text: String) throws {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard lines.count > 12 else { throw FormatProblem(description: "report too short: \(lines.count) lines") }
    for (number, key) in Self.headerKeys.enumerated() {
      let prefix = key + ":"
      let line = lines[number]
      guard line.hasPrefix(prefix), line.count >= 17 else {
        throw FormatProblem(description: "line \(number + 1) is not '\(key):': \(line)")
      }
      // Values start in column 18, as in Apple's reports and HELPERS.md.
      let valueStart = line.index(line.startIndex, offsetBy: 17)
      guard line[line.index(line.startIndex, offsetBy: prefix.count)..<valueStart].allSatisfy({ $0 == " " }) else {
        throw FormatProblem(description: "line \(number + 1): value not in column 18: \(line)")
      }
      header[key] = String(line[valueStart...])
    }
    guard lines[7] == "", lines[8] == "Thread 0 Crashed:" else {
      throw FormatProblem(description: "no 'Thread 0 Crashed:' after the header")
    }
    var number = 9
    while number < lines.count, !lines[number].isEmpty {
      frames.append(try Self.frame(lines[number]))
      number += 1
    }
    guard number + 1 < lines.count, lines[number + 1] == "Binary Images:" else {
      throw FormatProblem(description: "no 'Binary Images:' after the frames")
    }
    number += 2
    while number < lines.count, !lines[number].isEmpty {
      images.append(try Self.image(lines[number]))
      number += 1
    }
    guard number == lines.count - 1 else { throw FormatProblem(description: "text after the Binary Images") }
  }

  static func hex(_ token: Substring) -> UInt64? {
    guard token.hasPrefix("0x") else { return nil }
    return UInt64(token.dropFirst(2), radix: 16)
  }

  /// `N   name                          0x%016llx 0xLOAD + DECIMAL`
  static func frame(_ line: String) throws -> Frame {
    let tokens = line.split(separator: " ")
    guard tokens.count >= 6, let index = Int(tokens[0]), tokens[tokens.count - 2] == "+",
          let offset = UInt64(tokens[tokens.count - 1]),
          let load = hex(tokens[tokens.count - 3]),
          tokens[tokens.count - 4].count == 18, let address = hex(tokens[tokens.count - 4])
    else { throw FormatProblem(description: "bad frame line: \(line)") }
    let name = tokens[1..<(tokens.count - 4)].joined(separator: " ")
    // The name column starts at 4 and the address at 34 (names shorter than 30 characters).
    if name.count < 30 {
      let expectedPrefix = String(tokens[0]) + String(repeating: " ", count: 4 - tokens[0].count)
        + name + String(repeating: " ", count: 30 - name.count) + "0x"
      guard line.hasPrefix(expectedPrefix) else { throw FormatProblem(description: "frame columns: \(line)") }
    }
    return Frame(index: index, imageName: name, address: address, loadAddress: load, offset: offset)
  }

  /// `0xSTART - 0xEND +name arch  <32 hex> /path`
  static func image(_ line: String) throws -> BinaryImage {
    let tokens = line.split(separator: " ", omittingEmptySubsequences: false)
    guard tokens.count >= 8, let start = hex(tokens[0]), tokens[1] == "-", let end = hex(tokens[2]),
          tokens[5] == "", tokens[6].hasPrefix("<"), tokens[6].hasSuffix(">"), tokens[6].count == 34,
          let pathStart = line.firstRange(of: "> ")
    else { throw FormatProblem(description: "bad Binary Images line: \(line)") }
    let name = tokens[3]
    return BinaryImage(start: start, end: end, name: String(name.hasPrefix("+") ? name.dropFirst() : name),
                       isMainExecutable: name.hasPrefix("+"), architecture: String(tokens[4]),
                       uuid: String(tokens[6].dropFirst().dropLast()),
                       path: String(line[pathStart.upperBound...]))
  }
}

/// One line of /proc/PID/maps.
struct MapsLine {
  var start: UInt64
  var end: UInt64
  var permissions: String
  var fileOffset: UInt64
  var path: String

  static func parse(_ text: String) -> [MapsLine] {
    text.split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
      guard fields.count >= 5 else { return nil }
      let range = fields[0].split(separator: "-")
      guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16),
            let offset = UInt64(fields[2], radix: 16) else { return nil }
      let path = fields.count == 6 ? fields[5].drop(while: { $0 == " " }) : ""
      return MapsLine(start: start, end: end, permissions: String(fields[1]), fileOffset: offset, path: String(path))
    }
  }
}
