import ImageLogTestSupport
import Testing
import Snapshot
@testable import SnapshotSources

/// A log holding reports of different kinds one after another is read as several, each by its own kind.
@Suite struct SeveralLinuxReportsTests {
  static let v8 = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/v8-d8-dcheck-asan-374627491.txt"

  /// d8's `==== C stack trace` (11 lines in glibc's `module(symbol+0x…) [0x…]` form), then the
  /// AddressSanitizer trap it ends in (`#0` to `#20`): two reports, not one glibc report of 32 frames.
  /// The counts are the fixture's lines, counted by hand (and by `awk`, README.md).
  @Test func v8StackThenSanitizerTrap() throws {
    let text = try #require(readFile(Self.v8))
    let results = ReportParser.parseAll(text)
    try #require(results.count == 2, "\(results.map { (try? $0.get().format.rawValue) ?? "error" })")
    let glibc = try results[0].get(), sanitizer = try results[1].get()
    #expect(glibc.format == .glibcBacktrace && glibc.frameCount == 11 && glibc.threads.count == 1)
    #expect(sanitizer.format == .sanitizer && sanitizer.frameCount == 21 && sanitizer.threads.count == 1)
    // Each keeps its own lines: together the whole log, in order.
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    #expect(glibc.lines + sanitizer.lines == lines)
    #expect(glibc.lines.last?.hasSuffix("libv8.so(+0x3a58afd) [0x7fc63523cafd]") == true)
    #expect(sanitizer.lines.first == "AddressSanitizer:DEADLYSIGNAL")
    // The first and last frame of each, as their lines give them.
    #expect(glibc.threads[0].frames.first?.address == 0x55cbd91b17a6 && glibc.threads[0].frames.last?.address == 0x7fc63523cafd)
    #expect(sanitizer.threads[0].frames.first?.address == 0x7fc6317c3690 && sanitizer.threads[0].frames.last?.address == 0x55cbd927e335)
    #expect(sanitizer.threads[0].frames.first?.reportedFunction?.name == "v8::base::OS::Abort()")
    // Frame lines point into each report's own lines.
    for report in [glibc, sanitizer] {
      for frame in report.frames { #expect(frame.line.map { report.lines[$0].contains("0x") } == true) }
    }
    // One report asked for: the whole log, as before.
    #expect(try ReportParser.parse(text).frameCount == 32)
  }

  /// Stacks of one kind stay one report (a sanitizer's several stacks; glibc's and coredump's too).
  @Test(arguments: ["asan-gcc-symbolized-stacks.txt", "coredump-systemd-35316.txt", "asan-android-logcat-sanitizers-1100.txt",
                    "glibc-zoneminder-3544.txt"])
  func oneKindIsOneReport(fixture: String) throws {
    let text = try #require(readFile(packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/" + fixture))
    let results = ReportParser.parseAll(text)
    #expect(results.count == 1)
    #expect(try results.first?.get().frameCount == ReportParser.parse(text).frameCount)
  }
}
