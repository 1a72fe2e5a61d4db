/// A small command-line scanner in the spirit of swift-argument-parser: `--name value`,
/// `--name=value`, `-x`, repeated options, and `--` ending options. A command takes what it
/// knows out of the scanner; whatever option is left over is a usage error.
struct ArgumentScanner {
  private var arguments: [String]
  /// The command these arguments are for: usage errors name it and show its usage line.
  private(set) var commandName = "help"
  private(set) var usage = "imagelog <subcommand>"
  /// Arguments after a `--`; never read as options.
  private(set) var afterTerminator: [String]
  /// True when the command line had a `--`.
  private(set) var hadTerminator: Bool

  init<S: Sequence>(_ arguments: S) where S.Element == String {
    let all = Array(arguments)
    if let terminator = all.firstIndex(of: "--") {
      self.arguments = Array(all[..<terminator])
      afterTerminator = Array(all[(terminator + 1)...])
      hadTerminator = true
    } else {
      self.arguments = all
      afterTerminator = []
      hadTerminator = false
    }
  }

  /// Scans for `command` from here on: its name and usage go with every usage error.
  mutating func begin(_ command: any Command.Type) {
    commandName = command.name
    usage = command.usage
  }

  /// A usage error of the command being scanned: printed with its usage, exit status 64.
  func usageError(_ message: String) -> UsageError {
    UsageError(message: message, commandName: commandName, usage: usage)
  }

  /// The first argument if it is not an option, without consuming it.
  var peekWord: String? {
    guard let first = arguments.first, !first.hasPrefix("-") else { return nil }
    return first
  }

  /// Removes and returns the first argument.
  mutating func popFirst() -> String? {
    arguments.isEmpty ? nil : arguments.removeFirst()
  }

  /// True when any of `names` is present before `--`.
  func contains(_ names: String...) -> Bool {
    arguments.contains { Self.isOption($0) && names.contains($0) }
  }

  /// Removes every occurrence of a flag; true when there was at least one.
  mutating func flag(_ names: String...) -> Bool {
    let before = arguments.count
    arguments.removeAll { Self.isOption($0) && names.contains($0) }
    return arguments.count != before
  }

  /// Removes every `--name value` / `--name=value` for any of `names` and returns the values in the
  /// order given. One pass over the arguments, whatever the number of names; an argument that does
  /// not start with `-` is never compared (paths are most of a long command line).
  mutating func options(_ names: String...) throws(UsageError) -> [String] {
    try options(names)
  }

  private mutating func options(_ names: [String]) throws(UsageError) -> [String] {
    var values: [String] = []
    var index = 0
    var kept: [String] = []
    kept.reserveCapacity(arguments.count)
    while index < arguments.count {
      let argument = arguments[index]
      guard Self.isOption(argument) else {
        kept.append(argument)
        index += 1
        continue
      }
      if names.contains(argument) {
        guard index + 1 < arguments.count else {
          throw usageError("Missing value for '\(argument) <value>'")
        }
        values.append(arguments[index + 1])
        index += 2
        continue
      }
      if let equals = argument.utf8.firstIndex(of: UInt8(ascii: "=")), names.contains(String(argument[..<equals])) {
        values.append(String(argument[argument.index(after: equals)...]))
        index += 1
        continue
      }
      kept.append(argument)
      index += 1
    }
    arguments = kept
    return values
  }

  /// The last value given for an option that may be given more than once (under any of its names);
  /// `nil` when absent.
  mutating func option(_ names: String...) throws(UsageError) -> String? {
    try options(names).last
  }

  /// True for an argument that starts with `-` (checked on the UTF-8 bytes: no Character work).
  private static func isOption(_ argument: String) -> Bool {
    argument.utf8.first == UInt8(ascii: "-")
  }

  /// What is left: positional arguments (then those after `--`). An unknown option is a usage error.
  mutating func positionals() throws(UsageError) -> [String] {
    if let unknown = arguments.first(where: { Self.isOption($0) && $0 != "-" }) {
      throw usageError("Unknown option '\(unknown)'")
    }
    defer { arguments = []; afterTerminator = [] }
    return arguments + afterTerminator
  }

  /// Like `positionals`, but nothing may be left.
  mutating func finish() throws(UsageError) {
    let rest = try positionals()
    if let first = rest.first {
      throw usageError("Unexpected argument '\(first)'")
    }
  }
}
