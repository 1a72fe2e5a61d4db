import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication

/// The Linux report shapes of issue #26, on the fixtures Scripts/make-linux-report-fixtures made with
/// this toolchain's sanitizers and glibc (the expected values are the ones written in their lines).
@Suite struct LinuxReportShapeTests {
  static let folder = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/"
  /// Where the recipe built the programs the reports name.
  static let recipeFolder = "/tmp/imagelog-linux-reports"

  static func text(_ name: String) throws -> String {
    try #require(readFile(folder + name), "cannot read \(folder + name)")
  }

  static func report(_ name: String) throws -> ProcessSnapshot { try ReportParser.parse(text(name)) }

  /// No system debug folders, no DWARF: answers from the files the reports name, when present.
  static var offline: SymbolicationOptions {
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.lineInfo = false
    return options
  }

  /// The frames of each thread, as (index, address) pairs.
  static func stacks(_ report: ProcessSnapshot) -> [[(Int, UInt64)]] {
    var stacks = [[(Int, UInt64)]](repeating: [], count: report.threads.count)
    for frame in report.frames where stacks.indices.contains(frame.thread) { stacks[frame.thread].append((frame.index, frame.address)) }
    return stacks
  }

  // MARK: 1. Detection by the whole report's shape

  /// `(…/libasan.so.8+0x…)` after a demangled name, `(discriminator 3)` and `(<unknown module>)` end
  /// frames of one ASan report: it stays a sanitizer report, three stacks, each whole.
  @Test func parenthesisedEndingsStayInTheirSanitizerStacks() throws {
    let report = try Self.report("asan-gcc-parenthesised.txt")
    #expect(report.format == .sanitizer)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.threads.map(\.name) == ["READ of size 4 at 0x602000000010 thread T0", "freed by thread T0 here:",
                                           "previously allocated by thread T0 here:"])
    let stacks = Self.stacks(report)
    try #require(stacks.map { $0.map(\.0) } == [[0, 1, 2, 3, 4], [0, 1, 2], [0, 1, 2, 3, 4, 5]])
    #expect(stacks[2].map(\.1) == [0x7ffff78b9628, 0x5555555551a6, 0x7ffff7ea2005, 0x555555555274, 0x5555555551f9, 0x7ffff7645249])

    // `#1 0x555555555228 in main /src/asan-shapes.cc:10 (discriminator 3)`: no module, as written.
    let loop = report.frames[1]
    #expect(loop.namesNoModule && loop.imageIndex == nil)
    #expect(loop.reportedSymbol == "main /src/asan-shapes.cc:10")
    #expect(loop.reportedFunction == ProcessSnapshot.ReportedFunction(name: "main", file: "/src/asan-shapes.cc", line: 10))
    // `#2 0x7ffff7ea2005  (<unknown module>)`: a frame, in no module, with no name.
    let jit = try #require(report.frames.first { $0.address == 0x7ffff7ea2005 })
    #expect(jit.namesNoModule && jit.imageIndex == nil && jit.reportedSymbol == nil)
    // `#0 0x7ffff78b9628 in operator new[](unsigned long) (/tmp/imagelog-linux-reports/lib/libasan.so.8+0xb9628)`.
    let new = report.frames[8]
    let image = try #require(new.imageIndex.map { report.images[$0] })
    #expect(image.path == Self.recipeFolder + "/lib/libasan.so.8" && new.address - image.loadAddress == 0xb9628)
    #expect(new.reportedSymbol == "operator new[](unsigned long)" && !new.namesNoModule)
    #expect(report.images.map(\.name) == ["asan-shapes", "libasan.so.8"])
  }

  /// A frame line alone does not decide: a stack whose lines say nothing either way takes the kind the
  /// report names, and gdb's `bt` (which says `in` too) stays out.
  @Test func kindComesFromTheStackAndTheReport() throws {
    let coredump = try ReportParser.parse("""
      Stack trace of thread 1:
      #0  0x00007f0000001000 raise (libc.so.6 + 0x3ee2b)
      #1  0x00007f0000002000 abort (libc.so.6)
      """)
    #expect(coredump.format == .coredump && coredump.threads.count == 1 && coredump.frames.count == 2)
    let gdb = "#0  0x00007ffff7e4ae8b in raise () from /lib/x86_64-linux-gnu/libc.so.6\n"
      + "#1  0x0000555555555156 in main () at a.c:5\n"
    #expect(throws: ReportError.self) { try ReportParser.parse(gdb) }
  }

  // MARK: 2. Stacks whose first frames name no module

  /// The allocation's stack has module-less frames #0…#4 and `#5 … _start (…)`: it is a stack of its
  /// own, not the write's continued (#5 > #4).
  @Test func moduleLessFramesStartTheirOwnStack() throws {
    let report = try Self.report("asan-gcc-symbolized-stacks.txt")
    #expect(report.threads.map(\.name) == ["WRITE of size 4 at 0x602000000020 thread T0", "allocated by thread T0 here:"])
    let stacks = Self.stacks(report)
    try #require(stacks.map { $0.map(\.0) } == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])
    #expect(stacks[1].last?.1 == 0x5555555550b0)
    #expect(report.frames.filter { !$0.namesNoModule }.map(\.address) == [0x5555555550b0, 0x5555555550b0])
  }

  // MARK: 3. glibc frames without a symbol

  /// `./backtrace-jit[0x401185]` (non-PIE, no symbol) and the JIT frame's bare `[0x7ffff7fbf006]` are
  /// frames of the one stack, in order, under its heading.
  @Test func glibcFramesWithoutASymbol() throws {
    let report = try Self.report("glibc-nonpie-jit.txt")
    #expect(report.format == .glibcBacktrace)
    #expect(report.problems.isEmpty)
    #expect(report.threads.map(\.name) == ["Stack trace:"])
    try #require(report.frames.map(\.index) == Array(0..<8))
    #expect(report.frames.map(\.address) == [0x401185, 0x7ffff7fbf006, 0x40128a, 0x4011d9, 0x4011e4, 0x7ffff7ddb24a,
                                             0x7ffff7ddb305, 0x4010a1])
    let modules = report.frames.map { $0.imageIndex.flatMap { report.images[$0].path } }
    #expect(modules == ["./backtrace-jit", nil, "./backtrace-jit", "./backtrace-jit", "./backtrace-jit",
                        "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "./backtrace-jit"])
    #expect(report.frames[1].namesNoModule)
  }

  /// Bare `[0x…]` lines and `name[0x…]` alone are no report; beside glibc's own lines they are frames.
  @Test func bareGlibcLinesNeedAGlibcStack() throws {
    #expect(throws: ReportError.self) { try ReportParser.parse("[0x3c13f38d]\nbuffer[0x10]\n") }
    let report = try ReportParser.parse("/usr/sbin/mysqld(my_print_stacktrace+0x35)[0x7a7ea5]\n[0x3c13f38d]\nmysqld[0x5a1c12]\n")
    #expect(report.frames.map(\.address) == [0x7a7ea5, 0x3c13f38d, 0x5a1c12] && report.threads.count == 1)
  }

  // MARK: 4. Fully symbolized reports

  /// UBSan on a thread, every frame symbolized: read, each frame as the report wrote it, the text kept.
  @Test func fullySymbolizedReportIsRead() throws {
    let text = try Self.text("ubsan-clang-thread-symbolized.txt")
    let report = try ReportParser.parse(text)
    #expect(report.format == .sanitizer)
    #expect(report.frames.map(\.reportedFunction) == [
      .init(name: "add", file: "/src/ubsan-thread.c", line: 6, column: 60),
      .init(name: "twice", file: "/src/ubsan-thread.c", line: 7, column: 53),
      .init(name: "worker", file: "/src/ubsan-thread.c", line: 8, column: 55),
      .init(name: "start_thread", file: "nptl/./nptl/pthread_create.c", line: 442, column: 8),
      .init(name: "clone3", file: "misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S", line: 81),
    ])
    #expect(report.frames.allSatisfy { $0.namesNoModule })
    let result = Symbolicator.symbolicated(report, options: Self.offline)
    #expect(result.frames.allSatisfy { $0.status == .noModule })
    let written = result.formatted(.report)
    #expect(written.hasPrefix(text))
    #expect(written.contains("-- symbolicated by imagelog: 0 of 5 frames; 0 of 0 images found, 0 missing, 0 mismatched\n"
                             + "  without a module: 5 frames, kept as the report wrote them\n"))
  }

  // MARK: 5. Every frame line is a frame, in JSON and in the count

  /// Each `#N` line (sanitizers) or `[0x…]` line (glibc) is one JSON frame; the summary counts them all;
  /// a frame without a module has status `no-module` and the function and location its line gives.
  @Test(arguments: ["asan-gcc-parenthesised.txt", "asan-gcc-symbolized-stacks.txt", "glibc-nonpie-jit.txt",
                    "ubsan-clang-thread-symbolized.txt"])
  func everyFrameLineIsAFrame(fixture: String) throws {
    let text = try Self.text(fixture)
    let frameLines = text.split(separator: "\n").filter { line in
      let trimmed = line.drop { $0 == " " }
      return (trimmed.hasPrefix("#") && trimmed.dropFirst().prefix { $0.isNumber }.count > 0 && trimmed.contains(" 0x"))
        || (trimmed.hasSuffix("]") && trimmed.contains("[0x"))
    }
    let result = Symbolicator.symbolicated(try ReportParser.parse(text), options: Self.offline)
    let json = try JSONValue.parse(result.formatted(.json)[...])
    if CrashDocumentSchema.unavailableReason == nil { #expect(try CrashDocumentSchema.problems(result.formatted(.json)) == []) }
    let frames = try #require(json["frames"]?.array)
    #expect(frames.count == frameLines.count)
    #expect(result.summary().contains(" of \(frameLines.count) frames; "))
    for (frame, line) in zip(frames, frameLines) where frame["status"]?.string == "no-module" {
      #expect(frame["image"] == nil)
      if let symbol = frame["symbol"]?.string { #expect(line.contains(" in \(symbol) ") || line.hasSuffix(" in \(symbol)")) }
      if let file = frame["file"]?.string, let number = frame["line"]?.integer { #expect(line.contains("\(file):\(number)")) }
    }
    #expect(frames.contains { $0["status"]?.string == "no-module" })
  }

  // MARK: 6. Tombstone pcs written `0x…`

  @Test func tombstonePCsWithAPrefix() throws {
    let report = try Self.report("tombstone-console-0x.txt")
    #expect(report.format == .androidTombstone && report.problems.isEmpty, "\(report.problems)")
    try #require(report.threads.count == 2)
    let stacks = Self.stacks(report)
    #expect(stacks[0].map(\.1) == [0x4f8a4, 0xa3c1c, 0xa3d80, 0xb1f44])
    #expect(stacks[0].map(\.1) == stacks[1].map(\.1))
    let byThread = Dictionary(grouping: report.frames, by: \.thread)
    #expect(byThread[0]?.map(\.reportedSymbol) == byThread[1]?.map(\.reportedSymbol))
    #expect(byThread[0]?.map { $0.imageIndex.map { report.images[$0].path } } == byThread[1]?.map { $0.imageIndex.map { report.images[$0].path } })
  }

  // MARK: 8. The Swift backtracer's JSON as a .crash

  /// `--format crash` of the backtracer's JSON: its thread, its frames (numbered, with their images and
  /// addresses), its registers and its images, not an empty shell.
  @Test func swiftBacktraceJSONAsClassicText() throws {
    let report = try Self.report("swift-backtrace-crasher.json")
    #expect(report.format == .swiftBacktraceJSON)
    let text = Symbolicator.symbolicated(report, options: Self.offline).formatted(.crash)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    let thread = try #require(lines.firstIndex(of: "Thread 0 Crashed:: crasher"), "\(text)")
    let frames = lines[(thread + 1)...].prefix { !$0.isEmpty }
    // The document's six frames and its `truncated` mark.
    #expect(frames.count == 7 && frames.last == "...", "\(text)")
    for (number, (line, frame)) in zip(frames, report.frames).enumerated() {
      let image = frame.imageIndex.map { report.images[$0].name } ?? "???"
      #expect(line.hasPrefix(String(number).padding(4) + image.padding(30) + "\t"), "\(line)")
      #expect(line.contains("0x" + String(frame.address, radix: 16) + " "), "\(line)")
    }
    #expect(text.contains("Thread 0 crashed with X86 Thread State (64-bit):\n  rax: 0x0000000000000000  rbx: 0x000055500003ec8b"))
    let images = lines.drop { $0 != "Binary Images:" }.dropFirst().prefix { !$0.isEmpty }
    #expect(images.count == report.images.count && images.count == 3)
    for (line, image) in zip(images, report.images) { #expect(line.hasSuffix(" " + (image.path ?? "???"))) }
    #expect(text.contains("-- symbolicated by imagelog: "))
  }

  // MARK: 9. Report text in notes

  /// The unreadable line's quote and the text after an `.ips` body are escaped in the summary: no ESC,
  /// CR, NUL, DEL or C1 control from the report reaches the output.
  @Test func quotedReportTextIsEscaped() throws {
    let frameLine = Symbolicator.symbolicated(try Self.report("hostile-frame-line.txt"), options: Self.offline).summary()
    #expect(frameLine.contains(#"  unreadable: line 4: unreadable frame address '    #1 0x55a7\x1b[2J\x1b[31mFORGED\r  note: forged\x00\x7f\u{9b}"#
                               + "\u{FFFD}  (/tmp/uaf+0x171e20)'\n"), "\(frameLine)")
    let ips = Symbolicator.symbolicated(try Self.report("hostile-ips-trailer.ips"), options: Self.offline).summary()
    #expect(ips.contains(#"  unreadable: text after the .ips body is not read: 'Model: Mac14,2\x1b[2J\x1b[31mFORGED\r  note: forged\x00\x7f\u{9b}"#
                         + "\u{FFFD}'\n"), "\(ips)")
    for summary in [frameLine, ips] {
      let raw = summary.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }
      #expect(raw.isEmpty, "raw control characters \(raw.map(\.value))")
    }
  }
}

