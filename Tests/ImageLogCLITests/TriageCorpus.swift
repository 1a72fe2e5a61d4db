// A folder of a few hundred crashes of a handful of bugs, made at test time for TriageCommandTests:
// three bugs in one C program (Tests/Programs/triage-bugs.c) built four times, crashed under
// `imagelog run --crash-dir` (a .crash and a .dmp each), under gdb (a core) and with AddressSanitizer
// (its log); each file copied many times with other times, and two of the repository's report
// fixtures copied too. What each bug must give is known from how it was made, not from triage.
import Glibc
import ImageLogTestSupport
import Testing

struct TriageCorpus: Sendable {
  struct Bug: Sendable {
    /// The signature the bug's crashing function gives (its name: the top significant frame).
    var signature: String?
    var files: Set<String>
    /// `NAME BUILDID` (the first 16 bytes of the build-id readelf shows), or the name alone.
    var builds: Set<String> = []
    var reasons: Set<String> = []
    /// The crashing function and its line in the source (the line holding `/* triage: MODE */`).
    var function: String?
    var line: Int?
    var firstSeen: Int64?
    var lastSeen: Int64?
  }

  let root: String
  /// The folder triage reads.
  let folder: String
  var bugs: [String: Bug] = [:]
  var unreadable: [String] = []
  var total: Int { bugs.values.reduce(0) { $0 + $1.files.count } }

  static let shared: Result<TriageCorpus, TestSupportError> = {
    do { return .success(try TriageCorpus()) } catch let error as TestSupportError { return .failure(error) } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }()

  static let source = packageRoot + "/Tests/Programs/triage-bugs.c"

  static func setModified(_ path: String, _ seconds: Int64) throws {
    var times = [timeval(tv_sec: Int(seconds), tv_usec: 0), timeval(tv_sec: Int(seconds), tv_usec: 0)]
    guard utimes(path, &times) == 0 else { throw TestSupportError("utimes \(path) failed") }
  }

  static func modified(_ path: String) -> Int64 {
    var info = stat()
    return stat(path, &info) == 0 ? Int64(info.st_mtim.tv_sec) : 0
  }

  static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildResult {
    let result = try runChild(arguments, environment: environment, timeoutSeconds: 120)
    guard !result.timedOut else { throw TestSupportError("\(arguments) timed out") }
    return result
  }

  /// The build-id readelf -n shows for `path`, its first 16 bytes in hex.
  static func buildID(_ path: String) throws -> String {
    let notes = try run(["readelf", "-n", path]).output
    guard let line = notes.split(separator: "\n").first(where: { $0.contains("Build ID:") }),
          let hex = line.split(separator: " ").last else { throw TestSupportError("no build-id in \(path)") }
    return String(hex.prefix(32))
  }

  /// The line of the source that holds `/* triage: MODE */`.
  static func sourceLine(_ mode: String) throws -> Int {
    guard let text = readFile(source),
          let index = text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex(where: { $0.contains("/* triage: \(mode) */") })
    else { throw TestSupportError("no marker for \(mode) in \(source)") }
    return index + 1
  }

