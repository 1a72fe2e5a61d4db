import ImageReaders
#if canImport(Glibc)
internal import Glibc
#endif

@main
enum ImageLogMain {
  static let version = "0.1.0"

  /// Every subcommand; the first is the default, run when no subcommand word is given. Computed, not
  /// stored: a stored array of metatypes is global state Swift 6 cannot prove concurrency-safe.
  static var commands: [any Command.Type] { [
    ListCommand.self,
    FileCommand.self,
    SymbolicateCommand.self,
    TriageCommand.self,
    SymbolsCommand.self,
    PidCommand.self,
    MinidumpCommand.self,
    RunCommand.self,
    WatchCommand.self,
    CoreHandlerCommand.self,
    CrashesCommand.self,
    UploadCommand.self,
    CaptureCrashCommand.self,
    CacheBuildCommand.self,
  ] }

  static func main() {
    // CommandLine.arguments replaces bytes that are not UTF-8 (a path under `caf\xe9`): read argv as bytes.
    var arguments: [String] = []
    let argv = CommandLine.unsafeArgv
    for index in 1..<max(1, Int(CommandLine.argc)) {
      if let argument = argv[index] { arguments.append(PathBytes.string(cString: argument)) }
    }
    var scanner = ArgumentScanner(arguments[...])
    let status: ExitStatus
    do {
      status = try dispatch(&scanner)
    } catch let error as UsageError {
      printErrorLines("Error: \(error.message)\nUsage: \(error.usage)\n"
                 + "  See 'imagelog \(error.commandName) --help' for more information.")
      status = .usage
    } catch {
      printError("imagelog: \(error)")
      status = .failure
    }
    exit(status.code)
  }

  static func dispatch(_ scanner: inout ArgumentScanner) throws -> ExitStatus {
    if scanner.peekWord == "help" {
      _ = scanner.popFirst()
      guard let word = scanner.popFirst() else { printOutput(topLevelHelp); return .success }
      guard let command = commands.first(where: { $0.name == word }) else {
        throw UsageError(message: "Unknown subcommand '\(word)'", commandName: "help", usage: "imagelog help <subcommand>")
      }
      printOutput(command.help)
      return .success
    }
    let command: any Command.Type
    if let word = scanner.peekWord, let named = commands.first(where: { $0.name == word }) {
      _ = scanner.popFirst()
      command = named
    } else if let word = scanner.peekWord {
      throw UsageError(message: "Unknown subcommand '\(word)'", commandName: "help", usage: "imagelog <subcommand>")
    } else {
      if scanner.contains("--help", "-h") { printOutput(topLevelHelp); return .success }
      if scanner.contains("--version") { printOutput(version); return .success }
      command = commands[0]
    }
    if scanner.contains("--help", "-h") { printOutput(command.help); return .success }
    var parser = scanner
    parser.begin(command)
    let instance = try command.init(&parser)
    return try instance.run()
  }

  static var topLevelHelp: String {
    var text = """
      OVERVIEW: Which binary images are in a process, exactly which builds they are, and what crash addresses mean.

      With no subcommand, lists imagelog's own loaded images (see 'imagelog help list').

      USAGE: imagelog [<subcommand>] [<options>]

      OPTIONS:
        --version               Show the version.
        -h, --help              Show help information.

      SUBCOMMANDS:

      """
    for command in commands where !command.isInternal {
      let padded = command.name + String(repeating: " ", count: max(1, 24 - command.name.count))
      text += "  \(padded)\(command.abstract)\n"
    }
    text += "\n  See 'imagelog help <subcommand>' for detailed help."
    return text
  }
}