/// Reports and files made at test time: a non-PIE program's glibc frames placed and named (issue #26,
/// 3), and the files at the paths of reports without build-ids checked against the reports' own names
/// and offsets (issue #26, 7): another build is refused, the same build is not.
@Suite(.enabled(if: LinuxPrograms.haveClang, "needs clang with compiler-rt (Swift's toolchain ships it)"))
struct LinuxReportBuildCheckTests {
  /// Builds `sources` into `folder/name` with clang and `flags`.
  static func build(_ sources: [String], _ folder: String, _ name: String, _ flags: [String]) throws -> String {
    let path = folder + "/" + name
    let result = try runChild(["clang", "-O0"] + flags + sources + ["-o", path])
    guard result.status == 0 else { throw TestSupportError("clang \(flags.joined(separator: " ")): \(result.error.suffix(400))") }
    return path
  }

  static let otherBuild = packageRoot + "/Tests/Programs/other-build.c"

  /// The fixture `name` with the recipe's folder replaced by `folder`, read and symbolicated without
  /// system debug files.
  static func symbolicate(_ name: String, in folder: String) throws -> ProcessSnapshot {
    let text = try LinuxReportShapeTests.text(name).replacing(LinuxReportShapeTests.recipeFolder, with: folder)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    return Symbolicator.symbolicated(try ReportParser.parse(text), options: options)
  }