  init() throws {
    root = try makeTemporaryDirectory("imagelog-triage")
    // Made once for the suite and read by each test: removed when the test process ends.
    atexit {
      if case .success(let corpus) = TriageCorpus.shared { _ = try? runChild(["rm", "-rf", corpus.root]) }
    }
    folder = root + "/folder"
    let programs = root + "/programs"
    let build = """
      set -e
      mkdir -p '\(programs)' '\(folder)/crashes' '\(folder)/copied' '\(folder)/dumps' '\(folder)/cores' '\(folder)/sanitizer' '\(folder)/fixtures'
      cd '\(programs)'
      cc -g -O1 -DBUILD=1 -o alpha '\(Self.source)'
      cc -g -O1 -DBUILD=2 -o alpha2 '\(Self.source)'
      cc -g -O1 -DBUILD=3 -o beta '\(Self.source)'
      cc -g -O1 -DBUILD=4 -fsanitize=address -o gamma '\(Self.source)'
      """
    let built = try Self.run(["sh", "-c", build])
    guard built.exitCode == 0 else { throw TestSupportError("building triage-bugs.c failed: \(built.error)") }
    let imagelog = builtProduct("imagelog")
    let ids = (alpha: try Self.buildID(programs + "/alpha"), alpha2: try Self.buildID(programs + "/alpha2"),
               beta: try Self.buildID(programs + "/beta"))
    var null = Bug(signature: "triage_null_write", files: [], builds: ["alpha \(ids.alpha)", "alpha2 \(ids.alpha2)"],
                   reasons: ["SIGSEGV / SEGV_MAPERR"], function: "triage_null_write", line: try Self.sourceLine("null"))
    var abort = Bug(signature: "triage_check_failed", files: [], builds: ["beta \(ids.beta)"], reasons: ["SIGABRT / SI_TKILL"],
                    function: "triage_check_failed", line: try Self.sourceLine("abort"))
    // The sanitizer's kind is the crash's abort message: siggen's abort rule puts it first.
    var overflow = Bug(signature: "Abort | AddressSanitizer: heap-buffer-overflow | triage_overflow", files: [], builds: ["gamma"], reasons: ["AddressSanitizer: heap-buffer-overflow"],
                       function: "triage_overflow", line: try Self.sourceLine("overflow"))

    // `imagelog run --crash-dir`: each crash leaves PROGRAM.PID.TIME.crash and .dmp (one crash: the .crash is read).
    let crashes = folder + "/crashes"
    var seen: Set<String> = []
    var realTimes: [String: [Int64]] = [:]  // bug -> the times the reports state
    for (program, mode) in [("alpha", "null"), ("alpha", "null"), ("alpha2", "null"), ("alpha2", "null"), ("beta", "abort"), ("beta", "abort")] {
      let result = try Self.run([imagelog, "run", "--crash-dir", crashes, "--crash-wait", "-o", "/dev/null", "--", programs + "/" + program, mode])
      guard result.signal != nil || result.exitCode != 0 else { throw TestSupportError("\(program) \(mode) did not crash") }
      let new = Set(directoryNames(crashes)).subtracting(seen)
      seen.formUnion(new)
      guard let report = new.first(where: { $0.hasSuffix(".crash") }), let dump = new.first(where: { $0.hasSuffix(".dmp") }),
            let text = readFile(crashes + "/" + report),
            let date = text.split(separator: "\n").first(where: { $0.hasPrefix("Date/Time:") }) else {
        throw TestSupportError("run --crash-dir left \(new.sorted()) for \(program) \(mode)")
      }
      let time = epochSeconds(String(date.dropFirst("Date/Time:".count).drop { $0 == " " }))
      realTimes[mode, default: []].append(time)
      // Copies of the report under other crash names and dates (the date the report states is its time).
      for copy in 0..<15 {
        let day = copy + 1
        let stamp = "202611\(day < 10 ? "0" : "")\(day)T100000Z"
        let path = folder + "/copied/\(program).\(50_000 + seen.count * 100 + copy).\(stamp).crash"
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
          line.hasPrefix("Date/Time:") ? "Date/Time:       2026-11-\(day < 10 ? "0" : "")\(day) 10:00:00 +0000" : String(line)
        }
        try writeFile(path, lines.joined(separator: "\n"))
        if mode == "null" { null.files.insert(path) } else { abort.files.insert(path) }
      }
      // Copies of the minidump (a minidump states its own time).
      guard let bytes = readFileBytes(crashes + "/" + dump) else { throw TestSupportError("cannot read \(dump)") }
      for copy in 0..<8 {
        let path = folder + "/dumps/\(program)-\(seen.count)-\(copy).dmp"
        try writeFile(path, bytes: bytes)
        if mode == "null" { null.files.insert(path) } else { abort.files.insert(path) }
      }
      if mode == "null" { null.files.insert(crashes + "/" + report) } else { abort.files.insert(crashes + "/" + report) }
      if unreadable.isEmpty {
        try writeFile(folder + "/damaged.dmp", bytes: Array(bytes.prefix(300)))
        try writeFile(folder + "/notes.txt", "Things to look at on Monday: the crash folder, the build farm.\n")
        unreadable = [folder + "/damaged.dmp", folder + "/notes.txt"]
      }
    }
    null.firstSeen = epochSeconds("2026-11-01 10:00:00")
    null.lastSeen = realTimes["null"]?.max()
    abort.firstSeen = epochSeconds("2026-11-01 10:00:00")
    abort.lastSeen = realTimes["abort"]?.max()

    // A core written by gdb at the crash, and two copies (a core states no time: its file's is used).
    if haveTool("gdb") {
      let core = folder + "/cores/beta.core"
      _ = try Self.run(["gdb", "-q", "-batch", "-nx", "-ex", "run", "-ex", "generate-core-file \(core)", "--args", programs + "/beta", "abort"])
      guard let bytes = readFileBytes(core) else { throw TestSupportError("gdb wrote no core") }
      for copy in 0..<3 {
        let path = copy == 0 ? core : folder + "/cores/beta-\(copy).core"
        if copy > 0 { try writeFile(path, bytes: bytes) }
        try Self.setModified(path, epochSeconds("2026-10-20 12:00:00"))
        abort.files.insert(path)
      }
      abort.firstSeen = epochSeconds("2026-10-20 12:00:00")
    }

    // AddressSanitizer's log (no time in it: the file's modification time), copied with older times.
    for run in 0..<2 {
      let result = try Self.run([programs + "/gamma", "overflow"], environment: ["ASAN_OPTIONS": "detect_leaks=0"])
      guard result.error.contains("heap-buffer-overflow") else { throw TestSupportError("gamma gave no ASan report: \(result.error)") }
      let path = folder + "/sanitizer/gamma-\(run).log"
      try writeFile(path, result.error)
      overflow.files.insert(path)
      overflow.lastSeen = max(overflow.lastSeen ?? 0, Self.modified(path))
      for copy in 0..<40 {
        let copyPath = folder + "/sanitizer/gamma-\(run)-\(copy).log"
        try writeFile(copyPath, result.error)
        try Self.setModified(copyPath, epochSeconds("2026-10-01 08:00:00") + Int64(copy) * 86_400)
        overflow.files.insert(copyPath)
      }
    }
    overflow.firstSeen = epochSeconds("2026-10-01 08:00:00")

    // Two of the repository's report fixtures, 30 copies each: one group each.
    for fixture in ["tombstone-retroarch-519.txt", "asan-rust-90977.txt"] {
      guard let text = readFile(packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/" + fixture) else {
        throw TestSupportError("no fixture \(fixture)")
      }
      var bug = Bug(files: [])
      for copy in 0..<30 {
        let path = folder + "/fixtures/\(copy)-\(fixture)"
        try writeFile(path, text)
        bug.files.insert(path)
      }
      bugs[fixture] = bug
    }
    bugs["null"] = null
    bugs["abort"] = abort
    bugs["overflow"] = overflow
  }
}
