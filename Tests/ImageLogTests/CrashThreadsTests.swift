import Glibc
import ImageLogTestSupport
import Testing

/// Every thread at crash time: crash-program's worker modes (named threads asleep in read(2); a crash in
/// glibc's qsort comparator, in a gcc -O2 -fomit-frame-pointer library three calls deep, on the main
/// thread, with a thread that blocks every signal). The report lists each thread /proc lists, with its
/// name, in /proc's order; each thread's frames (unwound by call frame information through glibc and the
/// library built without frame pointers, down to clone3) and the crashed thread's rip/rsp equal gdb's for the
/// same program stopped at the same crash (both runs without address randomization, so addresses compare).
@Suite(.serialized) struct CrashThreadsTests {
  static let gcc = which("gcc")
  static let gdb = which("gdb")
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

  /// gdb's view of the same crash: each thread's physical frames (gdb's NORMAL and SIGTRAMP frames; its inlined
  /// frames and the tail-call frames it infers from DWARF call sites are not on the stack, so no unwinder from
  /// the stack sees them), by thread id, and the crashed thread's rip and rsp.
  struct GDBView {
    var threads: [Int32: [UInt64]] = [:]
    var rip: UInt64?
    var rsp: UInt64?
    /// The report the crash handler wrote when gdb let the signal through, in the process gdb looked at.
    var report: ParsedCrashReport?
  }

  static let gdbScript = GDBCrashView.framesScript + """
    print("registers %x %x" % (int(gdb.parse_and_eval("$rip")), int(gdb.parse_and_eval("$rsp"))))
    # Then the signal goes on to the program, whose handler writes its report in this same process: a
    # worker thread's stack is placed by the order of the threads' own mmaps, which differs between runs.
    gdb.execute("handle all nostop noprint pass")
    gdb.execute("continue")

    """

  static func gdbView(_ mode: String) throws -> GDBView {
    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let script = "\(directory)/frames.py"
    let fd = open(script, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = gdbScript.withCString { write(fd, $0, strlen($0)) }
    close(fd)
    // No shell between gdb and the program, and without the LINES/COLUMNS gdb adds: the program's
    // environment, and so its stack addresses, are those of the run without gdb.
    let result = try CrashTestSupport.run(gdb!, [
      "-nx", "-batch", "-ex", "set startup-with-shell off", "-ex", "unset environment LINES",
      "-ex", "unset environment COLUMNS", "-ex", "run", "-x", script,
      "--args", program, mode, "\(directory)/report.crash", "\(directory)/maps",
    ], environment: ["CRASH_LIBRARY": try library.get()], timeoutSeconds: 120)
    var view = GDBView()
    for line in result.stdout.split(separator: "\n") {
      let tokens = line.split(separator: " ")
      if tokens.first == "frames", tokens.count >= 2, let tid = Int32(tokens[1]) {
        view.threads[tid] = tokens.dropFirst(2).compactMap { UInt64($0, radix: 16) }
      } else if tokens.first == "registers", tokens.count == 3 {
        view.rip = UInt64(tokens[1], radix: 16)
        view.rsp = UInt64(tokens[2], radix: 16)
      }
    }
    #expect(!view.threads.isEmpty, "gdb: \(result.stdout.suffix(2000))\(result.stderr.suffix(2000))")
    view.report = readFile("\(directory)/report.crash").flatMap { try? ParsedCrashReport($0) }
    return view
  }

  #if arch(x86_64)
  @Test(.enabled(if: CrashHandlerTests.compiler != nil && gcc != nil && gdb != nil && setarch != nil,
                 "needs cc, gcc, gdb and setarch"), arguments: cases)
  func framesAndRegistersEqualGDB(_ testCase: Case) throws {
    let run = try Self.crash(testCase.mode)
    let gdb = try Self.gdbView(testCase.mode)
    let crashed = try #require(run.report.threads.first { $0.crashed })
    #expect(run.report.registers["rip"] == gdb.rip, "\(run.text)")
    // rsp from the report written in the process gdb stopped (the same stack placement).
    let underGDB = try #require(gdb.report, "no report from the run under gdb")
    #expect(underGDB.registers["rip"] == gdb.rip)
    #expect(underGDB.registers["rsp"] == gdb.rsp)
    // Thread ids differ between the runs: threads are matched by their place in the list.
    let gdbThreads = gdb.threads.keys.sorted()
    #expect(gdbThreads.count == run.report.threads.count, "gdb saw \(gdbThreads.count) threads")
    for (thread, gdbTid) in zip(run.report.threads, gdbThreads) {
      guard thread.problem == nil, var expected = gdb.threads[gdbTid] else { continue }
      // A thread the report's signal interrupted in a system call: with SA_RESTART the kernel moves its pc
      // back onto the 2-byte syscall instruction, to run it again; gdb shows the thread inside the call.
      if !thread.crashed, let first = thread.frames.first, !expected.isEmpty, first.address == expected[0] &- 2 {
        expected[0] = first.address
      }
      #expect(thread.frames.map(\.address) == expected, "thread \(thread.index) (\(thread.name ?? ""))\n\(run.text)")
    }
    // The crashed thread is unwound through code without frame pointers by call frame information:
    // no frame of it was found by scanning.
    #expect(crashed.frames.allSatisfy { $0.trust != "stack scan" }, "\(run.text)")
  }
  #endif
}
