import Glibc
import ImageLogTestSupport
import Testing

/// Child processes built from Tests/Programs/crash-program.c (which compiles
/// the crash handler's C, Sources/CImageLog/crash_*.c, and the unwinder in) crash in different ways; each must leave a complete report in
/// imagelog's format whose frames llvm-symbolizer resolves to the crashing functions and whose
/// Binary Images are the process's images, and must still die by the original signal.
@Suite(.serialized) struct CrashHandlerTests {
  static let compiler = which("cc") ?? which("clang")
  static let symbolizer = which("llvm-symbolizer") ?? which("llvm-symbolizer-14")
  static let readelf = which("readelf")

  /// The crash handler's C and the program: the handler's parts (Sources/CImageLog/crash_internal.h
  /// lists them), the unwinder it walks stacks with, interpose.c (pthread_create gives new threads an
  /// alternate signal stack) and crash-program.c.
  static func programArguments(output: String) -> [String] {
    let root = packageRoot
    let handler = ["table", "memory", "threads", "report", "handler", "helper"].map { "\(root)/Sources/CImageLog/crash_\($0).c" }
    return ["-g", "-O0", "-fno-omit-frame-pointer", "-fPIE", "-pie", "-pthread", "-DIL_HELPER_TEST_HOOKS",
            "-I", "\(root)/Sources/CImageLog/include", "-I", "\(root)/Sources/CImageLogImage/include",
            "-I", "\(root)/Sources/CImageLogUnwind/include", "-I", "\(root)/Sources/CImageLogProcess/include"] + handler
      + ["cfi", "cfi_expression", "unwind"].map { "\(root)/Sources/CImageLogUnwind/\($0).c" }
      + ["\(root)/Sources/CImageLog/interpose.c", "\(root)/Tests/Programs/crash-program.c", "-o", output, "-ldl"]
  }

  /// The crash program, compiled once per test run into a temporary directory.
  static let program: Result<String, CrashTestSupport.SpawnError> = {
    guard let compiler else { return .failure(.init(description: "no C compiler")) }
    let output = CrashTestSupport.makeTemporaryDirectory() + "/crash-program"
    do {
      let result = try CrashTestSupport.run(compiler, programArguments(output: output))
      guard result.exitCode == 0 else { return .failure(.init(description: "cc failed: \(result.stderr)")) }
      return .success(output)
    } catch let error as CrashTestSupport.SpawnError {
      return .failure(error)
    } catch {
      return .failure(.init(description: "\(error)"))
    }
  }()

  struct Case: CustomTestStringConvertible, Sendable {
    var mode: String
    var signal: Int32
    /// The start of the Exception Type value.
    var exceptionType: String
    /// The function frame 0 must symbolize to, when frame 0 is in the program.
    var frame0Function: String?
    /// A function some frame in the program must symbolize to.
    var callerFunction: String
    var environment: [String: String] = [:]
    var testDescription: String { mode }
  }

