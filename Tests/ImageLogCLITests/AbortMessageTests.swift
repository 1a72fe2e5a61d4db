#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// The message a real crash gave as it aborted, read where glibc keeps it (`__abort_msg`, in the
/// crashed process's memory under `run --crash-dir`, in a core gdb wrote): the line glibc printed to
/// stderr, shown as the report's `Abort Message:` header, in the crash document (`abortMessage`, read
/// back from it), and in the signature as siggen's AbortSignature rule puts it: siggen, given the same
/// crash as `--format stackwalk-json` in a processed crash with that `abort_message`, gives imagelog's
/// signature.
@Suite struct AbortMessageTests {
  static let canRun = haveTool("cc")
  static let imagelog = builtProduct("imagelog")
  static let environment = ["DEBUGINFOD_URLS": ""]

  /// A program that aborts through glibc: `assert(0)` (`__assert_fail`), or with `free` a free of a
  /// pointer malloc never gave (`__libc_message`: `free(): invalid pointer`).
  static let source = """
    #include <assert.h>
    #include <stdlib.h>
    #include <string.h>
    int main(int argc, char **argv) {
      if (argc > 1 && strcmp(argv[1], "free") == 0) {
        char *volatile block = malloc(16);
        free(block + 1);
        return 0;
      }
      assert(0);
      return 0;
    }
    """

  /// The program built in `directory` (`aborting`, from `aborting.c`).
  static func build(in directory: String) throws -> String {
    let file = directory + "/aborting.c"
    let write = try runChild(["sh", "-c", "cat > '\(file)'"], input: source)
    try #require(write.exitCode == 0, "\(write.error)")
    let program = directory + "/aborting"
    let compile = try runChild(["cc", "-g", "-O0", "-Wno-free-nonheap-object", "-o", program, file])
    try #require(compile.exitCode == 0, "cc: \(compile.error)")
    return program
  }

