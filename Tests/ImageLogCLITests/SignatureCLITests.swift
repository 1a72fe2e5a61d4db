#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// The signature imagelog writes (`symbolicate --format json --signature-lists SIGGEN`) against
/// Mozilla's siggen: the same crash as `--format stackwalk-json`, wrapped as a processed crash
/// (`{"json_dump": ...}`), given to `signify` with siggen's own lists, gives the same signature, on the
/// repository's report fixtures, the minidump field fixtures, and a Crashpad dump made here. And the
/// text carries it: a `Signature:` line.
@Suite struct SignatureCLITests {
  static let reason = Comment(rawValue: Siggen.skipReason)

  /// imagelog's signature of `arguments`' crash(es), and siggen's of the same crash in stackwalk-json.
  static func both(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> [(ours: String?, theirs: String)] {
    let environment = ["DEBUGINFOD_URLS": ""]
    let json = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "json", "--signature-lists", Siggen.listDirectory]
                            + arguments, environment: environment)
    try #require(json.exitCode == 0, "imagelog: \(json.error)", sourceLocation: sourceLocation)
    let stackwalk = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "stackwalk-json"] + arguments, environment: environment)
    try #require(stackwalk.exitCode == 0, "imagelog: \(stackwalk.error)", sourceLocation: sourceLocation)
    let documents = try StackwalkJSONCLITests.documents(json.output)
    let dumps = try StackwalkJSONCLITests.documents(stackwalk.output)
    try #require(documents.count == dumps.count && !dumps.isEmpty, sourceLocation: sourceLocation)
    #expect(dumps.allSatisfy { $0["signature"] == nil }, "stackwalk-json holds no signature", sourceLocation: sourceLocation)
    return try zip(documents, dumps).map { document, dump in
      // What Socorro keeps beside json_dump from a crash's annotations: the abort message and the
      // failed allocation's size, as imagelog's document has them.
      var processed: [(String, JSONValue)] = [("json_dump", dump)]
      if let message = document["abortMessage"] { processed.append(("abort_message", message)) }
      if let size = document["oomAllocationSize"] { processed.append(("oom_allocation_size", size)) }
      let answer = try JSONValue.parse(try Siggen.signify(JSONValue.object(processed).serialized())[...])
      return (document["signature"]?.string, try #require(answer["signature"]?.string, sourceLocation: sourceLocation))
    }
  }

  @Test(.enabled(if: Siggen.isInstalled, reason), arguments: StackwalkJSONCLITests.reportFixtures)
  func reportFixtureAsSiggenSignsIt(_ name: String) throws {
    for (ours, theirs) in try Self.both([StackwalkJSONCLITests.reportFolder + "/" + name]) {
      #expect(ours == theirs, "\(name)")
    }
  }

  @Test(.enabled(if: Siggen.isInstalled, reason), arguments: StackwalkJSONCLITests.fieldDumps)
  func fieldDumpAsSiggenSignsIt(_ name: String) throws {
    let arguments = StackwalkJSONCLITests.stores.flatMap { ["--symbols", $0] } + [StackwalkJSONCLITests.fieldFolder + "/" + name]
    for (ours, theirs) in try Self.both(arguments) { #expect(ours == theirs, "\(name)") }
  }

  /// A Crashpad dump of a crash in a library, symbolicated with its files: the signature names the
  /// library's crashing function for both, and the text report has it as a header line.
  @Test(.enabled(if: Siggen.isInstalled && MinidumpCrashpadCLITests.canRun, reason))
  func crashpadDumpAsSiggenSignsIt() throws {
    let directory = try makeTemporaryDirectory("imagelog-signature")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let dump = try StackwalkJSONCLITests.crashpadLibraryDump(in: directory)
    let pairs = try Self.both([dump])
    #expect(pairs.count == 1 && pairs[0].ours == pairs[0].theirs, "\(pairs)")
    #expect(pairs.first?.theirs == "library_third", "\(pairs)")
    // The text: imagelog's layout with its own lists.
    let text = try runChild([MinidumpCLI.imagelog, "symbolicate", dump], environment: ["DEBUGINFOD_URLS": ""])
    try #require(text.exitCode == 0, "imagelog: \(text.error)")
    #expect(text.output.contains("\nSignature:       library_third\n"), "\(text.output.prefix(600))")
  }

  /// A core: siggen takes its stackwalk-json and gives imagelog's signature.
  @Test(.enabled(if: Siggen.isInstalled, reason))
  func coreAsSiggenSignsIt() throws {
    let pairs = try Self.both([packageRoot + "/Tests/ImageReadersTests/Fixtures/cores/linkmap-x86_64.core"])
    #expect(pairs.count == 1 && pairs[0].ours == pairs[0].theirs && !pairs[0].theirs.hasPrefix("EMPTY"), "\(pairs)")
  }

  /// A report's own text keeps its layout; the signature follows the summary.
  @Test func reportTextHasTheSignature() throws {
    let report = StackwalkJSONCLITests.reportFolder + "/linux-reports/asan-gcc-symbolized-stacks.txt"
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", report], environment: ["DEBUGINFOD_URLS": ""])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let json = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "json", report], environment: ["DEBUGINFOD_URLS": ""])
    let signature = try #require(try JSONValue.parse(json.output[...])["signature"]?.string)
    #expect(!signature.isEmpty && run.output.contains("\nSignature: \(signature)\n"), "\(run.output.suffix(400))")
  }

  /// A folder that is not there, or a list that does not compile: a usage error naming it.
  @Test func badSignatureListsAreNamed() throws {
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--signature-lists", "/nonexistent-lists", "0x1"])
    #expect(run.exitCode == 64)
    #expect(run.error.contains("/nonexistent-lists: not a folder of signature lists"), "\(run.error)")
  }
}
