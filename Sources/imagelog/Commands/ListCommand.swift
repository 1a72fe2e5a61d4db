/// `imagelog [list]`: the images loaded in imagelog itself.
struct ListCommand: Command {
  static let name = "list"
  static let abstract = "List the images loaded in this process (the default)."
  static let usage = "imagelog [list] [--format <style>]"
  static let helpSections = """
    OPTIONS:
      --format <style>        logger, crash, unstrip or json (default: crash).
      -h, --help              Show help information.
    """

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    try scanner.finish(command: Self.name, usage: Self.usage)
  }

  func run() throws -> ExitStatus {
    printOutput("not implemented yet")
    return .failure
  }
}
