#if canImport(Glibc)
internal import Glibc
#endif

import ImageLog

/// How imagelog ends: its own statuses (0 ok, 1 runtime failure, 64 usage, as swift-argument-parser
/// uses them), or, for `imagelog run`, the status or signal of the command it ran.
enum ExitStatus: Equatable {
  case success
  /// A runtime failure (other inputs were still processed).
  case failure
  /// `EX_USAGE`
  case usage
  /// A child's exit status, passed through.
  case exited(Int32)
  /// A child's terminating signal: imagelog ends by the same signal (without a core file).
  case signaled(Int32)

  /// The status `exit` is called with (for a signal, the shell's 128+N if raising it fails).
  var code: Int32 {
    switch self {
    case .success: 0
    case .failure: 1
    case .usage: 64
    case .exited(let status): status
    case .signaled(let signal): 128 + signal
    }
  }
}

/// A command-line mistake: printed with the command's usage, exit status 64.
struct UsageError: Error {
  var message: String
  var commandName: String
  var usage: String
}

/// A subcommand: parsed from the scanner into a value, then run.
protocol Command {
  /// The word on the command line (`file`).
  static var name: String { get }
  /// The OVERVIEW line.
  static var abstract: String { get }
  /// The USAGE line.
  static var usage: String { get }
  /// The OPTIONS (and any further) sections of `--help`, already formatted.
  static var helpSections: String { get }
  init(_ scanner: inout ArgumentScanner) throws(UsageError)
  func run() throws -> ExitStatus
}

extension Command {
  static var help: String {
    "OVERVIEW: \(abstract)\n\nUSAGE: \(usage)\n\n\(helpSections)"
  }
}

/// Writes `text` and a newline to standard error, unbuffered.
func printError(_ text: String) {
  var line = text
  if !line.hasSuffix("\n") { line += "\n" }
  writeAll(to: 2, line)
}

/// Writes `text` to standard output through stdio's buffer (results, not diagnostics).
func printOutput(_ text: String) {
  print(text)
}

/// True when standard error is a terminal (progress lines are for people only).
var standardErrorIsTerminal: Bool { isatty(2) == 1 }
