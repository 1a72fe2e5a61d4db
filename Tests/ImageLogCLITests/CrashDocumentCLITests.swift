import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// imagelog's crash document (`--format json`, issue 36): for each kind of source it is valid under
/// `Schemas/imagelog-crash.schema.json` (python3-jsonschema, a validator that is not ours), it holds
/// what the text report of the same source holds (compared with the text report's own lines), and
/// `symbolicate DOC.json` writes the same document byte for byte.
@Suite(.enabled(if: CrashDocumentSchema.unavailableReason == nil,
                "needs Debian's python3-jsonschema for /usr/bin/python3 (Scripts/install-test-tools)"))
struct CrashDocumentCLITests {
  static let binary = builtProduct("imagelog")
  static let reports = packageRoot + "/Tests/SymbolicationTests/Fixtures/"
  static let readerFixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures/"

  static func imagelog(_ arguments: [String]) throws -> ChildResult { try runChild([binary] + arguments) }

  /// Every report fixture: Apple `.crash` and `.ips`, the backtracer's JSON, each Linux report kind.
  static let reportFixtures: [String] = {
    let apple = directoryNames(reports + "apple-reports").filter { $0.hasSuffix(".crash") || $0.hasSuffix(".ips") }
      .map { "apple-reports/" + $0 }
    // coredump-modules.txt is a module list alone (a test of the store's lookup), no report.
    let linux = directoryNames(reports + "linux-reports").filter { !$0.hasSuffix(".md") && $0 != "coredump-modules.txt" }
      .map { "linux-reports/" + $0 }
    return (apple + linux).sorted()
  }()

  /// Every minidump (imagelog's, Breakpad's, Crashpad's, rust-minidump's) and core fixture.
  static let dumpFixtures: [String] = {
    var paths: [String] = directoryNames(readerFixtures + "minidump").filter { $0.hasSuffix(".dmp") }.map { "minidump/" + $0 }
    for folder in directoryNames(readerFixtures + "minidump-field") {
      paths += directoryNames(readerFixtures + "minidump-field/" + folder).filter { $0.hasSuffix(".dmp") }
        .map { "minidump-field/\(folder)/\($0)" }
    }
    paths += directoryNames(readerFixtures + "cores").filter { $0.hasSuffix(".core") }.map { "cores/" + $0 }
    return paths.sorted()
  }()

  /// `source`'s document: written, valid under the schema, and read back into the same bytes.
  static func document(of source: String, in folder: String,
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
    let run = try imagelog(["symbolicate", "--format", "json", source])
    try #require(!run.output.isEmpty, "\(source): \(run.error)", sourceLocation: sourceLocation)
    #expect(try CrashDocumentSchema.problems(run.output) == [], "\(source)", sourceLocation: sourceLocation)
    let saved = folder + "/document.json"
    try writeFile(saved, run.output)
    let again = try imagelog(["symbolicate", "--format", "json", saved])
    #expect(again.exitCode == run.exitCode, "\(again.error)", sourceLocation: sourceLocation)
    #expect(again.output == run.output, "\(source): the document read back writes other bytes", sourceLocation: sourceLocation)
    let (first, _) = try JSONValue.parsePrefix(run.output[...])
    return first
  }

