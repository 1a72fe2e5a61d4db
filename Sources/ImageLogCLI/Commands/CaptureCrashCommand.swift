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
    + "[--done-when-final] [--upload-url <url>] [--search <path> ...] [--no-lines] [--no-system-debug] [--no-cache]"
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

  /// The last line of a report written before its symbolicated version replaces it.
  static let provisionalMarker = CrashDatabase.provisionalMarker

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
    let crash: CrashRecord
    let capture: ProcessSnapshot.Capture
    let folder: CrashFolder
    do {
      folder = try CrashFolder(path: directory)
      crash = try CrashRecord.read(pid: pid, at: record)
      // The /proc files a minidump carries are read now: the process is gone once it is let go.
      capture = try ProcessSnapshot.capture(pid: pid, linuxFiles: true, crash: crash)
    } catch {
      printError("imagelog: capture-crash: \(error)")
      return .failure
    }
    let program = capture.snapshot.images.compactMap(\.loaded).first(where: \.isMainExecutable)?.name
      ?? capture.snapshot.process.name ?? "unknown"
    // A name taken by any entry (a planted dangling link too) is skipped, not failed on.
    var names = CrashFolder.CrashNames(in: folder, program: program, pid: pid, time: crash.date, extensions: ["crash", "dmp"])
    // The vDSO is in no file, a deleted or replaced file no longer at its path: both taken from the process
    // while it still waits (copied, or held open through its mapping, readable after it is let go).
    var options = options
    options.inMemoryImages = InMemoryImage.live(capture.snapshot.images.compactMap(\.loaded), pid: pid)
    let path: String
    // With a handler waiting (and not for the final report): the report as read, at once, so the
    // program can die while DWARF is read.
    let early = doneDescriptor != nil && !doneWhenFinal
    do {
      let text = early ? capture.snapshot.imagelogReportText() + Self.provisionalMarker
                       : symbolicatedReportText(capture.snapshot, options: options)
      path = try folder.write(Array(text.utf8), as: &names, extension: "crash", access: CrashFolder.Access()).path
    } catch {
      printError("imagelog: capture-crash: \(error)")
      return .failure
    }
    printError("imagelog: \(program) [\(pid)] crashed (signal \(crash.signal)): report written to \(path)")
    if early { letTheProgramGo() }
    var status = ExitStatus.success
    do {
      // Every thread's registers and stack as copied at the stop (the crashed one's from the handler's
      // record), the images, the exception, the /proc files: the minidump beside the report.
      _ = try folder.write(try capture.snapshot.minidumpBytes(), as: &names, extension: "dmp", access: CrashFolder.Access())
    } catch {
      if !early { printError("imagelog: capture-crash: \(names.stem).dmp: \(error)") }
      status = .failure
    }
    if !early {
      if doneDescriptor != nil { letTheProgramGo() }
    } else {
      do {
        _ = try folder.write(symbolicatedReportText(capture.snapshot, options: options), as: names.stem + ".crash",
                             access: CrashFolder.Access(), time: crash.date, replacing: true)
      } catch {
        return .failure  // the report written above stays, unsymbolicated
      }
    }
    return status
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

  /// The snapshot symbolicated and written in imagelog's report layout, its summary of images found
  /// after it.
  func symbolicatedReportText(_ snapshot: ProcessSnapshot, options: SymbolicationOptions) -> String {
    var snapshot = snapshot
    Symbolicator.symbolicate(&snapshot, options: options)
    var text = snapshot.formatted(.report)
    if !text.hasSuffix("\n") { text += "\n" }
    return text
  }
}
