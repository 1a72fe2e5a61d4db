internal import Glibc
import ImageReaders

/// The crash folder (`CrashFolder`) read as a database of reports to send: which crashes are there,
/// which wait to be sent, which were sent (and what the server called them), which a server refused.
///
/// Layout: a crash is its files `PROGRAM.PID.TIME.crash` (the report), `.dmp` (the minidump),
/// `.core.zst` and `.json` (the crash document), as the writers leave them; its upload state is one more file beside them,
/// `PROGRAM.PID.TIME.upload` (a small JSON object), written by `CrashFolder`'s one file writer: whole,
/// marked, and put in place of the previous state by rename(2). So every change of state is one
/// atomic step of the file system, and the crash files themselves are never moved or rewritten.
///
/// States (`State`), and the one step that enters each:
/// - `incomplete`: the report is still being written (a provisional `.crash`, at most
///   `provisionalSeconds` old) or its minidump is not there yet; nothing is sent.
/// - `waiting`: complete and not sent; no state file yet, or a state file `waiting` saying how many
///   attempts were made, why the last failed and when the next may start (`nextAttempt`).
/// - `uploading`: an uploader holds the minidump's `flock(2)` lock. The lock dies with the process,
///   so a killed upload leaves the report `waiting` (its state file says an attempt began and never
///   ended), never stuck.
/// - `sent`: a server accepted it (2xx); the state file keeps the server's answer and crash id.
///   Never sent again.
/// - `rejected`: a server refused it for good (4xx other than 408 and 429); the reason is kept and
///   it is not sent again (the state file can be removed to send it again).
/// - `noMinidump`: a report without a minidump (the servers take minidumps): kept, never sent.
///
/// An attempt takes the lock, reads the state again under it (another uploader may have sent the
/// report meanwhile), writes `waiting` with the attempt counted (a kill from there on is seen by the
/// next run), sends, and writes the outcome. The one window where a report can reach a server twice
/// is a kill after the server answered and before the outcome was written (as with Crashpad's
/// database); the report is then sent again with the same `reportID` (form field
/// `imagelog_report_id`), by which a server can drop the second copy.
package struct CrashDatabase: Sendable {
  /// The folder.
  package let folder: CrashFolder

  /// The extensions of a crash's own files.
  package static let crashExtensions = ["crash", "dmp", "core.zst", "json"]
  /// The extension of a crash's upload state.
  package static let stateExtension = "upload"
  /// Every extension a crash's files have in a folder: its files and its upload state, which goes with
  /// them (a new crash never takes a name whose state file is there, pruning removes both).
  package static let fileExtensions = crashExtensions + [stateExtension]
  /// How long a provisional report is waited for (its writer may have died: then it is sent as it is).
  package static let provisionalSeconds: Int64 = 300
  /// The last line of a report that its writer will replace (`capture-crash`'s provisional report).
  package static let provisionalMarker = "\n-- provisional: being symbolicated, to be replaced\n"

  /// The database in `folder`.
  package init(folder: CrashFolder) { self.folder = folder }

  /// The database in the folder at `path`, which must exist (a command reading it makes nothing).
  package init(existing path: String) throws(SystemError) {
    guard FileSystem.kind(path) == .directory else { throw SystemError("\(path) is not a folder", errno: ENOTDIR) }
    folder = try CrashFolder(path: path)
  }

  /// Where a report is.
  package enum State: String, Sendable {
    case incomplete, waiting, uploading, sent, rejected
    case noMinidump = "no-minidump"
  }

  /// What a state file says.
  package struct Record: Sendable, Equatable {
    /// `waiting`, `sent` or `rejected`.
    package var state: State = .waiting
    /// Attempts begun so far.
    package var attempts = 0
    /// When the last attempt began, seconds since the epoch.
    package var lastAttempt: Int64?
    /// The earliest time of the next attempt, seconds since the epoch (`waiting` only).
    package var nextAttempt: Int64?
    /// Why the last attempt failed, or why the report was refused.
    package var reason: String?
    /// The id this report is sent with (`imagelog_report_id`), the same for every attempt.
    package var reportID: String?
    /// Where it went.
    package var url: String?
    /// The HTTP status of the last answer.
    package var httpStatus: Int?
    /// The server's answer (its first 4096 bytes), when sent or refused.
    package var answer: String?
    /// The crash id found in the answer: Socorro's `CrashID=bp-...`, Sentry's JSON `id`.
    package var crashID: String?
    /// When it was sent, seconds since the epoch.
    package var sentTime: Int64?

    package init() {}

    /// The state file's JSON text (the one JSON writer).
    package var json: String {
      var writer = JSONWriter(capacity: 512)
      writer.beginObject()
      writer.member("state", string: state.rawValue)
      writer.member("attempts", number: UInt64(max(attempts, 0)))
      func time(_ key: StaticString, _ value: Int64?) {
        guard let value else { return }
        writer.member(key, number: UInt64(max(value, 0)))
      }
      time("last_attempt", lastAttempt)
      time("next_attempt", nextAttempt)
      if let reason { writer.member("reason", string: reason) }
      if let reportID { writer.member("report_id", string: reportID) }
      if let url { writer.member("url", string: url) }
      if let httpStatus { writer.member("http_status", number: UInt64(max(httpStatus, 0))) }
      if let answer { writer.member("answer", string: answer) }
      if let crashID { writer.member("crash_id", string: crashID) }
      time("sent_time", sentTime)
      writer.endObject()
      return String(decoding: writer.bytes, as: UTF8.self) + "\n"
    }

    /// A state file's text read back; a malformed one says what is wrong.
    package init(parsing text: String) throws(StateFileError) {
      let value: JSONValue
      do { value = try JSONValue.parse(Substring(text), maximumDepth: 4) } catch { throw StateFileError(message: error.description) }
      guard case .object = value, let stateText = value["state"]?.string else {
        throw StateFileError(message: "no \"state\" member")
      }
      guard let state = State(rawValue: stateText), [.waiting, .sent, .rejected].contains(state) else {
        throw StateFileError(message: "unknown state \"\(stateText)\"")
      }
      self.state = state
      attempts = value["attempts"]?.integer ?? 0
      lastAttempt = value["last_attempt"]?.integer.map(Int64.init)
      nextAttempt = value["next_attempt"]?.integer.map(Int64.init)
      reason = value["reason"]?.string
      reportID = value["report_id"]?.string
      url = value["url"]?.string
      httpStatus = value["http_status"]?.integer
      answer = value["answer"]?.string
      crashID = value["crash_id"]?.string
      sentTime = value["sent_time"]?.integer.map(Int64.init)
    }
  }

  /// Why a state file cannot be read.
  package struct StateFileError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
  }

  /// One crash in the folder.
  package struct Report: Sendable {
    /// `PROGRAM.PID.TIME`.
    package var stem: String
    /// The extensions of its files there (`crash`, `dmp`, `core.zst`).
    package var files: [String]
    package var state: State
    /// Its state file, when there is one and it could be read.
    package var record: Record?
    /// Why the state file could not be read.
    package var problem: String?
  }

  /// The crashes in the folder, by name (so by time within a program). `now` decides whether a
  /// provisional report is still being written.
  package func reports(now: Int64) -> [Report] {
    var files: [String: [String]] = [:]
    var stems: [String] = []
    for name in FileSystem.contents(folder.path) where !name.hasPrefix(".") {
      guard let stem = CrashFolder.crashStem(name, extensions: Self.fileExtensions) else { continue }
      if files[stem] == nil { stems.append(stem) }
      files[stem, default: []].append(String(name.dropFirst(stem.count + 1)))
    }
    return stems.sorted().compactMap { stem in
      let extensions = files[stem] ?? []
      let own = extensions.filter { $0 != Self.stateExtension }
      guard !own.isEmpty else { return nil }  // a state left behind by pruning
      return report(stem, files: own, hasState: extensions.contains(Self.stateExtension), now: now)
    }
  }

  /// The report `stem` (its files as found in the folder).
  func report(_ stem: String, files: [String], hasState: Bool, now: Int64) -> Report {
    var report = Report(stem: stem, files: files, state: .waiting)
    if hasState {
      switch readRecord(stem) {
      case .success(let record): report.record = record
      case .failure(let problem): report.problem = problem.description
      }
    }
    if let record = report.record, record.state != .waiting {
      report.state = record.state
    } else if !files.contains("dmp") {
      report.state = isProvisional(stem, now: now) || !files.contains("crash") ? .incomplete : .noMinidump
      if files.contains("crash"), !isProvisional(stem, now: now), ctimeSeconds("\(stem).crash").map({ now - $0 < 5 }) ?? false {
        report.state = .incomplete  // the minidump follows the report within moments
      }
    } else if isProvisional(stem, now: now) {
      report.state = .incomplete
    } else if isLocked(stem) {
      report.state = .uploading
    }
    return report
  }

  /// The state file of `stem`, read and parsed.
  package func readRecord(_ stem: String) -> Result<Record, StateFileError> {
    let path = "\(folder.path)/\(stem).\(Self.stateExtension)"
    guard let text = Self.readSmallFile(path) else { return .failure(StateFileError(message: "\(path): cannot be read")) }
    do { return .success(try Record(parsing: text)) } catch { return .failure(StateFileError(message: "\(path): \(error)")) }
  }

  /// Writes `record` as the state of `stem`, in place of the previous one at once.
  package func write(_ record: Record, for stem: String, now: Int64) throws(SystemError) {
    _ = try folder.write(record.json, as: "\(stem).\(Self.stateExtension)", access: CrashFolder.Access(), time: now,
                         replacing: true)
  }

  /// True when the report `stem` ends with the provisional marker and changed less than
  /// `provisionalSeconds` ago.
  func isProvisional(_ stem: String, now: Int64) -> Bool {
    let path = "\(folder.path)/\(stem).crash"
    guard let changed = ctimeSeconds("\(stem).crash"), now - changed < Self.provisionalSeconds else { return false }
    let descriptor = PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    let marker = Array(Self.provisionalMarker.utf8)
    var tail = [UInt8](repeating: 0, count: marker.count)
    let end = lseek(descriptor, 0, SEEK_END)
    guard end >= marker.count else { return false }
    let count = tail.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, marker.count, end - off_t(marker.count)) }
    return count == marker.count && tail == marker
  }

  /// When `name` in the folder was last linked or changed (its ctime), seconds since the epoch.
  func ctimeSeconds(_ name: String) -> Int64? {
    var info = stat()
    guard PathBytes.withCString("\(folder.path)/\(name)", { lstat($0, &info) }) == 0 else { return nil }
    return Int64(info.st_ctim.tv_sec)
  }

  /// True when another process holds the lock of `stem` (its minidump's `flock`). flock(2) has no
  /// query: the lock is taken and dropped at once, so an upload starting in that instant skips the
  /// report for its run (it stays waiting, for the next).
  func isLocked(_ stem: String) -> Bool {
    do { return try lock(stem) == nil } catch { return false }
  }

  /// A held upload lock: the minidump open, `flock(LOCK_EX)`, released when closed or when the
  /// process ends.
  package final class Lock {
    /// The minidump, open for reading.
    package let descriptor: Int32
    init(descriptor: Int32) { self.descriptor = descriptor }
    deinit { close(descriptor) }
  }

  /// Takes the upload lock of `stem`; `nil` when another process holds it.
  package func lock(_ stem: String) throws(SystemError) -> Lock? {
    let path = "\(folder.path)/\(stem).dmp"
    let descriptor = PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
    guard descriptor >= 0 else { throw .current("cannot open \(path)") }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      let error = SystemError.current("cannot lock \(path)")
      close(descriptor)
      if error.errno == EWOULDBLOCK { return nil }
      throw error
    }
    return Lock(descriptor: descriptor)
  }

  /// This folder's client id (Crashpad's `guid`), a random UUID as Crashpad writes it
  /// (`8-4-4-4-12` hex digits), made once and kept in the folder as `client-id` (written by the one
  /// file writer; the first writer's id wins a race).
  package func clientID() throws(SystemError) -> String {
    let path = "\(folder.path)/client-id"
    if let text = Self.readSmallFile(path), text.count >= 36 { return String(text.prefix(36)) }
    let hex = Array(Self.newReportID())
    let id = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(hex[$0]) }.joined(separator: "-")
    do {
      _ = try folder.write(id + "\n", as: "client-id", access: CrashFolder.Access(), time: Int64(time(nil)))
    } catch where error.errno == EEXIST {}
    return Self.readSmallFile(path).map { String($0.prefix(36)) } ?? id
  }

  /// `YYYYMMDDTHHMMSSZ` for `time` (seconds since the epoch) in UTC, as crash names write it.
  package static func timeText(_ time: Int64) -> String { CrashFolder.timeText(time) }

  /// A new report id: 32 random hex digits.
  package static func newReportID() -> String {
    var generator = SystemRandomNumberGenerator()  // getrandom(2)
    return hexDigits(generator.next(), width: 16) + hexDigits(generator.next(), width: 16)
  }

  /// The text of a small file (at most `limit` bytes), or nil.
  package static func readSmallFile(_ path: String, limit: Int = 1 << 16) -> String? {
    guard let file = try? MappedFile(path: path), file.count <= limit else { return nil }
    return file.withReader { reader in (try? reader.bytes(at: 0, length: reader.count)).map { String(decoding: $0, as: UTF8.self) } }
  }
}

