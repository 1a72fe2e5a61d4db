#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// What the crash folder's writer leaves beside a report when asked for the crash document
/// (`run --crash-document`, `core-handler --document`): `STEM.json`, valid under the schema, with the
/// signature the report's `Signature:` line gives, which siggen gives for the same frames.
enum CrashFilesDocument {
  /// The one crash's report, its document and the document's signature in `folder`, after checking that
  /// the document validates, is `schemaVersion` 1, and has the report's signature.
  static func check(_ folder: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> (report: String, reportText: String, document: JSONValue, signature: String) {
    let names = directoryNames(folder).sorted()
    let reports = names.filter { $0.hasSuffix(".crash") }
    try #require(reports.count == 1, "one report: \(names)", sourceLocation: sourceLocation)
    let stem = String(reports[0].dropLast(".crash".count))
    #expect(names.contains(stem + ".json") && names.contains(stem + ".dmp"), "\(names)", sourceLocation: sourceLocation)
    let text = try #require(readFile("\(folder)/\(stem).json"), sourceLocation: sourceLocation)
    #expect(try CrashDocumentSchema.problems(text) == [], "\(text.prefix(400))", sourceLocation: sourceLocation)
    let document = try JSONValue.parse(text[...])
    #expect(document["schemaVersion"] == .number("1") && document["document"] == .string("imagelog-crash"),
            sourceLocation: sourceLocation)
    let reportText = try #require(readFile("\(folder)/\(stem).crash"), sourceLocation: sourceLocation)
    #expect(!reportText.contains("-- provisional"), "the final report", sourceLocation: sourceLocation)
    let signature = try #require(document["signature"]?.string, "the document's signature", sourceLocation: sourceLocation)
    let line = reportText.split(separator: "\n").first { $0.hasPrefix("Signature:") }
    #expect(line.map { $0.dropFirst("Signature:".count).drop { $0 == " " } } == signature[...],
            "the report's Signature: line \(line ?? "none") against the document's \(signature)", sourceLocation: sourceLocation)
    return ("\(folder)/\(stem).crash", reportText, document, signature)
  }

  /// siggen's signature of the report at `path`: its crash in minidump-stackwalk's schema
  /// (`symbolicate --format stackwalk-json`) as a processed crash's `json_dump`, signed with `lists`.
  static func siggenSignature(ofReport path: String, lists: String,
                              sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let stackwalk = try runChild([builtProduct("imagelog"), "symbolicate", "--format", "stackwalk-json", path],
                                 environment: ["DEBUGINFOD_URLS": ""])
    try #require(stackwalk.exitCode == 0, "imagelog: \(stackwalk.error)", sourceLocation: sourceLocation)
    let dump = try JSONValue.parse(stackwalk.output[...])
    let answer = try JSONValue.parse(try Siggen.signify(JSONValue.object([("json_dump", dump)]).serialized(), lists: lists)[...])
    return try #require(answer["signature"]?.string, "siggen: \(answer)", sourceLocation: sourceLocation)
  }

  /// The document's threads as `CoreHandlerTests.reportStacks` gives a report's: each frame's real
  /// function (the last of its functions), its image's file, and whether it is in the vDSO, by tid.
  static func stacks(_ document: JSONValue) -> [Int: [(name: String?, file: String?, inVDSO: Bool)]] {
    let images = document["binaryImages"]?.array ?? []
    var stacks: [Int: [(name: String?, file: String?, inVDSO: Bool)]] = [:]
    for thread in document["threads"]?.array ?? [] {
      guard let tid = thread["tid"]?.integer else { continue }
      stacks[tid] = (thread["frames"]?.array ?? []).map { frame in
        let image = frame["imageIndex"]?.integer.flatMap { images.indices.contains($0) ? images[$0] : nil }
        return (frame["functions"]?.array?.last?["symbol"]?.string, image?["path"]?.string, frame["image"]?.string == "[vdso]")
      }
    }
    return stacks
  }
}

