import ImageLog

/// `imagelog pid PID`: the images of another running process.
struct PidCommand: Command {
  static let name = "pid"
  static let abstract = "List the images of a running process (read from /proc/PID and its memory)."
  static let usage = "imagelog pid <pid> [--format <style>]"
  static let helpSections = """
    ARGUMENTS:
      <pid>                   The process to inspect.

    OPTIONS:
      --format <style>        logger, crash, unstrip or json (default: crash).
      -h, --help              Show help information.

    NOTES:
      Needs the access ptrace(2) calls PTRACE_MODE_READ for /proc/PID/maps: the same user (and, to
      read memory, /proc/sys/kernel/yama/ptrace_scope 0 unless the process is your child), root, or
      CAP_SYS_PTRACE. When the memory cannot be read, headers come from the files
      (/proc/PID/map_files, /proc/PID/root). Images are listed in address order, as eu-unstrip -n -p.
    """

  var pid: Int32
  var style: ProcessOutputStyle

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    style = try ProcessOutputStyle.parse(&scanner, command: Self.name, usage: Self.usage)
    let rest = try scanner.positionals(command: Self.name, usage: Self.usage)
    guard let first = rest.first else {
      throw UsageError(message: "Missing expected argument '<pid>'", commandName: Self.name, usage: Self.usage)
    }
    guard rest.count == 1 else {
      throw UsageError(message: "Unexpected argument '\(rest[1])'", commandName: Self.name, usage: Self.usage)
    }
    pid = try parsePID(first, command: Self.name, usage: Self.usage)
  }

  func run() throws -> ExitStatus {
    let images: [Image]
    do {
      images = try ProcessImages.snapshot(of: pid)
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    for image in images { printOutput(style.format(image)) }
    return .success
  }
}

/// A PID argument: a positive decimal number.
func parsePID(_ text: String, command: String, usage: String) throws(UsageError) -> Int32 {
  guard let pid = Int32(text), pid > 0 else {
    throw UsageError(message: "'\(text)' is not a process ID", commandName: command, usage: usage)
  }
  return pid
}