  /// The message glibc printed (the line of `stderr` holding `marker`), which `__abort_msg` holds too.
  static func printedMessage(_ stderr: String, _ marker: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let line = stderr.split(separator: "\n").first { $0.contains(marker) }
    return String(try #require(line, "glibc printed no \(marker): \(stderr)", sourceLocation: sourceLocation))
  }

  /// imagelog's document of `path` (signed with siggen's lists) and siggen's signature of the same
  /// crash: its stackwalk-json as the processed crash's `json_dump`, with `abort_message`.
  static func signatures(_ path: String, abortMessage: String,
                         sourceLocation: SourceLocation = #_sourceLocation) throws -> (document: JSONValue, siggen: String) {
    let json = try runChild([imagelog, "symbolicate", "--format", "json", "--signature-lists", Siggen.listDirectory, path],
                            environment: environment)
    try #require(json.exitCode == 0, "imagelog: \(json.error)", sourceLocation: sourceLocation)
    let stackwalk = try runChild([imagelog, "symbolicate", "--format", "stackwalk-json", path], environment: environment)
    try #require(stackwalk.exitCode == 0, "imagelog: \(stackwalk.error)", sourceLocation: sourceLocation)
    let processed = JSONValue.object([("json_dump", try JSONValue.parse(stackwalk.output[...])),
                                      ("abort_message", .string(abortMessage))])
    let answer = try JSONValue.parse(try Siggen.signify(processed.serialized())[...])
    let signature = try #require(answer["signature"]?.string, "siggen: \(answer)", sourceLocation: sourceLocation)
    return (try JSONValue.parse(json.output[...]), signature)
  }

  /// The report's `Abort Message:` header line's value.
  static func headerMessage(_ report: String) -> String? {
    report.split(separator: "\n").first { $0.hasPrefix("Abort Message:") }
      .map { String($0.dropFirst("Abort Message:".count).drop { $0 == " " }) }
  }

  /// `run --crash-dir --crash-document`: the crashed process's `__abort_msg`, read while it waits for
  /// the capture, in the report, the document and its signature; the document read back keeps it.
  @Test(.enabled(if: canRun && CrashDocumentSchema.unavailableReason == nil, "needs cc and python3-jsonschema"),
        arguments: [("assert", "Assertion `0' failed."), ("free", "free(): invalid pointer")])
  func underRunCrashDir(_ mode: String, _ marker: String) throws {
    let directory = try makeTemporaryDirectory("imagelog-abort-run")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let program = try Self.build(in: directory)
    let crashes = directory + "/crashes"
    let run = try runChild([Self.imagelog, "run", "--crash-dir", crashes, "--crash-wait", "--crash-document", "--", program]
                           + (mode == "free" ? ["free"] : []), environment: Self.environment)
    let message = try Self.printedMessage(run.error, marker)
    if mode == "assert" { #expect(message == "aborting: \(directory)/aborting.c:10: main: Assertion `0' failed.") }
    let (report, text, document, signature) = try CrashFilesDocument.check(crashes)
    #expect(Self.headerMessage(text) == message, "\(text.prefix(700))")
    #expect(document["abortMessage"]?.string == message, "the document's abortMessage")
    #expect(signature.hasPrefix("Abort | "), "imagelog's lists, the abort rule: \(signature)")
    // The document read back keeps the message, and so does the report read back.
    let stem = String(report.dropLast(".crash".count))
    for path in [stem + ".json", report] {
      let reread = try runChild([Self.imagelog, "symbolicate", "--format", "json", path], environment: Self.environment)
      try #require(reread.exitCode == 0, "imagelog: \(reread.error)")
      #expect(try JSONValue.parse(reread.output[...])["abortMessage"]?.string == message, "\(path) read back")
    }
    guard Siggen.isInstalled else { return }
    let (ours, theirs) = try Self.signatures(report, abortMessage: message)
    #expect(ours["signature"]?.string == theirs && theirs.hasPrefix("Abort | "), "imagelog \(ours["signature"] ?? .null), siggen \(theirs)")
  }

  /// A core gdb wrote as the program stopped on its SIGABRT: `__abort_msg` read from the core's memory.
  @Test(.enabled(if: canRun && haveTool("gdb"), "needs cc and gdb"),
        arguments: [("assert", "Assertion `0' failed."), ("free", "free(): invalid pointer")])
  func inAGdbCore(_ mode: String, _ marker: String) throws {
    let directory = try makeTemporaryDirectory("imagelog-abort-core")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let program = try Self.build(in: directory)
    let core = directory + "/aborting.core"
    let gdb = try runChild(["gdb", "-nx", "-batch", "-ex", "run", "-ex", "generate-core-file \(core)", "--args", program]
                           + (mode == "free" ? ["free"] : []), timeoutSeconds: 300)
    try #require(access(core, R_OK) == 0, "gdb wrote no core: \(gdb.output) \(gdb.error)")
    let message = try Self.printedMessage(gdb.output + "\n" + gdb.error, marker)
    let text = try runChild([Self.imagelog, "symbolicate", core], environment: Self.environment)
    try #require(text.exitCode == 0, "imagelog: \(text.error)")
    #expect(Self.headerMessage(text.output) == message, "\(text.output.prefix(700))")
    #expect(text.output.contains("\nSignature:       Abort | "), "\(text.output.prefix(700))")
    guard Siggen.isInstalled else { return }
    let (ours, theirs) = try Self.signatures(core, abortMessage: message)
    #expect(ours["abortMessage"]?.string == message)
    #expect(ours["signature"]?.string == theirs && theirs.hasPrefix("Abort | "), "imagelog \(ours["signature"] ?? .null), siggen \(theirs)")
  }

  /// A real Swift crash (the repository's Swift backtrace JSON, whose stderr preamble holds the
  /// runtime's line): the `Fatal error:` line as printed is the abort message, and siggen's abort rule
  /// with it gives imagelog's signature.
  @Test(.enabled(if: Siggen.isInstalled, Comment(rawValue: Siggen.skipReason)))
  func swiftFatalErrorOfARealCrash() throws {
    let path = StackwalkJSONCLITests.reportFolder + "/linux-reports/swift-backtrace-crasher.json"
    let printed = try #require(readFile(path)?.split(separator: "\n").first.map(String.init))
    #expect(printed.contains(": Fatal error: Index out of range"), "the runtime's line: \(printed)")
    let (ours, theirs) = try Self.signatures(path, abortMessage: printed)
    #expect(ours["abortMessage"]?.string == printed)
    #expect(ours["signature"]?.string == theirs && theirs.hasPrefix("Abort | \(printed) | "), "imagelog \(ours["signature"] ?? .null), siggen \(theirs)")
  }

  /// Real sanitizer logs: the kind their `SUMMARY:` line names is the abort message. siggen has no
  /// rule of its own for a sanitizer's kind (its rules read Firefox's annotations); imagelog gives the
  /// kind as the abort message, so crashes of different kinds at one place stay apart, and siggen's
  /// abort rule, given it as `abort_message`, agrees.
  @Test(.enabled(if: Siggen.isInstalled, Comment(rawValue: Siggen.skipReason)), arguments: [
    ("asan-gcc-parenthesised.txt", "AddressSanitizer: heap-use-after-free"),
    ("asan-gcc-symbolized-stacks.txt", "AddressSanitizer: heap-buffer-overflow"),
    ("ubsan-clang-thread-symbolized.txt", "UndefinedBehaviorSanitizer: undefined-behavior"),
  ])
  func sanitizerKindOfARealLog(_ name: String, _ kind: String) throws {
    let path = StackwalkJSONCLITests.reportFolder + "/linux-reports/" + name
    let (ours, theirs) = try Self.signatures(path, abortMessage: kind)
    #expect(ours["abortMessage"]?.string == kind)
    #expect(ours["signature"]?.string == theirs && theirs.hasPrefix("Abort | \(kind) | "), "imagelog \(ours["signature"] ?? .null), siggen \(theirs)")
  }

  /// AddressSanitizer refusing a 2 TiB malloc (allocation-size-too-big), its log written here: the
  /// size it names is the out-of-memory size, and siggen's OOM rule (`OOM | large`, above 256 KiB) and
  /// abort rule, given it and the kind, give imagelog's signature.
  @Test(.enabled(if: canRun && Siggen.isInstalled, "needs cc and siggen"))
  func asanAllocationSizeTooBig() throws {
    let directory = try makeTemporaryDirectory("imagelog-abort-asan")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let file = directory + "/big.c"
    let source = "#include <stdlib.h>\nint main(void) { void *volatile block = malloc((size_t)1 << 41); return block != 0; }\n"
    try #require(try runChild(["sh", "-c", "cat > '\(file)'"], input: source).exitCode == 0)
    let compile = try runChild(["cc", "-g", "-fsanitize=address", "-o", directory + "/big", file])
    try #require(compile.exitCode == 0, "cc -fsanitize=address: \(compile.error)")
    let run = try runChild([directory + "/big"], environment: ["ASAN_OPTIONS": "allocator_may_return_null=0"])
    try #require(run.error.contains("allocation-size-too-big"), "\(run.error)")
    let log = directory + "/big.log"
    try #require(try runChild(["sh", "-c", "cat > '\(log)'"], input: run.error).exitCode == 0)
    let json = try runChild([Self.imagelog, "symbolicate", "--format", "json", "--signature-lists", Siggen.listDirectory, log],
                            environment: Self.environment)
    try #require(json.exitCode == 0, "imagelog: \(json.error)")
    let ours = try JSONValue.parse(json.output[...])
    #expect(ours["oomAllocationSize"]?.unsigned == 1 << 41 && ours["abortMessage"]?.string == "AddressSanitizer: allocation-size-too-big")
    let stackwalk = try runChild([Self.imagelog, "symbolicate", "--format", "stackwalk-json", log], environment: Self.environment)
    try #require(stackwalk.exitCode == 0, "imagelog: \(stackwalk.error)")
    let processed = JSONValue.object([("json_dump", try JSONValue.parse(stackwalk.output[...])),
                                      ("abort_message", .string("AddressSanitizer: allocation-size-too-big")),
                                      ("oom_allocation_size", .number(String(UInt64(1) << 41)))])
    let theirs = try #require(try JSONValue.parse(try Siggen.signify(processed.serialized())[...])["signature"]?.string)
    #expect(ours["signature"]?.string == theirs && theirs.hasPrefix("Abort | AddressSanitizer: allocation-size-too-big | OOM | large | "),
            "imagelog \(ours["signature"] ?? .null), siggen \(theirs)")
  }
}