  static let cases: [Case] = [
    Case(mode: "null", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
         frame0Function: "crash_null_dereference", callerFunction: "main"),
    Case(mode: "abort", signal: SIGABRT, exceptionType: "SIGABRT (SI_TKILL)",
         frame0Function: nil, callerFunction: "crash_abort"),
    Case(mode: "stack", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_",
         frame0Function: "crash_recurse", callerFunction: "crash_recurse"),
    Case(mode: "thread", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
         frame0Function: "crash_null_dereference", callerFunction: "second_thread"),
    Case(mode: "threadstack", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_",
         frame0Function: "crash_recurse", callerFunction: "crash_recurse"),
    // A thread created after install that never asked for an alternate stack: the pthread_create
    // interposer gave it one (without it the handler cannot run and no report is written).
    Case(mode: "newthreadstack", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_",
         frame0Function: "crash_recurse", callerFunction: "crash_recurse"),
    Case(mode: "divide", signal: SIGFPE, exceptionType: "SIGFPE (FPE_INTDIV)",
         frame0Function: "crash_divide", callerFunction: "main"),
    Case(mode: "breakpoint", signal: SIGTRAP, exceptionType: "SIGTRAP (SI_KERNEL)",
         frame0Function: "crash_breakpoint", callerFunction: "main"),
    Case(mode: "callnull", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
         frame0Function: nil, callerFunction: "crash_call_null"),
    // glibc detects a corrupted chunk inside _int_free holding the arena lock and aborts: the report
    // is written while the crashing thread holds the allocator lock and three other threads loop in
    // malloc/free on the same (only) arena. A handler that allocated would hang here.
    Case(mode: "malloc", signal: SIGABRT, exceptionType: "SIGABRT (SI_TKILL)",
         frame0Function: nil, callerFunction: "crash_corrupt_heap",
         environment: ["MALLOC_ARENA_MAX": "1", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"]),
  ]

  /// A vfork child that crashes before it executes anything, then its parent: both are reported (issue 35,
  /// item 5: the child's claim, made in the memory it shared, kept the parent from its report).
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func vforkChildThenParent() throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash"
    let result = try CrashTestSupport.run(program, ["vfork", reportPath, "\(directory)/maps"], timeoutSeconds: 60)
    #expect(!result.timedOut, "the crash handler hung")
    #expect(result.terminationSignal == SIGSEGV)
    let processes = (readFile(reportPath) ?? "").split(separator: "\n").filter { $0.hasPrefix("Process:") }
    #expect(processes.count == 2, "\(processes)")
    #expect(processes.last?.hasSuffix("crash-program [\(result.pid)]") == true, "\(processes)")
  }

  /// A child forked right after the crashed thread started its helper (held there by the test hook,
  /// IL_HELPER_TEST_HOOKS), living until its parent dies, holds copies of every pipe the handler made:
  /// the crash still ends at once, with its report (issue 35, item 7: the handler read the exec-error
  /// pipe to its end, which the child's copy kept away, for as long as the child lived).
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func childForkedDuringTheCrashHoldsNothingUp() throws {
    let (result, reports) = try Self.crashWithFailingHelper("forkhang")
    #expect(!result.timedOut, "the crashed program hung while its child lived")
    #expect(result.terminationSignal == SIGSEGV)
    #expect(result.stderr.contains("failed (exit status 1); writing the report in process"), "\(result.stderr)")
    #expect(reports.count == 1, "\(reports)")
  }

  /// crash-program MODE with a helper that fails at once (a script exiting 1) and the in-process report
  /// into the crash directory: the result and the text of each report there whose name has the PID.
  static func crashWithFailingHelper(_ mode: String) throws -> (result: CrashTestSupport.ProcessResult, reports: [String]) {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let helper = directory + "/helper"
    try writeFile(helper, "#!/bin/sh\nexit 1\n")
    chmod(helper, 0o755)
    let result = try CrashTestSupport.run(program, [mode, "-", "\(directory)/maps"],
                                          environment: ["CRASH_HELPER": helper, "CRASH_DIR": directory,
                                                        "CRASH_HELPER_TIMEOUT_MS": "60000"],
                                          timeoutSeconds: 30)
    let names = directoryEntries(directory).filter { $0.hasSuffix(".crash") && $0.hasPrefix("crash-program.\(result.pid).") }
    return (result, names.map { readFile("\(directory)/\($0)") ?? "" })
  }

  /// A program with no descriptor left at its crash (RLIMIT_NOFILE 3): the helper cannot be started, and
  /// the in-process report goes into the file kept from il_crash_set_helper (issue 35, item 8: no report,
  /// and nothing said why).
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func reportWithNoDescriptorLeft() throws {
    let (result, reports) = try Self.crashWithFailingHelper("nofile")
    #expect(!result.timedOut, "the crash handler hung")
    #expect(result.terminationSignal == SIGSEGV)
    #expect(result.stderr.contains("could not be started (errno 24); writing the report in process\n"), "\(result.stderr)")
    #expect(reports.count == 1, "\(reports)")
    let report = try ParsedCrashReport(reports.first ?? "")
    #expect(report.header["Process"] == "crash-program [\(result.pid)]")
    #expect(report.threads.first { $0.crashed }?.tid == result.pid)
  }

  @Test(.enabled(if: compiler != nil, "needs cc or clang"), arguments: cases)
  func crashLeavesCompleteReport(_ testCase: Case) throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash", mapsPath = "\(directory)/maps"
    let result = try CrashTestSupport.run(program, [testCase.mode, reportPath, mapsPath],
                                          environment: testCase.environment, timeoutSeconds: 60)
    #expect(!result.timedOut, "the crash handler hung")
    #expect(result.terminationSignal == testCase.signal,
            "died by \(String(describing: result.terminationSignal)), exit \(String(describing: result.exitCode))")
    let text = try #require(readFile(reportPath))
    let report = try ParsedCrashReport(text)

