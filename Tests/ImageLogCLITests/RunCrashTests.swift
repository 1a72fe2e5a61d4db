import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog run --crash-dir DIR -- PROGRAM`: any dynamically linked program, no handler of its own
/// (Tests/Programs/run-crash.c), gets the capture handler from the audit module; the helper's report
/// lands in DIR; images are still logged; a handler the program installs replaces ours; when the helper
/// cannot capture (a seccomp filter refusing ptrace) the module writes its own report; a Swift program's
/// crash is reported with Swift names.
@Suite(.serialized) struct RunCrashTests {
  static let gcc = which("gcc")
  static let gdb = which("gdb")
  static let setarch = which("setarch")
  static let strace = which("strace")

  /// run-crash.c and crash-threads-lib.c (gcc -O2 -fomit-frame-pointer), built once.
  static let programs: Result<(program: String, library: String), TestSupportError> = {
    guard processTestHaveCC, let gcc else { return .failure(TestSupportError("no cc or gcc")) }
    do {
      let directory = try makeTemporaryDirectory("imagelog-run-crash")
      let program = directory + "/run-crash", library = directory + "/libcrashthreads.so"
      let built = try runProcessTest(["cc", "-g", "-O0", "-pthread", packageRoot + "/Tests/Programs/run-crash.c", "-o", program, "-ldl"])
      guard built.exitStatus == 0 else { return .failure(TestSupportError("cc: \(built.error)")) }
      let shared = try runProcessTest([gcc, "-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-Wl,--build-id",
                                       packageRoot + "/Tests/Programs/crash-threads-lib.c", "-o", library])
      guard shared.exitStatus == 0 else { return .failure(TestSupportError("gcc: \(shared.error)")) }
      return .success((program, library))
    } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }()

  struct Run {
    var result: ChildResult
    var directory: String
    var files: [String]
    var text: String
    var log: String
    var procThreads: [(tid: Int32, name: String)]
  }

  /// `imagelog run --output LOG --crash-dir DIR [extra] -- PROGRAM MODE THREADS`.
  /// With `missingDirectory`, DIR (two levels) is not made before the run.
  static func crash(_ mode: String, program: String? = nil, extra: [String] = [], noRandomization: Bool = false,
                    environment: [String: String] = [:], missingDirectory: Bool = false) throws -> Run {
    let (builtProgram, library) = try programs.get()
    let directory = try makeTemporaryDirectory("imagelog-run-crash")
    let crashDirectory = directory + (missingDirectory ? "/made/crashes" : "/crashes")
    if !missingDirectory { mkdir(crashDirectory, 0o755) }
    var command = [processTestImagelog, "run", "--output", "\(directory)/log", "--crash-dir", crashDirectory] + extra
      + ["--", program ?? builtProgram, mode, "\(directory)/threads"]
    if noRandomization, let setarch { command = [setarch, "-R"] + command }
    var variables = ["CRASH_LIBRARY": library, "DEBUGINFOD_URLS": ""]
    variables.merge(environment) { $1 }
    let result = try runChild(command, environment: variables, timeoutSeconds: 120)
    #expect(!result.timedOut, "the crash hung")
    let files = try finishedCrashDirectory(crashDirectory, helperWrote: result.error.contains("report written to"))
    let reports = files.filter { $0.hasSuffix(".crash") }
    let procThreads = (readFile("\(directory)/threads") ?? "").split(separator: "\n").compactMap { line in
      let parts = line.split(separator: " ", maxSplits: 1)
      return parts.count == 2 ? Int32(parts[0]).map { ($0, String(parts[1])) } : nil
    }
    return Run(result: result, directory: crashDirectory, files: files,
               text: reports.count == 1 ? readFile("\(crashDirectory)/\(reports[0])") ?? "" : "",
               log: readFile("\(directory)/log") ?? "", procThreads: procThreads)
  }

  /// The capture scene under run: every thread named and unwound (the one that blocks every signal and
  /// spins too), the crashed thread's frames and registers as gdb has them for the same run of imagelog
  /// (gdb follows its exec into the program), lines on the program's frames, the program dead of SIGSEGV,
  /// and the image log written as without --crash-dir.
  #if arch(x86_64)
  @Test(.enabled(if: gdb != nil && setarch != nil && processTestHaveCC && gcc != nil, "needs cc, gcc, gdb and setarch"))
  func captureUnderRunEqualsGDB() throws {
    let run = try Self.crash("capture", noRandomization: true)
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    #expect(run.files.count == 2 && run.files[0].hasPrefix("run-crash.") && run.files[0].hasSuffix("Z.crash")
              && run.files[1] == run.files[0].dropLast("crash".count) + "dmp", "\(run.files)")
    #expect(run.result.error.contains("report written to \(run.directory)/"), "\(run.result.error)")
    #expect(run.log.contains("run-crash") && run.log.contains("libcrashthreads.so"), "the images are still logged: \(run.log)")
    let report = try SymbolicatedReportText(run.text)
    #expect(report.threads.map(\.tid) == run.procThreads.map(\.tid), "\(run.text)")
    #expect(report.threads.map { $0.name ?? "" } == ["run-crash", "sleeper", "spinner", "sorter"], "\(run.text)")
    for thread in report.threads { #expect(!thread.frames.isEmpty, "\(thread.name ?? "") unwound\n\(run.text)") }
    let crashed = try #require(report.threads.first { $0.crashed })
    #expect(crashed.name == "sorter")
    for function in ["call_library", "compare", "sorter"] {
      #expect(crashed.lines.contains { $0.contains(" \(function) + ") && $0.contains("(run-crash.c:") }, "\(function)\n\(run.text)")
    }

    let (program, library) = try Self.programs.get()
    let directory = try makeTemporaryDirectory("imagelog-run-crash-gdb")
    mkdir(directory + "/crashes", 0o755)
    let gdb = try GDBCrashView.run(gdb: Self.gdb!, [processTestImagelog, "run", "--output", "\(directory)/log",
                                                    "--crash-dir", directory + "/crashes", "--", program, "capture",
                                                    "\(directory)/threads"],
                                   environment: ["CRASH_LIBRARY": library, "DEBUGINFOD_URLS": ""])
    #expect(gdb.differences(from: report).isEmpty, "\(gdb.differences(from: report))\n\(run.text)\n\(gdb.output)")
    #expect(!gdb.threads.isEmpty, "gdb: \(gdb.output)")
  }
  #endif

  struct Case: CustomTestStringConvertible, Sendable {
    var mode: String
    var testDescription: String { mode }
  }

  /// The helper writes the report whatever the program does with SIGCHLD, and for a stack overflow on the
  /// main thread (the module gave it an alternate signal stack).
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"),
        arguments: [Case(mode: "ignorechld"), Case(mode: "handlechld"), Case(mode: "stack"), Case(mode: "null")])
  func helperWritesTheReport(_ testCase: Case) throws {
    let run = try Self.crash(testCase.mode)
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    #expect(run.files.count == 2, "a report and a minidump: \(run.files)")
    let report = try SymbolicatedReportText(run.text)
    let crashed = try #require(report.threads.first { $0.crashed }, "\(run.text)")
    let function = testCase.mode == "stack" ? "recurse" : "crash_null"
    #expect(crashed.lines.first?.contains(" \(function) + ") == true, "\(run.text)")
    #expect(report.header["Exception Type"]?.hasPrefix("SIGSEGV (SEGV_") == true)
  }

  /// A handler the program installs after the module's replaces it: the program's runs, no report.
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func programHandlerKeepsItsPlace() throws {
    let run = try Self.crash("handler")
    #expect(run.result.exitCode == 42, "\(run.result.error)")
    #expect(run.result.error == "run-crash: its own handler ran\n")
    #expect(run.files.isEmpty, "\(run.files)")
  }

  /// A seccomp filter that refuses ptrace (as some container profiles do) is inherited by the helper,
  /// which cannot stop the threads: the module says so and writes its own report into the directory,
  /// in imagelog's layout, the crashed thread unwound in process.
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func moduleWritesTheReportWhenTheHelperCannot() throws {
    let run = try Self.crash("seccomp")
    #expect(run.result.signal == SIGSEGV)
    #expect(run.result.error.contains("failed (exit status 1); writing the report in process\n"), "\(run.result.error)")
    #expect(run.result.error.contains("ptrace"), "the helper said why: \(run.result.error)")
    #expect(run.files.count == 1 && run.files[0].hasPrefix("run-crash.\(run.result.pid)."), "\(run.files)")
    let report = try SymbolicatedReportText(run.text)
    #expect(report.header["Process"] == "run-crash [\(run.result.pid)]")
    #expect(report.header["Exception Type"] == "SIGSEGV (SEGV_MAPERR)")
    let crashed = try #require(report.threads.first { $0.crashed })
    #expect(crashed.frames.count >= 3, "\(run.text)")
    #expect(report.registers["rip"] ?? report.registers["pc"] == crashed.frames.first)
    #expect(run.text.contains("\nBinary Images:\n") && run.text.contains("+run-crash "), "\(run.text)")
    // imagelog symbolicate reads it and names the crashing function.
    let symbolicated = try runProcessTest([processTestImagelog, "symbolicate", "\(run.directory)/\(run.files[0])"],
                                          environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(symbolicated.exitStatus == 0, "\(symbolicated.error)")
    #expect(symbolicated.output.contains("crash_null"), "\(symbolicated.output)")
  }

  /// A Swift program: imagelog's handler is in place before the Swift runtime starts, and the runtime
  /// does not put its backtracer over a handler already there, so imagelog's report is the only one (with
  /// Swift's names); under CrashReporter.install in the program, ours runs first and Swift's after.
  @Test(.enabled(if: haveTool("swiftc"), "needs swiftc"))
  func swiftProgram() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-crash-swift")
    let source = directory + "/crasher.swift", program = directory + "/crasher"
    try writeFile(source, """
      @inline(never) func crashHere(_ address: Int) -> Int {
        let pointer = UnsafeMutablePointer<Int>(bitPattern: address)!
        pointer.pointee = 1
        return pointer.pointee
      }
      print(crashHere(CommandLine.arguments.count * 8))

      """)
    let built = try runProcessTest(["swiftc", "-g", "-Onone", source, "-o", program])
    try #require(built.exitStatus == 0, "\(built.error)")
    let run = try Self.crash("swift", program: program,
                             environment: ["SWIFT_BACKTRACE": "enable=yes,interactive=no,symbolicate=off,color=no"])
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    #expect(!run.result.error.contains("Program crashed"), "Swift's backtracer stayed out: \(run.result.error)")
    let report = try SymbolicatedReportText(run.text)
    let crashed = try #require(report.threads.first { $0.crashed }, "\(run.text)")
    #expect(crashed.lines.first?.contains("crashHere(_:) + ") == true && crashed.lines.first?.contains("(crasher.swift:3)") == true,
            "\(run.text)")
  }

  /// The minidump beside the report against Crashpad's own handler's for the same crash
  /// (Tests/Programs/capture-bench.c, which starts crashpad_handler from its handler as Crashpad's client
  /// does): minidump-stackwalk finds the same threads, and the crashed thread's frames (module and offset,
  /// and how each was found) are the same in both dumps. Both runs without address randomization.
  @Test(.enabled(if: pipelineTool("crashpad_handler") != nil && pipelineTool("minidump-stackwalk") != nil
                   && processTestHaveCC && setarch != nil,
                 "needs crashpad_handler and minidump-stackwalk (Scripts/install-test-tools), cc and setarch"))
  func minidumpEqualsCrashpads() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-crash-dump")
    let program = directory + "/capture-bench"
    let built = try runProcessTest(["cc", "-O2", "-g", "-pthread", packageRoot + "/Tests/Programs/capture-bench.c", "-o", program])
    try #require(built.exitStatus == 0, "\(built.error)")
    let crashes = directory + "/crashes"
    mkdir(crashes, 0o755)
    let ours = try runChild([Self.setarch!, "-R", processTestImagelog, "run", "--output", "/dev/null", "--crash-dir", crashes, "--",
                             program, "4"], timeoutSeconds: 120)
    #expect(ours.signal == SIGSEGV, "\(ours.error)")
    let files = try finishedCrashDirectory(crashes, helperWrote: ours.error.contains("report written to"))
    let ourDump = try #require(files.first { $0.hasSuffix(".dmp") }, "\(files)")
    let theirs = try runChild([Self.setarch!, "-R", program, "4", pipelineTool("crashpad_handler")!, directory + "/crashpad"],
                              timeoutSeconds: 120)
    #expect(theirs.signal == SIGSEGV, "\(theirs.error)")
    let pending = directoryEntries(directory + "/crashpad/pending").filter { $0.hasSuffix(".dmp") }
    let theirDump = try #require(pending.first, "no dump from crashpad_handler: \(theirs.error)")
    func walk(_ path: String) throws -> (threads: Int, crashed: [String]) {
      let result = try runChild([pipelineTool("minidump-stackwalk")!, path])
      let lines = result.output.split(separator: "\n").map(String.init)
      let crashed = lines.drop { !$0.contains("(crashed)") }.dropFirst().prefix { !$0.hasPrefix("Thread ") }
      // " 0  capture-bench + 0x1750" then "    Found by: ...": a frame and how it was found.
      var frames: [String] = []
      for line in crashed {
        let trimmed = line.drop { $0 == " " }
        if let first = trimmed.first, first.isNumber, line.contains(" + 0x") || line.contains("!") { frames.append(String(trimmed)) }
        if trimmed.hasPrefix("Found by:") { frames.append(String(trimmed)) }
      }
      return (lines.filter { $0.hasPrefix("Thread ") }.count, frames)
    }
    let (ourThreads, ourFrames) = try walk("\(crashes)/\(ourDump)")
    let (theirThreads, theirFrames) = try walk("\(directory)/crashpad/pending/\(theirDump)")
    #expect(ourThreads == 4 && theirThreads == 4)
    #expect(ourFrames.count >= 4, "\(ourFrames)")
    #expect(ourFrames == theirFrames)
  }

  /// A vfork child that crashes before it executes anything is reported, and so is its parent when it
  /// crashes afterwards: the claim the child made in the memory it shared is not the parent's (issue 35,
  /// item 5: the parent died with no report and nothing said).
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func vforkChildThenParentAreBothReported() throws {
    let run = try Self.crash("vfork")
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    let parent = "run-crash.\(run.result.pid)."
    try waitUntil("two reports in \(run.directory), each symbolicated") {
      let reports = directoryEntries(run.directory).filter { $0.hasSuffix(".crash") }
      return reports.count == 2 && reports.allSatisfy {
        readFile("\(run.directory)/\($0)")?.contains("\n-- symbolicated by imagelog") ?? false
      }
    }
    let reports = directoryEntries(run.directory).filter { $0.hasSuffix(".crash") }
    let parentReport = try #require(reports.first { $0.hasPrefix(parent) }, "\(reports)\n\(run.result.error)")
    let child = try #require(reports.first { !$0.hasPrefix(parent) }, "\(reports)")
    let report = try SymbolicatedReportText(readFile("\(run.directory)/\(parentReport)") ?? "")
    #expect(report.header["Process"] == "run-crash [\(run.result.pid)]")
    #expect(report.threads.first { $0.crashed }?.lines.first?.contains(" crash_null + ") == true, "\(parentReport)")
    #expect(child.hasPrefix("run-crash.") && child != parentReport)
  }

  /// The program, the audit module in LD_AUDIT by hand, and `helper` (a script: the audit module's
  /// interface lets the helper be any program) as its crash helper; HELD_DIR is a folder of the run's
  /// own for the script and the program.
  static func auditedCrash(_ mode: String, helper script: String) throws
    -> (result: ChildResult, seconds: Double, crashes: String, held: String) {
    let (program, _) = try programs.get()
    let directory = try makeTemporaryDirectory("imagelog-run-crash-held")
    let crashes = directory + "/crashes", held = directory + "/held", helper = directory + "/helper"
    mkdir(crashes, 0o755)
    mkdir(held, 0o755)
    try writeFile(helper, script)
    chmod(helper, 0o755)
    let binDirectory = String(processTestImagelog[..<(processTestImagelog.lastIndex(of: "/") ?? processTestImagelog.startIndex)])
    func seconds() -> Double {
      var now = timespec()
      clock_gettime(CLOCK_MONOTONIC, &now)
      return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
    let started = seconds()
    let result = try runChild([program, mode, directory + "/threads"],
                              environment: ["LD_AUDIT": binDirectory + "/libImageLogAudit.so",
                                            "IMAGELOG_AUDIT_CRASH_DIR": crashes, "IMAGELOG_AUDIT_CRASH_HELPER": helper,
                                            "IMAGELOG_AUDIT_CRASH_TIMEOUT_MS": "20000", "HELD_DIR": held,
                                            "DEBUGINFOD_URLS": ""],
                              timeoutSeconds: 60)
    return (result, seconds() - started, crashes, held)
  }

  /// `auditedCrash` with a stand-in for the helper that holds the first crash's handler until the
  /// program says release, then, as every later one at once, exits 1, so the handler writes its own
  /// report: the crashed thread is then certainly inside the handler while the program forks.
  static func heldCrash(_ mode: String) throws -> (result: ChildResult, seconds: Double, crashes: String, held: String) {
    try auditedCrash(mode, helper: """
      #!/bin/sh
      if mkdir "$HELD_DIR/first" 2>/dev/null; then
        : > "$HELD_DIR/started"
        while [ ! -e "$HELD_DIR/release" ]; do sleep 0.01; done
      fi
      exit 1

      """)
  }

  /// Without --crash-wait the first report, written before symbolication so that the program can die,
  /// ends with a line saying it is provisional; here it stays so, because the helper's rename over it
  /// is refused (strace injects EIO; the helper keeps its PID under strace -D, so the program's
  /// PR_SET_PTRACER still names it) (issue 35, item 20: nothing told a provisional report from a final one).
  @Test(.enabled(if: processTestHaveCC && gcc != nil && strace != nil, "needs cc, gcc and strace"))
  func firstReportSaysItIsProvisional() throws {
    let run = try Self.auditedCrash("null", helper: """
      #!/bin/sh
      echo $$ > "$HELD_DIR/helper.pid"
      exec \(Self.strace!) -D -qq -o /dev/null -e trace=rename,renameat,renameat2 \\
        -e inject=rename,renameat,renameat2:error=EIO \(processTestImagelog) "$@"

      """)
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    #expect(run.result.error.contains("report written to"), "\(run.result.error)")
    let helper = Int32((readFile(run.held + "/helper.pid") ?? "").split(separator: "\n").first ?? "") ?? 0
    try #require(helper > 0)
    try waitUntil("the helper \(helper) has ended") {
      guard let stat = readFile("/proc/\(helper)/stat") else { return true }
      return stat.split(separator: ")").last?.hasPrefix(" Z") ?? true
    }
    let reports = directoryEntries(run.crashes).filter { $0.hasSuffix(".crash") }
    #expect(reports.count == 1 && reports.first?.hasPrefix("run-crash.\(run.result.pid).") == true, "\(reports)")
    let text = readFile("\(run.crashes)/\(reports.first ?? "")") ?? ""
    #expect(text.hasSuffix("\n-- provisional: being symbolicated, to be replaced\n"), "\(text)")
    #expect(!text.contains("-- symbolicated by imagelog"))
    #expect(try SymbolicatedReportText(text).threads.first { $0.crashed }?.frames.isEmpty == false, "\(text)")
  }

  /// A child forked while the crashed thread is inside the handler, which then crashes itself, is reported
  /// and dies at once (issue 35, item 6: it inherited the "a thread is reporting" state, waited 32 s as an
  /// orphan with SIGSEGV blocked, and died without a report); the parent is reported too.
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func childForkedDuringACrashIsReported() throws {
    let run = try Self.heldCrash("forkcrash")
    #expect(!run.result.timedOut)
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    // "PID STATUS" of the child, written by the forking thread once it reaped the child, before release.
    let child = (readFile(run.held + "/child") ?? "").split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
    try #require(child.count == 2, "the child was never reaped before the crash ended: \(run.result.error)")
    #expect(child[1] & 0x7f == SIGSEGV, "the child died of its own signal: status \(child[1])")
    let reports = directoryEntries(run.crashes)
    #expect(reports.contains { $0.hasPrefix("run-crash.\(child[0]).") && $0.hasSuffix(".crash") }, "\(reports)\n\(run.result.error)")
    #expect(reports.contains { $0.hasPrefix("run-crash.\(run.result.pid).") && $0.hasSuffix(".crash") }, "\(reports)")
    #expect(run.seconds < 20, "ended within the crash timeout: \(run.seconds) s")
  }

  /// A program with no descriptor left at its crash (RLIMIT_NOFILE 3): the helper cannot be started, and
  /// the module writes its report with what it opened at install (issue 35, item 8: no report, and
  /// nothing said why).
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func reportWithNoDescriptorLeft() throws {
    let run = try Self.crash("nofile")
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    #expect(run.result.error.contains("could not be started (errno 24); writing the report in process\n"), "\(run.result.error)")
    #expect(run.files.count == 1 && run.files[0].hasPrefix("run-crash.\(run.result.pid).") && run.files[0].hasSuffix("Z.crash"),
            "\(run.files)\n\(run.result.error)")
    let report = try SymbolicatedReportText(run.text)
    #expect(report.header["Process"] == "run-crash [\(run.result.pid)]")
    #expect(report.header["Exception Type"] == "SIGSEGV (SEGV_MAPERR)")
    #expect(try #require(report.threads.first { $0.crashed }, "\(run.text)").frames.count >= 3, "\(run.text)")
    var info = stat()
    #expect(stat("\(run.directory)/\(run.files[0])", &info) == 0 && info.st_mode & 0o7777 == 0o640 & ~Self.umask())
  }

  /// The process's umask, from /proc (umask(2) would change it for every thread of the test process).
  static func umask() -> mode_t {
    let line = (readFile("/proc/self/status") ?? "").split(separator: "\n").first { $0.hasPrefix("Umask:") }
    return mode_t(line.flatMap { UInt32(String($0.dropFirst("Umask:".count).filter { !$0.isWhitespace }), radix: 8) } ?? 0o022)
  }

  /// A crash directory that does not exist is made, as core-handler makes its own (mode 0755 and its
  /// parents), and the crash's files go there (issue 35, item 19).
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func missingCrashDirectoryIsMade() throws {
    let run = try Self.crash("null", missingDirectory: true)
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    var info = stat()
    #expect(stat(run.directory, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR)
    #expect(info.st_mode & 0o7777 == 0o755 & ~Self.umask(), "mode \(String(info.st_mode & 0o7777, radix: 8))")
    #expect(run.files.count == 2, "a report and a minidump: \(run.files)")
    #expect(try SymbolicatedReportText(run.text).header["Process"] == "run-crash [\(run.result.pid)]")
  }

  /// With --crash-wait, the report in the folder when the program has exited is the final, symbolicated
  /// one, and the minidump is beside it: nothing to wait for (issue 35, item 20: the unsymbolicated report
  /// was replaced about 0.1 s later, and a script could neither tell nor wait).
  @Test(.enabled(if: processTestHaveCC && gcc != nil, "needs cc and gcc"))
  func crashWaitLeavesTheFinalReport() throws {
    let (program, library) = try Self.programs.get()
    let directory = try makeTemporaryDirectory("imagelog-run-crash-wait")
    let crashes = directory + "/crashes"
    mkdir(crashes, 0o755)
    let result = try runChild([processTestImagelog, "run", "--output", "/dev/null", "--crash-dir", crashes, "--crash-wait",
                               "--", program, "null", directory + "/threads"],
                              environment: ["CRASH_LIBRARY": library, "DEBUGINFOD_URLS": ""], timeoutSeconds: 120)
    #expect(result.signal == SIGSEGV, "\(result.error)")
    // Read at once: no waiting.
    let files = directoryEntries(crashes).sorted()
    #expect(files.count == 2 && files[0].hasSuffix(".crash") && files[1] == files[0].dropLast("crash".count) + "dmp", "\(files)")
    let text = readFile("\(crashes)/\(files.first ?? "")") ?? ""
    #expect(text.contains("\n-- symbolicated by imagelog: "), "\(text)")
    #expect(!text.contains("-- provisional"), "\(text)")
    let report = try SymbolicatedReportText(text)
    let crashed = try #require(report.threads.first { $0.crashed }, "\(text)")
    #expect(crashed.lines.first?.contains(" crash_null + ") == true && crashed.lines.first?.contains("(run-crash.c:") == true, "\(text)")
    // The crash's signature among the header lines: the faulting function, nothing above it to skip.
    #expect(report.header["Signature"] == "crash_null", "\(text.prefix(600))")
  }

  @Test func crashDirectoryErrors() throws {
    let missing = try runProcessTest([processTestImagelog, "run", "--crash-dir", "/proc/imagelog-missing/crashes", "--", "true"])
    #expect(missing.exitStatus == 1)
    #expect(missing.error.hasPrefix("imagelog: /proc/imagelog-missing/crashes: cannot write crash reports there: "), "\(missing.error)")
    let under = try runProcessTest([processTestImagelog, "run", "--crash-dir", "/etc/hostname/crashes", "--", "true"])
    #expect(under.exitStatus == 1)
    #expect(under.error == "imagelog: /etc/hostname/crashes: cannot write crash reports there: Not a directory\n")
    let file = try runProcessTest([processTestImagelog, "run", "--crash-dir", "/etc/hostname", "--", "true"])
    #expect(file.exitStatus == 1)
    #expect(file.error == "imagelog: /etc/hostname: cannot write crash reports there: Not a directory\n")
    let timeout = try runProcessTest([processTestImagelog, "run", "--crash-dir", "/tmp", "--crash-timeout", "soon", "--", "true"])
    #expect(timeout.exitStatus == 64)
    #expect(timeout.error.hasPrefix("Error: 'soon' is not a number of seconds (more than 0, at most 86400) for --crash-timeout\n"))
  }
}