extension CrashDatabase {
  /// Removes the files of sent reports beyond the newest `count` sent ones (by the time they were
  /// sent, then by name), of those sent more than `maximumAge` seconds before `now`, and then of the
  /// oldest sent ones until the crash files of the whole folder (every report's `.crash`, `.dmp`,
  /// `.core.zst` and state file) take at most `maximumBytes` (as Crashpad's and systemd-coredump's
  /// size limits); reports in any other state are never touched, so a folder of waiting reports can
  /// stay above the limit. Only files that are the writer's own are removed (as
  /// `CrashFolder.removeOldest` decides: regular, owned by the effective user, marked with their own
  /// name), the state file last, so a report whose crash files stay keeps its state. Returns the
  /// paths removed.
  @discardableResult
  package func pruneSent(keeping count: Int?, maximumAge: Int64?, maximumBytes: Int64? = nil, now: Int64) -> [String] {
    let all = reports(now: now)
    let sent = all.filter { $0.state == .sent }
      .sorted { ($0.record?.sentTime ?? 0, $0.stem) > ($1.record?.sentTime ?? 0, $1.stem) }
    var total: Int64 = 0
    if maximumBytes != nil {
      for report in all {
        for ext in report.files + [Self.stateExtension] {
          let (sum, overflow) = total.addingReportingOverflow(fileSize("\(report.stem).\(ext)"))
          total = overflow ? .max : sum
        }
      }
    }
    var removed: [String] = []
    var pruned = Set<String>()
    func remove(_ report: Report) {
      pruned.insert(report.stem)
      var kept = false
      for ext in report.files + [Self.stateExtension] {
        let name = "\(report.stem).\(ext)"
        let path = "\(folder.path)/\(name)"
        var info = stat()
        guard ext != Self.stateExtension || !kept else { continue }
        guard PathBytes.withCString(path, { lstat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFREG,
              info.st_uid == geteuid(), CrashFolder.isMarked(path, as: name),
              PathBytes.withCString(path, unlink) == 0 else { kept = true; continue }
        total = max(total.subtractingReportingOverflow(Int64(info.st_size)).partialValue, 0)
        removed.append(path)
      }
    }
    for (index, report) in sent.enumerated() {
      let tooMany = count.map { index >= $0 } ?? false
      let tooOld = maximumAge.map { now - (report.record?.sentTime ?? now) > $0 } ?? false
      if tooMany || tooOld { remove(report) }
    }
    if let maximumBytes {
      for report in sent.reversed() where total > maximumBytes && !pruned.contains(report.stem) { remove(report) }
    }
    return removed
  }

  /// The size of `name` in the folder (0 when it is not a regular file there).
  func fileSize(_ name: String) -> Int64 {
    var info = stat()
    guard PathBytes.withCString("\(folder.path)/\(name)", { lstat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFREG else { return 0 }
    return Int64(info.st_size)
  }
}