extension RunCrashTests {
  /// `run --crash-dir --crash-document`: the crash document beside the report, valid, with the
  /// report's signature (`crash_null`, the function that faulted: run-crash.c's null mode has no frame
  /// a signature list skips above it), which siggen gives too; its crashed
  /// thread's frames are the report's.
  @Test(.enabled(if: processTestHaveCC && gcc != nil && CrashDocumentSchema.unavailableReason == nil,
                 "needs cc, gcc and python3-jsonschema"))
  func crashDocumentBesideTheReport() throws {
    let run = try Self.crash("null", extra: ["--crash-wait", "--crash-document"])
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    #expect(run.files.count == 3, "a report, a minidump and a document: \(run.files)")
    let (report, text, document, signature) = try CrashFilesDocument.check(run.directory)
    #expect(signature == "crash_null", "\(text)")
    // siggen with its own lists: given imagelog's, whose line-number list is empty, siggen joins no
    // pattern into "", which matches every function, and writes "crash_null:59".
    if Siggen.isInstalled { #expect(try CrashFilesDocument.siggenSignature(ofReport: report, lists: Siggen.listDirectory) == signature) }
    let parsed = try SymbolicatedReportText(text)
    let crashed = try #require(parsed.threads.first { $0.crashed }, "\(text)")
    let thread = try #require(document["threads"]?.array?.first { $0["crashed"] == .bool(true) }, "a crashed thread")
    #expect(thread["tid"]?.integer == Int(crashed.tid))
    let frames = thread["frames"]?.array ?? []
    #expect(frames.compactMap { $0["address"]?.unsigned } == crashed.frames, "\(frames)\n\(text)")
    let first = frames.first?["functions"]?.array?.last
    #expect(first?["symbol"]?.string == "crash_null" && first?["file"]?.string?.hasSuffix("run-crash.c") == true, "\(frames.first.map { "\($0)" } ?? "")")
  }

  /// run with every option, in an environment of its own that holds none of the variables it replaces:
  /// the environment it builds for the program (its own, then LD_AUDIT and the module's 16 variables and
  /// the end) fits the array it allocates. Under valgrind (which cannot read the debug binary's DWARF 5:
  /// a stripped copy, the audit module beside it); the array was one entry short before --crash-document
  /// was added and valgrind said "Invalid write of size 8".
  @Test(.enabled(if: haveTool("valgrind") && haveTool("strip"), "needs valgrind and strip"))
  func everyRunOptionFitsTheEnvironment() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-options")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let copy = directory + "/imagelog"
    let strip = try runChild(["strip", "-o", copy, processTestImagelog])
    try #require(strip.exitCode == 0, "strip: \(strip.error)")
    let module = processTestImagelog.split(separator: "/").dropLast().joined(separator: "/")
    let copied = try runChild(["cp", "/" + module + "/libImageLogAudit.so", directory + "/"])
    try #require(copied.exitCode == 0, "cp: \(copied.error)")
    let run = try runChild(["env", "-i", "PATH=/usr/bin:/bin", "valgrind", "-q", copy, "run", "--timing", "--full-build-ids",
                            "--no-follow", "--output", directory + "/log", "--crash-dir", directory + "/crashes", "--crash-wait",
                            "--crash-document", "--upload-url", "http://127.0.0.1:9/", "--unloaded-history", "3", "--", "true"],
                           timeoutSeconds: 300)
    #expect(run.exitCode == 0 && !run.error.contains("Invalid") && !run.error.contains("unaddressable"), "\(run.error)")
    #expect(readFile(directory + "/log")?.isEmpty == false, "the program ran audited")
  }

  @Test func crashDocumentNeedsACrashDirectory() throws {
    let run = try runChild([processTestImagelog, "run", "--crash-document", "--", "true"])
    #expect(run.exitCode == 64 && run.error.contains("--crash-document needs --crash-dir"), "\(run.error)")
  }
}

extension CoreHandlerTests {
  /// `core-handler --document` on a real core: the document beside the report, valid, with the
  /// report's signature, which siggen gives from its own lists (`--signature-lists` of siggen's); its
  /// threads' frames are eu-stack's.
  @Test(.enabled(if: (kernelCores || haveOracles) && CrashDocumentSchema.unavailableReason == nil,
                 "no kernel core or gcore (see CoreFileTests), or no python3-jsonschema"))
  func documentBesideTheReport() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-document")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (core, live) = try Self.smallCore(in: directory)
    defer { live?.stop() }
    let reports = directory + "/reports"
    let lists = Siggen.isInstalled ? ["--signature-lists", Siggen.listDirectory] : []
    let run = try Self.handle(core, pid: Self.unusedPID(), into: reports, ["--document", "--demangle", "none"] + lists)
    #expect(run.exitCode == 0, "\(run.error)")
    #expect(run.output.split(separator: "\n").count == 3, "the three paths: \(run.output)")
    let (report, text, document, signature) = try CrashFilesDocument.check(reports)
    #expect(!signature.isEmpty && !signature.hasPrefix("EMPTY"), "\(text)")
    if Siggen.isInstalled {
      #expect(try CrashFilesDocument.siggenSignature(ofReport: report, lists: Siggen.listDirectory) == signature)
    }
    try CoreFileTests.expectSameStacks(CrashFilesDocument.stacks(document), as: core, "the document")
    #expect(text.contains("\n-- imagelog core-handler: memory read from "), "the handler's section stays last: \(text.suffix(300))")
  }
}
