import Glibc
import ImageLogTestSupport
import Testing

/// Out-of-process capture (crash_helper.c, CImageLogCrashHelper.h, `imagelog capture-crash`): crash-program
/// with CRASH_HELPER set to the built imagelog starts it from its handler; the helper's symbolicated report
/// lands in the crash directory, every thread in it (a thread that blocks every signal and spins included),
/// the crashed thread's frames and registers as gdb has them; when the helper cannot write one (missing,
/// refused, failing, crashing, too slow), the in-process report is there instead; the process always dies
/// of its own signal.
@Suite(.serialized) struct CrashHelperTests {
  static let imagelog = builtProduct("imagelog")
  static let ready = CrashHandlerTests.compiler != nil && CrashThreadsTests.gcc != nil && access(imagelog, X_OK) == 0

  /// A crash program run with the helper: its result, the crash directory and what is in it.
  struct Run {
    var result: CrashTestSupport.ProcessResult
    var directory: String
    var files: [String]
    /// The report's text (the one `.crash` file), "" when there is none.
    var text: String
    /// (tid, name) as /proc/self/task listed them just before the crash (modes that write them).
    var procThreads: [(tid: Int32, name: String)]
  }

  static func crash(_ mode: String, helper: String = imagelog, environment: [String: String] = [:],
                    noRandomization: Bool = false) throws -> Run {
    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory("imagelog-capture")
    let crashDirectory = directory + "/crashes"
    mkdir(crashDirectory, 0o755)
    var command = [program, mode, "-", "\(directory)/maps"]
    if noRandomization, let setarch = CrashThreadsTests.setarch { command = [setarch, "-R"] + command }
    var variables = ["CRASH_HELPER": helper, "CRASH_DIR": crashDirectory,
                     "CRASH_LIBRARY": try CrashThreadsTests.library.get(), "DEBUGINFOD_URLS": ""]
    variables.merge(environment) { $1 }
    let result = try CrashTestSupport.run(command[0], Array(command.dropFirst()), environment: variables, timeoutSeconds: 120)
    #expect(!result.timedOut, "the crash hung")
    let files = try finishedCrashDirectory(crashDirectory, helperWrote: result.stderr.contains("report written to"))
    let reports = files.filter { $0.hasSuffix(".crash") }
    let text = reports.count == 1 ? readFile("\(crashDirectory)/\(reports[0])") ?? "" : ""
    let procThreads = (readFile("\(directory)/maps.threads") ?? "").split(separator: "\n").compactMap { line in
      let parts = line.split(separator: " ", maxSplits: 1)
      return parts.count == 2 ? Int32(parts[0]).map { ($0, String(parts[1])) } : nil
    }
    return Run(result: result, directory: crashDirectory, files: files, text: text, procThreads: procThreads)
  }

