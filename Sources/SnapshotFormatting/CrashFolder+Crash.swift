import ProcessInspection
import ImageReaders
import Snapshot
import Symbolication

extension CrashFolder {
  /// How a crash's files are written.
  package struct CrashFileSettings {
    /// How the report is symbolicated (and its signature made: `signatureLists`).
    package var symbolication: SymbolicationOptions
    /// Who may read the files.
    package var access: Access
    /// Also write imagelog's crash document, `STEM.json` (`symbolicate --format json`'s).
    package var document: Bool

    /// The settings: reports symbolicated with `symbolication`, files readable as `access` says,
    /// with the JSON document when `document`.
    package init(symbolication: SymbolicationOptions, access: Access = Access(), document: Bool = false) {
      self.symbolication = symbolication
      self.access = access
      self.document = document
    }
  }

  /// What `writeCrash` wrote and what went wrong on the way.
  package struct WrittenCrash {
    /// Each file's path, in the order written (a report replaced is listed once).
    package var paths: [String] = []
    /// The report's path once written (provisional or final).
    package var reportPath: String?
    /// The files that could not be written, and what the writer could not give a written file (an
    /// ACL, the marker), one line each, without a prefix.
    package var problems: [String] = []
    /// True when the report was not written (nothing to show for the crash, or only its provisional report).
    package var reportFailed = false
    /// True when every file asked for was written.
    package var isComplete: Bool { !reportFailed && !filesFailed }
    /// True when the minidump or the document was not written.
    fileprivate var filesFailed = false
  }

  /// Writes a captured crash, `snapshot` (threads unwound, frames not yet named; the images only its
  /// memory held, the vDSO, copied by its source), as the crash `names` in this folder, every file
  /// through the folder's one writer (unnamed, then linked; mode 0600; marked): the minidump
  /// (`STEM.dmp`, of `dump` when given: a copy of `snapshot` carrying more, as core-handler's stacks
  /// kept from the core as it passed), the report
  /// symbolicated with its signature (`STEM.crash`, imagelog's layout, then `section`'s lines, given
  /// the problems of the files written before it), and with `settings.document` the crash document
  /// (`STEM.json`, before the report, so a report that is there and not provisional has its files
  /// beside it).
  ///
  /// With `provisional`, first the report as read (unsymbolicated, ending in
  /// `CrashDatabase.provisionalMarker`), then `provisional` is called with its path (the crashed
  /// process may go: symbolication reads files, not its memory), and the final report later takes its
  /// place (rename(2)). Without one, nothing appears under the report's name before the final report.
  package func writeCrash(_ snapshot: ProcessSnapshot, dump: ProcessSnapshot? = nil, as names: inout CrashNames,
                          settings: CrashFileSettings,
                          provisional: ((String) -> Void)? = nil,
                          section: ([String]) -> String = { _ in "" }) -> WrittenCrash {
    var written = WrittenCrash()
    // One file of the crash under its next free name: its path, or nil with the reason in `problems`.
    func file(_ ext: String, failure lead: String = "", _ bytes: () throws -> [UInt8]) -> String? {
      do {
        let (path, problem) = try write(try bytes(), as: &names, extension: ext, access: settings.access)
        written.paths.append(path)
        if let problem { written.problems.append(problem) }
        return path
      } catch {
        written.problems.append(lead + "\(error)")
        return nil
      }
    }
    if let provisional {
      written.reportPath = file("crash") { Array((snapshot.imagelogReportText() + CrashDatabase.provisionalMarker).utf8) }
      guard let path = written.reportPath else {
        written.reportFailed = true
        return written
      }
      provisional(path)
    }
    // Every thread's registers and stack as copied, the images, the exception, the /proc files.
    if file("dmp", failure: "no minidump: ", { try (dump ?? snapshot).minidumpBytes() }) == nil { written.filesFailed = true }
    var snapshot = snapshot
    Symbolicator.symbolicate(&snapshot, options: settings.symbolication)
    snapshot.sign(with: settings.symbolication)
    if settings.document, file("json", failure: "no crash document: ", { snapshot.formattedUTF8(.json) }) == nil {
      written.filesFailed = true
    }
    var text = snapshot.formatted(.report)
    if !text.hasSuffix("\n") { text += "\n" }
    text += section(written.problems)
    if provisional == nil {
      written.reportPath = file("crash") { Array(text.utf8) }
      written.reportFailed = written.reportPath == nil
    } else {
      // In place of the provisional report, under the name it was given.
      do { _ = try write(text, as: names.stem + ".crash", access: settings.access, time: names.time, replacing: true) } catch {
        written.problems.append(error.description)
        written.reportFailed = true
      }
    }
    return written
  }
}
