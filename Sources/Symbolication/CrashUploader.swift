internal import Glibc
import ProcessInspection
import ImageReaders

/// Sends the reports of a crash folder (`CrashDatabase`) that wait to a crash server, as Crashpad's
/// handler does: one `multipart/form-data` POST per report, the minidump as `upload_file_minidump`,
/// the annotations as form fields, the body gzip-encoded (`Content-Encoding: gzip`); Socorro, Sentry's
/// minidump endpoint, BugSplat and Backtrace take that request. The symbolicated report goes along as
/// one more file part (`imagelog_report`), which Sentry keeps as an attachment.
///
/// What leaves the machine: the minidump without its environment and command line streams
/// (`LinuxEnviron`, `LinuxCmdLine` are made `Unused` and their bytes zeroed) unless asked for, and,
/// with `stripStacks`, without the threads' stack memory (registers and the report's frames stay).
package struct CrashUploader {
  /// How to send.
  package struct Options: Sendable {
    /// The server's URL.
    package var url: String
    /// Form fields given by the user (`--annotation KEY=VALUE`), after (and in place of) ours.
    package var annotations: [(key: String, value: String)] = []
    /// Gzip the body (`Content-Encoding: gzip`), as Crashpad does by default.
    package var gzip = true
    /// The least time between two attempts for one report, seconds; after failures the wait doubles,
    /// up to a day.
    package var rateLimitSeconds: Int64 = 3600
    /// Attempt reports whose next attempt is not due yet.
    package var ignoreSchedule = false
    /// The time an attempt may take, seconds.
    package var timeoutSeconds = 60
    /// Keep the minidump's environment stream.
    package var includeEnvironment = false
    /// Keep the minidump's command line stream.
    package var includeCommandLine = false
    /// Zero the threads' stack memory in the minidump.
    package var stripStacks = false
    /// The `User-Agent`.
    package var userAgent = "imagelog"

    package init(url: String) { self.url = url }
  }

  /// What happened to one report.
  package struct Outcome: Sendable {
    package var stem: String
    /// `sent`, `rejected`, `waiting` (failed, or not due), `uploading` (another process has it), or
    /// the state it was left in.
    package var state: CrashDatabase.State
    /// What to tell: the crash id, the reason of a failure, or why it was skipped.
    package var detail: String
    /// True when a request was made.
    package var attempted: Bool
    /// True when the report was due and is not sent: its request failed or was refused, or could not
    /// be made or recorded (a full disk, an unreadable minidump).
    package var failed: Bool
  }

  /// One request, as it would go.
  package struct Request: Sendable {
    package var fields: [(name: String, value: String)]
    package var files: [(name: String, fileName: String, contentType: String, bytes: [UInt8])]
    package var headers: [String]
    package var body: [UInt8]
  }

  package let database: CrashDatabase
  package let options: Options

  package init(database: CrashDatabase, options: Options) {
    self.database = database
    self.options = options
  }

  /// Sends every report that waits and is due; returns what happened to each report looked at.
  /// `stop`, for the tests of interrupted uploads, is called at each stage with its name
  /// (`before-request`, `after-answer`).
  package func uploadAll(now: () -> Int64 = { Int64(time(nil)) }, stop: (String) -> Void = { _ in }) -> [Outcome] {
    var outcomes: [Outcome] = []
    for report in database.reports(now: now()) where report.state == .waiting || report.state == .uploading {
      outcomes.append(upload(report.stem, now: now, stop: stop))
    }
    return outcomes
  }

  /// Sends the report `stem` when it waits and is due (see `CrashDatabase` for the steps).
  package func upload(_ stem: String, now: () -> Int64, stop: (String) -> Void = { _ in }) -> Outcome {
    func outcome(_ state: CrashDatabase.State, _ detail: String, attempted: Bool = false, failed: Bool? = nil) -> Outcome {
      Outcome(stem: stem, state: state, detail: detail, attempted: attempted, failed: failed ?? (attempted && state != .sent))
    }
    let lock: CrashDatabase.Lock
    do {
      guard let held = try database.lock(stem) else { return outcome(.uploading, "another upload has it") }
      lock = held
    } catch {
      return outcome(.waiting, "\(error)", failed: true)
    }
    // Read again under the lock: another uploader may have sent it since the folder was listed.
    var record = CrashDatabase.Record()
    switch database.readRecord(stem) {
    case .success(let existing): record = existing
    case .failure(let problem):
      if FileSystem.kind("\(database.folder.path)/\(stem).\(CrashDatabase.stateExtension)") != .missing {
        record.reason = problem.description  // rewritten below: the report still waits
      }
    }
    guard record.state == .waiting else { return outcome(record.state, record.crashID ?? record.reason ?? "") }
    let start = now()
    if let next = record.nextAttempt, next > start, !options.ignoreSchedule {
      return outcome(.waiting, "next attempt at \(CrashDatabase.timeText(next))" + (record.reason.map { " (last: \($0))" } ?? ""))
    }
    let request: Request
    do { request = try makeRequest(stem, minidump: lock.descriptor, clientID: try database.clientID()) } catch {
      return outcome(.waiting, "\(error)", failed: true)
    }
    // The attempt is counted before the request: a kill from here on is seen by the next run.
    record.attempts += 1
    record.lastAttempt = start
    record.nextAttempt = start + options.rateLimitSeconds
    record.reason = "attempt \(record.attempts) began at \(CrashDatabase.timeText(start)) and recorded no answer"
    record.reportID = record.reportID ?? CrashDatabase.newReportID()
    record.url = options.url
    do { try database.write(record, for: stem, now: start) } catch {
      return outcome(.waiting, "cannot record the attempt: \(error)", failed: true)
    }
    stop("before-request")
    var sent = request
    sent.fields.append((name: "imagelog_report_id", value: record.reportID ?? ""))
    if let id = record.reportID { sent = finish(sent, reportID: id) }
    let answer = HTTPClient.post(url: Self.url(options.url, fields: request.fields),
                                 headers: sent.headers, body: sent.body, userAgent: options.userAgent,
                                 timeoutSeconds: options.timeoutSeconds)
    stop("after-answer")
    let end = now()
    let result = Self.classify(answer, attempts: record.attempts, rateLimit: options.rateLimitSeconds, now: end)
    record.state = result.state
    record.reason = result.reason
    record.nextAttempt = result.state == .waiting ? result.nextAttempt : nil
    if case .success(let response) = answer {
      record.httpStatus = response.status
      record.answer = String(decoding: response.body.prefix(4096), as: UTF8.self)
      if result.state == .sent {
        record.crashID = Self.crashID(response.body)
        record.sentTime = end
      }
    }
    do { try database.write(record, for: stem, now: end) } catch {
      return outcome(.waiting, "sent, but the state cannot be written: \(error)", attempted: true)
    }
    let detail = switch result.state {
    case .sent: record.crashID.map { "crash id \($0)" } ?? "sent (HTTP \(record.httpStatus ?? 0))"
    default: (result.reason ?? "") + (record.nextAttempt.map { "; next attempt at \(CrashDatabase.timeText($0))" } ?? "")
    }
    return outcome(result.state, detail, attempted: true)
  }

  /// What `uploadAll` would send, report by report, without sending or changing anything: the
  /// reports that wait and are due, each with its request (`imagelog upload --dry-run`).
  package func plannedRequests(now: Int64) -> [(stem: String, request: Result<Request, UploadError>)] {
    database.reports(now: now).filter { $0.state == .waiting }.compactMap { report in
      if let next = report.record?.nextAttempt, next > now, !options.ignoreSchedule { return nil }
      let path = "\(database.folder.path)/\(report.stem).dmp"
      let descriptor = PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
      guard descriptor >= 0 else { return (report.stem, .failure(UploadError(message: "\(SystemError.current("cannot open \(path)"))"))) }
      defer { close(descriptor) }
      do {
        // The client id is made by the first real upload: a dry run writes nothing.
        let clientID = CrashDatabase.readSmallFile("\(database.folder.path)/client-id").map { String($0.prefix(36)) }
        var request = try makeRequest(report.stem, minidump: descriptor, clientID: clientID ?? "(made at the first upload)")
        let id = report.record?.reportID ?? "(made at the first attempt)"
        request.fields.append((name: "imagelog_report_id", value: id))
        return (report.stem, .success(finish(request, reportID: report.record?.reportID ?? "0")))
      } catch {
        return (report.stem, .failure(UploadError(message: "\(path): \(error)")))
      }
    }
  }

  /// Why a request could not be made.
  package struct UploadError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
  }

  /// The state an answer leaves a report in: 2xx sent; 408, 429, 5xx, 3xx and network failures
  /// waiting (429 until its `Retry-After`, the others after the backoff); other 4xx refused for good.
  static func classify(_ answer: Result<HTTPClient.Response, HTTPClient.Failure>, attempts: Int, rateLimit: Int64,
                       now: Int64) -> (state: CrashDatabase.State, reason: String?, nextAttempt: Int64?) {
    // The wait doubles with each failed attempt, from the rate limit, up to a day.
    let doublings = Int64(min(max(attempts - 1, 0), 16))
    let backoff = now + min(rateLimit << doublings, max(rateLimit, 86_400))
    switch answer {
    case .failure(let failure):
      return (.waiting, "\(failure)", backoff)
    case .success(let response):
      let firstLine = String(decoding: response.body.prefix(200), as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
      let reason = "HTTP \(response.status)" + (firstLine.isEmpty ? "" : ": \(firstLine)")
      switch response.status {
      case 200..<300: return (.sent, nil, nil)
      case 429:
        if let text = response.header("Retry-After"), let seconds = Int64(text.trimmingCharacters()), seconds >= 0 {
          return (.waiting, reason + " (Retry-After \(seconds) s)", now + max(seconds, rateLimit))
        }
        return (.waiting, reason, backoff)
      case 408, 500..<600, 300..<400: return (.waiting, reason, backoff)
      default: return (.rejected, reason, nil)
      }
    }
  }

  /// The crash id in a server's answer: Socorro's `CrashID=bp-...`, the JSON `id` of Sentry's, the
  /// JSON `crash_id` (a number) of BugSplat's, or a Breakpad server's bare id (one short line).
  static func crashID(_ body: [UInt8]) -> String? {
    let text = String(decoding: body.prefix(4096), as: UTF8.self).trimmingCharacters()
    if text.hasPrefix("CrashID=") {
      return String(text.dropFirst("CrashID=".count).prefix { !$0.isWhitespace })
    }
    if text.hasPrefix("{"), let value = try? JSONValue.parse(Substring(text), maximumDepth: 8) {
      if let id = value["id"]?.string { return id }
      if let id = value["crash_id"]?.string ?? value["crash_id"]?.integer.map({ String($0) }) { return id }
      return nil
    }
    guard !text.isEmpty, text.count <= 128, !text.contains("\n"), !text.contains("<") else { return nil }
    return text
  }

  /// The request for the report `stem` (its minidump open as `minidump`), without the report id.
  /// `clientID` is the folder's `guid` (`CrashDatabase.clientID`).
  package func makeRequest(_ stem: String, minidump: Int32, clientID: String) throws -> Request {
    let file = try MappedFile(descriptor: minidump, path: "\(database.folder.path)/\(stem).dmp")
    var dump = try file.withReader { reader throws(FormatError) in try reader.bytes(at: 0, length: reader.count) }
    try MinidumpPrivacy.clean(&dump, keepEnvironment: options.includeEnvironment,
                              keepCommandLine: options.includeCommandLine, stripStacks: options.stripStacks)
    var fields: [(name: String, value: String)] = []
    let program = String(stem.split(separator: ".").dropLast(2).joined(separator: "."))
    fields.append((name: "prod", value: program))
    fields.append((name: "guid", value: clientID))
    if let seconds = CrashFolder.time(ofStem: stem) {
      fields.append((name: "crash_time", value: String(seconds)))
    }
    fields.append((name: "imagelog_report_name", value: stem))
    for (key, value) in options.annotations {
      fields.removeAll { $0.name == key }
      fields.append((name: key, value: value))
    }
    var files: [(name: String, fileName: String, contentType: String, bytes: [UInt8])] = []
    files.append((name: "upload_file_minidump", fileName: stem + ".dmp", contentType: "application/octet-stream", bytes: dump))
    let reportPath = "\(database.folder.path)/\(stem).crash"
    if let report = try? MappedFile(path: reportPath) {
      let bytes = report.withReader { reader in (try? reader.bytes(at: 0, length: reader.count)) ?? [] }
      files.append((name: "imagelog_report", fileName: stem + ".crash", contentType: "text/plain; charset=utf-8", bytes: bytes))
    }
    return Request(fields: fields, files: files, headers: [], body: [])
  }

  /// `request` with its body and headers made (multipart, then gzip when asked).
  package func finish(_ request: Request, reportID: String) -> Request {
    var request = request
    let boundary = "---MultipartBoundary-\(reportID)---"
    var body: [UInt8] = []
    func append(_ text: String) { body += Array(text.utf8) }
    for field in request.fields {
      append("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quotedName(field.name))\"\r\n\r\n")
      append(field.value)
      append("\r\n")
    }
    for file in request.files {
      append("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quotedName(file.name))\"; "
             + "filename=\"\(Self.quotedName(file.fileName))\"\r\nContent-Type: \(file.contentType)\r\n\r\n")
      body += file.bytes
      append("\r\n")
    }
    append("--\(boundary)--\r\n")
    request.headers = ["Content-Type: multipart/form-data; boundary=\(boundary)"]
    if options.gzip, let compressed = try? Gzip.compress(body) {
      request.headers.append("Content-Encoding: gzip")
      body = compressed
    }
    request.body = body
    return request
  }

  /// `url` with the client identified in its query as Crashpad's handler does it:
  /// `product=PROD&version=VER&guid=GUID`, from those fields when present (percent-encoded).
  static func url(_ url: String, fields: [(name: String, value: String)]) -> String {
    let query = [("product", "prod"), ("version", "ver"), ("guid", "guid")].compactMap { parameter, field in
      fields.last { $0.name == field }.map { "\(parameter)=\(percentEncoded($0.value))" }
    }
    guard !query.isEmpty else { return url }
    let fragment = url.firstIndex(of: "#") ?? url.endIndex
    let base = url[..<fragment]
    return base + (base.contains("?") ? "&" : "?") + query.joined(separator: "&") + url[fragment...]
  }

  /// `text` with every byte but RFC 3986's unreserved ones percent-encoded.
  static func percentEncoded(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
      let unreserved = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
        || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
      out += unreserved ? String(UnicodeScalar(byte)) : "%" + hexDigits(UInt64(byte), width: 2).uppercased()
    }
    return out
  }

  /// A form field's name or file name in its quoted string, as browsers and Crashpad send them: `"`,
  /// CR and LF percent-encoded.
  static func quotedName(_ name: String) -> String {
    var text = ""
    for character in name {
      switch character {
      case "\"": text += "%22"
      case "\r": text += "%0D"
      case "\n": text += "%0A"
      case "\r\n": text += "%0D%0A"
      default: text.append(character)
      }
    }
    return text
  }
}

