import Glibc
import ImageLog
import ImageLogTestSupport
import Testing

/// `CrashReporter.install(helper:crashDirectory:)` in a real Swift program (this test binary, re-run as a
/// child that crashes on purpose) with Swift's backtracer on: ours runs first, because the runtime
/// installs its handler before `main` and ours, installed in `main`, replaces it and chains to it; the
/// helper captures the process while every thread is still as it was at the crash (Swift's backtracer,
/// had it run first, would have suspended them and then ended the process itself). Swift's backtracer
/// then runs second and prints its own backtrace, whose frames are the oracle for ours.
@Suite(.serialized) struct CrashHelperSwiftTests {
  @Test(.enabled(if: access(CrashHelperTests.imagelog, X_OK) == 0, "needs the built imagelog"))
  func swiftProgramCapturedFirstThenSwiftBacktracer() throws {
    let executable = try #require(CrashReporterTests.selfExecutable())
    let directory = CrashTestSupport.makeTemporaryDirectory("imagelog-capture-swift")
    let result = try CrashTestSupport.run(executable, ["--testing-library", "swift-testing", "--filter", "capturingChild"],
                                          environment: ["IMAGELOG_CAPTURE_CHILD": directory, "DEBUGINFOD_URLS": "",
                                                        "SWIFT_BACKTRACE": "enable=yes,interactive=no,symbolicate=off,color=no"],
                                          timeoutSeconds: 300)
    #expect(!result.timedOut)
    #expect(result.terminationSignal == SIGILL, "\(result.stderr.suffix(2000))")
    let files = try finishedCrashDirectory(directory, helperWrote: result.stderr.contains("report written to"))
    #expect(files.count == 2 && files.first?.hasSuffix(".crash") == true && files.last?.hasSuffix(".dmp") == true, "\(files)")
    let text = try #require(readFile("\(directory)/\(files.first ?? "")"), "\(result.stderr.suffix(2000))")
    #expect(result.stderr.contains("report written to \(directory)/"), "\(result.stderr.suffix(2000))")
    #expect(result.stderr.contains("Program crashed"), "Swift's backtracer ran second: \(result.stderr.suffix(2000))")
    let report = try SymbolicatedReportText(text)
    let crashed = try #require(report.threads.first { $0.crashed })
    #expect(crashed.lines.contains { $0.contains("triggerFatalError()") && $0.contains("(CrashReporterTests.swift:") },
            "\(text)")
    // Swift's backtracer's frame 0 and [ra] frames are ours, address for address.
    let swiftFrames = CrashReporterTests.swiftBacktracerFrames(result.stderr)
    #expect(swiftFrames.count >= 2, "\(result.stderr.prefix(3000))")
    #expect(Array(crashed.frames.prefix(swiftFrames.count)) == swiftFrames, "\(text)")
    #expect(report.threads.allSatisfy { !$0.frames.isEmpty }, "\(text)")
  }
}

/// Runs only in the child started by `swiftProgramCapturedFirstThenSwiftBacktracer`.
@Suite struct CrashHelperSwiftChild {
  @Test(.enabled(if: getenv("IMAGELOG_CAPTURE_CHILD") != nil, "only in a child process"))
  func capturingChild() throws {
    try CrashReporter.install(helper: CrashHelperTests.imagelog,
                              crashDirectory: String(cString: getenv("IMAGELOG_CAPTURE_CHILD")!))
    triggerFatalError()
  }
}