    // Header
    #expect(report.header["Process"] == "crash-program [\(result.pid)]")
    #expect(report.header["Path"] == program)
    #expect(report.header["Exception Type"]?.hasPrefix(testCase.exceptionType) == true, "\(text)")
    #expect(report.header["Exception Codes"]?.hasPrefix("signal \(testCase.signal), code ") == true)
    #expect(report.header["OS Version"] == Self.expectedOSVersion())
    let dates = [Self.utcDate(), Self.utcDate(offsetSeconds: -600)]
    #expect(dates.contains { report.header["Date/Time"]?.hasPrefix($0) == true })
    #expect(report.header["Date/Time"]?.hasSuffix(" +0000") == true)
    // Every thread: the main thread first (its tid is the pid), each with its name; the others
    // answered (no thread here blocks signals for long), so each has frames.
    let crashed = try #require(report.threads.first { $0.crashed })
    #expect(report.threads.first?.tid == result.pid, "the main thread first")
    #expect(Set(report.threads.map(\.tid)).count == report.threads.count)
    if testCase.mode.hasPrefix("thread") || testCase.mode == "newthreadstack" {
      #expect(crashed.tid != result.pid && report.threads.count == 2, "a second thread crashed: \(text)")
    } else {
      #expect(crashed.tid == result.pid && crashed.index == 0, "the main thread crashed")
    }
    if testCase.mode == "malloc" { #expect(report.threads.count == 4, "main and three allocator threads") }
    for thread in report.threads {
      #expect(thread.name == "crash-program", "thread \(thread.index) named as its comm")
      #expect(thread.problem == nil && !thread.frames.isEmpty, "thread \(thread.index) unwound: \(text)")
    }
    // Registers: the layout of the architecture, frame 0 is the instruction pointer, cr2 the fault address.
    #if arch(x86_64)
    #expect(report.registersTitle == "X86 Thread State (64-bit)")
    #expect(report.registers.count == 19)
    #expect(report.registers["rip"] == report.frames.first?.address)
    let fault = report.header["Exception Codes"]?.split(separator: " ").last.flatMap { ParsedCrashReport.hex($0) }
    #expect(report.registers["cr2"] == fault)
    #endif

    // Binary Images are the process's images (against its own /proc/self/maps copy and readelf).
    let maps = MapsLine.parse(try #require(readFile(mapsPath)))
    try Self.checkImages(report.images, against: maps, program: program)

    // Frames: consistent arithmetic, named after their image, bounded.
    #expect(!report.frames.isEmpty)
    #expect(report.frames.count <= 128)
    for (index, frame) in report.frames.enumerated() {
      #expect(frame.index == index)
      #expect(frame.address == frame.loadAddress &+ frame.offset)
      if frame.imageName != "???" {
        let image = report.images.first { $0.start == frame.loadAddress }
        #expect(image?.name == frame.imageName, "frame \(index) names its image")
        #expect(image.map { frame.address <= $0.end } == true)
      }
    }
    if testCase.mode.hasSuffix("stack") { #expect(report.frames.count == 128, "an overflowed stack fills the bound") }
    if testCase.mode == "callnull" {
      #expect(report.frames[0].imageName == "???" && report.frames[0].address == 0)
    }
    if testCase.mode == "abort" || testCase.mode == "malloc" {
      #expect(report.frames[0].imageName == "libc.so.6")
    }

    // Symbolication with llvm-symbolizer: frame 0 at its address, return addresses at - 1.
    guard let symbolizer = Self.symbolizer else {
      try Test.cancel("llvm-symbolizer missing (Debian llvm-14): the report was checked, its names were not; skipped")
    }
    let programName = "crash-program"
    if let expected = testCase.frame0Function {
      #expect(report.frames[0].imageName == programName)
      #expect(try Self.symbolize(program, offsets: [report.frames[0].offset], symbolizer: symbolizer) == [expected])
    }
    let callers = report.frames.dropFirst().filter { $0.imageName == programName }.map { $0.offset - 1 }
    let names = try Self.symbolize(program, offsets: callers, symbolizer: symbolizer)
    #expect(names.contains(testCase.callerFunction), "\(names)\n\(text)")
  }

  /// The report path is opened with O_APPEND at install time: earlier content stays.
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func reportIsAppendedAndFileKeepsEarlierContent() throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash"
    let fd = open(reportPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = "earlier line\n".withCString { write(fd, $0, strlen($0)) }
    close(fd)
    let result = try CrashTestSupport.run(program, ["null", reportPath, "\(directory)/maps"])
    #expect(result.terminationSignal == SIGSEGV)
    let text = try #require(readFile(reportPath))
    #expect(text.hasPrefix("earlier line\nProcess:         crash-program ["), "opened with O_APPEND, not truncated")
  }

  /// A handler installed before ours runs after ours, with the original siginfo.
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func previousHandlerRunsAfterReport() throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let result = try CrashTestSupport.run(program, ["chained", "\(directory)/report.crash", "\(directory)/maps"])
    #expect(result.exitCode == 42, "the previous handler's _exit(42)")
    #expect(result.stderr == "previous handler ran: signal 11, address zero: Y\n")
    let report = try ParsedCrashReport(try #require(readFile("\(directory)/report.crash")))
    #expect(report.header["Exception Type"] == "SIGSEGV (SEGV_MAPERR)")
  }

  /// After il_crash_uninstall the default action is back: no report, still SIGSEGV.
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func uninstallRestoresDefault() throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let result = try CrashTestSupport.run(program, ["uninstalled", "\(directory)/report.crash", "\(directory)/maps"])
    #expect(result.terminationSignal == SIGSEGV)
    #expect(readFile("\(directory)/report.crash") == "")
  }

  /// The handler formats the date by hand (no localtime/gmtime in a signal handler): every day
  /// from 1970 to 2200 against glibc's gmtime_r + strftime.
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func handMadeDateMatchesGmtime() throws {
    let root = packageRoot
    let output = CrashTestSupport.makeTemporaryDirectory() + "/crash-dates"
    let compiled = try CrashTestSupport.run(Self.compiler!, ["-O1", "-I", "\(root)/Sources/CImageLogImage/include",
                                                             "\(root)/Tests/Programs/crash-dates.c", "-o", output])
    try #require(compiled.exitCode == 0, "\(compiled.stderr)")
    let result = try CrashTestSupport.run(output, [])
    #expect(result.exitCode == 0)
    #expect(result.stdout.hasSuffix("mismatches=0\n"), "\(result.stdout)")
  }

  /// A report descriptor that is a pipe nobody reads: the write fails (EPIPE), and the process
  /// still dies by SIGSEGV, not by the SIGPIPE the write raised.
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func brokenPipeKeepsTheOriginalSignal() throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let result = try CrashTestSupport.run(program, ["brokenpipe", "\(directory)/unused", "\(directory)/maps"])
    #expect(result.terminationSignal == SIGSEGV)
  }