  /// The helper's report and minidump: PROGRAM.PID.YYYYMMDDTHHMMSSZ.crash and .dmp, nothing half-written
  /// beside them, and the program dead of its own signal.
  static func checkHelperReport(_ run: Run, signal: Int32, sourceLine: SourceLocation = #_sourceLocation) {
    #expect(run.result.terminationSignal == signal, "\(run.result.stderr)", sourceLocation: sourceLine)
    let stem = run.files.first.map { String($0.dropLast(".crash".count)) } ?? ""
    #expect(run.files == [stem + ".crash", stem + ".dmp"], "\(run.files)", sourceLocation: sourceLine)
    let stamp = stem.dropFirst("crash-program.\(run.result.pid).".count)
    #expect(stem.hasPrefix("crash-program.\(run.result.pid).") && stamp.count == 16
              && stamp.enumerated().allSatisfy { $0.offset == 8 ? $0.element == "T" : $0.offset == 15 ? $0.element == "Z" : $0.element.isNumber },
            "\(stem)", sourceLocation: sourceLine)
    #expect(run.result.stderr.contains("report written to \(run.directory)/\(stem).crash"), "\(run.result.stderr)",
            sourceLocation: sourceLine)
    #expect(run.text.hasPrefix("Process:         crash-program [\(run.result.pid)]\n"), sourceLocation: sourceLine)
  }

  // MARK: The report against gdb

  /// The whole scene: a crash three calls deep in a gcc -O2 -fomit-frame-pointer library reached through
  /// glibc's qsort on a named worker, beside a worker that blocks every signal and spins and one asleep in
  /// read(2). Every thread is in the report with its name and frames (the spinning one too: ptrace stops it
  /// whatever it blocks); the crashed thread's frames and registers are gdb's for the same crash (both runs
  /// without address randomization); its frames in the program carry file:line.
  #if arch(x86_64)
  @Test(.enabled(if: ready && CrashThreadsTests.gdb != nil && CrashThreadsTests.setarch != nil,
                 "needs cc, gcc, gdb, setarch and the built imagelog"))
  func captureEqualsGDB() throws {
    let run = try Self.crash("capture", noRandomization: true)
    Self.checkHelperReport(run, signal: SIGSEGV)
    let report = try SymbolicatedReportText(run.text)
    #expect(report.threads.map(\.tid) == run.procThreads.map(\.tid), "\(run.text)")
    #expect(report.threads.map { $0.name ?? "" } == run.procThreads.map(\.name))
    #expect(report.threads.map { $0.name ?? "" } == ["crash-program", "worker-1", "spinner", "sorter"])
    for thread in report.threads { #expect(!thread.frames.isEmpty, "thread \(thread.name ?? "") unwound\n\(run.text)") }
    let crashed = try #require(report.threads.first { $0.crashed })
    #expect(crashed.name == "sorter")
    #expect(report.header["Exception Type"] == "SIGSEGV (SEGV_MAPERR)")
    // Lines: the program's frames on the crashed thread are named with their file and line.
    for function in ["call_library", "compare_into_library", "capture_worker"] {
      #expect(crashed.lines.contains { $0.contains(function) && $0.contains("(crash-program.c:") }, "\(function)\n\(run.text)")
    }
    #expect(crashed.lines.first?.contains("libcrashthreads.so") == true && crashed.lines.first?.contains("level2") == true)

    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory("imagelog-capture-gdb")
    let gdb = try GDBCrashView.run(gdb: CrashThreadsTests.gdb!, [program, "capture", "\(directory)/report.crash", "\(directory)/maps"],
                                   environment: ["CRASH_LIBRARY": try CrashThreadsTests.library.get(), "DEBUGINFOD_URLS": ""])
    #expect(gdb.differences(from: report).isEmpty, "\(gdb.differences(from: report))\n\(run.text)\n\(gdb.output)")
    #expect(!gdb.threads.isEmpty, "gdb: \(gdb.output)")
  }

  #endif

  // MARK: The hard cases

  struct Case: CustomTestStringConvertible, Sendable {
    var name: String
    var mode: String
    var signal: Int32
    /// The function the crashed thread's report must name (on some frame).
    var function: String
    var environment: [String: String] = [:]
    var testDescription: String { name }
  }

  static let cases: [Case] = [
    // glibc aborts inside free() holding the arena lock while three threads loop in malloc: the helper is
    // started without fork (whose atfork handlers take that lock) and reads the process from outside.
    Case(name: "malloc lock held", mode: "malloc", signal: SIGABRT, function: "crash_corrupt_heap",
         environment: ["MALLOC_ARENA_MAX": "1", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"]),
    Case(name: "stack overflow, main thread", mode: "stack", signal: SIGSEGV, function: "crash_recurse"),
    Case(name: "stack overflow, worker", mode: "threadstack", signal: SIGSEGV, function: "crash_recurse"),
    Case(name: "two threads at once", mode: "twothreads", signal: SIGSEGV, function: "crashing_together"),
    Case(name: "SIGCHLD ignored", mode: "null", signal: SIGSEGV, function: "crash_null_dereference",
         environment: ["CRASH_SIGCHLD": "ignore"]),
    Case(name: "SIGCHLD handled by a reaper", mode: "null", signal: SIGSEGV, function: "crash_null_dereference",
         environment: ["CRASH_SIGCHLD": "handle"]),
  ]

  @Test(.enabled(if: ready, "needs cc, gcc and the built imagelog"), arguments: cases)
  func helperWritesTheReport(_ testCase: Case) throws {
    let run = try Self.crash(testCase.mode, environment: testCase.environment)
    Self.checkHelperReport(run, signal: testCase.signal)
    let report = try SymbolicatedReportText(run.text)
    let crashed = try #require(report.threads.first { $0.crashed }, "\(run.text)")
    #expect(crashed.lines.contains { $0.contains(" \(testCase.function) + ") || $0.contains(" \(testCase.function) (") },
            "\(run.text)")
    #expect(report.registers["rip"] ?? report.registers["pc"] == crashed.frames.first)
    if testCase.mode == "twothreads" {
      // The other thread is listed with its stack. Whether it has faulted too when the helper stops the
      // process is a race the barrier cannot settle (on a busy machine it may not have run since): if it
      // has, its frames pass through the signal frame to crash_null_dereference; if not, it is on its way
      // there from crashing_together. Either way the walk reaches the thread's own function.
      let other = try #require(report.threads.first { !$0.crashed && $0.tid != run.result.pid })
      #expect(other.lines.contains { $0.contains("crash_null_dereference") || $0.contains("crashing_together") },
              "\(run.text)")
    }
    if testCase.mode == "malloc" { #expect(report.threads.count == 4) }
  }

  // MARK: When the helper cannot write the report

  struct Failure: CustomTestStringConvertible, Sendable {
    var name: String
    /// The helper's path, or a script's body to make one.
    var helper: String
    var script: String?
    /// The script's mode.
    var mode: mode_t = 0o755
    /// What the handler says on standard error.
    var message: String
    var testDescription: String { name }
  }

  static let failures: [Failure] = [
    Failure(name: "missing", helper: "/nonexistent/imagelog", message: "is missing (errno \(ENOENT))"),
    Failure(name: "not executable", helper: "", script: "#!/bin/sh\nexit 0\n", mode: 0o644,
            message: "could not be executed (errno \(EACCES))"),
    Failure(name: "fails", helper: "/bin/false", message: "failed (exit status 1)"),
    Failure(name: "crashes", helper: "", script: "#!/bin/sh\nkill -SEGV $$\n", message: "died of signal \(SIGSEGV)"),
    Failure(name: "too slow", helper: "", script: "#!/bin/sh\nexec sleep 600\n",
            message: "did not finish within the timeout, and was killed"),
  ]

  @Test(.enabled(if: CrashHandlerTests.compiler != nil && CrashThreadsTests.gcc != nil, "needs cc and gcc"),
        arguments: failures)
  func inProcessReportWhenTheHelperFails(_ failure: Failure) throws {
    var helper = failure.helper
    if let script = failure.script {
      helper = CrashTestSupport.makeTemporaryDirectory("imagelog-helper") + "/helper.sh"
      try writeFile(helper, script)
      chmod(helper, failure.mode)
    }
    // The slow helper is killed after 300 ms: a bound on the wait, not a timing assertion.
    let run = try Self.crash("mainworkers", helper: helper, environment: ["CRASH_HELPER_TIMEOUT_MS": "300"])
    #expect(run.result.terminationSignal == SIGSEGV)
    #expect(run.result.stderr.contains("imagelog: the crash helper \(helper) \(failure.message)"), "\(run.result.stderr)")
    #expect(run.result.stderr.contains("; writing the report in process\n"))
    #expect(run.files.count == 1 && run.files.first?.hasPrefix("crash-program.\(run.result.pid).") == true, "\(run.files)")
    // The handler's own report, whole, under the helper's name.
    let report = try ParsedCrashReport(run.text)
    #expect(report.header["Process"] == "crash-program [\(run.result.pid)]")
    #expect(report.threads.count == 4 && report.threads.allSatisfy { !$0.frames.isEmpty }, "\(run.text)")
  }

  /// Yama's ptrace_scope 1 lets only ancestors trace: the handler names the helper its ptracer. Set for the
  /// test and put back. (As root CAP_SYS_PTRACE passes Yama anyway: the test then shows the capture works
  /// with Yama on, not that PR_SET_PTRACER is what let it.)
  static let yama = "/proc/sys/kernel/yama/ptrace_scope"

  @Test(.enabled(if: ready && access(yama, W_OK) == 0,
                 "needs a writable /proc/sys/kernel/yama/ptrace_scope (Yama is not in this kernel, or the test is not root)"))
  func captureUnderYamaScopeOne() throws {
    let saved = try #require(readFile(Self.yama))
    try writeFile(Self.yama, "1\n")
    defer { try? writeFile(Self.yama, saved) }
    let run = try Self.crash("mainworkers")
    Self.checkHelperReport(run, signal: SIGSEGV)
  }
}

