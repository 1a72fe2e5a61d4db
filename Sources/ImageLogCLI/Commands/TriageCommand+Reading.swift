#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageReaders
import Snapshot
import SnapshotSources
import Symbolication

/// Reads crash files into a `CrashTriage`: each file's crashes symbolicated and signed by the engine of
/// `symbolicate --output-dir` (one `SymbolicationCache` for all), or taken from the `--state` of an
/// earlier run when the file's size and modification time are the same.
final class TriageReader {
  let options: SymbolicationOptions
  let cache: SymbolicationCache
  let state: CrashTriageStateParser.State
  let keepsRecords: Bool
  private(set) var triage = CrashTriage()
  /// Every crash added, for the next `--state` (kept only when `keepsRecords`).
  private(set) var records: [CrashTriage.Crash] = []

  init(options: SymbolicationOptions, state: CrashTriageStateParser.State, keepsRecords: Bool) {
    self.options = options
    cache = SymbolicationCache(options: options)
    self.state = state
    self.keepsRecords = keepsRecords
  }

  func read(_ paths: [String]) {
    for path in paths { read(path) }
  }

  /// The file's size and modification time (seconds), following links as reading it does.
  static func sizeAndTime(_ path: String) -> (size: Int64, modified: Int64)? {
    var info = stat()
    guard PathBytes.withCString(path, { stat($0, &info) }) == 0 else { return nil }
    return (Int64(info.st_size), Int64(info.st_mtim.tv_sec))
  }

  func read(_ path: String) {
    guard let (size, modified) = Self.sizeAndTime(path) else {
      triage.addUnreadable(CrashTriage.Unreadable(path: path, size: 0, modified: 0, problem: String(cString: strerror(errno))))
      return
    }
    if let known = state.crashes[path], known.allSatisfy({ $0.size == size && $0.modified == modified }) {
      triage.filesFromState += 1
      for crash in known { add(crash) { self.state.examples[path] } }
      return
    }
    if let known = state.unreadable[path], known.size == size, known.modified == modified {
      triage.filesFromState += 1
      triage.addUnreadable(known)
      return
    }
    triage.filesRead += 1
    let name = Image.shortName(of: path)
    let stem = name.split(separator: ".", omittingEmptySubsequences: false).dropLast().joined(separator: ".")
    let fileTime = CrashFolder.time(ofStem: stem) ?? CrashFolder.time(ofStem: name) ?? modified
    let reports: [Result<ProcessSnapshot, ReportError>]
    do {
      reports = try SymbolicateCommand.symbolicatedReports(path, options: options, cache: cache, signing: true)
    } catch {
      triage.addUnreadable(CrashTriage.Unreadable(path: path, size: size, modified: modified, problem: "\(error.problem)"))
      return
    }
    var firstProblem: String?
    var added = 0
    for parsed in reports {
      switch parsed {
      case .success(let snapshot) where snapshot.frameCount == 0:
        // A damaged minidump or core reads as a snapshot that says what it lacks: no frame, no signature.
        firstProblem = firstProblem ?? "no frames to make a signature of" + (snapshot.problems.first.map { " (\($0))" } ?? "")
      case .success(let snapshot):
        let crash = snapshot.triageCrash(path: path, size: size, modified: modified, signature: snapshot.signature ?? "",
                                         fileTime: fileTime)
        add(crash) { snapshot.triageExample(path: path) }
        added += 1
      case .failure(let error):
        firstProblem = firstProblem ?? "\(error)"
      }
    }
    if added == 0 {
      triage.addUnreadable(CrashTriage.Unreadable(path: path, size: size, modified: modified, problem: firstProblem ?? "no crash in it"))
    }
  }

  private func add(_ crash: CrashTriage.Crash, example: () -> CrashTriage.Example?) {
    triage.add(crash, example: example)
    if keepsRecords { records.append(crash) }
  }
}