  /// The program the report names, found at its path: another build, its frames the report's own.
  static func expectOtherBuild(_ result: ProcessSnapshot, image name: String, reason: String,
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
    let resolution = try #require(result.resolutions.first { result.images[$0.imageIndex].name == name },
                                  sourceLocation: sourceLocation)
    guard case .otherBuild(_, let why) = resolution.status else {
      Issue.record("\(name): \(resolution.status)", sourceLocation: sourceLocation)
      return
    }
    #expect(why.hasPrefix(reason), "\(why)", sourceLocation: sourceLocation)
    let text = result.formatted(.report)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    for frame in result.frames where frame.imageIndex == resolution.imageIndex {
      #expect(frame.status == .otherBuild, sourceLocation: sourceLocation)
      // The report's own function, as this kind of report writes it (glibc's `main+0x9`: `main`, offset 9).
      let kept = frame.functions.map {
        ProcessSnapshot.ReportedFunction(name: $0.name, offset: $0.offset, file: $0.file, line: $0.line, column: $0.column)
      }
      #expect(kept == (result.reportedFunction(of: frame.frame).map { [$0] } ?? []), sourceLocation: sourceLocation)
      // Nothing from the file is written into the report's line.
      if let line = frame.line { #expect(lines[line] == result.lines[line][...], sourceLocation: sourceLocation) }
    }
    #expect(text.contains("mismatch:   \(name) "), sourceLocation: sourceLocation)
    #expect(result.formatted(.json).contains("\"status\":\"other-build\""), sourceLocation: sourceLocation)
  }

