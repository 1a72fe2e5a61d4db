#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Symbolication
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources

/// `imagelog symbolicate CORE`: the dead process's snapshot (its threads unwound in the core's memory),
/// symbolicated as any report is and written in imagelog's crash-report layout (README.md's "Crash reports").
extension SymbolicateCommand {
  /// A core: the dead process's snapshot, symbolicated as any report is, in imagelog's layout.
  func runCore(_ dump: CoreDump, options: SymbolicationOptions) -> ExitStatus {
    var (snapshot, problems) = ProcessSnapshot.core(dump)
    for problem in problems { printError("imagelog: \(dump.path): \(problem)") }
    return writeSymbolicated(&snapshot, options: options, locator: Symbolicator.locator(forOneReport: options))
  }

  /// A minidump: symbolicated (its threads walked first through its memory with the call frame
  /// information of its modules' files, found by build-id) as any report is, in imagelog's layout.
  func runMinidump(_ snapshot: inout ProcessSnapshot, path: String, options: SymbolicationOptions) -> ExitStatus {
    // What could not be read (a stream past the end, a lying count) is said, as for a core and `file DUMP`.
    for problem in snapshot.problems { printError("imagelog: \(path): \(problem)") }
    return writeSymbolicated(&snapshot, options: options, locator: Symbolicator.locator(forOneReport: options))
  }

  /// Symbolicates a snapshot (unless `--no-symbolicate`) and writes it in the chosen style: imagelog's
  /// layout (the crash style of its own layout is that layout), JSON or minidump-stackwalk's JSON.
  func writeSymbolicated(_ snapshot: inout ProcessSnapshot, options: SymbolicationOptions,
                         locator: DebugFileLocator) -> ExitStatus {
    var status = ExitStatus.success
    if !(noSymbolicate && style == .report) {
      for path in options.searchPaths + options.symbolStores where !ReportReading.exists(path) {
        printError("imagelog: \(path): no such file or directory")
        status = .failure
      }
    }
    writeSnapshot(&snapshot, style: style == .crash ? .report : style, symbolicate: !noSymbolicate, options: options,
                  locator: locator)
    return status
  }
}

/// The engine of `symbolicate --output-dir` and `triage`: one file of any kind imagelog reads (a core, a
/// minidump, a report or several in one text, a crash document) into its snapshots, each symbolicated
/// with `cache` (so each binary and debug file is found, read and indexed once for all the files) and,
/// when `signing`, signed with the options' lists.
extension SymbolicateCommand {
  /// The snapshots in the file at `path`: each a report, or why it could not be read. Throws when the
  /// file itself cannot be read or is no crash at all.
  static func symbolicatedReports(_ path: String, options: SymbolicationOptions, cache: SymbolicationCache,
                                  signing: Bool) throws(CrashFileError) -> [Result<ProcessSnapshot, ReportError>] {
    var reports = try CrashFile.open(path).snapshots()
    for index in reports.indices {
      guard case .success(var report) = reports[index] else { continue }
      // The array's copy let go first, so that symbolication fills in the only copy of the frames, in place.
      reports[index] = .failure(ReportError(""))
      Symbolicator.symbolicate(&report, options: options, cache: cache)
      if signing, report.format != .addresses { report.sign(with: options) }
      reports[index] = .success(report)
    }
    return reports
  }
}
