#if canImport(Glibc)
internal import Glibc
#endif

import ImageLog
import ImageReaders

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
  /// True for a subcommand only imagelog itself runs: left out of the overview's list.
  static var isInternal: Bool { get }
  init(_ scanner: inout ArgumentScanner) throws(UsageError)
  func run() throws -> ExitStatus
}

extension Command {
  /// Every subcommand but `capture-crash` is for people.
  static var isInternal: Bool { false }

  static var help: String {
    "OVERVIEW: \(abstract)\n\nUSAGE: \(usage)\n\n\(helpSections)"
  }
}

/// Writes a one-line diagnostic (`imagelog: PATH: problem`) and a newline to standard error, unbuffered.
/// Its text holds paths, commands and names from files, so it is escaped as every text style is
/// (`TextEscaping`): a newline or an escape sequence in a file name cannot forge a line or drive the
/// terminal.
func printError(_ text: String) {
  var line = TextEscaping.escaped(text.hasSuffix("\n") ? String(text.dropLast()) : text)
  line += "\n"
  writeAll(to: 2, line)
}

/// Writes text of several lines (usage, a summary whose parts are already escaped) to standard error as it is.
func printErrorLines(_ text: String) {
  var lines = text
  if !lines.hasSuffix("\n") { lines += "\n" }
  writeAll(to: 2, lines)
}

/// Writes `text` and a newline to standard output.
func printOutput(_ text: String) {
  writeOutput(text + "\n")
}

/// Writes `text` to standard output: with `writeAll(to: 1, ...)`, the one way results leave imagelog
/// (no stdio buffer, so a diagnostic written after a result is never seen before it). A command that
/// prints many short lines gathers them first (`OutputLines`).
func writeOutput(_ text: String) {
  writeAll(to: 1, text)  // a closed pipe or a full disk: nothing more can be said there
}

/// Writes `bytes` to standard output (`writeOutput(_:)` for bytes already encoded).
func writeOutput(_ bytes: UnsafeRawBufferPointer) {
  writeAll(to: 1, bytes)
}

/// True when standard error is a terminal (progress lines are for people only).
var standardErrorIsTerminal: Bool { isatty(2) == 1 }
