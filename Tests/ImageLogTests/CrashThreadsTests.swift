import Glibc
import ImageLogTestSupport
import Testing

/// Every thread at crash time: crash-program's worker modes (named threads asleep in read(2); a crash in
/// glibc's qsort comparator, in a gcc -O2 -fomit-frame-pointer library three calls deep, on the main
/// thread, with a thread that blocks every signal). The report lists each thread /proc lists, with its
/// name, in /proc's order.
@Suite(.serialized) struct CrashThreadsTests {
  static let gcc = which("gcc")
  static let setarch = which("setarch")

  /// crash-threads-lib.c as gcc -O2 -fomit-frame-pointer builds it: no frame records at all.
  static let library: Result<String, CrashTestSupport.SpawnError> = {
    guard let gcc else { return .failure(.init(description: "no gcc")) }
    let output = CrashTestSupport.makeTemporaryDirectory() + "/libcrashthreads.so"
    do {
      let result = try CrashTestSupport.run(gcc, ["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-Wl,--build-id",
                                                  "\(packageRoot)/Tests/Programs/crash-threads-lib.c", "-o", output])
      guard result.exitCode == 0 else { return .failure(.init(description: "gcc failed: \(result.stderr)")) }
      return .success(output)
    } catch {
      return .failure(.init(description: "\(error)"))
    }
  }()

  struct Case: CustomTestStringConvertible, Sendable {
    var mode: String
    /// The crashed thread's name.
    var crashedName: String
    var testDescription: String { mode }
  }

  static let cases: [Case] = [
    Case(mode: "qsort", crashedName: "sorter"),
    Case(mode: "library", crashedName: "library-caller"),
    Case(mode: "mainworkers", crashedName: "crash-program"),
    Case(mode: "blocked", crashedName: "crash-program"),
  ]

  struct Run {
    var result: CrashTestSupport.ProcessResult
    var text: String
    var report: ParsedCrashReport
    /// (tid, name) as /proc/self/task listed them just before the crash.
    var procThreads: [(tid: Int32, name: String)]
  }

  /// Runs the mode without address randomization (as gdb runs it), with gdb's environment.
  static func crash(_ mode: String) throws -> Run {
    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash", mapsPath = "\(directory)/maps"
    var command = [program, mode, reportPath, mapsPath]
    if let setarch = Self.setarch { command = [setarch, "-R"] + command }
    let result = try CrashTestSupport.run(command[0], Array(command.dropFirst()),
                                          environment: ["CRASH_LIBRARY": try library.get()], timeoutSeconds: 60)
    #expect(!result.timedOut, "the crash handler hung")
    #expect(result.terminationSignal == SIGSEGV, "\(result.stderr)")
    let text = try #require(readFile(reportPath))
    let procThreads = try #require(readFile(mapsPath + ".threads")).split(separator: "\n").compactMap { line in
      let parts = line.split(separator: " ", maxSplits: 1)
      return parts.count == 2 ? Int32(parts[0]).map { ($0, String(parts[1])) } : nil
    }
    return Run(result: result, text: text, report: try ParsedCrashReport(text), procThreads: procThreads)
  }

  @Test(.enabled(if: CrashHandlerTests.compiler != nil && gcc != nil, "needs cc and gcc"), arguments: cases)
  func everyThreadIsListedWithItsName(_ testCase: Case) throws {
    let run = try Self.crash(testCase.mode)
    let report = run.report
    // The same threads, names and order as /proc/self/task (main first).
    #expect(report.threads.map(\.tid) == run.procThreads.map(\.tid), "\(run.text)")
    #expect(report.threads.map { $0.name ?? "" } == run.procThreads.map(\.name))
    #expect(report.threads.first?.tid == run.result.pid)
    let crashed = try #require(report.threads.first { $0.crashed })
    #expect(crashed.name == testCase.crashedName)
    #expect(report.threads.count == (testCase.mode.hasSuffix("workers") || testCase.mode == "blocked" ? 4 : 5))
    for thread in report.threads {
      if thread.name == "blocks-all" {
        #expect(thread.problem?.hasPrefix("not unwound: the thread blocks signal \(__libc_current_sigrtmax() - 2)") == true, "\(run.text)")
      } else {
        #expect(thread.problem == nil && !thread.frames.isEmpty, "thread \(thread.index) unwound\n\(run.text)")
      }
    }
    #expect(testCase.mode != "blocked" || report.threads.contains { $0.name == "blocks-all" })
  }
}
