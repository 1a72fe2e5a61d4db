#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageReaders
import Symbolication

/// `imagelog upload --url URL DIR`: sends the crashes of a folder that wait to a crash server, as
/// Crashpad's handler does, and records each outcome beside the crash (see `CrashDatabase`).
struct UploadCommand: Command {
  static let name = "upload"
  static let abstract = "Send the crashes waiting in a crash folder to a crash server (Socorro, Sentry, BugSplat...)."
  static let usage = "imagelog upload --url <url> [--annotation <key>=<value> ...] [--annotations-file <file>] "
    + "[--no-gzip] [--rate-limit <seconds>] [--now] [--timeout <seconds>] [--include-environment] "
    + "[--include-command-line] [--strip-stacks] [--max-sent <n>] [--max-sent-days <days>] [--max-size <bytes>] [--dry-run] <dir>"
  static let helpSections = """
    ARGUMENTS:
      <dir>                   A crash folder (run --crash-dir, core-handler --output-dir).

    OPTIONS:
      --url <url>             Where to send: a Breakpad/Crashpad minidump endpoint, as
                              https://o0.ingest.sentry.io/api/PROJECT/minidump/?sentry_key=KEY (Sentry),
                              https://crash-reports.example.org/submit (Socorro),
                              https://DATABASE.bugsplat.com/post/bp/crash/crashpad.php (BugSplat).
      --annotation <key>=<value>
                              One more form field (prod and ver, say); replaces one of ours of that
                              name. Repeatable.
      --annotations-file <file>
                              Form fields from a file, one KEY=VALUE a line (# starts a comment).
      --no-gzip               Send the body as it is (by default gzip-encoded, Content-Encoding: gzip,
                              as Crashpad sends it).
      --rate-limit <seconds>  The least time between two attempts for one report (default 3600, as
                              Crashpad's one upload attempt an hour); after each failure the wait
                              doubles, up to a day.
      --now                   Try the waiting reports whose next attempt is not due yet.
      --timeout <seconds>     Give up on one request after this long (default 60); it stays waiting.
      --include-environment   Send the minidump's environment stream (left out by default).
      --include-command-line  Send the minidump's command line stream (left out by default).
      --strip-stacks          Send the threads' registers but not their stack memory.
      --max-sent <n>          Then keep the files of at most this many sent crashes, removing those
                              sent longest ago (waiting and refused crashes are never removed).
      --max-sent-days <days>  Then remove the files of crashes sent more than this many days ago.
      --max-size <bytes>      Then remove the files of the crashes sent longest ago until the
                              folder's crash files take at most this many bytes.
                              Only the writer's own crash files are removed (see core-handler).
      --dry-run               Show what would be sent, change nothing.
      -h, --help              Show help information.

    WHAT IS SENT:
      One multipart/form-data POST per report: the minidump as upload_file_minidump
      (PROGRAM.PID.TIME.dmp, application/octet-stream), the symbolicated report as imagelog_report
      (PROGRAM.PID.TIME.crash, text/plain), and the fields prod (the program), guid (this folder's
      client id, kept in DIR/client-id), crash_time (seconds since the epoch), imagelog_report_name,
      imagelog_report_id (the same on every attempt of one report, so a server can drop a second
      copy) and the --annotation fields. The answer is kept in PROGRAM.PID.TIME.upload, with the crash
      id found in it (Socorro's CrashID=bp-..., Sentry's JSON id).

    OUTCOMES:
      2xx: sent, never again. 408, 429, 5xx, redirects and network failures: waiting, with the reason
      and the time of the next attempt (429: not before its Retry-After). Other 4xx: rejected, with
      the reason, not sent again (remove the .upload file to send it again). See 'imagelog crashes'.
      Needs libcurl (libcurl.so.4; apt install libcurl4); without it nothing is sent and every
      crash stays waiting.

    EXIT STATUS:
      0 when every report tried was sent (or none was due); 1 when one failed or was refused.
    """

