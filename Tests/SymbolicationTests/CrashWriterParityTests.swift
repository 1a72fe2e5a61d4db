import CImageLog
import Glibc
import ImageLog
import ImageLogTestSupport
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Testing

// What the signal handler below hands the crash handler's writer: set before the signal, read in it.
nonisolated(unsafe) private var parityReportFD: Int32 = -1
nonisolated(unsafe) private var paritySignalInfo = siginfo_t()

/// Writes the crash handler's report for the context the kernel gives this handler: a real thread's
/// registers and stack, as at crash time, without crashing.
private let parityHandler: @convention(c) (Int32, UnsafeMutablePointer<siginfo_t>?, UnsafeMutableRawPointer?) -> Void = {
  _, _, context in
  il_crash_write_report(parityReportFD, SIGSEGV, &paritySignalInfo, context)
}

/// The two writers of imagelog's report layout: crash_report.c's at crash time and the snapshot's
/// `imagelogReportText()` for `pid --threads` and cores. A report the crash handler writes for a real
/// context, read back by the parser, and written again by `imagelogReportText()` from a snapshot made as
/// a capture makes one of what was read, is the same bytes; and what it says of each thread is what
/// /proc says.
@Suite struct CrashWriterParityTests {
  /// The crash handler's report, written to `path`, for this thread interrupted by a signal (SIGURG:
  /// ignored by default, and used by nothing in the tests), as if it had crashed there with a
  /// SEGV_MAPERR at 0x10. After `CrashReporter.install` it lists every thread, as at crash time.
  static func crashHandlerReport(path: String) throws -> String {
    CrashReporter.startImageTable()
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    try #require(fd >= 0, "cannot create \(path)")
    parityReportFD = fd
    paritySignalInfo = siginfo_t()
    paritySignalInfo.si_signo = SIGSEGV
    paritySignalInfo.si_code = 1  // SEGV_MAPERR
    paritySignalInfo._sifields._sigfault.si_addr = UnsafeMutableRawPointer(bitPattern: 0x10)
    var action = sigaction()
    action.__sigaction_handler.sa_sigaction = parityHandler
    action.sa_flags = SA_SIGINFO
    sigemptyset(&action.sa_mask)
    var previous = sigaction()
    try #require(sigaction(SIGURG, &action, &previous) == 0)
    // The test's threads block most signals: SIGURG is let through for this one while it is sent. A
    // signal a thread sends itself, unblocked, is handled before pthread_kill returns.
    var only = sigset_t(), mask = sigset_t()
    sigemptyset(&only)
    sigaddset(&only, SIGURG)
    pthread_sigmask(SIG_UNBLOCK, &only, &mask)
    pthread_kill(pthread_self(), SIGURG)
    pthread_sigmask(SIG_SETMASK, &mask, nil)
    sigaction(SIGURG, &previous, nil)
    close(fd)
    return try #require(readFile(path))
  }

  /// The value after `label` in the report's header.
  static func field(_ text: String, _ label: String) -> String? {
    text.split(separator: "\n").first { $0.hasPrefix(label) }.map { String($0.dropFirst(17)) }
  }

