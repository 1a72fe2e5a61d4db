import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication

/// Garbage, truncated and mixed Linux logs: a clear error, or the frames that could be read with the
/// unreadable lines named.
@Suite struct LinuxReportMalformedTests {
  static let fixtures = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/"

  @Test(arguments: [
    ("    #3 0x55zz  (/tmp/uaf+0x10)", "line 2: unreadable frame address '    #3 0x55zz  (/tmp/uaf+0x10)'"),
    ("    #3 0x55a7  (/tmp/uaf+0xqq)", "line 2: unreadable module offset in frame '    #3 0x55a7  (/tmp/uaf+0xqq)'"),
    ("    #04 pc zz  /system/lib/libc.so", "line 2: unreadable pc '    #04 pc zz  /system/lib/libc.so'"),
  ])
  func unreadableFrameLinesAreNamed(line: String, problem: String) throws {
    let report = try ReportParser.parse("    #0 0x55a720bade1b  (/tmp/uaf+0x171e1b)\n" + line + "\n    #1 0x55a720bade20  (/tmp/uaf+0x171e20)\n")
    #expect(report.problems == [problem])
    #expect(report.frames.map(\.address) == [0x55a720bade1b, 0x55a720bade20])
    let summary = Symbolicator.symbolicated(report, options: Self.offline).summary()
    #expect(summary.contains("  unreadable: \(problem)\n"))
  }

  /// A frame line with an address and nothing else is a frame of the report it is in (issue #26, 5):
  /// one without a module, kept as written, not an unreadable line.
  @Test func addressAloneIsAFrameWithoutAModule() throws {
    let report = try ReportParser.parse("    #0 0x55a720bade1b  (/tmp/uaf+0x171e1b)\n    #3 0x55a7\n    #4 0x55a720bade20  (/tmp/uaf+0x171e20)\n")
    #expect(report.problems.isEmpty)
    #expect(report.frames.map(\.address) == [0x55a720bade1b, 0x55a7, 0x55a720bade20])
    #expect(report.frames.map(\.namesNoModule) == [false, true, false])
    let result = Symbolicator.symbolicated(report, options: Self.offline)
    try #require(result.frames.count == 3)
    #expect(result.frames[1].status == .noModule && result.frames[1].functions.isEmpty)
    #expect(result.summary().contains("  without a module: 1 frame, kept as the report wrote it\n"))
  }

  static var offline: SymbolicationOptions {
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.lineInfo = false
    return options
  }

  @Test(arguments: ["", "hello\nworld\n", "# 1 heading\n#1 not a frame\n##\n", "#0 0x\n", "[0x1234]\n(+0x10)[0x20]\n",
                    "\u{0}\u{1}\u{2}#0 pc\n"])
  func garbageIsNotAReport(text: String) {
    #expect(throws: ReportError.self) { try ReportParser.parse(text) }
  }

