import CImageLog
import Glibc
import ImageLog
import ImageLogSymbolication
import ImageLogTestSupport
import ImageReaders
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

/// The two writers of imagelog's report layout: crash.c's at crash time and `ThreadsReport` for
/// `pid --threads` and cores. A report the crash handler writes for a real context, read back by the
/// parser, and written again by `ThreadsReport` from what was read, is the same bytes; and what it
/// says of the thread is what /proc says.
@Suite struct CrashWriterParityTests {
  /// The crash handler's report for this thread, interrupted by a signal (SIGURG: ignored by default,
  /// and used by nothing in the tests), as if it had crashed there with a SEGV_MAPERR at 0x10.
  static func crashHandlerReport() throws -> String {
    CrashReporter.startImageTable()
    let directory = try makeTemporaryDirectory()
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let path = directory + "/parity.crash"
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

  @Test(.loaderList) func crashHandlerAndSwiftWriterWriteTheSameBytes() throws {
    // This thread's id, as /proc/thread-self names it (`PID/task/TID`); Glibc's gettid is not imported.
    var link = [CChar](repeating: 0, count: 64)
    let length = readlink("/proc/thread-self", &link, link.count - 1)
    let tid = try #require(Int32(String(decoding: link.prefix(max(length, 0)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
      .split(separator: "/").last ?? ""))
    let text = try Self.crashHandlerReport()
    let report = try ReportParser.parse(text)
    #expect(report.problems.isEmpty, "\(report.problems)")

    // What the report says of the process and the thread, against /proc.
    let process = try #require(Self.field(text, "Process:"))
    #expect(process.hasSuffix(" [\(getpid())]"))
    let crashed = try #require(report.threads.first { $0.crashed }, "\(text)")
    #expect(crashed.tid == UInt64(tid))
    let comm = readFile("/proc/self/task/\(tid)/comm").map { String($0.dropLast()) }
    #expect(crashed.name == comm)
    #expect(report.threads.allSatisfy { thread in
      thread.tid.map { readFile("/proc/self/task/\($0)/comm").map { String($0.dropLast()) } == thread.name } ?? false
    }, "\(text)")
    #expect(Self.field(text, "Exception Codes:") == "signal 11, code 1, address 0x0000000000000010")
    #expect(report.frames.contains { $0.thread == crashed.number }, "\(text)")

    // The same report, written by ThreadsReport from what was read.
    let codes = try #require(Self.field(text, "Exception Codes:")).split(separator: " ")
    let date = try #require(Self.field(text, "Date/Time:")).split(whereSeparator: { "- :".contains($0) }).compactMap { Int32($0) }
    try #require(date.count == 7)
    var parts = tm(tm_sec: date[5], tm_min: date[4], tm_hour: date[3], tm_mday: date[2], tm_mon: date[1] - 1,
                   tm_year: date[0] - 1900, tm_wday: 0, tm_yday: 0, tm_isdst: 0, tm_gmtoff: 0, tm_zone: nil)
    let snapshot = LoadedImages.snapshot()
    let imageLines = text.split(separator: "\n").drop { $0 != "Binary Images:" }.dropFirst()
    let images = try imageLines.map { line in
      try #require(snapshot.first { ImageFormatter(style: .crash).format($0) == line }, "not loaded: \(line)")
    }
    let threads = report.threads.map { thread in
      ThreadsReport.Thread(tid: Int32(thread.tid ?? 0), name: thread.name, state: thread.state, crashed: thread.crashed,
                           frames: report.frames.filter { $0.thread == thread.number }.map { .init(address: $0.address, trust: $0.trust) },
                           problem: thread.problem)
    }
    let rewritten = ThreadsReport(
      processName: String(process.dropLast(" [\(getpid())]".count)), path: Self.field(text, "Path:") ?? "",
      pid: getpid(), date: Int64(timegm(&parts)), osVersion: Self.field(text, "OS Version:") ?? "",
      exception: .init(signal: SIGSEGV, code: Int32(codes[3].dropLast()) ?? -1,
                       address: UInt64(codes[5].dropFirst(2), radix: 16) ?? 1),
      threads: threads, registers: crashed.registers, images: images)
    #expect(rewritten.text() == text)
  }
}
