#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog

/// `imagelog run -- COMMAND`: every image COMMAND's dynamic loader adds and removes.
struct RunCommand: Command {
  static let name = "run"
  static let abstract = "Run a command and report every image its loader adds and removes (LD_AUDIT)."
  static let usage = "imagelog run [--timing] [--output <file>] [--format <style>] [--full-build-ids] [--follow-exec] -- <command> [<argument> ...]"
  static let helpSections = """
    ARGUMENTS:
      <command> [<argument> ...]
                              The program to run, searched on PATH, and its arguments.

    OPTIONS:
      --timing                Add to each image when it was added (ms since imagelog started the
                              program) and how long the loader took to find, open and map it (from
                              the start of its search). Relocation and constructors come after; they
                              show as the gap before the next image's time.
      --output <file>         Write the events to <file> instead of standard error.
      --format <style>        logger, crash, unstrip or json (default: logger).
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      --follow-exec           Also report the programs the command executes (a wrapper script's real
                              program, a shell's commands): their lines start with [pid N] (JSON: a
                              "pid" field). Without it, only the command's own process is reported.
      -h, --help              Show help information.

    NOTES:
      Uses an rtld-audit module (libImageLogAudit.so next to imagelog, or PREFIX/lib/imagelog/).
      Events start with the executable, the dynamic loader and the vDSO, before main runs; an image
      is added when the loader has mapped it (before its constructors) and removed by dlclose.
      Images still loaded when the program exits are not reported as removed.
      The command's standard streams are untouched and its exit status is imagelog's; when it is
      killed by a signal, imagelog ends with the same signal. The module takes itself out of
      LD_AUDIT, so programs the command executes are not followed (see --follow-exec); a forked
      child that does not
      execute keeps the module, and its events are not shown. Set-user-ID and set-group-ID programs
      (and programs with file capabilities) ignore LD_AUDIT: imagelog says so, and reports nothing.
    """

  var arguments: [String]
  var timing: Bool
  var followExec: Bool
  var outputPath: String?
  var formatter: ImageFormatter

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    timing = scanner.flag("--timing")
    followExec = scanner.flag("--follow-exec")
    outputPath = try scanner.option("--output", "-o", command: Self.name, usage: Self.usage)
    formatter = try parseFormatter(&scanner, command: Self.name, usage: Self.usage, default: .logger)
    arguments = try scanner.positionals(command: Self.name, usage: Self.usage)
    guard !arguments.isEmpty else {
      throw UsageError(message: "Missing expected argument '<command>'", commandName: Self.name, usage: Self.usage)
    }
  }

  func run() throws -> ExitStatus {
    let command = arguments[0]
    let module: String
    do {
      module = try AuditedLaunch.findModule(forExecutable: "/proc/self/exe")
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    guard let executable = AuditedLaunch.resolve(command) else {
      printError("imagelog: \(command): command not found")
      return .failure
    }
    let secure = AuditedLaunch.isSecureExecution(executable)
    if secure {
      printError("imagelog: \(command): set-user-ID or set-group-ID program: the dynamic loader ignores LD_AUDIT, so no images can be reported")
    }
    var output: Int32 = 2
    if let outputPath {
      output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
      guard output >= 0 else {
        printError("imagelog: \(outputPath): cannot open: \(String(cString: strerror(errno)))")
        return .failure
      }
    }
    defer { if output != 2 { close(output) } }
    var count = 0
    let termination: AuditedLaunch.Termination
    // The lines of one batch of records go out in one write.
    var pending = ""
    do {
      var commandPID: Int32?
      termination = try AuditedLaunch.run(arguments, module: module, followingExec: followExec, onRecord: { record in
        guard record.kind != .removedAtExit else { return }
        count += 1
        var line = formatter.eventLine(record.image, event: record.kind == .added ? .added : .removed)
        if timing, record.kind == .added {
          line = formatter.withTiming(line, sinceStart: record.nanosecondsSinceStart, step: record.stepNanoseconds)
        }
        // The command's own process reports first; others (only with --follow-exec) are labelled.
        if commandPID == nil { commandPID = record.pid }
        if record.pid != commandPID { line = formatter.labelled(line, pid: record.pid) }
        pending += line
        pending += "\n"
      }, afterRecords: {
        guard !pending.isEmpty else { return }
        writeAll(pending, to: output)
        pending = ""
      })
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    if count == 0 && !secure {
      printError("imagelog: \(command): no images were reported: the program is statically linked, or the loader ignored LD_AUDIT (set-user-ID, file capabilities)")
    }
    fflush(nil)
    switch termination {
    case .exited(let status): return .exited(status)
    case .signaled(let signalNumber, _): return .signaled(signalNumber)
    }
  }
}

/// Writes all of `text` (whole lines) to `descriptor` (a file or standard error), retrying short
/// writes. Each write(2) is at most PIPE_BUF (4096) bytes and ends at a line's end, so that where
/// the program writes to the same pipe, neither side's lines are cut by the other's (the kernel
/// keeps such writes whole).
func writeAll(_ text: String, to descriptor: Int32) {
  var text = text
  text.withUTF8 { buffer in
    var offset = 0
    while offset < buffer.count {
      var end = min(offset + 4096, buffer.count)
      if end < buffer.count, let newline = buffer[offset..<end].lastIndex(of: 0x0A) { end = newline + 1 }
      while offset < end {
        let written = write(descriptor, buffer.baseAddress! + offset, end - offset)
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return }
        offset += written
      }
    }
  }
}