  /// One log holding a sanitizer report, a coredump entry, a tombstone and glibc lines: every stack,
  /// in order, each from its own kind; the report takes the first kind's name.
  @Test func mixedLogReadsEveryStack() throws {
    var text = "CI job 1234 started\n"
    for name in ["asan-rust-90977.txt", "coredump-systemd-13798.txt", "tombstone-anbox-382.txt", "glibc-nvme-cli-3716.txt"] {
      text += try #require(readFile(Self.fixtures + name)) + "some other log line\n"
    }
    let report = try ReportParser.parse(text)
    #expect(report.format == .sanitizer)
    #expect(report.problems.isEmpty)
    #expect(report.threads.count == 4)
    #expect(report.threads.map(\.name) == ["READ of size 4 at 0x7ffc05e39530 thread T0", "Stack trace of thread 666897:",
                                           "backtrace:", "Stack trace (7 frames):"])
    #expect(Dictionary(grouping: report.frames, by: \.thread).mapValues(\.count) == [0: 7, 1: 6, 2: 7, 3: 7])
    // The text is written back line for line: nothing found, so nothing inserted.
    let written = Symbolicator.symbolicated(report, options: Self.offline).formatted(.report)
    #expect(written.hasPrefix(text))
  }

  /// Every prefix of every sample is read without a trap: an error, or no more frames than the whole.
  @Test func truncationsOnlyShortenTheReport() throws {
    for name in ["asan-rust-90977.txt", "coredump-systemd-35316.txt", "tombstone-retroarch-519.txt", "glibc-zoneminder-3544.txt",
                 "asan-gcc-parenthesised.txt", "glibc-nonpie-jit.txt", "ubsan-clang-thread-symbolized.txt", "tombstone-console-0x.txt"] {
      let bytes = Array(try #require(readFile(Self.fixtures + name)).utf8)
      let whole = try ReportParser.parse(String(decoding: bytes, as: UTF8.self)).frames.count
      for length in stride(from: 0, through: bytes.count, by: 7) {
        // parse throws only ReportError (typed): a prefix with no frame is "not a crash report".
        if let report = try? ReportParser.parse(String(decoding: bytes.prefix(length), as: UTF8.self)) {
          #expect(report.frames.count <= whole, "\(name) cut at \(length)")
        }
      }
    }
  }

  @Test func bitFlipsNeitherTrapNorHang() throws {
    var rng = SeededGenerator(seed: 0x11_4E)
    for name in ["asan-android-logcat-sanitizers-1100.txt", "coredump-systemd-13798.txt", "tombstone-trustwallet-31.txt",
                 "glibc-linuxcnc-ethercat-430.txt", "coredump-modules.txt", "asan-gcc-symbolized-stacks.txt",
                 "asan-no-build-id.txt", "glibc-no-build-id.txt", "hostile-frame-line.txt"] {
      let original = Array(try #require(readFile(Self.fixtures + name)).utf8)
      for _ in 0..<100 {
        var bytes = original
        for _ in 0..<4 {
          let index = Int.random(in: 0..<bytes.count, using: &rng)
          bytes[index] ^= 1 << UInt8.random(in: 0...7, using: &rng)
        }
        // parse throws ReportError only (typed); whatever it reads must also symbolicate and write.
        if let report = try? ReportParser.parse(String(decoding: bytes, as: UTF8.self)) {
          #expect(!Symbolicator.symbolicated(report, options: Self.offline).formatted(.report).isEmpty, "\(name)")
        }
      }
    }
  }

  /// A glibc frame placed only by a symbol the file does not have is left unresolved and said so, not guessed.
  @Test func unplaceableGlibcFramesAreNamed() throws {
    let libc = "/lib/x86_64-linux-gnu/libc.so.6"
    try #require(readFileBytes(libc) != nil, "needs \(libc)")
    let report = try ReportParser.parse("\(libc)(no_such_symbol_here+0x10)[0x7f0000001000]\n")
    let result = Symbolicator.symbolicated(report, options: Self.offline)
    #expect(result.frames.map(\.status) == [.noImage])
    #expect(result.notes.contains { $0.hasPrefix("\(libc): no frame gives an offset or a symbol this file has") })
  }
}

/// A symbol that holds a newline and terminal escapes (Tests/ImageReadersTests/Fixtures/hostile) is
/// written escaped: the log keeps its lines, one per frame.
@Suite struct LinuxReportEscapingTests {
  @Test func hostileSymbolStaysOnItsLine() throws {
    let library = packageRoot + "/Tests/ImageReadersTests/Fixtures/hostile/libhostile-x86_64.so"
    try #require(readFileBytes(library) != nil, "needs the hostile fixture \(library)")
    let nm = try runChild(["llvm-nm", "--defined-only", library])
    // llvm-nm prints the name raw: its line breaks inside it. The function is at 0x12f0 (`T evil…`).
    try #require(nm.output.contains("00000000000012f0 T evil\u{1B}[2J\nRemoved: 0xdead (0x1) FORGED"), "\(nm.output)")
    let text = "    #0 0x7f00000012f4  (\(library)+0x12f4)\n    #1 0x7f00000012f0  (\(library)+0x12f0)\nSUMMARY: done\n"
    var options = LinuxReportMalformedTests.offline
    options.demangle = .none
    let written = Symbolicator.symbolicated(try ReportParser.parse(text), options: options).formatted(.report)
    let lines = written.split(separator: "\n", omittingEmptySubsequences: false)
    #expect(lines[0].hasPrefix("    #0 0x7f00000012f4 in evil\\x1b[2J\\nRemoved: 0xdead (0x1) FORGED"), "\(written)")
    #expect(lines[1].hasPrefix("    #1 0x7f00000012f0 in evil\\x1b[2J\\n"), "\(written)")
    #expect(lines[2] == "SUMMARY: done")
    #expect(!written.contains("\u{1B}"))
  }
}