  /// This thread's id, as /proc/thread-self names it (`PID/task/TID`); Glibc's gettid is not imported.
  static func currentTID() throws -> Int32 {
    var link = [CChar](repeating: 0, count: 64)
    let length = readlink("/proc/thread-self", &link, link.count - 1)
    return try #require(Int32(String(decoding: link.prefix(max(length, 0)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
      .split(separator: "/").last ?? ""))
  }

  /// `/proc/self/task/TID/comm` without its newline.
  static func comm(_ tid: UInt64) -> String? { readFile("/proc/self/task/\(tid)/comm").map { String($0.dropLast()) } }

  /// `text` (a crash handler's report) read back, and written again by `imagelogReportText()` from what
  /// was read, made into a snapshot as a capture makes one (frames by address and trust alone, placed in
  /// the loaded images by address); the images are this process's, in the order of the report's Binary Images.
  static func rewritten(_ text: String) throws -> String {
    let report = try ReportParser.parse(text)
    let process = try #require(field(text, "Process:"))
    let codes = try #require(field(text, "Exception Codes:")).split(separator: " ")
    try #require(codes.count == 6)
    let date = try #require(field(text, "Date/Time:")).split(whereSeparator: { "- :".contains($0) }).compactMap { Int32($0) }
    try #require(date.count == 7)
    var parts = tm(tm_sec: date[5], tm_min: date[4], tm_hour: date[3], tm_mday: date[2], tm_mon: date[1] - 1,
                   tm_year: date[0] - 1900, tm_wday: 0, tm_yday: 0, tm_isdst: 0, tm_gmtoff: 0, tm_zone: nil)
    let loaded = LoadedImages.snapshot()
    let imageLines = text.split(separator: "\n").drop { $0 != "Binary Images:" }.dropFirst()
    let images = try imageLines.map { line in
      try #require(loaded.first { ImageFormatter(style: .crash).format($0) == line }, "not loaded: \(line)")
    }
    let threads = report.threads.enumerated().map { number, thread in
      ProcessSnapshot.Thread(
        number: number, tid: thread.tid, name: thread.name, state: thread.state, crashed: thread.crashed,
        problem: thread.problem, registers: thread.crashed ? thread.registers : nil,
        frames: thread.frames.enumerated().map { .init(number: $0.offset, address: $0.element.address,
                                                       isReturnAddress: $0.offset > 0, trust: $0.element.trust) })
    }
    var snapshot = ProcessSnapshot(
      format: .imagelog,
      process: .init(name: String(process.dropLast(" [\(getpid())]".count)), pid: getpid(), path: field(text, "Path:") ?? "",
                     osVersion: field(text, "OS Version:") ?? "", date: Int64(timegm(&parts))),
      exception: .init(signal: SIGSEGV, code: Int32(codes[3].dropLast()) ?? -1,
                       address: UInt64(codes[5].dropFirst(2), radix: 16) ?? 1),
      threads: threads, images: images.map(ProcessSnapshot.Image.init))
    snapshot.placeFrames()
    return snapshot.imagelogReportText()
  }

  /// In this process, without `install`: the crash handler reports the calling thread alone.
  @Test(.loaderList) func crashHandlerAndSwiftWriterWriteTheSameBytes() throws {
    let tid = try Self.currentTID()
    let directory = try makeTemporaryDirectory()
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let text = try Self.crashHandlerReport(path: directory + "/parity.crash")
    let report = try ReportParser.parse(text)
    #expect(report.problems.isEmpty, "\(report.problems)")
    let process = try #require(Self.field(text, "Process:"))
    #expect(process.hasSuffix(" [\(getpid())]"))
    let crashed = try #require(report.threads.first { $0.crashed }, "\(text)")
    #expect(crashed.tid == UInt64(tid))
    #expect(crashed.name == Self.comm(UInt64(tid)))
    #expect(Self.field(text, "Exception Codes:") == "signal 11, code 1, address 0x0000000000000010")
    #expect(!crashed.frames.isEmpty, "\(text)")
    #expect(try Self.rewritten(text) == text)
  }

  /// In a child process (this test binary again) that installed the crash handler and runs three named
  /// threads: every thread of the process is listed, each with /proc's tid and name, the named ones
  /// unwound; and `imagelogReportText()` writes the same bytes.
  @Test(.enabled(if: access("/proc/self/exe", R_OK) == 0, "needs /proc/self/exe to start the child"))
  func everyThreadAgreesWithProc() throws {
    let directory = try makeTemporaryDirectory()
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let executable = try #require(executablePath(of: getpid()))
    let result = try runChild([executable, "--testing-library", "swift-testing", "--filter", "CrashWriterParityChild"],
                              environment: ["IMAGELOG_PARITY_CHILD": directory])
    #expect(!result.timedOut)
    #expect(result.exitCode == 0, "\(result.output.suffix(3000))\(result.error.suffix(3000))")
    let text = try #require(readFile(directory + "/c.crash"), "\(result.output.suffix(3000))")
    #expect(readFile(directory + "/swift.crash") == text)
    let report = try ReportParser.parse(text)
    #expect(report.problems.isEmpty, "\(report.problems)")
    // Each thread as /proc/PID/task listed it in the child while the report was written ("TID NAME" lines).
    let tasks = Dictionary(try #require(readFile(directory + "/tasks")).split(separator: "\n").map { line in
      (UInt64(line.prefix { $0 != " " }) ?? 0, String(line.drop { $0 != " " }.dropFirst()))
    }, uniquingKeysWith: { first, _ in first })
    #expect(report.process.threadCount == report.threads.count)
    #expect(report.threads.first?.tid == UInt64(result.pid), "the main thread first")
    for thread in report.threads {
      let tid = try #require(thread.tid)
      // Names are written escaped, by the C as by TextEscaping (thread 3's holds a tab), and read back.
      #expect(tasks[tid] != nil && tasks[tid] == thread.name,
              "thread \(thread.number) tid \(tid) \(thread.name ?? "-")")
    }
    for name in ["parity-1", "parity-2", "parity\t3"] {
      let thread = try #require(report.threads.first { $0.name == name }, "\(text)")
      #expect(thread.problem == nil && !thread.frames.isEmpty, "\(text)")
    }
    #expect(report.threads.filter(\.crashed).count == 1)
  }
}

