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
    let styleName = try scanner.option("--format", command: Self.name, usage: Self.usage) ?? "crash"
    guard let style = ImageFormatStyle(rawValue: styleName) else {
      let choices = ImageFormatStyle.allCases.map(\.rawValue).joined(separator: ", ")
      throw UsageError(message: "Unknown format '\(styleName)' (expected one of: \(choices))",
                       commandName: Self.name, usage: Self.usage)
    }
    let full = scanner.flag("--full-build-ids")
    try scanner.finish(command: Self.name, usage: Self.usage)
    formatter = ImageFormatter(style: style, fullBuildIDs: full)
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
