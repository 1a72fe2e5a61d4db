import ImageLog

/// `imagelog pid PID`: the images of another running process.
struct PidCommand: Command {
  static let name = "pid"
  static let abstract = "List the images of a running process (read from /proc/PID and its memory)."
  static let usage = "imagelog pid <pid> [--format <style>] [--full-build-ids]"
  static let helpSections = """
    ARGUMENTS:
      <pid>                   The process to inspect.

    OPTIONS:
      --format <style>        logger, crash, unstrip or json (default: crash).
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      -h, --help              Show help information.

    NOTES:
      Needs the access ptrace(2) calls PTRACE_MODE_READ for /proc/PID/maps: the same user (and, to
      read memory, /proc/sys/kernel/yama/ptrace_scope 0 unless the process is your child), root, or
      CAP_SYS_PTRACE. When refused, the error says which check failed: the uid, capabilities the process
      holds that imagelog lacks, a process that is not dumpable, or ptrace_scope, and whether
      CAP_SYS_PTRACE would do. When the memory cannot be read, headers come from the files
      (/proc/PID/map_files, /proc/PID/root). Images are listed in address order, as eu-unstrip -n -p.
    """

  var pid: Int32
  var formatter: ImageFormatter

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    formatter = try parseFormatter(&scanner, command: Self.name, usage: Self.usage, default: .crash)
    pid = try parsePIDArgument(&scanner, command: Self.name, usage: Self.usage)
  }

  func run() throws -> ExitStatus {
    let images: [Image]
    do {
      images = try ProcessImages.snapshot(of: pid)
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    var text = ""
    for image in images { text += formatter.format(image) + "\n" }
    if !text.isEmpty { text.removeLast() }
    printOutput(text)
    return .success
  }
}

/// A PID argument: a positive decimal number.
/// The one positional argument of `imagelog pid` and `imagelog watch`: a process ID.
func parsePIDArgument(_ scanner: inout ArgumentScanner, command: String, usage: String) throws(UsageError) -> Int32 {
  let rest = try scanner.positionals(command: command, usage: usage)
  guard let first = rest.first else {
    throw UsageError(message: "Missing expected argument '<pid>'", commandName: command, usage: usage)
  }
  guard rest.count == 1 else {
    throw UsageError(message: "Unexpected argument '\(rest[1])'", commandName: command, usage: usage)
  }
  return try parsePID(first, command: command, usage: usage)
}

func parsePID(_ text: String, command: String, usage: String) throws(UsageError) -> Int32 {
  guard let pid = Int32(text), pid > 0 else {
    throw UsageError(message: "'\(text)' is not a process ID", commandName: command, usage: usage)
  }
  return pid
}

/// `--format <style>` and `--full-build-ids` for the process commands, as `imagelog list` reads them.
func parseFormatter(_ scanner: inout ArgumentScanner, command: String, usage: String,
                    default fallback: ImageFormatStyle) throws(UsageError) -> ImageFormatter {
  let styleName = try scanner.option("--format", command: command, usage: usage) ?? fallback.rawValue
  guard let style = ImageFormatStyle(rawValue: styleName) else {
    let choices = ImageFormatStyle.allCases.map(\.rawValue).joined(separator: ", ")
    throw UsageError(message: "Unknown format '\(styleName)' (expected one of: \(choices))",
                     commandName: command, usage: usage)
  }
  return ImageFormatter(style: style, fullBuildIDs: scanner.flag("--full-build-ids"))
}
