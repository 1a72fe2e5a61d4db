import ImageLog

/// `imagelog [list]`: the images loaded in imagelog itself.
struct ListCommand: Command {
  static let name = "list"
  static let abstract = "List the images loaded in this process (the default)."
  static let usage = "imagelog [list] [--format <style>] [--full-build-ids]"
  static let helpSections = """
    OPTIONS:
      --format <style>        logger, crash, unstrip or json (default: crash).
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      -h, --help              Show help information.
    """

  var formatter: ImageFormatter

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    formatter = try parseFormatter(&scanner, default: .crash)
    try scanner.finish()
  }

  func run() throws -> ExitStatus {
    var text = ""
    for image in LoadedImages.snapshot() {
      text += formatter.format(image)
      text += "\n"
    }
    if !text.isEmpty { text.removeLast() }
    printOutput(text)
    return .success
  }
}