  /// glibc's `prog(print_trace+0x1f)`: a file at that path without `print_trace` is another build.
  @Test func glibcNamesDisagreeWithAnotherBuild() throws {
    let folder = try makeTemporaryDirectory("imagelog-other-build")
    _ = try Self.build([Self.otherBuild], folder, "backtrace-named", ["-Wl,--build-id=none"])
    try Self.expectOtherBuild(Self.symbolicate("glibc-no-build-id.txt", in: folder), image: "backtrace-named",
                              reason: "the report's names disagree with this file: another build (the report has print_trace+0x1f; the file has no print_trace)")
  }

  /// ASan's offsets past the end of a small file's segments, and its names at offsets inside a large one.
  @Test(arguments: [(["-Wl,--build-id=none"], "the report's offset 0x"),
                    (["-Wl,--build-id=none", "-fsanitize=address", "-DPADDING"], "the report's names disagree with this file")])
  func sanitizerFramesDisagreeWithAnotherBuild(flags: [String], reason: String) throws {
    let folder = try makeTemporaryDirectory("imagelog-other-build")
    _ = try Self.build([Self.otherBuild], folder, "heap-overflow-nobuildid", flags)
    try Self.expectOtherBuild(Self.symbolicate("asan-no-build-id.txt", in: folder), image: "heap-overflow-nobuildid",
                              reason: reason)
  }