  var folder: String
  var options: CrashUploader.Options
  var dryRun: Bool
  var maxSent: Int?
  var maxSentAge: Int64?
  var maxSize: Int64?

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    guard let url = try scanner.option("--url") else { throw scanner.usageError("Missing '--url <url>'") }
    options = CrashUploader.Options(url: url)
    options.userAgent = "imagelog/\(ImageLogMain.version)"
    var annotations: [String] = []
    for file in try scanner.options("--annotations-file") {
      guard let text = CrashDatabase.readSmallFile(file, limit: 1 << 20) else { throw scanner.usageError("Cannot read the annotations file '\(file)'") }
      annotations += text.split(separator: "\n").map { String($0) }.filter { !$0.hasPrefix("#") && $0.contains("=") }
    }
    annotations += try scanner.options("--annotation")
    for annotation in annotations {
      guard let equals = annotation.firstIndex(of: "="), equals != annotation.startIndex else {
        throw scanner.usageError("The value '\(annotation)' is invalid for '--annotation <key>=<value>'")
      }
      options.annotations.append((key: String(annotation[..<equals]), value: String(annotation[annotation.index(after: equals)...])))
    }
    func seconds(_ name: String, _ unit: String = "seconds") throws(UsageError) -> Int? {
      guard let text = try scanner.option(name) else { return nil }
      guard let value = Int(text), value >= 0 else { throw scanner.usageError("The value '\(text)' is invalid for '\(name) <\(unit)>'") }
      return value
    }
    if let value = try seconds("--rate-limit") { options.rateLimitSeconds = Int64(value) }
    if let value = try seconds("--timeout") { options.timeoutSeconds = max(value, 1) }
    maxSent = try seconds("--max-sent", "n")
    maxSentAge = try seconds("--max-sent-days", "days").flatMap { Int64(exactly: $0)?.multipliedReportingOverflow(by: 86_400) }
      .map { $0.overflow ? Int64.max : $0.partialValue }
    maxSize = try seconds("--max-size", "bytes").map { Int64($0) }
    options.gzip = !scanner.flag("--no-gzip")
    options.ignoreSchedule = scanner.flag("--now")
    options.includeEnvironment = scanner.flag("--include-environment")
    options.includeCommandLine = scanner.flag("--include-command-line")
    options.stripStacks = scanner.flag("--strip-stacks")
    dryRun = scanner.flag("--dry-run")
    let rest = try scanner.positionals()
    guard rest.count == 1, let path = rest.first else { throw scanner.usageError("Expected one <dir>") }
    folder = path
  }

  func run() throws -> ExitStatus {
    let database: CrashDatabase
    do { database = try CrashDatabase(existing: folder) } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    let uploader = CrashUploader(database: database, options: options)
    if dryRun { return showPlan(uploader) }
    guard HTTPClient.isAvailable || database.reports(now: Int64(time(nil))).allSatisfy({ $0.state != .waiting }) else {
      printError("imagelog: upload: cannot load libcurl.so.4 (install it: apt install libcurl4); the crashes stay waiting")
      return .failure
    }
    // For the tests of interrupted uploads only: the process kills itself at the named stage.
    let killAt = FileSystem.environment("IMAGELOG_UPLOAD_TEST_KILL")
    var status = ExitStatus.success
    for outcome in uploader.uploadAll(stop: { stage in if stage == killAt { raise(SIGKILL) } }) {
      printOutput("\(outcome.stem): \(outcome.state.rawValue)\(outcome.detail.isEmpty ? "" : ": " + outcome.detail)")
      if outcome.failed { status = .failure }
    }
    if maxSent != nil || maxSentAge != nil || maxSize != nil {
      for path in database.pruneSent(keeping: maxSent, maximumAge: maxSentAge, maximumBytes: maxSize, now: Int64(time(nil))) { printOutput("removed \(path)") }
    }
    return status
  }

  /// `--dry-run`: each request that would go, its fields and files.
  func showPlan(_ uploader: CrashUploader) -> ExitStatus {
    var status = ExitStatus.success
    for (stem, request) in uploader.plannedRequests(now: Int64(time(nil))) {
      switch request {
      case .failure(let error):
        printError("imagelog: \(error)")
        status = .failure
      case .success(let request):
        var text = "\(stem): would POST \(request.body.count) bytes to \(options.url)\n"
        for header in request.headers { text += "  header \(header)\n" }
        for field in request.fields { text += "  field \(field.name)=\(field.value)\n" }
        for file in request.files {
          text += "  file \(file.name): \(file.fileName), \(file.bytes.count) bytes, \(file.contentType)\n"
        }
        writeOutput(text)
      }
    }
    return status
  }
}
