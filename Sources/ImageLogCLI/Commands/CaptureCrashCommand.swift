#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageLogSymbolication
import Snapshot
import SnapshotFormatting
import SnapshotSources

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
  static let usage = "imagelog capture-crash --pid <pid> --record <address> --crash-dir <directory> "
    + "[--search <path> ...] [--no-lines] [--no-system-debug]"
  static let helpSections = """
    OPTIONS:
      --pid <pid>             The crashed process (the helper's parent).
      --record <address>      Where the handler's crash record is in that process (0x...).
      --crash-dir <directory> Where the report goes: NAME-PID-YYYYMMDDTHHMMSSZ.crash, written to a
                              hidden temporary name and then given its own.
      --search <path>         A folder or file holding binaries and debug files. Repeatable.
      --no-lines              Symbol tables only, no file:line from DWARF.
      --no-system-debug       Do not look in /usr/lib/debug, debuginfod caches or servers.
      -h, --help              Show help information.

    NOTES:
      Started by imagelog's crash handler (imagelog run --crash-dir, CrashReporter.install(helper:)),
      from the crashed thread's signal handler, which waits for it. It stops every thread at once
      (PTRACE_SEIZE, the machinery of pid --threads), unwinds each, the crashed thread from the
      registers its handler recorded, lets the process go, and writes the symbolicated report. Exit
      status 0 when the report is written; otherwise 1, and the handler writes its own report.
    """

  var pid: Int32
  var record: UInt64
  var directory: String
  var options: SymbolicationOptions

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
    options = try parseSymbolicationOptions(&scanner)
    let rest = try scanner.positionals()
    if let first = rest.first { throw scanner.usageError("Unexpected argument '\(first)'") }
  }

  func run() throws -> ExitStatus {
    let crash: CrashRecord
    let capture: ProcessSnapshot.Capture
    do {
      crash = try CrashRecord.read(pid: pid, at: record)
      capture = try ProcessSnapshot.capture(pid: pid, crash: crash)
    } catch {
      printError("imagelog: capture-crash: \(error)")
      return .failure
    }
    let text = symbolicatedReportText(capture.snapshot, options: options, pid: pid)
    let program = capture.snapshot.images.compactMap(\.loaded).first(where: \.isMainExecutable)?.name
      ?? capture.snapshot.process.name ?? "unknown"
    let stem = CrashReporter.crashFileStem(program: program, pid: pid, date: crash.date)
    let path: String
    do {
      var bytes = text
      path = try bytes.withUTF8 { utf8 throws(CrashReporter.InstallError) -> String in
        try CrashReporter.writeCrashFile(directory: directory, stem: stem, suffix: ".crash", UnsafeRawBufferPointer(utf8))
      }
    } catch {
      printError("imagelog: capture-crash: \(error)")
      return .failure
    }
    // TODO(minidump): write `capture.snapshot` as STEM.dmp through the one minidump writer once
    // ProcessSnapshot -> minidump bytes is on main (issue #27); the report alone is written until then.
    printError("imagelog: \(program) [\(pid)] crashed (signal \(crash.signal)): report written to \(path)")
    return .success
  }

  /// The snapshot symbolicated and written in imagelog's report layout, its summary of images found
  /// after it. The one place this command symbolicates: it goes through the flat report until
  /// `Symbolicator` works on snapshots directly.
  func symbolicatedReportText(_ snapshot: ProcessSnapshot, options: SymbolicationOptions, pid: Int32) -> String {
    var snapshot = snapshot
    var options = options
    // The vDSO is in no file: its symbols come from the process's memory.
    options.inMemoryImages = InMemoryImage.copies(of: snapshot.images.compactMap(\.loaded), in: ProcessMemory(pid: pid))
    let result = Symbolicator.symbolicate(snapshot.flatReport(), options: options)
    snapshot.take(result)
    var text = snapshot.imagelogReportText() + result.summary()
    if !text.hasSuffix("\n") { text += "\n" }
    return text
  }
}
