import ImageLogTestSupport
import Testing
import Snapshot
@testable import SnapshotSources

/// Parts of Apple's and Swift's reports from the real corpus: `Application Specific Backtrace N:`
/// sections (Fixtures/apple-reports/README.md names the source) and the backtracer's `registers=all`.
@Suite struct AppleReportSectionTests {
  @Test func applicationSpecificBacktraceIsRead() throws {
    let path = packageRoot + "/Tests/SymbolicationTests/Fixtures/apple-reports/app-specific-backtrace-rtimageassets-5.crash"
    let report = try ReportParser.parse(try #require(readFile(path)))
    #expect(report.format == .appleCrash)
    #expect(report.threads.map(\.heading) == [ThreadHeading(number: -2, crashed: false, name: "Application Specific Backtrace 1")])
    // The values in the report's lines, frame for frame.
    let expected: [(UInt64, String)] = [
      (0x00007fff8baa564c, "__exceptionPreprocess + 172"), (0x00000001019fa274, "DVTFailureHintExceptionPreprocessor + 194"),
      (0x00007fff8fd5d6de, "objc_exception_throw + 43"), (0x00007fff8baa54fd, "+[NSException raise:format:] + 205"),
      (0x00007fff8692edff, "-[NSFileManager enumeratorAtURL:includingPropertiesForKeys:options:errorHandler:] + 89"),
      (0x0000000104766915, "-[IAImageAssets allFilesInDirectoryAtPath:] + 223"), (0x00000001047665ba, "-[IAImageAssets initWithPath:] + 154"),
      (0x0000000104766504, "+[IAImageAssets assetsWithPath:] + 65"), (0x0000000104768159, "-[RTImageAssets _generateAssets:] + 316"),
      (0x00007fff903cfcd7, "_os_activity_initiate + 75"), (0x00007fff84437497, "-[NSApplication sendAction:to:from:] + 410"),
      (0x0000000101f5f140, "__37-[DVTApplication sendAction:to:from:]_block_invoke + 379"),
      (0x00000001019f9fb2, "DVTInvokeWithFailureHint + 83"),
    ]
    #expect(report.allFrames.count == expected.count)
    for (index, (frame, (address, symbol))) in zip(report.frames(ofThread: -2), expected).enumerated() {
      #expect(frame.number == index && frame.address == address && frame.reportedSymbol == symbol)
    }
    #expect(report.problems == ["no Binary Images section: frames cannot be matched to files"])
  }

  @Test func applicationSpecificBacktraceBesideThreads() throws {
    let text = """
      Crashed Thread:        0  Dispatch queue: com.apple.main-thread

      Application Specific Information:
      *** Terminating app due to uncaught exception 'NSInvalidArgumentException'

      Application Specific Backtrace 1:
      0   CoreFoundation                      0x00007fff8baa564c __exceptionPreprocess + 172
      1   libobjc.A.dylib                     0x00007fff8fd5d6de objc_exception_throw + 43

      Application Specific Backtrace 2:
      0   CoreFoundation                      0x00007fff8baa5600 __exceptionPreprocess + 96

      Thread 0 Crashed:: Dispatch queue: com.apple.main-thread
      0   libsystem_kernel.dylib              0x00007fff8bcf0282 __pthread_kill + 10

      """
    let report = try ReportParser.parse(text)
    #expect(report.threads.map(\.number) == [-2, -3, 0])
    #expect(report.frameThreadNumbers == [-2, -2, -3, 0])
    #expect(report.crashedThreadNumber == 0)
    #expect(!report.problems.contains { $0.contains("unreadable") })
  }

  /// The backtracer with `registers=all` prints the crashed thread's registers before its frames; they
  /// are not frames (each used to be an "unreadable frame").
  @Test(.enabled(if: CrashPrograms.haveCompilers, "needs swiftc and clang to build the crash program"))
  func swiftBacktraceRegistersAreNotFrames() throws {
    let path = try CrashPrograms.crasher.get()
    let raw = try runChild([path, "index"], environment: [
      "SWIFT_BACKTRACE": "enable=yes,interactive=no,symbolicate=off,registers=all,color=no",
    ])
    let registerLines = raw.error.split(separator: "\n").filter { SwiftBacktraceParser.isRegisterLine($0.trimmingSpaces) }
    try #require(registerLines.count >= 16, "the backtracer printed no registers:\n\(raw.error)")
    #expect(registerLines.contains { $0.hasPrefix("rax 0x") || $0.hasPrefix(" x0 0x") || $0.hasPrefix("x0 0x") })
    let report = try ReportParser.parse(raw.error)
    #expect(report.format == .swiftBacktrace)
    #expect(!report.problems.contains { $0.contains("unreadable frame") }, "\(report.problems)")
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash("index", symbolicate: "full"))
    let crashed = try #require(report.crashedThreadNumber)
    #expect(report.frames(ofThread: crashed).count == expected.count)
  }
}

/// Files with several reports, read one report at a time.
@Suite struct SeveralReportsTests {
  @Test func appleReportsSplitAtEachIncident() throws {
    let one = ReportParserTests.appleCrash
    let text = "{\"bug_type\":\"109\"}\n" + one + "\n" + "{\"bug_type\":\"109\"}\n" + one
    let reports = ReportParser.parseAll(text)
    #expect(reports.count == 2)
    let single = try ReportParser.parse(one)
    for result in reports {
      let report = try result.get()
      #expect(report.document?.ipsHeader != nil)
      #expect(report.allFrames.map(\.address) == single.allFrames.map(\.address))
      #expect(report.images.count == single.images.count)
    }
    #expect(ReportParser.parseAll(one).count == 1)
  }

  /// Two crashes of the crash program in one log (as a CI job that runs two tests prints them).
  @Test(.enabled(if: CrashPrograms.haveCompilers, "needs swiftc and clang to build the crash program"))
  func swiftBacktracesSplitAtEachCrash() throws {
    let index = try CrashPrograms.crash("index", symbolicate: "off")
    let null = try CrashPrograms.crash("null", symbolicate: "off")
    let reports = ReportParser.parseAll("test 1\n" + index + "\ntest 2\n" + null).map { try? $0.get() }
    #expect(reports.count == 2)
    let first = try #require(reports.first ?? nil), second = try #require(reports.last ?? nil)
    #expect(first.allFrames.map(\.address) == (try ReportParser.parse(index)).allFrames.map(\.address))
    #expect(second.allFrames.map(\.address) == (try ReportParser.parse(null)).allFrames.map(\.address))
    let firstLines = try #require(first.document?.lines), secondLines = try #require(second.document?.lines)
    #expect(firstLines.first == "test 1")
    #expect(secondLines.contains { $0.hasPrefix("*** Program crashed:") } && !secondLines.contains("test 1"))
  }
}
