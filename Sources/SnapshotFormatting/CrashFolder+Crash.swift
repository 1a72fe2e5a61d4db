import ImageLog
import ImageReaders
import Snapshot
import Symbolication

/// A crash captured from a process, as the crash folder's writer takes it: the snapshot read (threads
/// unwound, not yet symbolicated), the snapshot its minidump is written from, and the images only the
/// process's memory held (the vDSO), copied while that memory could still be read.
package struct CapturedCrash {
  /// The process at the crash, its frames not yet named.
  package var snapshot: ProcessSnapshot
  /// What the minidump holds: `snapshot`, or a copy of it carrying more (core-handler's stacks kept
  /// from the core as it passed).
  package var dump: ProcessSnapshot
  /// Images no file holds, copied from the crashed process's memory (or its core's).
  package var inMemoryImages: [InMemoryImage]

  /// The crash `snapshot` (and `dump`, when it is another), its in-memory images copied from
  /// `memory` now: call it while the crashed process (or the core) is still there to read.
  package init(snapshot: ProcessSnapshot, dump: ProcessSnapshot? = nil, memory: some MemoryReading) {
    self.snapshot = snapshot
    self.dump = dump ?? snapshot
    inMemoryImages = InMemoryImage.copies(of: snapshot.images.compactMap(\.loaded), in: memory)
  }
}

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

  /// Writes a captured crash as the crash `names` in this folder, every file through the folder's
  /// one writer (unnamed, then linked; mode 0600; marked): the minidump (`STEM.dmp`), the report
  /// symbolicated with its signature (`STEM.crash`, imagelog's layout, then `section`'s lines, given
  /// the problems of the files written before it), and with `settings.document` the crash document
  /// (`STEM.json`, before the report, so a report that is there and not provisional has its files
  /// beside it).
  ///
  /// With `provisional`, first the report as read (unsymbolicated, ending in
  /// `CrashDatabase.provisionalMarker`), then `provisional` is called with its path (the crashed
  /// process may go: symbolication reads files, not its memory), and the final report later takes its
  /// place (rename(2)). Without one, nothing appears under the report's name before the final report.
  package func writeCrash(_ crash: CapturedCrash, as names: inout CrashNames, settings: CrashFileSettings,
                          provisional: ((String) -> Void)? = nil,
                          section: ([String]) -> String = { _ in "" }) -> WrittenCrash {
    var written = WrittenCrash()
    if let provisional {
      do {
        let (path, problem) = try write(Array((crash.snapshot.imagelogReportText() + CrashDatabase.provisionalMarker).utf8),
                                        as: &names, extension: "crash", access: settings.access)
        written.paths.append(path)
        written.reportPath = path
        if let problem { written.problems.append(problem) }
      } catch {
        written.problems.append(error.description)
        written.reportFailed = true
        return written
      }
      provisional(written.reportPath ?? "")
    }
    do {
      // Every thread's registers and stack as copied, the images, the exception, the /proc files.
      let (path, problem) = try write(try crash.dump.minidumpBytes(), as: &names, extension: "dmp", access: settings.access)
      written.paths.append(path)
      if let problem { written.problems.append(problem) }
    } catch {
      written.problems.append("no minidump: \(error)")
      written.filesFailed = true
    }
    var snapshot = crash.snapshot
    var options = settings.symbolication
    options.inMemoryImages = crash.inMemoryImages
    Symbolicator.symbolicate(&snapshot, options: options)
    snapshot.sign(with: options)
    if settings.document {
      do {
        let (path, problem) = try write(snapshot.formattedUTF8(.json), as: &names, extension: "json", access: settings.access)
        written.paths.append(path)
        if let problem { written.problems.append(problem) }
      } catch {
        written.problems.append("no crash document: \(error)")
        written.filesFailed = true
      }
    }
    var text = snapshot.formatted(.report)
    if !text.hasSuffix("\n") { text += "\n" }
    text += section(written.problems)
    do {
      if provisional != nil {
        // In place of the provisional report, under the name it was given.
        _ = try write(text, as: names.stem + ".crash", access: settings.access, time: names.time, replacing: true)
      } else {
        let (path, problem) = try write(Array(text.utf8), as: &names, extension: "crash", access: settings.access)
        written.paths.append(path)
        written.reportPath = path
        if let problem { written.problems.append(problem) }
      }
    } catch {
      written.problems.append(error.description)
      written.reportFailed = true
    }
    return written
  }
}