  /// The same build: an ASan report naming its functions (`in make (uaf+0x…)`, libc's from its debug
  /// file) with its `(BuildId: …)` groups taken out, as older sanitizers wrote it, agrees with every
  /// file (interceptors, inlined calls, aliases, versions): each frame gets the answer it gets with them.
  @Test(.enabled(if: currentLLVMSymbolizer != nil, "needs the toolchain's llvm-symbolizer for the sanitizer"))
  func sameBuildWithoutBuildIDsAgrees() throws {
    let folder = try makeTemporaryDirectory("imagelog-same-build")
    let path = try Self.build([packageRoot + "/Tests/Programs/sanitizer-uaf.c"], folder, "uaf",
                              ["-fsanitize=address", "-fno-omit-frame-pointer", "-Wl,--build-id"])
    let symbolizer = currentLLVMSymbolizer.map { ":external_symbolizer_path=" + $0 } ?? ""
    let run = try runChild([path], environment: ["ASAN_OPTIONS": "symbolize=1" + symbolizer])
    var stripped = ""
    for line in run.error.split(separator: "\n", omittingEmptySubsequences: false) {
      stripped += (line.firstRange(of: " (BuildId: ").map { line[..<$0.lowerBound] } ?? line) + "\n"
    }
    #expect(stripped != run.error + "\n", "the report named no build-id:\n\(run.error)")
    var options = SymbolicationOptions()
    options.searchPaths = [folder]
    let with = Symbolicator.symbolicated(try ReportParser.parse(run.error), options: options)
    let without = Symbolicator.symbolicated(try ReportParser.parse(stripped), options: options)
    #expect(without.resolutions.allSatisfy { if case .unverified = $0.status { true } else { false } }, "\(without.resolutions)")
    #expect(without.frames.contains { $0.reportedSymbol != nil && $0.imageIndex != nil }, "no named frame to check")
    #expect(with.frames.map(\.functions) == without.frames.map(\.functions))
  }

