#if canImport(Glibc)
internal import Glibc
#endif

import ImageLog

/// How imagelog ends: 0 ok, 1 runtime failure, 64 usage, as swift-argument-parser uses them. (`imagelog
/// run` becomes the command it runs, so the command's status is its own without passing through here.)
enum ExitStatus: Equatable {
  case success
  /// A runtime failure (other inputs were still processed).
  case failure
  /// `EX_USAGE`
  case usage

  /// The status `exit` is called with.
  var code: Int32 {
    switch self {
    case .success: 0
    case .failure: 1
    case .usage: 64
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
