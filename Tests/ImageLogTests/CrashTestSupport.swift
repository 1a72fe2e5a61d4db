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

/// imagelog's crash report (CrashReporter's format, README.md's "Crash reports"), parsed strictly enough that a format slip
/// fails a test.
struct ParsedCrashReport {
  struct Frame: Equatable {
    var index: Int
    var imageName: String
    var address: UInt64
    var loadAddress: UInt64
    var offset: UInt64
    /// nil (call frame information or the context), "frame pointer" or "stack scan".
    var trust: String? = nil
    /// For a frame in an image removed before the crash: "unloaded 3.200 ms before the crash by thread 4";
    /// in one mapped where a removed one had been: "libplugin.so was here, unloaded ...".
    var unloaded: String? = nil
  }

  struct Thread: Equatable {
    var index: Int
    var tid: Int32
    var name: String?
    var crashed: Bool
    var frames: [Frame]
    /// The `(not unwound: ...)` line, without its parentheses.
    var problem: String?
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
  var threads: [Thread] = []
  /// The `Unloaded Images:` lines, when the report has the section.
  var unloadedImages: [String] = []
  /// The crashed thread's frames.
  var frames: [Frame] = []
  /// The crashed thread's registers, by name.
  var registers: [String: UInt64] = [:]
  var registersTitle = ""
  var images: [BinaryImage] = []

  static let headerKeys = ["Process", "Path", "Date/Time", "OS Version", "Exception Type",
                           "Exception Codes", "Crashed Thread", "Threads"]

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
    var number = Self.headerKeys.count
    // Thread blocks: an empty line, an optional name line, the thread line, frames or one problem line.
    while number + 1 < lines.count, lines[number].isEmpty, lines[number + 1].hasPrefix("Thread "),
          !lines[number + 1].contains(" crashed with ") {
      number += 1
      let index = threads.count
      var name: String?
      if lines[number].hasPrefix("Thread \(index) name:  ") {
        name = String(lines[number].dropFirst("Thread \(index) name:  ".count))
        number += 1
      }
      let line = lines[number]
      let crashed: Bool
      let rest: Substring
      if line.hasPrefix("Thread \(index) Crashed:  tid ") {
        crashed = true
        rest = line.dropFirst("Thread \(index) Crashed:  tid ".count)
      } else if line.hasPrefix("Thread \(index):  tid ") {
        crashed = false
        rest = line.dropFirst("Thread \(index):  tid ".count)
      } else {
        throw FormatProblem(description: "not 'Thread \(index):  tid N': \(line)")
      }
      guard let tid = Int32(rest) else { throw FormatProblem(description: "bad tid: \(line)") }
      number += 1
      var thread = Thread(index: index, tid: tid, name: name, crashed: crashed, frames: [], problem: nil)
      if number < lines.count, lines[number].hasPrefix("(not unwound: "), lines[number].hasSuffix(")") {
        thread.problem = String(lines[number].dropFirst().dropLast())
        number += 1
      } else {
        while number < lines.count, !lines[number].isEmpty {
          thread.frames.append(try Self.frame(lines[number]))
          number += 1
        }
      }
      threads.append(thread)
    }
    guard threads.count == Int(header["Threads"] ?? "") else {
      throw FormatProblem(description: "\(threads.count) thread blocks, header says \(header["Threads"] ?? "")")
    }
    guard let crashedThread = threads.first(where: { $0.crashed }),
          header["Crashed Thread"] == "\(crashedThread.index)  tid \(crashedThread.tid)",
          threads.filter(\.crashed).count == 1 else {
      throw FormatProblem(description: "no one crashed thread matching 'Crashed Thread:'")
    }
    frames = crashedThread.frames
    // Registers: "Thread N crashed with ... Thread State (64-bit):" and rows of "name: 0x..." cells.
    if number + 1 < lines.count, lines[number].isEmpty,
       lines[number + 1] == "Thread \(crashedThread.index) crashed with X86 Thread State (64-bit):"
        || lines[number + 1] == "Thread \(crashedThread.index) crashed with ARM Thread State (64-bit):" {
      registersTitle = String(lines[number + 1].split(separator: " with ")[1].dropLast())
      number += 2
      while number < lines.count, lines[number].hasPrefix("  ") {
        let tokens = lines[number].split(separator: " ")
        guard tokens.count % 2 == 0 else { throw FormatProblem(description: "bad register row: \(lines[number])") }
        for cell in stride(from: 0, to: tokens.count, by: 2) {
          guard tokens[cell].hasSuffix(":"), let value = Self.hex(tokens[cell + 1]) else {
            throw FormatProblem(description: "bad register cell: \(lines[number])")
          }
          registers[String(tokens[cell].dropLast())] = value
        }
        number += 1
      }
    }
    guard number + 1 < lines.count, lines[number].isEmpty, lines[number + 1] == "Binary Images:" else {
      throw FormatProblem(description: "no 'Binary Images:' after the threads: line \(number + 1)")
    }
    number += 2
    while number < lines.count, !lines[number].isEmpty {
      images.append(try Self.image(lines[number]))
      number += 1
    }
    // The images removed before the crash, when any was.
    if number + 1 < lines.count, lines[number].isEmpty, lines[number + 1] == "Unloaded Images:" {
      number += 2
      while number < lines.count, !lines[number].isEmpty {
        unloadedImages.append(lines[number])
        number += 1
      }
    }
    // The loads and unloads after the program started (TimelineLine reads them).
    if number + 1 < lines.count, lines[number].isEmpty, lines[number + 1] == "Image Timeline:" {
      number += 2
      while number < lines.count, !lines[number].isEmpty { number += 1 }
    }
    guard number == lines.count - 1 else { throw FormatProblem(description: "text after the Binary Images") }
  }

  static func hex(_ token: Substring) -> UInt64? {
    guard token.hasPrefix("0x") else { return nil }
    return UInt64(token.dropFirst(2), radix: 16)
  }

  /// `N   name                          0x%016llx 0xLOAD + DECIMAL` and an optional trust mark.
  static func frame(_ fullLine: String) throws -> Frame {
    var line = fullLine
    var trust: String?
    for mark in ["frame pointer", "stack scan"] where line.hasSuffix("  (\(mark))") {
      trust = mark
      line = String(line.dropLast(mark.count + 4))
    }
    // A frame in an image removed before the crash: "  (unloaded 3.200 ms before the crash by thread 4)",
    // or in one mapped where it had been: "  (libplugin.so was here, unloaded ...)".
    var unloaded: String?
    if line.hasSuffix(")"), let open = line.ranges(of: "  (").last,
       line[open.upperBound...].hasPrefix("unloaded ") || line[open.upperBound...].contains(" was here, unloaded ") {
      unloaded = String(line[open.upperBound...].dropLast())
      line = String(line[..<open.lowerBound])
    }
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
    return Frame(index: index, imageName: name, address: address, loadAddress: load, offset: offset, trust: trust,
                 unloaded: unloaded)
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