  /// The table is never torn: at least 60,000 updates while another thread and a timer signal aimed at the
  /// updating thread itself (so it lands inside il_crash_table_add/remove) write it and check every
  /// snapshot line by line. A single-buffer table fails this (torn > 0); a reader that waited for
  /// the writer would hang it.
  @Test(.enabled(if: compiler != nil, "needs cc or clang"))
  func tableIsNeverTornByUpdates() throws {
    let program = try Self.program.get()
    let result = try CrashTestSupport.run(program, ["churn", "/dev/null", "/dev/null"], timeoutSeconds: 120)
    #expect(!result.timedOut)
    #expect(result.exitCode == 0, "\(result.stdout)\(result.stderr)")
    var counts: [String: Int] = [:]
    for field in result.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
      let pair = field.split(separator: "=")
      if pair.count == 2 { counts[String(pair[0])] = Int(pair[1]) }
    }
    #expect(counts["torn"] == 0)
    #expect((counts["reader-snapshots"] ?? 0) > 0)
    #expect((counts["signal-snapshots"] ?? 0) > 0)
    #expect((counts["interrupted-updates"] ?? 0) > 0, "some snapshots were taken inside an update on the same thread")
  }

  // MARK: round trip through imagelog symbolicate

  /// The `imagelog` built beside this test binary, when it has the `symbolicate` command.
  static let imagelogWithSymbolicate: String? = {
    guard let executable = CrashReporterTests.selfExecutable() else { return nil }
    let cli = executable.split(separator: "/").dropLast().joined(separator: "/")
    let path = "/" + cli + "/imagelog"
    guard access(path, X_OK) == 0,
          let help = try? CrashTestSupport.run(path, ["symbolicate", "--help"], timeoutSeconds: 60),
          help.exitCode == 0 else { return nil }
    return path
  }()

  @Test(.enabled(if: compiler != nil && imagelogWithSymbolicate != nil, "needs cc and imagelog symbolicate"),
        arguments: [("null", 0, "crash_null_dereference"), ("thread", 0, "crash_null_dereference"),
                    ("abort", nil, "crash_abort"), ("callnull", 1, "crash_call_null")] as [(String, Int?, String)])
  func symbolicateNamesTheCrashingFunction(mode: String, frame: Int?, function: String) throws {
    let program = try Self.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash"
    _ = try CrashTestSupport.run(program, [mode, reportPath, "\(directory)/maps"])
    let result = try CrashTestSupport.run(Self.imagelogWithSymbolicate!, ["symbolicate", reportPath])
    #expect(result.exitCode == 0, "\(result.stderr)")
    let lines = result.stdout.split(separator: "\n").map(String.init)
    let start = try #require(lines.firstIndex { $0.hasPrefix("Thread ") && $0.contains(" Crashed:  tid ") },
                             "\(result.stdout)")
    let frames = lines[(start + 1)...].prefix { !$0.isEmpty && $0.first?.isNumber == true }
    if let frame {
      let line = try #require(frames.first { $0.hasPrefix("\(frame) ") })
      #expect(line.contains(" \(function) + "), "\(result.stdout)")
    } else {
      #expect(frames.contains { $0.contains(" \(function) + ") }, "\(result.stdout)")
    }
  }

  // MARK: aarch64, under qemu-user (when the cross compiler and qemu are installed)

  static let crossCompiler = which("aarch64-linux-gnu-gcc")
  static let qemu = which("qemu-aarch64")
  static let armSysroot = "/usr/aarch64-linux-gnu"

  static let armProgram: Result<String, CrashTestSupport.SpawnError> = {
    guard let crossCompiler else { return .failure(.init(description: "no aarch64-linux-gnu-gcc")) }
    let output = CrashTestSupport.makeTemporaryDirectory() + "/crash-program"
    do {
      let result = try CrashTestSupport.run(crossCompiler, programArguments(output: output))
      guard result.exitCode == 0 else { return .failure(.init(description: "cross cc failed: \(result.stderr)")) }
      return .success(output)
    } catch {
      return .failure(.init(description: "\(error)"))
    }
  }()

  static let armCases: [Case] = [
    Case(mode: "null", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
         frame0Function: "crash_null_dereference", callerFunction: "main"),
    Case(mode: "thread", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
         frame0Function: "crash_null_dereference", callerFunction: "second_thread"),
    Case(mode: "callnull", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_MAPERR)",
         frame0Function: nil, callerFunction: "crash_call_null"),
    Case(mode: "abort", signal: SIGABRT, exceptionType: "SIGABRT (SI_TKILL)",
         frame0Function: nil, callerFunction: "crash_abort"),
    Case(mode: "stack", signal: SIGSEGV, exceptionType: "SIGSEGV (SEGV_",
         frame0Function: "crash_recurse", callerFunction: "crash_recurse"),
    Case(mode: "breakpoint", signal: SIGTRAP, exceptionType: "SIGTRAP (TRAP_BRKPT)",
         frame0Function: "crash_breakpoint", callerFunction: "main"),
  ]

  /// The aarch64 paths (PC/FP/LR from the ucontext, leaf functions whose caller is only in LR)
  /// in an emulated aarch64 process.
  @Test(.enabled(if: crossCompiler != nil && qemu != nil && access(armSysroot, F_OK) == 0,
                 "needs aarch64-linux-gnu-gcc, qemu-aarch64 and libc6-dev-arm64-cross"),
        arguments: armCases)
  func aarch64CrashUnderQEMU(_ testCase: Case) throws {
    let program = try Self.armProgram.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash"
    let result = try CrashTestSupport.run(Self.qemu!, [program, testCase.mode, reportPath, "\(directory)/maps"],
                                          environment: ["QEMU_LD_PREFIX": Self.armSysroot], timeoutSeconds: 120)
    #expect(result.terminationSignal == testCase.signal)
    let text = try #require(readFile(reportPath))
    let report = try ParsedCrashReport(text)
    #expect(report.header["Exception Type"]?.hasPrefix(testCase.exceptionType) == true, "\(text)")
    #expect(report.images.allSatisfy { $0.architecture == "arm64" })
    #expect(report.images.filter(\.isMainExecutable).map(\.path) == [program])
    #expect(report.registersTitle == "ARM Thread State (64-bit)")
    #expect(report.registers.count == 34, "x0...x28, fp, lr, sp, pc, cpsr")
    #expect(report.registers["pc"] == report.frames.first?.address)
    // qemu-user's own threads (which block every signal) are in /proc/self/task too: the program's
    // two threads are the ones with frames.
    if testCase.mode.hasPrefix("thread") {
      #expect(report.threads.filter { !$0.frames.isEmpty }.map(\.tid).contains(result.pid), "\(text)")
      #expect(report.threads.filter { !$0.frames.isEmpty }.count == 2, "\(text)")
    }
    if testCase.mode == "stack" { #expect(report.frames.count == 128) }
    guard let symbolizer = Self.symbolizer else {
      try Test.cancel("llvm-symbolizer missing (Debian llvm-14): the report was checked, its names were not; skipped")
    }
    if let expected = testCase.frame0Function {
      #expect(try Self.symbolize(program, offsets: [report.frames[0].offset], symbolizer: symbolizer) == [expected])
    }
    let callers = report.frames.dropFirst().filter { $0.imageName == "crash-program" }.map { $0.offset - 1 }
    let names = try Self.symbolize(program, offsets: callers, symbolizer: symbolizer)
    #expect(names.contains(testCase.callerFunction), "\(names)\n\(text)")
  }

  // MARK: helpers

  static func checkImages(_ images: [ParsedCrashReport.BinaryImage], against maps: [MapsLine],
                          program: String) throws {
    #expect(images.filter(\.isMainExecutable).map(\.path) == [program])
    #expect(images.first?.isMainExecutable == true, "load order: the executable first")
    #if arch(x86_64)
    #expect(images.allSatisfy { $0.architecture == "x86_64" })
    #elseif arch(arm64)
    #expect(images.allSatisfy { $0.architecture == "arm64" })
    #endif
    for image in images {
      #expect(image.name == String(image.path.split(separator: "/").last ?? ""))
      // maps names the file by its real path (/usr/lib/... on merged-/usr), the loader by its name.
      let realPath = Self.realPath(image.path)
      let mappings = maps.filter { $0.path == realPath }
      // Its load address is where the file's offset-0 mapping starts ([vdso]: where it starts).
      #expect(mappings.contains { $0.start == image.start && (image.path == "[vdso]" || $0.fileOffset == 0) },
              "\(image.path) mapped at 0x\(String(image.start, radix: 16))")
      // The text end (inclusive) falls inside an executable mapping of the same file.
      #expect(mappings.contains { $0.permissions.contains("x") && $0.start <= image.end && image.end < $0.end },
              "\(image.path) text end 0x\(String(image.end, radix: 16))")
      if let readelf, image.path.hasPrefix("/") {
        let notes = try CrashTestSupport.run(readelf, ["-n", image.path]).stdout
        if let line = notes.split(separator: "\n").first(where: { $0.contains("Build ID:") }) {
          let hex = String(line.split(separator: " ").last ?? "")
          let uuid = String((hex + String(repeating: "0", count: 32)).prefix(32))
          #expect(image.uuid == uuid, "\(image.path) build-id")
        }
      }
    }
    // Every executable file mapping (and the vDSO) belongs to an image in the table.
    for mapping in maps where mapping.permissions.contains("x") && (mapping.path.hasPrefix("/") || mapping.path == "[vdso]") {
      #expect(images.contains { Self.realPath($0.path) == mapping.path }, "\(mapping.path) missing from Binary Images")
    }
  }

  static func realPath(_ path: String) -> String {
    guard path.hasPrefix("/"), let resolved = realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
  }

  /// Function names llvm-symbolizer gives for file offsets in `binary` (a PIE: offset == vaddr).
  static func symbolize(_ binary: String, offsets: [UInt64], symbolizer: String) throws -> [String] {
    guard !offsets.isEmpty else { return [] }
    let result = try CrashTestSupport.run(symbolizer,
                                          ["--obj=\(binary)"] + offsets.map { "0x" + String($0, radix: 16) })
    return result.stdout.split(separator: "\n\n").compactMap { block in
      block.split(separator: "\n").first.map(String.init)
    }
  }

  static func expectedOSVersion() -> String {
    var names = utsname()
    uname(&names)
    func field<T>(_ value: T) -> String {
      withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
    return "\(field(names.sysname)) \(field(names.release)) \(field(names.machine))"
  }

  /// "YYYY-MM-DD HH" in UTC, from gmtime_r (the oracle for the handler's own date arithmetic).
  static func utcDate(offsetSeconds: Int = 0) -> String {
    var now = time(nil) + offsetSeconds
    var parts = tm()
    gmtime_r(&now, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour))"
  }
}