/// What is taken out of a minidump before it leaves the machine.
package enum MinidumpPrivacy {
  /// Makes the environment and command line streams (unless kept) `Unused` with their bytes zeroed,
  /// and with `stripStacks` zeroes each thread's stack memory; the dump's layout is unchanged, so
  /// every reader reads it as before, less what was taken.
  ///
  /// It walks the directory and thread lists itself rather than through `MinidumpFile`: it edits bytes
  /// at their offsets, and it must reach every stream of a type (the reader decodes the first thread
  /// list and notes a second one unread, which a hostile dump could use to send stacks on).
  package static func clean(_ dump: inout [UInt8], keepEnvironment: Bool, keepCommandLine: Bool,
                            stripStacks: Bool) throws(FormatError) {
    var dropped: Set<UInt32> = []
    if !keepEnvironment { dropped.insert(MinidumpFile.linuxEnvironmentType) }
    if !keepCommandLine { dropped.insert(MinidumpFile.linuxCommandLineType) }
    var directoryEntries: [Int] = []  // offsets of the type fields to clear
    var ranges: [Range<Int>] = []  // bytes to zero
    try ByteReader.reading(dump) { file throws(FormatError) in
      guard file.count >= 32, try file.peek(UInt32.self, at: 0) == 0x504D_444D else {  // "MDMP"
        throw .notRecognized(magic: file.count >= 4 ? try file.peek(UInt32.self, at: 0) : 0)
      }
      let count = Int(try file.peek(UInt32.self, at: 8))
      let directory = Int(try file.peek(UInt32.self, at: 12))
      guard count <= 4096 else { throw .outOfRange(start: directory, length: count, limit: file.count) }
      for index in 0..<count {
        let entry = directory + index * 12  // count <= 4096 and directory < 2^32: no overflow on 64-bit
        let type = try file.peek(UInt32.self, at: entry)
        let size = Int(try file.peek(UInt32.self, at: entry + 4))
        let rva = Int(try file.peek(UInt32.self, at: entry + 8))
        guard rva <= file.count, size <= file.count - rva else {
          throw .outOfRange(start: rva, length: size, limit: file.count)
        }
        if dropped.contains(type) {
          directoryEntries.append(entry)
          ranges.append(rva..<rva + size)
        } else if stripStacks && type == MinidumpFile.threadListType && size >= 4 {
          let threads = Int(try file.peek(UInt32.self, at: rva))
          guard threads <= (size - 4) / 48 else { throw .outOfRange(start: rva, length: size, limit: file.count) }
          for thread in 0..<threads {
            let descriptor = rva + 4 + thread * 48 + 24  // MINIDUMP_THREAD.Stack
            let stackSize = Int(try file.peek(UInt32.self, at: descriptor + 8))
            let stackRVA = Int(try file.peek(UInt32.self, at: descriptor + 12))
            guard stackRVA <= file.count, stackSize <= file.count - stackRVA else {
              throw .outOfRange(start: stackRVA, length: stackSize, limit: file.count)
            }
            ranges.append(stackRVA..<stackRVA + stackSize)
          }
        }
      }
    }
    for entry in directoryEntries { dump.replaceSubrange(entry..<entry + 4, with: [0, 0, 0, 0]) }  // UnusedStream
    for range in ranges { dump.replaceSubrange(range, with: repeatElement(0, count: range.count)) }
  }
}