/// Runs only in the child `everyThreadAgreesWithProc` starts: installs the crash handler, starts three
/// named threads blocked in `read`, writes the crash handler's report and `imagelogReportText()`'s of it, and
/// the process's threads as /proc lists them.
@Suite struct CrashWriterParityChild {
  @Test(.enabled(if: getenv("IMAGELOG_PARITY_CHILD") != nil, "only in the child of everyThreadAgreesWithProc"))
  func writeBothReports() throws {
    let directory = String(cString: try #require(getenv("IMAGELOG_PARITY_CHILD")))
    try CrashReporter.install(writingTo: directory + "/installed.crash")
    defer { CrashReporter.uninstall() }
    var fds: [Int32] = [0, 0]
    try #require(pipe(&fds) == 0)
    var threads: [pthread_t] = []
    for index in 1...3 {
      var thread = pthread_t()
      // The argument carries the thread's number and the descriptor it blocks on (no context to capture).
      let argument = UnsafeMutableRawPointer(bitPattern: Int(fds[0]) << 8 | index)
      try #require(pthread_create(&thread, nil, { argument in
        let bits = Int(bitPattern: argument)
        // Its name, as pthread_setname_np sets it (which Glibc does not import).
        let named = open("/proc/thread-self/comm", O_WRONLY)
        // The third name holds a tab: both writers must escape it the same way.
        _ = (bits & 0xFF == 3 ? "parity\t3" : "parity-\(bits & 0xFF)").withCString { write(named, $0, strlen($0)) }
        close(named)
        var byte: UInt8 = 0
        _ = read(Int32(bits >> 8), &byte, 1)  // until the write end is closed
        return nil
      }, argument) == 0)
      threads.append(thread)
    }
    defer {
      close(fds[1])
      for thread in threads { pthread_join(thread, nil) }
      close(fds[0])
    }
    func tasks() -> [String] {
      guard let folder = opendir("/proc/self/task") else { return [] }
      defer { closedir(folder) }
      var lines: [String] = []
      while let entry = readdir(folder) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard let tid = UInt64(name), let comm = CrashWriterParityTests.comm(tid) else { continue }
        lines.append("\(tid) \(comm)")
      }
      return lines
    }
    try waitUntil("the three threads are named") { Set(["parity-1", "parity-2", "parity\t3"]).isSubset(of: tasks().map { String($0.drop { $0 != " " }.dropFirst()) }) }
    let before = tasks()
    let text = try CrashWriterParityTests.crashHandlerReport(path: directory + "/c.crash")
    try writeFile(directory + "/tasks", (before + tasks()).joined(separator: "\n") + "\n")
    try writeFile(directory + "/swift.crash", try CrashWriterParityTests.rewritten(text))
  }
}
