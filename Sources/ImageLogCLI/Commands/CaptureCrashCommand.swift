#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication

/// `imagelog capture-crash`: the helper a crash handler starts (`CrashReporter.install(helper:...)`,
/// `imagelog run --crash-dir`), never a person. It reads what the crashed process's handler recorded,
/// stops every thread with ptrace, unwinds them (the crashed one from the recorded registers),
/// symbolicates them and writes the report into the crash directory; its exit status tells the
/// waiting handler whether it did (0) or must write its own report (1).
///
/// Internal: left out of `imagelog --help`'s list of subcommands (a person has nothing to run it on:
/// it needs a process parked in imagelog's handler and the address of its record), but
/// `imagelog help capture-crash` describes it, for whoever finds it in a process list.
struct CaptureCrashCommand: Command {
  static let name = "capture-crash"
  static let isInternal = true
  static let abstract = "Internal: capture a crashed process for the crash handler that started it (see run --crash-dir)."
  static let usage = "imagelog capture-crash --pid <pid> --record <address> --crash-dir <directory> [--done-fd <fd>] "
    + "[--done-when-final] [--upload-url <url>] [--document] [--search <path> ...] [--no-lines] [--no-system-debug] [--no-cache]"
  static let helpSections = """
    OPTIONS:
      --pid <pid>             The crashed process (the helper's parent).
      --record <address>      Where the handler's crash record is in that process (0x...).
      --crash-dir <directory> Where the report and the minidump go: PROGRAM.PID.YYYYMMDDTHHMMSSZ.crash
                              and .dmp, each written unnamed and then given its name.
      --done-fd <fd>          Write one byte to <fd> once the report is written unsymbolicated (every
                              thread read and unwound): the waiting handler lets the program die, and
                              the report is then replaced by its symbolicated version, and
                              ends with "-- provisional: being symbolicated, to be replaced" until then.
      --done-when-final       Write to --done-fd only once the symbolicated report and the
                              minidump are written (imagelog run --crash-wait): the program dies
                              with its files final.
      --upload-url <url>      Once the files are written, start 'imagelog upload --url <url>' on the
                              crash directory in a process of its own (imagelog run --upload-url).
      --document              Also write the crash document, PROGRAM.PID.YYYYMMDDTHHMMSSZ.json
                              (imagelog symbolicate --format json's, with the signature), before the
                              symbolicated report (imagelog run --crash-document).
      --search <path>         A folder or file holding binaries and debug files. Repeatable.
      --no-lines              Symbol tables only, no file:line from DWARF.
      --no-system-debug       Do not look in /usr/lib/debug, debuginfod caches or servers.
      --no-cache              Neither read nor write the symbol cache (see imagelog help symbolicate).
      -h, --help              Show help information.

    NOTES:
      Started by imagelog's crash handler (imagelog run --crash-dir, CrashReporter.install(helper:)),
      from the crashed thread's signal handler, which waits for it. It stops every thread at once
      (PTRACE_SEIZE, the machinery of pid --threads), unwinds each, the crashed thread from the
      registers its handler recorded, lets the process go, writes the report, tells the handler
      (--done-fd), then writes the minidump (every thread's registers and stack as copied at the
      stop) and puts the symbolicated report in place of the first, atomically.
      Exit status 0 when the report is written; otherwise 1, and the handler writes its own report.
    """

  var pid: Int32
  var record: UInt64
  var directory: String
  var doneDescriptor: Int32?
  var doneWhenFinal: Bool
  var uploadURL: String?
  var options: SymbolicationOptions
  var document: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    guard let pidText = try scanner.option("--pid") else { throw scanner.usageError("Missing '--pid <pid>'") }
    pid = try parsePID(pidText, scanner)
    guard let recordText = try scanner.option("--record") else {
      throw scanner.usageError("Missing '--record <address>'")
    }
    guard recordText.hasPrefix("0x"), let address = UInt64(recordText.dropFirst(2), radix: 16), address != 0 else {
      throw scanner.usageError("'\(recordText)' is not an address (0x...)")
    }
    record = address
    guard let directoryText = try scanner.option("--crash-dir") else {
      throw scanner.usageError("Missing '--crash-dir <directory>'")
    }
    directory = directoryText
    if let done = try scanner.option("--done-fd") {
      guard let descriptor = Int32(done), descriptor > 2 else { throw scanner.usageError("'\(done)' is not a descriptor above 2") }
      doneDescriptor = descriptor
    }
    doneWhenFinal = scanner.flag("--done-when-final")
    uploadURL = try scanner.option("--upload-url")
    document = scanner.flag("--document")
    options = try parseSymbolicationOptions(&scanner)
    let rest = try scanner.positionals()
    if let first = rest.first { throw scanner.usageError("Unexpected argument '\(first)'") }
  }

  func run() throws -> ExitStatus {
    let status = capture()
    // After the program was let go and the files are final: the upload never delays the exit.
    if let uploadURL { startDetachedImagelog([UploadCommand.name, "--url", uploadURL, directory]) }
    return status
  }

  /// Captures the crash and writes its files (`run`'s work before the upload).
  func capture() -> ExitStatus {
    let record: CrashRecord
    let crash: ProcessSnapshot
    let folder: CrashFolder
    do {
      folder = try CrashFolder(path: directory)
      record = try CrashRecord.read(pid: pid, at: self.record)
      // The /proc files a minidump carries are read now (and the vDSO copied): the process is gone once
      // it is let go.
      crash = try ProcessSnapshot.capture(pid: pid, linuxFiles: true, crash: record).snapshot
    } catch {
      printError("imagelog: capture-crash: \(error)")
      return .failure
    }
    let program = crash.images.compactMap(\.loaded).first(where: \.isMainExecutable)?.name
      ?? crash.process.name ?? "unknown"
    // A name taken by any entry (a planted dangling link too) is skipped, not failed on.
    var names = CrashFolder.CrashNames(in: folder, program: program, pid: pid, time: record.date,
                                       extensions: CrashDatabase.fileExtensions)
    let announce = { (path: String) in
      printError("imagelog: \(program) [\(pid)] crashed (signal \(record.signal)): report written to \(path)")
    }
    // With a handler waiting (and not for the final report): the report as read, at once, so the
    // program can die while DWARF is read.
    let early = doneDescriptor != nil && !doneWhenFinal
    let written = folder.writeCrash(crash, as: &names, settings: CrashFolder.CrashFileSettings(symbolication: options, document: document),
                                    provisional: early ? { path in announce(path); letTheProgramGo() } : nil)
    if !early {
      if let path = written.reportPath { announce(path) }
      // What failed (an ACL or marker a file system refuses is no failure: the files are there).
      if !written.isComplete { for problem in written.problems { printError("imagelog: capture-crash: \(problem)") } }
      if doneDescriptor != nil, !written.reportFailed { letTheProgramGo() }
    }
    // A report that could not be written (or replaced: the provisional one stays): the handler, when it
    // still waits, writes its own.
    return written.isComplete ? .success : .failure
  }

  /// Tells the waiting handler (--done-fd) that the report is written. The program is gone or going:
  /// nothing here may keep its standard streams open (a pipeline reading them would wait for the
  /// symbolication to end). A failure from then on leaves the report as it is.
  func letTheProgramGo() {
    guard let doneDescriptor else { return }
    _ = writeAll(to: doneDescriptor, "w")
    close(doneDescriptor)
    let null = open("/dev/null", O_RDWR)
    for stream: Int32 in [0, 1, 2] where null >= 0 { dup2(null, stream) }
    if null > 2 { close(null) }
  }
}