/// Gzip (RFC 1952) with the system's zlib: `compress2` makes a zlib stream, whose deflate data,
/// between its 2-byte header and its Adler-32, is wrapped in gzip's header and CRC-32 trailer.
enum Gzip {
  private typealias Compress = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt>?,
                                               UnsafePointer<UInt8>?, UInt, Int32) -> Int32
  private typealias Bound = @convention(c) (UInt) -> UInt
  private typealias CRC = @convention(c) (UInt, UnsafePointer<UInt8>?, UInt32) -> UInt

  private struct Functions: @unchecked Sendable { var compress: Compress, bound: Bound, crc: CRC }
  private static let functions: Result<Functions, SystemLibrary.LoadError> = {
    do throws(SystemLibrary.LoadError) {
      return .success(Functions(compress: try SystemLibrary.symbol("libz.so.1", "compress2", as: Compress.self).get(),
                                bound: try SystemLibrary.symbol("libz.so.1", "compressBound", as: Bound.self).get(),
                                crc: try SystemLibrary.symbol("libz.so.1", "crc32", as: CRC.self).get()))
    } catch { return .failure(error) }
  }()

  static func compress(_ bytes: [UInt8]) throws -> [UInt8] {
    let zlib = try functions.get()
    var length = zlib.bound(UInt(bytes.count))
    var out = [UInt8](repeating: 0, count: Int(length))
    let status = out.withUnsafeMutableBufferPointer { target in
      bytes.withUnsafeBufferPointer { zlib.compress(target.baseAddress, &length, $0.baseAddress, UInt(bytes.count), 6) }
    }
    guard status == 0, length >= 6 else { throw SystemError("zlib compress2 returned \(status)", errno: EINVAL) }
    // The CRC-32 in pieces: crc32 takes a 32-bit length.
    var crc: UInt = 0
    var offset = 0
    bytes.withUnsafeBufferPointer { buffer in
      while offset < bytes.count {
        let piece = min(bytes.count - offset, 1 << 30)
        crc = zlib.crc(crc, buffer.baseAddress.map { $0 + offset }, UInt32(piece))
        offset += piece
      }
    }
    var gzip: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3]  // deflate, no flags, no time, Unix
    gzip += out[2..<Int(length) - 4]
    for value in [UInt32(truncatingIfNeeded: crc), UInt32(truncatingIfNeeded: bytes.count)] {
      withUnsafeBytes(of: value.littleEndian) { gzip += $0 }
    }
    return gzip
  }
}

private extension String {
  func trimmingCharacters() -> String {
    String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
  }
}