  @Test(arguments: reportFixtures)
  func reportRoundTrip(_ fixture: String) throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let document = try Self.document(of: Self.reports + fixture, in: folder)
    #expect(document["schemaVersion"] == .number("1") && document["document"] == .string("imagelog-crash"))
  }

  @Test(arguments: dumpFixtures)
  func dumpRoundTrip(_ fixture: String) throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let path = Self.readerFixtures + fixture
    let document = try Self.document(of: path, in: folder)
    let text = try Self.imagelog(["symbolicate", path]).output
    Self.expectImagelogLayout(text: text, document: document, source: fixture)
    // The arguments are the dump's MD_LINUX_CMD_LINE bytes: each argument and its NUL, in the file as they are.
    if let arguments = document["process"]?["arguments"]?.array {
      let bytes = try #require(readFileBytes(path))
      var needle: [UInt8] = []
      for argument in arguments { needle += Array((argument.string ?? "").utf8) + [0] }
      let found = bytes.indices.contains { bytes[$0...].starts(with: needle) }
      #expect(!arguments.isEmpty && found, "\(fixture)")
    }
  }

  /// imagelog's own text report (a core's, as `symbolicate CORE` writes it) read as a report.
  @Test func imagelogReportRoundTrip() throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let report = try Self.imagelog(["symbolicate", Self.readerFixtures + "cores/linkmap-x86_64.core"])
    try #require(report.exitCode == 0, "\(report.error)")
    let text = report.output.components(separatedBy: "\n-- symbolicated by imagelog").first ?? ""
    let path = folder + "/report.txt"
    try writeFile(path, text)
    let document = try Self.document(of: path, in: folder)
    #expect(document["format"] == .string("imagelog"))
    Self.expectImagelogLayout(text: text, document: document, source: "imagelog report")
  }

  /// Swift's backtracer text (its JSON is among the report fixtures).
  @Test func swiftBacktraceRoundTrip() throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let path = folder + "/backtrace.txt"
    try writeFile(path, SampleReports.swiftBacktrace)
    let document = try Self.document(of: path, in: folder)
    #expect(document["format"] == .string("swift-backtrace"))
    // As the text says: two threads named crasher and worker, the first crashed; one image.
    let threads = document["threads"]?.array ?? []
    #expect(threads.map { $0["name"] } == [.string("crasher"), .string("worker")])
    #expect(threads.map { $0["crashed"] } == [.bool(true), .bool(false)])
    #expect(threads.map { $0["frames"]?.array?.first?["address"] } == [.string("0x000055851ccfb91c"), .string("0x00007f0000001010")])
    let image = document["binaryImages"]?.array?.first
    #expect(image?["base"] == .string("0x55851ccfa000") && image?["name"] == .string("crasher")
              && image?["path"] == .string("/tmp/crasher"))
    #expect(image?["identity"]?["buildID"] == .string("167ddc45f2bbbc485434077cf70e879175008f62"))
  }

  /// A live process (`pid --threads`): the document holds what its text report holds.
  @Test func liveProcessRoundTrip() throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 60"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: "sleep")  // the exec and the loader are done
    // The same capture read twice would differ (stopped time, states): the text is the document's own report.
    let run = try Self.imagelog(["pid", "--threads", "--format", "json", String(child.pid)])
    try #require(run.exitCode == 0, "\(run.error)")
    #expect(try CrashDocumentSchema.problems(run.output) == [])
    let saved = folder + "/live.json"
    try writeFile(saved, run.output)
    let again = try Self.imagelog(["symbolicate", "--format", "json", saved])
    #expect(again.output == run.output)
    let document = try JSONValue.parse(run.output[...])
    #expect(document["process"]?["pid"] == .number(String(child.pid)))
    #expect(document["process"]?["stoppedNanoseconds"] != nil)
    let text = try Self.imagelog(["symbolicate", saved])
    #expect(text.exitCode == 0, "\(text.error)")
    Self.expectImagelogLayout(text: text.output, document: document, source: "pid --threads")
  }

  /// An Apple `.crash` (SampleReports'): the process, the system, each thread's name and
  /// frames, and each Binary Images row, as the text has them.
  @Test func appleCrashFieldsMatchText() throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let path = folder + "/MyApp.crash"
    try writeFile(path, SampleReports.appleCrash)
    let document = try Self.document(of: path, in: folder)
    let process = document["process"], system = document["system"]
    #expect(process?["name"] == .string("MyApp") && process?["pid"] == .number("1234"))
    #expect(process?["path"] == .string("/private/var/containers/Bundle/Application/ABC/MyApp.app/MyApp"))
    #expect(system?["os"] == .string("iPhone OS 16.0 (20A362)") && system?["cpu"] == .string("arm64"))
    let threads = document["threads"]?.array ?? []
    #expect(threads.map { $0["name"] } == [.string("Dispatch queue: com.apple.main-thread"), nil])
    #expect(threads.map { $0["crashed"] } == [.bool(true), .bool(false)])
    #expect(threads.map { ($0["frames"]?.array ?? []).compactMap { $0["address"]?.string } }
              == [["0x00000001a2b3c4d8", "0x000000010064db08", "0x0000000110002000"], ["0x00000001e1c3e0c4"]])
    #expect(threads.first?["frames"]?.array?.first?["reported"]?["symbol"] == .string("__pthread_kill"))
    #expect(threads.first?["frames"]?.array?.first?["reported"]?["symbolOffset"] == .number("8"))
    let images = document["binaryImages"]?.array ?? []
    let expected: [(base: String, end: String, name: String, identity: String, path: String)] = [
      ("0x100104000", "0x100657fff", "MyApp", "c299a741488a3656a410a7be59926b13",
       "/private/var/containers/Bundle/Application/ABC/MyApp.app/MyApp"),
      ("0x1a2b10000", "0x1a2b47fff", "libsystem_kernel.dylib", "5e4f7d4a-9b2c-3f1e-8d7a-1b2c3d4e5f60",
       "/usr/lib/system/libsystem_kernel.dylib"),
      ("0x110000000", "0x110ffffff", "Google Chrome Framework", "0123456789ABCDEF0123456789ABCDEF",
       "/Applications/Google Chrome.app/Framework"),
      ("0x1e1c3d000", "0x1e1c49fff", "libsystem_pthread.dylib", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE",
       "/usr/lib/system/libsystem_pthread.dylib"),
      ("0x10d5c1000", "0x10d5c4fff", "com.example.app", "C299A741-488A-3656-A410-A7BE59926B13",
       "/Applications/Example.app/Contents/MacOS/Example"),
    ]
    // Apple's `???` row (all of memory, no identity, no path) is an image with neither.
    #expect(images.count == expected.count + 1)
    let unknown = images.first { $0["name"] == .string("???") }
    #expect(unknown?["base"] == .string("0x0") && unknown?["end"] == .string("0xffffffffffffffff")
              && unknown?["path"] == nil && unknown?["identity"] == nil)
    for (image, row) in zip(images.filter { $0["name"] != .string("???") }, expected) {
      #expect(image["base"] == .string(row.base) && image["end"] == .string(row.end), "\(row)")
      #expect(image["name"] == .string(row.name) && image["path"] == .string(row.path), "\(row)")
      #expect(image["identity"]?["text"] == .string(row.identity), "\(row)")
      // The derived forms: the UUID as Apple writes it, uppercase and dashed.
      let compact = row.identity.replacing("-", with: "").uppercased()
      #expect(image["identity"]?["uuid"]?.string?.replacing("-", with: "") == compact, "\(row)")
    }
  }

  /// A document read back is symbolicated again: its image's file gone from the recorded path, the frame is
  /// missing; given a folder holding the file (`--search`, another machine's copy), found by its build-id.
  @Test(.enabled(if: haveTool("cc") && haveTool("nm"), "needs cc and nm"))
  func documentIsSymbolicatedAgain() throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    try writeFile(folder + "/p.c", "#include <stdlib.h>\n__attribute__((noinline)) void crash_here(void) { abort(); }\n"
                    + "int main(void) { crash_here(); return 0; }\n")
    _ = try runTool(["mkdir", folder + "/here", folder + "/elsewhere"])
    let built = try runTool(["cc", "-g", "-O0", "-o", folder + "/here/prog", folder + "/p.c"])
    try #require(built.status == 0, "\(built.error)")
    let symbols = try runTool(["nm", folder + "/here/prog"]).output.split(separator: "\n")
    let line = try #require(symbols.first { $0.hasSuffix(" T crash_here") })
    let start = try #require(UInt64(line.prefix { $0 != " " }, radix: 16))
    let base: UInt64 = 0x5555_5555_4000
    try writeFile(folder + "/addresses.txt", "0x" + String(base + start + 4, radix: 16) + "\n")
    let first = try Self.imagelog(["symbolicate", "--image", folder + "/here/prog@0x" + String(base, radix: 16),
                                   "--format", "json", folder + "/addresses.txt"])
    try #require(first.exitCode == 0, "\(first.error)")
    #expect(try CrashDocumentSchema.problems(first.output) == [])
    try writeFile(folder + "/document.json", first.output)
    _ = try runTool(["mv", folder + "/here/prog", folder + "/elsewhere/prog"])

    func frame(_ arguments: [String]) throws -> JSONValue? {
      let run = try Self.imagelog(["symbolicate"] + arguments + ["--format", "json", folder + "/document.json"])
      #expect(try CrashDocumentSchema.problems(run.output) == [])
      return try JSONValue.parse(run.output[...])["threads"]?.array?.first?["frames"]?.array?.first
    }
    let gone = try frame([])
    #expect(gone?["status"] == .string("missing-image") && gone?["functions"] == nil)
    let found = try frame(["--search", folder + "/elsewhere"])
    #expect(found?["status"] == .string("symbolicated"))
    let function = found?["functions"]?.array?.last
    #expect(function?["symbol"] == .string("crash_here") && function?["symbolOffset"] == .number("4"))
    #expect(function?["line"] == .number("2"))  // p.c's second line
  }

  /// A document imagelog cannot read says which member, in one line, and fails.
  @Test func unreadableDocumentSaysWhere() throws {
    let folder = try makeTemporaryDirectory("imagelog-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let good = try Self.imagelog(["symbolicate", "--format", "json", Self.readerFixtures + "minidump/writer-x86_64.dmp"])
    let cases: [(String, String, String)] = [
      ("\"schemaVersion\":1", "\"schemaVersion\":2", "crash document schemaVersion 2: this imagelog reads version 1"),
      ("\"base\":\"0x555555550000\"", "\"base\":\"555555550000\"", "crash document binaryImages[0].base: not a hex address"),
      ("\"returnAddress\":false", "\"returnAddress\":0", "crash document threads[0].frames[0].returnAddress: not true or false"),
    ]
    for (index, (from, to, expected)) in cases.enumerated() {
      try #require(good.output.contains(from), "\(from)")
      let path = "\(folder)/bad-\(index).json"
      try writeFile(path, good.output.replacing(from, with: to, maxReplacements: 1))
      let run = try Self.imagelog(["symbolicate", "--format", "json", path])
      #expect(run.exitCode == 1 && run.output.isEmpty)
      #expect(run.error == "imagelog: \(path): \(expected)\n")
    }
  }

  /// The document's members against imagelog's text layout of the same source, line by line: the header
  /// fields, the exception, each thread's heading, name and frame addresses, the registers, Binary Images.
  static func expectImagelogLayout(text: String, document: JSONValue, source: String,
                                   sourceLocation: SourceLocation = #_sourceLocation) {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    func field(_ label: String) -> String? {
      lines.first { $0.hasPrefix(label) }.map { String($0.dropFirst(label.count).trimmingPrefix(while: { $0 == " " })) }
    }
    let process = document["process"], system = document["system"]
    // The text escapes what came from the process (`TextEscaping`); the document holds it as it is.
    let name = TextEscaping.escaped(process?["name"]?.string ?? "???")
    #expect(field("Process:") == "\(name) [\(process?["pid"]?.integer ?? 0)]", "\(source)", sourceLocation: sourceLocation)
    #expect(field("Path:") == TextEscaping.escaped(process?["path"]?.string ?? "???"), "\(source)", sourceLocation: sourceLocation)
    #expect(field("Date/Time:") == (process?["dateText"]?.string ?? "1970-01-01 00:00:00 +0000"), "\(source)",
            sourceLocation: sourceLocation)
    #expect(field("OS Version:") == TextEscaping.escaped(system?["os"]?.string ?? "???"), "\(source)", sourceLocation: sourceLocation)
    if let exception = document["exception"] {
      if let reason = exception["reason"]?.string {
        #expect(field("Exception Type:") == reason, "\(source)", sourceLocation: sourceLocation)
      } else {
        let name = exception["signalName"]?.string ?? "signal \(exception["signal"]?.integer ?? -1)"
        let code = exception["codeName"]?.string ?? String(exception["code"]?.integer ?? -1)
        #expect(field("Exception Type:") == "\(name) (\(code))", "\(source)", sourceLocation: sourceLocation)
        #expect(field("Exception Codes:") == "signal \(exception["signal"]?.integer ?? -1), code \(exception["code"]?.integer ?? -1), "
                  + "address \(exception["address"]?.string ?? "?")", "\(source)", sourceLocation: sourceLocation)
      }
      if let crashed = exception["crashedThread"]?.integer {
        let tid = document["threads"]?.array?[crashed]["tid"]?.integer ?? 0
        #expect(field("Crashed Thread:") == "\(crashed)  tid \(tid)", "\(source)", sourceLocation: sourceLocation)
      }
    } else {
      #expect(field("Exception Type:") == nil, "\(source)", sourceLocation: sourceLocation)
    }
    let threads = document["threads"]?.array ?? []
    for (index, thread) in threads.enumerated() {
      // A name the source gives as empty (a macOS dump's ThreadNames) is kept in the document; the text
      // gives such a thread no name line.
      let name = thread["name"]?.string
      #expect(field("Thread \(index) name:") == (name == "" ? nil : name), "\(source) thread \(index)", sourceLocation: sourceLocation)
      let heading = lines.firstIndex { $0.hasPrefix("Thread \(index):") || $0.hasPrefix("Thread \(index) Crashed:")
        || $0.hasPrefix("Thread \(index) Requested Dump:") }
      guard let heading else {
        Issue.record("\(source): no heading for thread \(index)", sourceLocation: sourceLocation)
        continue
      }
      #expect(lines[heading].contains("tid \(thread["tid"]?.integer ?? 0)"), "\(lines[heading])", sourceLocation: sourceLocation)
      #expect(lines[heading].contains(" Crashed:") == (thread["crashed"] == .bool(true)), "\(lines[heading])",
              sourceLocation: sourceLocation)
      // Each frame line's address (the 0x%016llx after the image name); an inlined function repeats its line's.
      var addresses: [String] = []
      for line in lines[(heading + 1)...].prefix(while: { !$0.isEmpty && !$0.hasPrefix("(not unwound") }) {
        guard let word = line.split(separator: " ").first(where: { $0.hasPrefix("0x") && $0.count == 18 }) else { continue }
        addresses.append(String(word))
      }
      let frames = (thread["frames"]?.array ?? []).compactMap { $0["address"]?.string }
      #expect(Self.collapsed(addresses) == Self.collapsed(frames), "\(source) thread \(index)", sourceLocation: sourceLocation)
      if let layout = thread["registerLayout"], let title = layout["title"]?.string,
         let line = lines.firstIndex(of: "Thread \(index) crashed with \(title):")
          ?? lines.firstIndex(of: "Thread \(index) requested the dump with \(title):") {
        let cells = lines[(line + 1)...].prefix { $0.hasPrefix("  ") }.flatMap { row in
          row.split(separator: " ").filter { $0.hasPrefix("0x") }.map(String.init)
        }
        let names = (layout["rows"]?.array ?? []).flatMap { $0.array ?? [] }.compactMap(\.string)
        #expect(cells == names.map { thread["registers"]?[$0]?.string ?? "?" }, "\(source) registers",
                sourceLocation: sourceLocation)
      }
    }
    let images = document["binaryImages"]?.array ?? []
    let rows = lines.drop { $0 != "Binary Images:" }.dropFirst().prefix { !$0.isEmpty && !$0.hasPrefix("-- ") }
    #expect(rows.count == images.count, "\(source): \(rows.count) rows, \(images.count) images", sourceLocation: sourceLocation)
    for (row, image) in zip(rows, images) {
      // Text escapes (a Windows path's `\\`) and marks the main executable `+name`, as Apple's rows do.
      let name = TextEscaping.escaped(image["name"]?.string ?? "?")
      #expect(row.contains(" \(name) ") || row.contains(" +\(name) "), "\(source): \(row)", sourceLocation: sourceLocation)
      if let path = image["path"]?.string {
        #expect(row.hasSuffix(" " + TextEscaping.escaped(path)), "\(source): \(row)", sourceLocation: sourceLocation)
      }
      let base = row.split(separator: " ").first.flatMap { UInt64($0.dropFirst(2), radix: 16) }
      #expect(base == image["base"]?.unsigned, "\(source): \(row)", sourceLocation: sourceLocation)
    }
  }

  /// `values` with runs of one value made one (a frame's inlined functions each have a line).
  static func collapsed(_ values: [String]) -> [String] {
    var result: [String] = []
    for value in values where result.last != value { result.append(value) }
    return result
  }
}
