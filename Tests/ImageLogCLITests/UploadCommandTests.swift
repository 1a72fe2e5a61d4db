import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog upload` and `imagelog crashes` against a crash server the test starts on 127.0.0.1
/// (Tests/Programs/crash-receiver.py), which records every request and plays the servers' answers
/// and failures; and against Crashpad's own handler uploading the same kind of crash.
@Suite struct UploadCommandTests {
  static let imagelog = builtProduct("imagelog")
  static let python = which("python3")
  static let canRun = python != nil && dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL) != nil
  static let reason: Comment = "needs python3 (the test's server) and libcurl.so.4"

  /// The test's crash server: started on a free port, killed when dropped.
  final class Receiver {
    let child: RunningChild
    let folder: String
    let url: String

    init(in directory: String, modes: [String] = ["ok"]) throws {
      folder = directory + "/received-\(UInt64.random(in: 0...UInt64.max))"
      guard mkdir(folder, 0o700) == 0 else { throw TestSupportError("cannot make \(folder)") }
      child = try RunningChild([UploadCommandTests.python ?? "python3", packageRoot + "/Tests/Programs/crash-receiver.py", folder,
                                "--modes", modes.joined(separator: ",")])
      guard let line = child.readLine(), line.hasPrefix("listening "), let port = Int(line.dropFirst("listening ".count)) else {
        throw TestSupportError("the receiver did not start")
      }
      url = "http://127.0.0.1:\(port)/submit"
    }

    /// The requests received whole, by number.
    func requests() throws -> [JSONValue] {
      let names = directoryNames(folder).filter { $0.hasSuffix(".json") && !$0.contains("partial") }
      return try names.sorted { (Int($0.split(separator: ".")[0]) ?? 0) < (Int($1.split(separator: ".")[0]) ?? 0) }.map { name in
        try JSONValue.parse(Substring(readFile(folder + "/" + name) ?? ""))
      }
    }

    /// The file part `name` of request `number`, as received.
    func file(_ number: Int, _ name: String) -> String { "\(folder)/\(number).\(name).bin" }
  }

  /// A crash folder holding one crash of `sh`, captured by `imagelog run --crash-dir --crash-wait`.
  static func crashFolder(in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (folder: String, stem: String) {
    let folder = directory + "/crashes"
    let run = try runChild([imagelog, "run", "--crash-dir", folder, "--crash-wait", "--", "sh", "-c", "kill -SEGV $$"],
                           timeoutSeconds: 120)
    try #require(run.signal == SIGSEGV, "sh should die of SIGSEGV: \(run.status) \(run.error)", sourceLocation: sourceLocation)
    let dumps = directoryNames(folder).filter { $0.hasSuffix(".dmp") }
    try #require(dumps.count == 1, "\(directoryNames(folder))", sourceLocation: sourceLocation)
    return (folder, String(dumps[0].dropLast(4)))
  }

  /// `count` more crashes in `folder`, copies of `stem`'s files under names of their own.
  static func copies(of stem: String, in folder: String, count: Int) throws -> [String] {
    let dump = try #require(readFileBytes("\(folder)/\(stem).dmp"))
    let report = try #require(readFileBytes("\(folder)/\(stem).crash"))
    return try (0..<count).map { index in
      let copy = "copy\(index).\(1000 + index).20260101T000000Z"
      try writeFile("\(folder)/\(copy).dmp", bytes: dump)
      try writeFile("\(folder)/\(copy).crash", bytes: report)
      return copy
    }
  }

  /// `imagelog crashes --format json DIR`, by report name.
  static func states(_ folder: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: JSONValue] {
    let run = try runChild([imagelog, "crashes", "--format", "json", folder])
    try #require(run.exitCode == 0, "\(run.error)", sourceLocation: sourceLocation)
    let document = try JSONValue.parse(Substring(run.output))
    #expect(document["schema"]?.string == "imagelog.crashes", sourceLocation: sourceLocation)
    var states: [String: JSONValue] = [:]
    for report in document["reports"]?.array ?? [] { if let name = report["name"]?.string { states[name] = report } }
    return states
  }

  static func upload(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildResult {
    try runChild([imagelog, "upload"] + arguments, environment: environment, timeoutSeconds: 120)
  }

  /// The stream types in a minidump's directory.
  static func streamTypes(_ path: String) throws -> [UInt32] {
    let bytes = try #require(readFileBytes(path))
    func u32(_ at: Int) -> UInt32 { bytes[at..<at + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
    try #require(bytes.count >= 32 && u32(0) == 0x504D_444D)
    let (count, directory) = (Int(u32(8)), Int(u32(12)))
    try #require(directory + count * 12 <= bytes.count)
    return (0..<count).map { u32(directory + $0 * 12) }
  }

  @Test(.enabled(if: canRun, reason)) func sendsAWaitingCrashOnceAndKeepsTheAnswer() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    #expect(try Self.states(folder)[stem]?["state"]?.string == "waiting")
    let receiver = try Receiver(in: directory, modes: ["socorro"])
    let run = try Self.upload(["--url", receiver.url, "--annotation", "ver=1.2.3", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let requests = try receiver.requests()
    try #require(requests.count == 1)
    let request = requests[0]
    #expect(request["method"]?.string == "POST")
    #expect(request["content_type"]?.string?.hasPrefix("multipart/form-data; boundary=") == true)
    #expect(request["content_encoding"]?.string == "gzip")
    #expect(request["fields"]?["prod"]?.string == "dash")
    #expect(request["fields"]?["ver"]?.string == "1.2.3")
    let guid = try #require(request["fields"]?["guid"]?.string)
    #expect(guid.count == 36 && guid.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12])
    #expect(request["path"]?.string == "/submit?product=dash&version=1.2.3&guid=\(guid)")
    #expect(request["files"]?["upload_file_minidump"]?["filename"]?.string == stem + ".dmp")
    #expect(request["files"]?["imagelog_report"]?["filename"]?.string == stem + ".crash")
    // The report attached is the one in the folder, byte for byte.
    #expect(readFileBytes(receiver.file(1, "imagelog_report")) == readFileBytes("\(folder)/\(stem).crash"))
    // The crash id Socorro answered is kept; a second run sends nothing.
    let answer = try #require(request["answer"]?.string)
    let state = try #require(try Self.states(folder)[stem])
    #expect(state["state"]?.string == "sent")
    #expect(state["crash_id"]?.string.map { "CrashID=\($0)\n" } == answer)
    let again = try Self.upload(["--url", receiver.url, "--now", folder])
    #expect(again.exitCode == 0)
    #expect(try receiver.requests().count == 1)
  }

  @Test(.enabled(if: canRun, reason)) func sentryAnswerAndNoGzipAndDryRun() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let receiver = try Receiver(in: directory, modes: ["sentry"])
    let dry = try Self.upload(["--url", receiver.url, "--dry-run", folder])
    #expect(dry.exitCode == 0)
    #expect(dry.output.contains("\(stem): would POST") && dry.output.contains("file upload_file_minidump: \(stem).dmp"))
    #expect(try receiver.requests().isEmpty)
    #expect(!directoryNames(folder).contains { $0.hasSuffix(".upload") || $0 == "client-id" }, "a dry run writes nothing")
    let run = try Self.upload(["--url", receiver.url, "--no-gzip", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let request = try #require(try receiver.requests().first)
    #expect(request["content_encoding"]?.string == "")
    let answer = try JSONValue.parse(Substring(request["answer"]?.string ?? ""))
    #expect(try Self.states(folder)[stem]?["crash_id"]?.string == answer["id"]?.string)
  }

  /// BugSplat's crashpad.php wants `product` and `version` fields (docs.bugsplat.com, Crash Post
  /// Endpoints) and answers a JSON object whose `crash_id` is a number.
  @Test(.enabled(if: canRun, reason)) func bugSplatFieldsAndAnswer() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let receiver = try Receiver(in: directory, modes: ["bugsplat"])
    let run = try Self.upload(["--url", receiver.url, "--annotation", "product=MyApp", "--annotation", "version=1.2.3", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let request = try #require(try receiver.requests().first)
    #expect(request["fields"]?["product"]?.string == "MyApp" && request["fields"]?["version"]?.string == "1.2.3", "\(request)")
    let answer = try JSONValue.parse(Substring(request["answer"]?.string ?? ""))
    let id = try #require(answer["crash_id"]?.integer)
    #expect(try Self.states(folder)[stem]?["crash_id"]?.string == String(id))
  }

  @Test(.enabled(if: canRun, reason)) func failuresWaitWithTheirReasonAndRefusalsAreKept() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    // Request 1: 500; 2: 429 Retry-After 7200; 3: reset mid-body; 4: slow past the timeout; 5: 413.
    let receiver = try Receiver(in: directory, modes: ["500", "429:7200", "reset", "slow:4", "413", "ok"])
    func attempt() throws -> JSONValue {
      let before = Int64(time(nil))
      let run = try Self.upload(["--url", receiver.url, "--now", "--rate-limit", "60", "--timeout", "2", folder])
      #expect(run.exitCode == 1, "a failed attempt is a failure: \(run.output)")
      let state = try #require(try Self.states(folder)[stem])
      if state["state"]?.string == "waiting" { #expect((state["next_attempt"]?.integer).map(Int64.init) ?? 0 >= before + 60) }
      return state
    }
    var state = try attempt()
    #expect(state["state"]?.string == "waiting" && state["reason"]?.string == "HTTP 500: internal error")
    state = try attempt()
    #expect(state["reason"]?.string?.hasPrefix("HTTP 429") == true)
    #expect((state["next_attempt"]?.integer).map(Int64.init) ?? 0 >= Int64(time(nil)) + 7100, "Retry-After is honoured")
    state = try attempt()
    #expect(state["state"]?.string == "waiting")
    #expect(state["http_status"] == nil || state["reason"]?.string?.hasPrefix("HTTP") == false, "\(state)")
    state = try attempt()
    #expect(state["state"]?.string == "waiting" && state["reason"]?.string?.lowercased().contains("timeout") == true, "\(state)")
    state = try attempt()
    #expect(state["state"]?.string == "rejected" && state["reason"]?.string == "HTTP 413: payload too large")
    #expect(state["attempts"]?.integer == 5)
    // Refused for good: not sent again, even with --now.
    let count = try receiver.requests().count
    _ = try Self.upload(["--url", receiver.url, "--now", folder])
    #expect(try receiver.requests().count == count)
  }

  @Test(.enabled(if: canRun, reason)) func theEnvironmentAndCommandLineStayUnlessAskedFor() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let local = try Self.streamTypes("\(folder)/\(stem).dmp")
    // The capture keeps the command line (LinuxCmdLine) and leaves the environment out already.
    try #require(local.contains(0x4767_0006), "the captured dump has the command line: \(local)")
    let receiver = try Receiver(in: directory)
    _ = try Self.upload(["--url", receiver.url, folder])
    let sent = try Self.streamTypes(receiver.file(1, "upload_file_minidump"))
    #expect(!sent.contains(0x4767_0007) && !sent.contains(0x4767_0006))
    #expect(sent.count == local.count, "the streams are made Unused, the layout kept")
    // minidump-stackwalk reads what was sent as it reads the dump in the folder.
    if let stackwalk = pipelineTool("minidump-stackwalk") {
      let theirs = try runChild([stackwalk, "\(folder)/\(stem).dmp"]), ours = try runChild([stackwalk, receiver.file(1, "upload_file_minidump")])
      // The one difference: the stream directory's line for the command line.
      func lines(_ text: String) -> [Substring] { text.split(separator: "\n").filter { !$0.hasPrefix("Stream 0x") } }
      #expect(ours.exitCode == 0 && lines(ours.output) == lines(theirs.output) && ours.output.contains("Crash reason:  SIGSEGV"))
      #expect(ours.output.contains("Stream 0x00000000 UnusedStream") && !ours.output.contains("LinuxCmdLine"))
    }
    try #require(unlink("\(folder)/\(stem).upload") == 0)
    _ = try Self.upload(["--url", receiver.url, "--include-environment", "--include-command-line", folder])
    #expect(try Self.streamTypes(receiver.file(2, "upload_file_minidump")) == local)
    #expect(readFileBytes(receiver.file(2, "upload_file_minidump")) == readFileBytes("\(folder)/\(stem).dmp"))
  }

  /// Each thread's stack bytes (MINIDUMP_THREAD.Stack) in a minidump.
  static func threadStacks(_ path: String) throws -> [[UInt8]] {
    let bytes = try #require(readFileBytes(path))
    func u32(_ at: Int) -> Int { Int(bytes[at..<at + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }) }
    let (count, directory) = (u32(8), u32(12))
    let list = try #require((0..<count).map { directory + $0 * 12 }.first { u32($0) == 3 })
    let rva = u32(list + 8)
    return (0..<u32(rva)).map { thread in
      let stack = rva + 4 + thread * 48 + 24
      return Array(bytes[u32(stack + 12)..<u32(stack + 12) + u32(stack + 8)])
    }
  }

  @Test(.enabled(if: canRun, reason)) func stripStacksSendsNoStackMemory() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let local = try Self.threadStacks("\(folder)/\(stem).dmp")
    try #require(!local.isEmpty && local.allSatisfy { stack in stack.contains { $0 != 0 } })
    let receiver = try Receiver(in: directory)
    let run = try Self.upload(["--url", receiver.url, "--strip-stacks", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let sent = try Self.threadStacks(receiver.file(1, "upload_file_minidump"))
    #expect(sent.map(\.count) == local.map(\.count) && sent.allSatisfy { stack in stack.allSatisfy { $0 == 0 } })
    if let stackwalk = pipelineTool("minidump-stackwalk") {
      let view = try runChild([stackwalk, receiver.file(1, "upload_file_minidump")])
      #expect(view.exitCode == 0 && view.output.contains("Crash reason:  SIGSEGV"), "registers and the crash stay")
    }
  }

  @Test(.enabled(if: canRun, reason)) func sentCrashesArePrunedOnlyWhenTheyAreOurs() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, first) = try Self.crashFolder(in: directory)
    let again = try runChild([Self.imagelog, "run", "--crash-dir", folder, "--crash-wait", "--", "sh", "-c", "kill -SEGV $$"])
    try #require(again.signal == SIGSEGV)
    let second = try #require(directoryNames(folder).first { $0.hasSuffix(".dmp") && !$0.hasPrefix(first) }).dropLast(4)
    let copy = try #require(try Self.copies(of: first, in: folder, count: 1).first)  // written by the test: not ours
    let receiver = try Receiver(in: directory)
    let run = try Self.upload(["--url", receiver.url, "--max-sent", "1", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let names = directoryNames(folder)
    let left = [first, String(second)].filter { stem in names.contains("\(stem).dmp") }
    #expect(left.count == 1, "the newest sent crash of ours stays: \(names.sorted())")
    for stem in [first, String(second)] where !left.contains(stem) {
      #expect(!names.contains { $0.hasPrefix(stem + ".") }, "\(stem)'s files and state go together")
    }
    #expect(names.contains("\(copy).dmp") && names.contains("\(copy).crash") && names.contains("\(copy).upload"),
            "files the writer did not make are never removed")
    #expect(try Self.states(folder)[copy]?["state"]?.string == "sent")
  }

  /// The bytes the crash files of `folder` take (every `.crash`, `.dmp`, `.core.zst` and `.upload`).
  static func crashBytes(_ folder: String) -> Int64 {
    directoryNames(folder).filter { name in [".crash", ".dmp", ".core.zst", ".upload"].contains { name.hasSuffix($0) } }
      .reduce(0) { total, name in
        var info = stat()
        return total + (lstat("\(folder)/\(name)", &info) == 0 ? Int64(info.st_size) : 0)
      }
  }

  @Test(.enabled(if: canRun, reason)) func sentCrashesArePrunedOldestFirstToFitTheMaximumSize() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, first) = try Self.crashFolder(in: directory)
    let again = try runChild([Self.imagelog, "run", "--crash-dir", folder, "--crash-wait", "--", "sh", "-c", "kill -SEGV $$"])
    try #require(again.signal == SIGSEGV)
    let second = String(try #require(directoryNames(folder).first { $0.hasSuffix(".dmp") && !$0.hasPrefix(first) }).dropLast(4))
    let copy = try #require(try Self.copies(of: first, in: folder, count: 1).first)  // written by the test: not ours
    let receiver = try Receiver(in: directory)
    let sent = try Self.upload(["--url", receiver.url, folder])
    #expect(sent.exitCode == 0, "\(sent.output)\(sent.error)")
    #expect(try receiver.requests().count == 3)
    let states = try Self.states(folder)
    // The one sent longest ago (then the smaller name) goes first.
    let ours = [first, second].sorted { a, b in
      ((states[a]?["sent_time"]?.integer ?? 0), a) < ((states[b]?["sent_time"]?.integer ?? 0), b)
    }
    #expect(ours.allSatisfy { states[$0]?["state"]?.string == "sent" }, "\(states)")
    let total = Self.crashBytes(folder)
    var run = try Self.upload(["--url", receiver.url, "--max-size", String(total - 1), folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    var names = directoryNames(folder)
    #expect(!names.contains { $0.hasPrefix(ours[0] + ".") }, "the oldest sent crash goes, its state with it: \(names.sorted())")
    #expect(names.contains("\(ours[1]).dmp") && names.contains("\(ours[1]).crash") && names.contains("\(ours[1]).upload"),
            "one crash fits: the newer stays: \(names.sorted())")
    #expect(Self.crashBytes(folder) <= total - 1)
    run = try Self.upload(["--url", receiver.url, "--max-size", "0", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    names = directoryNames(folder)
    #expect(!names.contains { $0.hasPrefix(ours[1] + ".") }, "\(names.sorted())")
    #expect(names.contains("\(copy).dmp") && names.contains("\(copy).crash") && names.contains("\(copy).upload"),
            "files the writer did not make are never removed, even above the size")
    #expect(try receiver.requests().count == 3, "pruning sends nothing")
    let bad = try Self.upload(["--url", receiver.url, "--max-size", "-1", folder])
    #expect(bad.exitCode != 0 && bad.error.contains("--max-size"), "\(bad.error)")
  }

  @Test(.enabled(if: canRun, reason)) func killedUploadsAreNeitherLostNorStuck() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let receiver = try Receiver(in: directory, modes: ["ok", "hold", "ok"])
    // Killed before the request: nothing reached the server, the report waits with its reason.
    var run = try Self.upload(["--url", receiver.url, folder], environment: ["IMAGELOG_UPLOAD_TEST_KILL": "before-request"])
    #expect(run.signal == SIGKILL)
    #expect(try receiver.requests().isEmpty)
    var state = try #require(try Self.states(folder)[stem])
    #expect(state["state"]?.string == "waiting" && state["reason"]?.string?.contains("recorded no answer") == true)
    // Killed after the server's answer, before the outcome was written: sent again, with the same id.
    run = try Self.upload(["--url", receiver.url, "--now", folder], environment: ["IMAGELOG_UPLOAD_TEST_KILL": "after-answer"])
    #expect(run.signal == SIGKILL)
    #expect(try Self.states(folder)[stem]?["state"]?.string == "waiting")
    // Killed mid-body (the server holds the request): the lock died with it.
    let held = try RunningChild([Self.imagelog, "upload", "--url", receiver.url, "--now", folder])
    try waitUntil("the server holds request 2") { access(receiver.folder + "/2.holding", F_OK) == 0 }
    #expect(try Self.states(folder)[stem]?["state"]?.string == "uploading")
    held.stop()
    try writeFile(receiver.folder + "/release", "")
    #expect(try Self.states(folder)[stem]?["state"]?.string == "waiting")
    run = try Self.upload(["--url", receiver.url, "--now", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    state = try #require(try Self.states(folder)[stem])
    #expect(state["state"]?.string == "sent" && state["attempts"]?.integer == 4)
    // Every whole request carried the report's one id.
    let requests = try receiver.requests().filter { $0["status"]?.integer == 200 }
    #expect(Set(requests.compactMap { $0["fields"]?["imagelog_report_id"]?.string }) == [state["report_id"]?.string ?? "?"])
  }

  @Test(.enabled(if: canRun, reason)) func aBrokenStateFileLosesNothingAndTheListingSaysWhy() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    try writeFile("\(folder)/\(stem).upload", "{\"state\": \"lost\"")
    let text = try runChild([Self.imagelog, "crashes", folder])
    #expect(text.exitCode == 0)
    #expect(text.output.hasPrefix("waiting     \(stem)  crash,dmp  \(folder)/\(stem).upload: "), "\(text.output)")
    #expect(try Self.states(folder)[stem]?["problem"]?.string?.contains("invalid JSON") == true)
    let receiver = try Receiver(in: directory)
    let run = try Self.upload(["--url", receiver.url, folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    #expect(try Self.states(folder)[stem]?["state"]?.string == "sent")
    let missing = try runChild([Self.imagelog, "crashes", directory + "/missing"])
    #expect(missing.exitCode == 1 && missing.error == "imagelog: \(directory)/missing is not a folder: Not a directory\n")
  }

  /// How many reports `aFolderOfManyReportsWithAFlakyServer` makes: 200 by default (seconds in a
  /// debug build); `IMAGELOG_TEST_MANY_REPORTS=1000` for the issue's figure.
  static let manyReports = getenv("IMAGELOG_TEST_MANY_REPORTS").flatMap { Int(String(cString: $0)) }.map { max($0, 2) } ?? 200

  /// A folder of many waiting reports (a small minidump, Tests/ImageReadersTests/Fixtures/minidump/
  /// writer-x86_64.dmp, and a small report, under crash names of their own) and a server failing every
  /// other request: after each run every report is sent exactly once or still waiting with the
  /// server's reason; runs until none waits.
  @Test(.enabled(if: canRun, reason)) func aFolderOfManyReportsWithAFlakyServer() throws {
    let directory = try makeTemporaryDirectory()
    let folder = directory + "/crashes"
    try #require(mkdir(folder, 0o700) == 0)
    let dump = try #require(readFileBytes(packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump/writer-x86_64.dmp"))
    let stems = try (0..<Self.manyReports).map { index in
      let stem = "many.\(10_000 + index).20260101T000000Z"
      try writeFile("\(folder)/\(stem).dmp", bytes: dump)
      try writeFile("\(folder)/\(stem).crash", bytes: Array("crash \(index)\n".utf8))
      return stem
    }
    let receiver = try Receiver(in: directory, modes: ["flaky"])
    let start = ContinuousClock.now
    var rounds = 0
    for round in 1...16 {
      rounds = round
      let run = try Self.upload(["--url", receiver.url, "--now", folder])
      let states = try Self.states(folder)
      #expect(states.count == stems.count, "no report lost")
      let accepted = try receiver.requests().filter { $0["status"]?.integer == 200 }
        .compactMap { $0["fields"]?["imagelog_report_name"]?.string }
      #expect(accepted.count == Set(accepted).count, "round \(round): a report was accepted twice")
      for stem in stems {
        let state = states[stem]?["state"]?.string
        if accepted.contains(stem) {
          #expect(state == "sent", "\(stem) was accepted: \(String(describing: states[stem]))")
        } else {
          #expect(state == "waiting" && (states[stem]?["reason"]?.string ?? "").contains("500"),
                  "\(stem) not accepted waits with the server's reason: \(String(describing: states[stem]))")
        }
      }
      if accepted.count == stems.count {
        #expect(run.exitCode == 0 || round == 1, "\(run.error)")
        break
      }
      #expect(run.exitCode == 1, "a failed report fails the run")
    }
    let seconds = ContinuousClock.now - start
    #expect(try Self.states(folder).values.allSatisfy { $0["state"]?.string == "sent" }, "all sent after \(rounds) runs")
    print("aFolderOfManyReportsWithAFlakyServer: \(stems.count) reports, \(rounds) runs, "
          + "\(try receiver.requests().count) requests, \(seconds)")
  }

  /// True when this test may mount a small tmpfs in a mount namespace of its own (root, unshare).
  static let canMountTmpfs: Bool = {
    guard getuid() == 0, haveTool("unshare") else { return false }
    let probe = try? runChild(["unshare", "-m", "--propagation", "private", "sh", "-c",
                               "d=$(mktemp -d) && mount -t tmpfs -o size=1M tmpfs $d && umount $d; s=$?; rmdir $d; exit $s"],
                              timeoutSeconds: 60)
    return probe?.exitCode == 0
  }()

  /// Runs `script` (sh) in a mount namespace of its own with a copy of the crash folder `folder` on
  /// a 2 MiB tmpfs: the script sees `$D` (`directory`, where it leaves its findings), `$IMAGELOG`,
  /// `$URL`, `$STEM`, `$RECEIVED` (the receiver's folder), `$C` (the copy) and `$P` (a background
  /// process it starts, killed on exit; the receiver is released then too). Returns a reader of
  /// the files the script left in `directory`.
  static func onSmallTmpfs(_ script: String, directory: String, receiver: Receiver, stem: String, folder: String,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> (String) -> String {
    let prologue = #"""
      set -u
      D=$1; IMAGELOG=$2; URL=$3; STEM=$4; FOLDER=$5; RECEIVED=$6
      mkdir -p "$D/mnt" && mount -t tmpfs -o size=2M,mode=0700 tmpfs "$D/mnt" || exit 2
      P=
      cleanup() { touch "$RECEIVED/release"; [ -n "$P" ] && kill -9 "$P" 2>/dev/null; wait; umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt"; }
      trap cleanup EXIT INT TERM HUP
      cp -a "$FOLDER" "$D/mnt/crashes" || exit 3
      C="$D/mnt/crashes"

      """#
    let run = try runChild(["unshare", "-m", "--propagation", "private", "sh", "-c", prologue + script, "sh", directory, imagelog,
                            receiver.url, stem, folder, receiver.folder], timeoutSeconds: 240)
    #expect(run.exitCode == 0, "\(run.output)\(run.error)", sourceLocation: sourceLocation)
    return { name in readFile("\(directory)/\(name)") ?? "(none)" }
  }

  /// A full disk while the state file is written: the crash folder on a 2 MiB tmpfs (in a mount
  /// namespace of the test's own), a first attempt answered 500, then the file system filled: the next
  /// attempt cannot record itself, so nothing is sent, the previous state stays byte for byte and the
  /// run says why (ENOSPC); once there is room again the report is sent, once.
  @Test(.enabled(if: canRun && canMountTmpfs, "needs python3, libcurl.so.4, root and unshare to mount a tmpfs"))
  func aFullDiskWhileWritingTheStateLosesNothing() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let receiver = try Receiver(in: directory, modes: ["500", "ok"])
    let script = #"""
      "$IMAGELOG" upload --url "$URL" "$C" > "$D/out1" 2>&1; echo $? > "$D/status1"
      cp "$C/$STEM.upload" "$D/state1" || exit 4
      dd if=/dev/zero of="$D/mnt/fill" bs=4096 > /dev/null 2>&1
      df -k "$D/mnt" > "$D/df"
      "$IMAGELOG" upload --url "$URL" --now "$C" > "$D/out2" 2>&1; echo $? > "$D/status2"
      cp "$C/$STEM.upload" "$D/state2" 2>/dev/null || cat "$C/$STEM.upload" > "$D/state2"
      "$IMAGELOG" crashes --format json "$C" > "$D/list2.json" 2>&1
      ls "$RECEIVED" | grep -c '^[0-9]*\.json$' > "$D/received2"
      ls -a "$C" > "$D/files2"
      rm -f "$D/mnt/fill"
      "$IMAGELOG" upload --url "$URL" --now "$C" > "$D/out3" 2>&1; echo $? > "$D/status3"
      "$IMAGELOG" crashes --format json "$C" > "$D/list3.json" 2>&1
      """#
    let text = try Self.onSmallTmpfs(script, directory: directory, receiver: receiver, stem: stem, folder: folder)
    #expect(text("status1") == "1\n" && text("out1").contains("HTTP 500"), "\(text("out1"))")
    let state1 = try JSONValue.parse(Substring(text("state1")))
    #expect(state1["state"]?.string == "waiting" && state1["attempts"]?.integer == 1, "\(text("state1"))")
    // The full disk: no request, the state as it was, the reason said.
    #expect(text("status2") == "1\n", "\(text("out2"))")
    #expect(text("out2").contains("\(stem): waiting: cannot record the attempt") && text("out2").contains("No space left"),
            "\(text("out2"))\(text("df"))")
    #expect(text("state2") == text("state1"), "the previous state stays whole")
    #expect(text("received2") == "1\n", "nothing is sent that cannot be recorded")
    let listed = try JSONValue.parse(Substring(text("list2.json")))
    #expect(listed["reports"]?.array?.first?["state"]?.string == "waiting", "\(text("list2.json"))")
    #expect(!text("files2").split(separator: "\n").contains { $0.hasPrefix(".") && $0 != "." && $0 != ".." },
            "no half-written file is left: \(text("files2"))")
    // Room again: sent, once.
    #expect(text("status3") == "0\n", "\(text("out3"))")
    let after = try JSONValue.parse(Substring(text("list3.json")))
    #expect(after["reports"]?.array?.first?["state"]?.string == "sent", "\(text("list3.json"))")
    let requests = try receiver.requests()
    #expect(requests.count == 2 && requests.filter { $0["status"]?.integer == 200 }.count == 1)
  }

  /// A full disk after the server answered (the window the database documents): the server holds the
  /// request until the test has filled the file system, so the answer cannot be recorded; the state
  /// says the attempt began and recorded no answer, the run exits 1 saying so, and with room again
  /// the report goes once more with the same `imagelog_report_id` and is then `sent`.
  @Test(.enabled(if: canRun && canMountTmpfs, "needs python3, libcurl.so.4, root and unshare to mount a tmpfs"))
  func aFullDiskAfterTheAnswerSendsAgainWithTheSameID() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let receiver = try Receiver(in: directory, modes: ["hold", "ok"])
    let script = #"""
      "$IMAGELOG" upload --url "$URL" "$C" > "$D/out1" 2>&1 &
      P=$!
      i=0; until [ -e "$RECEIVED/1.holding" ]; do i=$((i + 1)); [ $i -lt 6000 ] || exit 4; sleep 0.01; done
      dd if=/dev/zero of="$D/mnt/fill" bs=4096 > /dev/null 2>&1
      touch "$RECEIVED/release"
      wait "$P"; echo $? > "$D/status1"; P=
      cat "$C/$STEM.upload" > "$D/state1"
      rm -f "$D/mnt/fill"
      "$IMAGELOG" upload --url "$URL" --now "$C" > "$D/out2" 2>&1; echo $? > "$D/status2"
      "$IMAGELOG" crashes --format json "$C" > "$D/list2.json" 2>&1
      """#
    let text = try Self.onSmallTmpfs(script, directory: directory, receiver: receiver, stem: stem, folder: folder)
    #expect(text("status1") == "1\n", "\(text("out1"))")
    #expect(text("out1").contains("\(stem): waiting: sent, but the state cannot be written") && text("out1").contains("No space left"),
            "\(text("out1"))")
    let state1 = try JSONValue.parse(Substring(text("state1")))
    #expect(state1["state"]?.string == "waiting" && (state1["reason"]?.string ?? "").contains("recorded no answer"), "\(text("state1"))")
    #expect(text("status2") == "0\n", "\(text("out2"))")
    let listed = try JSONValue.parse(Substring(text("list2.json")))
    #expect(listed["reports"]?.array?.first?["state"]?.string == "sent", "\(text("list2.json"))")
    let requests = try receiver.requests()
    #expect(requests.count == 2 && requests.allSatisfy { $0["status"]?.integer == 200 }, "\(requests)")
    let ids = Set(requests.compactMap { $0["fields"]?["imagelog_report_id"]?.string })
    #expect(ids.count == 1 && ids.first == state1["report_id"]?.string, "both copies carry one report id: \(ids)")
  }

  @Test(.enabled(if: canRun, reason)) func racingUploadersSendEveryReportExactlyOnce() throws {
    let directory = try makeTemporaryDirectory()
    let (folder, stem) = try Self.crashFolder(in: directory)
    let stems = try Self.copies(of: stem, in: folder, count: 59) + [stem]
    // The server fails every other request: rounds of two racing uploaders until nothing waits.
    let receiver = try Receiver(in: directory, modes: ["flaky"])
    for _ in 0..<12 {
      let first = try RunningChild([Self.imagelog, "upload", "--url", receiver.url, "--now", folder])
      let second = try RunningChild([Self.imagelog, "upload", "--url", receiver.url, "--now", folder])
      first.reap()
      second.reap()
      if try Self.states(folder).values.allSatisfy({ $0["state"]?.string == "sent" }) { break }
    }
    let states = try Self.states(folder)
    #expect(states.count == stems.count)
    for name in stems { #expect(states[name]?["state"]?.string == "sent", "\(name): \(String(describing: states[name]))") }
    let accepted = try receiver.requests().filter { $0["status"]?.integer == 200 }.compactMap { $0["fields"]?["imagelog_report_name"]?.string }
    #expect(accepted.count == stems.count, "each report accepted once")
    #expect(Set(accepted) == Set(stems))
  }
}

/// Crashpad's own handler (`crashpad_handler --url`, uploads enabled in its database's settings.dat)
/// and `imagelog upload` send requests the same receiver reads the same way.
@Suite struct UploadCrashpadComparisonTests {
  static let handler = pipelineTool("crashpad_handler")
  static let stackwalk = pipelineTool("minidump-stackwalk")
  static let canRun = UploadCommandTests.canRun && handler != nil && stackwalk != nil && haveTool("gcc")

  /// Crashpad's `Settings::Data` (client/settings.cc): magic 'CPds', version 1, options (bit 0:
  /// uploads enabled), padding, the last upload attempt time (int64), the client UUID; little-endian.
  static func settings(uploadsEnabled: Bool) -> [UInt8] {
    var bytes: [UInt8] = []
    for value: UInt32 in [0x4350_6473, 1, uploadsEnabled ? 1 : 0, 0] { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
    bytes += [UInt8](repeating: 0, count: 8)
    bytes += (0..<16).map { _ in UInt8.random(in: 0...255) }
    return bytes
  }

  @Test(.enabled(if: canRun, "needs crashpad_handler and minidump-stackwalk (Scripts/install-test-tools), gcc, python3, libcurl"))
  func crashpadAndImagelogSendTheSameRequest() throws {
    let directory = try makeTemporaryDirectory()
    let program = directory + "/minidump-crashpad"
    let build = try runChild(["gcc", "-O2", "-g", "-pthread", packageRoot + "/Tests/Programs/minidump-crashpad.c", "-o", program])
    try #require(build.exitCode == 0, "\(build.error)")
    let database = directory + "/database"
    try #require(mkdir(database, 0o700) == 0)
    try writeFile(database + "/settings.dat", bytes: Self.settings(uploadsEnabled: true))
    let receiver = try UploadCommandTests.Receiver(in: directory)
    let crash = try runChild([program, try #require(Self.handler), database, "segv", "--url=\(receiver.url)", "--no-rate-limit",
                              "--annotation=prod=comparison", "--annotation=ver=4.5.6"], timeoutSeconds: 120)
    try #require(crash.signal == SIGSEGV, "\(crash.status) \(crash.error)")
    try waitUntil("Crashpad's handler uploaded its report") { try receiver.requests().count == 1 }
    let (folder, stem) = try UploadCommandTests.crashFolder(in: directory)
    let run = try UploadCommandTests.upload(["--url", receiver.url, "--annotation", "prod=comparison",
                                             "--annotation", "ver=4.5.6", folder])
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let requests = try receiver.requests()
    try #require(requests.count == 2)
    let (theirs, ours) = (requests[0], requests[1])
    for request in [theirs, ours] {
      #expect(request["method"]?.string == "POST")
      #expect(request["content_type"]?.string?.hasPrefix("multipart/form-data; boundary=") == true)
      #expect(request["content_encoding"]?.string == "gzip")
      #expect(request["fields"]?["prod"]?.string == "comparison" && request["fields"]?["ver"]?.string == "4.5.6")
      let guid = try #require(request["fields"]?["guid"]?.string)
      #expect(request["path"]?.string == "/submit?product=comparison&version=4.5.6&guid=\(guid)", "the client named in the URL too")
      #expect(request["files"]?["upload_file_minidump"]?["filename"]?.string?.hasSuffix(".dmp") == true)
      // The form fields come before the minidump.
      #expect(request["part_order"]?.array?.compactMap(\.string).firstIndex(of: "upload_file_minidump")
              ?? 0 >= (request["fields"]?.objectKeys.count ?? 0))
    }
    // Every field Crashpad sends, imagelog sends, with the same meaning checked above.
    let theirNames = Set(theirs["fields"]?.objectKeys ?? []), ourNames = Set(ours["fields"]?.objectKeys ?? [])
    #expect(theirNames.isSubset(of: ourNames), "Crashpad sends \(theirNames), imagelog \(ourNames)")
    // Each minidump as received is read by minidump-stackwalk: the crash and its threads.
    let stackwalk = try #require(Self.stackwalk)
    for (number, label) in [(1, "Crashpad's"), (2, "imagelog's")] {
      let view = try runChild([stackwalk, receiver.file(number, "upload_file_minidump")])
      #expect(view.exitCode == 0 && view.output.contains("Crash reason:  SIGSEGV"), "\(label): \(view.error)")
      #expect(view.output.contains("(crashed)"), "\(label) dump names its crashed thread")
    }
    let completed = directoryNames(database + "/completed").filter { $0.hasSuffix(".dmp") }
    try #require(completed.count == 1, "Crashpad marks its report completed: \(completed)")
    #expect(readFileBytes(receiver.file(1, "upload_file_minidump")) == readFileBytes(database + "/completed/" + completed[0]))
    #expect(try UploadCommandTests.states(folder)[stem]?["state"]?.string == "sent")
  }
}

extension UploadCoreHandlerFolderTests {
  /// `core-handler --upload-url`: the handler exits while the server still holds the upload it started.
  @Test(.enabled(if: UploadCommandTests.canRun && (CoreHandlerTests.kernelCores || CoreHandlerTests.haveOracles),
                 "needs python3, libcurl and a core (see CoreFileTests)"))
  func coreHandlerSendsFromAProcessOfItsOwn() throws {
    let directory = try makeTemporaryDirectory()
    let (core, live) = try CoreHandlerTests.smallCore(in: directory)
    defer { live?.stop() }
    let pid = try CoreHandlerTests.corePID(core)
    let reports = directory + "/reports"
    let receiver = try UploadCommandTests.Receiver(in: directory, modes: ["hold", "ok"])
    let handled = try CoreHandlerTests.handle(core, pid: pid, into: reports, ["--time", "1000", "--upload-url", receiver.url])
    try #require(handled.exitCode == 0, "\(handled.error)")
    // The handler has exited; its upload reaches the server and is held there.
    try waitUntil("the upload reached the server") { access(receiver.folder + "/1.holding", F_OK) == 0 }
    let stem = try #require(try UploadCommandTests.states(reports).keys.first)
    #expect(try UploadCommandTests.states(reports)[stem]?["state"]?.string == "uploading")
    try writeFile(receiver.folder + "/release", "")
    try waitUntil("the report is sent") { try UploadCommandTests.states(reports)[stem]?["state"]?.string == "sent" }
    let request = try #require(try receiver.requests().first)
    #expect(request["files"]?["upload_file_minidump"]?["filename"]?.string == stem + ".dmp")
  }
}

/// `imagelog run --crash-dir DIR --upload-url URL`: the crash reaches the server from a process of
/// its own, and the program's exit does not wait for it.
@Suite struct UploadRunTests {
  @Test(.enabled(if: UploadCommandTests.canRun, UploadCommandTests.reason))
  func aCrashUnderRunIsSentWithoutHoldingTheExit() throws {
    let directory = try makeTemporaryDirectory()
    let folder = directory + "/crashes"
    let receiver = try UploadCommandTests.Receiver(in: directory, modes: ["hold"])
    let run = try runChild([UploadCommandTests.imagelog, "run", "--crash-dir", folder, "--upload-url", receiver.url,
                            "--", "sh", "-c", "kill -SEGV $$"], timeoutSeconds: 120)
    #expect(run.signal == SIGSEGV, "the program's own end: \(run.status) \(run.error)")
    // The server holds the upload until released: the run above ended without waiting for it.
    try waitUntil("the upload reached the server") { access(receiver.folder + "/1.holding", F_OK) == 0 }
    try writeFile(receiver.folder + "/release", "")
    var stem = ""
    try waitUntil("the crash is sent") {
      let states = try UploadCommandTests.states(folder)
      stem = states.keys.first ?? ""
      return states.count == 1 && states[stem]?["state"]?.string == "sent"
    }
    let request = try #require(try receiver.requests().first)
    #expect(request["files"]?["upload_file_minidump"]?["filename"]?.string == stem + ".dmp")
    // The report sent is the final one (the upload starts once the symbolicated report replaced the first).
    #expect(readFileBytes(receiver.file(1, "imagelog_report")) == readFileBytes("\(folder)/\(stem).crash"))
    #expect(readFile(receiver.file(1, "imagelog_report"))?.contains("-- provisional") == false)
    if let stackwalk = pipelineTool("minidump-stackwalk") {
      let view = try runChild([stackwalk, receiver.file(1, "upload_file_minidump")])
      #expect(view.exitCode == 0 && view.output.contains("Crash reason:  SIGSEGV") && view.output.contains("(crashed)"))
    }
  }

  @Test func uploadURLNeedsACrashFolder() throws {
    let run = try runChild([UploadCommandTests.imagelog, "run", "--upload-url", "http://127.0.0.1:9/", "--", "true"])
    #expect(run.exitCode == 64 && run.error.contains("--upload-url needs --crash-dir"), "\(run.status) \(run.error)")
  }
}

private extension JSONValue {
  /// The member names of an object.
  var objectKeys: [String] { if case .object(let members) = self { members.map(\.0) } else { [] } }
}

/// A crash folder written by `core-handler`: its crashes wait to be sent, and `--max-crashes` removes
/// a crash's upload state with its files.
@Suite struct UploadCoreHandlerFolderTests {
  @Test(.enabled(if: UploadCommandTests.canRun && (CoreHandlerTests.kernelCores || CoreHandlerTests.haveOracles),
                 "needs python3, libcurl and a core (see CoreFileTests)"))
  func aSentCrashLeavesWithItsState() throws {
    let directory = try makeTemporaryDirectory()
    let (core, live) = try CoreHandlerTests.smallCore(in: directory)
    defer { live?.stop() }
    let pid = try CoreHandlerTests.corePID(core)
    let reports = directory + "/reports"
    let first = try CoreHandlerTests.handle(core, pid: pid, into: reports, ["--time", "1000", "--max-crashes", "1"])
    try #require(first.exitCode == 0, "\(first.error)")
    let states = try UploadCommandTests.states(reports)
    try #require(states.count == 1)
    let stem = try #require(states.keys.first)
    #expect(states[stem]?["state"]?.string == "waiting" && states[stem]?["files"]?.array?.count == 2)
    let receiver = try UploadCommandTests.Receiver(in: directory)
    let sent = try UploadCommandTests.upload(["--url", receiver.url, reports])
    #expect(sent.exitCode == 0, "\(sent.output)\(sent.error)")
    #expect(directoryNames(reports).contains("\(stem).upload"))
    let second = try CoreHandlerTests.handle(core, pid: pid, into: reports, ["--time", "2000", "--max-crashes", "1"])
    try #require(second.exitCode == 0, "\(second.error)")
    #expect(!directoryNames(reports).contains { $0.hasPrefix(stem) }, "\(directoryNames(reports))")
    #expect(try UploadCommandTests.states(reports).values.map { $0["state"]?.string } == ["waiting"])
  }
}