  /// gcc's ASan prints no build-ids: its names are checked against the very files it ran with and all
  /// agree: `operator new[](unsigned long)` against `_Znam`, `__interceptor_malloc`'s alias, `_start`.
  @Test(.enabled(if: haveTool("g++"), "needs g++ and its libasan.so.8"))
  func gccSanitizerNamesAgreeWithTheirFiles() throws {
    let folder = try makeTemporaryDirectory("imagelog-same-build")
    let sources = packageRoot + "/Scripts/fixtures-src/linux-reports/"
    let compile = try runChild(["g++", "-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=address", "-x", "c++",
                                sources + "asan-shapes.cc", "-x", "c", sources + "jit.c", "-o", folder + "/asan-shapes"])
    try #require(compile.status == 0, "\(compile.error)")
    let libasan = try runChild(["g++", "-print-file-name=libasan.so.8"]).output.trimmingSpaces.replacing("\n", with: "")
    try #require(mkdir(folder + "/lib", 0o755) == 0)
    let copy = try runChild(["objcopy", "--strip-debug", libasan, folder + "/lib/libasan.so.8"])
    try #require(copy.status == 0, "\(copy.error)")
    let run = try runChild([folder + "/asan-shapes"], environment: ["LD_LIBRARY_PATH": folder + "/lib"])
    let report = try ReportParser.parse(run.error)
    let result = Symbolicator.symbolicated(report)
    #expect(result.resolutions.allSatisfy { if case .unverified = $0.status { true } else { false } }, "\(result.resolutions)")
    let named = zip(report.frames, result.frames).filter { $0.0.imageIndex != nil && $0.0.reportedSymbol != nil }
    #expect(named.count >= 3, "\(run.error)")
    for (frame, answer) in named { #expect(answer.status == .symbolicated, "\(frame.reportedSymbol ?? "")") }
  }

  /// A non-PIE program's `./prog[0x…]` frames (glibc's, no symbol) are placed at bias 0 and named as
  /// llvm-symbolizer names their addresses; the JIT frame's `[0x…]` has no module.
  @Test(.enabled(if: haveTool("llvm-symbolizer"), "needs llvm-symbolizer as the oracle"))
  func nonPIEGlibcFramesAreNamed() throws {
    let folder = try makeTemporaryDirectory("imagelog-nonpie")
    let sources = packageRoot + "/Scripts/fixtures-src/linux-reports/"
    let path = try Self.build([sources + "backtrace-jit.c", sources + "jit.c"], folder, "backtrace-jit", ["-g", "-no-pie", "-fno-pie"])
    let run = try runChild([path])
    let report = try ReportParser.parse(run.error)
    #expect(report.frames.contains { $0.namesNoModule }, "no JIT frame:\n\(run.error)")
    let result = Symbolicator.symbolicated(report)
    var checked = 0
    for (frame, answer) in zip(report.frames, result.frames) where frame.imageIndex.map({ report.images[$0].path }) == path {
      let oracle = try runChild(["llvm-symbolizer", "--obj=" + path, "--no-inlines", "--functions=linkage",
                                 "0x" + String(frame.address - 1, radix: 16)])
      let expected = String(oracle.output.split(separator: "\n").first ?? "")
      #expect(answer.functions.last?.rawName == expected, "frame \(frame.index) 0x\(String(frame.address, radix: 16))")
      checked += 1
    }
    #expect(checked >= 5, "\(run.error)")
  }
}
