import Glibc
import ImageLogTestSupport
import Testing

/// Child processes, files and tools for the crash tests, without Foundation.
enum CrashTestSupport {
  static func makeTemporaryDirectory(_ prefix: String = "imagelog-crash") -> String {
    do { return try ImageLogTestSupport.makeTemporaryDirectory(prefix) } catch { preconditionFailure("\(error)") }
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
    let result = try runChild([executable] + arguments, environment: environment, timeoutSeconds: timeoutSeconds)
    return ProcessResult(pid: result.pid, exitCode: result.exitCode, terminationSignal: result.signal,
                         stdout: result.output, stderr: result.error, timedOut: result.timedOut)
  }
}

/// imagelog's crash report (CrashReporter's format), parsed strictly enough that a format slip fails a test.
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
      // Values start in column 18, as in Apple's reports.
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
