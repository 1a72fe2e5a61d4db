import CImageLog
import Glibc
import ImageLog
import ImageLogTestSupport
import Testing

/// The Swift API: the crash-time table kept by the LoadedImages observers, and the handler
/// installed with `CrashReporter.install(writingTo:)` in a real Swift process (this test binary,
/// re-run as a child that crashes on purpose).
@Suite(.serialized) struct CrashReporterTests {
  /// Reads everything `CrashReporter.writeBinaryImages` writes, through a pipe.
  static func tableLines() throws -> [String] {
    var fds: [Int32] = [0, 0]
    try #require(pipe(&fds) == 0)
    // Close-on-exec: children other tests start meanwhile must not inherit these (tests compare
    // the descriptors a command receives).
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    defer { close(fds[0]) }
    #expect(CrashReporter.writeBinaryImages(toFileDescriptor: fds[1]))
    close(fds[1])
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
      guard n > 0 else { break }
      bytes += buffer[0..<n]
    }
    let text = String(decoding: bytes, as: UTF8.self)
    #expect(text.isEmpty || text.hasSuffix("\n"))
    return text.split(separator: "\n").map(String.init)
  }

  /// `.loaderList`: no test loads or unloads a library between the snapshot and the table read.
  @Test(.loaderList) func tableHoldsTheFormattedSnapshot() throws {
    CrashReporter.startImageTable()
    CrashReporter.startImageTable()  // idempotent
    let formatter = ImageFormatter(style: .crash)
    // Compared as sets: the table keeps the order of the observers' events, not the loader's.
    let (snapshot, table, tableCount) = try withUnchangedLoaderList {
      (LoadedImages.snapshot(), try Self.tableLines(), CrashReporter.imageTableCount)
    }
    let expected = Set(snapshot.map { formatter.format($0) })
    let missing = expected.subtracting(table), extra = Set(table).subtracting(expected)
    #expect(missing.isEmpty, "in the snapshot, not the table: \(missing)")
    #expect(extra.isEmpty, "in the table, not the snapshot: \(extra)")
    #expect(tableCount == snapshot.count)
    #expect(table.count == snapshot.count, "one line per image")
  }

  @Test(.loaderList, .enabled(if: CrashHandlerTests.compiler != nil, "needs cc or clang"))
  func tableFollowsDlopenAndDlclose() throws {
    CrashReporter.startImageTable()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let source = "\(directory)/crash-table-probe.c", library = "\(directory)/libcrashtableprobe.so"
    let fd = open(source, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = "int crash_table_probe(void) { return 42; }\n".withCString { write(fd, $0, strlen($0)) }
    close(fd)
    let compiled = try CrashTestSupport.run(CrashHandlerTests.compiler!,
                                            ["-shared", "-fPIC", "-Wl,--build-id", source, "-o", library])
    try #require(compiled.exitCode == 0, "\(compiled.stderr)")

    #expect(try !Self.tableLines().contains { $0.hasSuffix(" \(library)") })
    let handle = try #require(dlopen(library, RTLD_NOW))
    let line = try Self.tableLines().first { $0.hasSuffix(" \(library)") }
    #expect(line != nil, "dlopen adds the library to the crash table")
    if let line {
      #expect(line.contains(" libcrashtableprobe.so x86_64  <") || line.contains(" libcrashtableprobe.so arm64  <"))
      let image = LoadedImages.snapshot().first { $0.path == library }
      #expect(image.map { ImageFormatter(style: .crash).format($0) } == line)
    }
    dlclose(handle)
    #expect(try !Self.tableLines().contains { $0.hasSuffix(" \(library)") }, "dlclose removes it")
  }

  @Test func installReportsAnUnopenablePath() {
    #expect(throws: CrashReporter.InstallError(path: "/nonexistent/imagelog/report.crash",
                                               SystemError("cannot open", errno: ENOENT))) {
      try CrashReporter.install(writingTo: "/nonexistent/imagelog/report.crash")
    }
    let error = CrashReporter.InstallError(path: "/x/report.crash", SystemError("cannot open", errno: ENOENT))
    #expect(error.description == "/x/report.crash: cannot open: No such file or directory")
  }

  /// The report file is made for its owner alone (it holds registers and addresses) and never opened
  /// through a symbolic link planted at its path: the file the link names stays as it was.
  @Test func reportFileIsPrivateAndNeverALink() throws {
    let folder = try makeTemporaryDirectory("imagelog-report-file")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let victim = folder + "/victim", link = folder + "/report.crash"
    let original = Array("not a crash report\n".utf8)
    let victimFD = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0o644)
    try #require(victimFD >= 0)
    _ = original.withUnsafeBytes { write(victimFD, $0.baseAddress, $0.count) }
    close(victimFD)
    try #require(symlink(victim, link) == 0)
    #expect(throws: CrashReporter.InstallError(path: link, SystemError("cannot open", errno: ELOOP))) {
      try CrashReporter.install(writingTo: link)
    }
    #expect(readFileBytes(victim) == original)
    // A new report file (opened the way install opens it, without installing a handler in this process).
    let fresh = folder + "/fresh.crash"
    let fd = il_crash_open_report(fresh)
    try #require(fd >= 0)
    close(fd)
    var info = stat()
    #expect(stat(fresh, &info) == 0 && info.st_mode & 0o777 == 0o600, "mode \(String(info.st_mode & 0o777, radix: 8))")
  }

  // MARK: a real Swift program: this test binary, re-run as a child

  struct SwiftCase: CustomTestStringConvertible, Sendable {
    var mode: String
    var swiftBacktrace: String
    var signal: Int32
    var exceptionType: String
    var function: String
    var testDescription: String { "\(mode) SWIFT_BACKTRACE=\(swiftBacktrace)" }
  }

  static let swiftCases: [SwiftCase] = [
    SwiftCase(mode: "fatalError", swiftBacktrace: "enable=no", signal: SIGILL,
              exceptionType: "SIGILL (ILL_ILLOPN)", function: "triggerFatalError"),
    // Swift's backtracer installed first (by the runtime), ours after: ours writes, then chains.
    SwiftCase(mode: "fatalError", swiftBacktrace: "enable=yes,interactive=no,symbolicate=off,color=no,preset=full",
              signal: SIGILL, exceptionType: "SIGILL (ILL_ILLOPN)", function: "triggerFatalError"),
    SwiftCase(mode: "nullPointer", swiftBacktrace: "enable=no", signal: SIGSEGV,
              exceptionType: "SIGSEGV (SEGV_MAPERR)", function: "triggerNullDereference"),
    // install(fileDescriptor: 2): the report goes to standard error.
    SwiftCase(mode: "stderr", swiftBacktrace: "enable=no", signal: SIGILL,
              exceptionType: "SIGILL (ILL_ILLOPN)", function: "triggerFatalError"),
  ]

  @Test(arguments: swiftCases)
  func swiftProgramCrashLeavesReport(_ testCase: SwiftCase) throws {
    let executable = try #require(Self.selfExecutable())
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash"
    let result = try CrashTestSupport.run(executable, ["--testing-library", "swift-testing", "--filter", "crashingChild"],
                                          environment: ["IMAGELOG_CRASH_CHILD": "\(testCase.mode):\(reportPath)",
                                                        "SWIFT_BACKTRACE": testCase.swiftBacktrace],
                                          timeoutSeconds: 300)
    #expect(!result.timedOut)
    #expect(result.terminationSignal == testCase.signal, "\(result.stderr.suffix(2000))")
    let text: String
    if testCase.mode == "stderr" {
      #expect(readFile(reportPath) == nil, "no file: the report went to fd 2")
      let start = try #require(result.stderr.firstRange(of: "Process:         "), "\(result.stderr.suffix(2000))")
      text = String(result.stderr[start.lowerBound...])
    } else {
      text = try #require(readFile(reportPath), "\(result.stderr.suffix(2000))")
    }
    let report = try ParsedCrashReport(text)
    let name = String(executable.split(separator: "/").last ?? "")
    #expect(report.header["Process"] == "\(name) [\(result.pid)]")
    #expect(report.header["Path"] == CrashHandlerTests.realPath(executable))
    #expect(report.header["Exception Type"] == testCase.exceptionType)
    let maps = MapsLine.parse(try #require(readFile(reportPath + ".maps")))
    try CrashHandlerTests.checkImages(report.images, against: maps, program: CrashHandlerTests.realPath(executable))
    if testCase.swiftBacktrace.hasPrefix("enable=yes") {
      #expect(result.stderr.contains("Program crashed"), "Swift's backtracer ran after ours: \(result.stderr.prefix(500))")
      // Swift's backtracer is the oracle for the frame walk: its frame 0 and the [ra] frames
      // before its first async frame are ours, address for address.
      let swiftFrames = Self.swiftBacktracerFrames(result.stderr)
      #expect(swiftFrames.count >= 2, "\(result.stderr.prefix(3000))")
      #expect(Array(report.frames.prefix(swiftFrames.count).map(\.address)) == swiftFrames)
      // preset=full lists every thread (this toolchain's swift-backtrace reads threads=all as "no"): the same
      // threads with the same names as Swift's backtracer, which numbers them in its own order.
      let swiftNames = Self.swiftBacktracerThreadNames(result.stderr)
      #expect(swiftNames.sorted() == report.threads.map { $0.name ?? "" }.sorted(), "\(result.stderr.prefix(6000))\n\(text)")
      // libdispatch's workers block every signal but SIGPROF: the report asks them with that one.
      #expect(report.threads.allSatisfy { $0.problem == nil && !$0.frames.isEmpty }, "\(text)")
    }
    // Every thread is listed: the test binary's own (Swift Testing's pool, the main thread first).
    #expect(report.threads.first?.tid == result.pid)
    #expect(report.threads.count >= 2, "\(text)")
    // Round trip: imagelog symbolicate names the Swift function in one of the frames.
    if let cli = CrashHandlerTests.imagelogWithSymbolicate, testCase.mode != "stderr" {
      let symbolicated = try CrashTestSupport.run(cli, ["symbolicate", reportPath])
      #expect(symbolicated.exitCode == 0, "\(symbolicated.stderr)")
      #expect(symbolicated.stdout.split(separator: "\n").contains { $0.contains(testCase.function) },
              "\(symbolicated.stdout)")
    }
    // The crashing Swift function is in a frame of the test binary (llvm-symbolizer prints the
    // mangled name, which contains the identifier).
    guard let symbolizer = CrashHandlerTests.symbolizer else {
      try Test.cancel("llvm-symbolizer missing (Debian llvm-14): the report was checked, its names were not; skipped")
    }
    let offsets = report.frames.enumerated().filter { $0.element.imageName == name }
      .map { $0.offset == 0 ? $0.element.offset : $0.element.offset - 1 }
    let names = try CrashHandlerTests.symbolize(CrashHandlerTests.realPath(executable), offsets: offsets,
                                                symbolizer: symbolizer)
    #expect(names.contains { $0.contains(testCase.function) }, "\(names)\n\(text)")
  }

  /// The addresses of the crashed thread's leading frames in Swift's backtracer output
  /// (`symbolicate=off`): frame 0 and the `[ra]` frames, up to the first other kind (`[async]`).
  static func swiftBacktracerFrames(_ output: String) -> [UInt64] {
    let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
    guard let start = lines.firstIndex(where: { $0.hasPrefix("Thread ") && $0.hasSuffix("crashed:") }) else { return [] }
    var addresses: [UInt64] = []
    for line in lines[(start + 1)...] {
      let tokens = line.split(separator: " ")
      if tokens.isEmpty { if addresses.isEmpty { continue } else { break } }
      guard tokens.count >= 2, Int(tokens[0]) == addresses.count else { break }
      let marker = tokens.count >= 3 ? tokens[1] : ""
      guard marker == "" || marker == "[ra]", let address = ParsedCrashReport.hex(tokens[tokens.count >= 3 ? 2 : 1])
      else { break }
      addresses.append(address)
    }
    return addresses
  }

  /// The thread names in Swift's backtracer output (`preset=full`): `Thread 0 "name" crashed:`, `Thread 2 "name":`,
  /// `Thread 1:` (no name: "").
  static func swiftBacktracerThreadNames(_ output: String) -> [String] {
    output.split(separator: "\n").compactMap { line -> String? in
      guard line.hasPrefix("Thread "), line.hasSuffix(":"), let number = line.split(separator: " ").dropFirst().first,
            Int(number.filter { $0 != ":" }) != nil else { return nil }
      guard let open = line.firstIndex(of: "\""), let close = line.lastIndex(of: "\""), open < close else { return "" }
      return String(line[line.index(after: open)..<close])
    }
  }

  static func selfExecutable() -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// Runs only in the child started by `swiftProgramCrashLeavesReport`: what a user adds to their
/// program, then a crash.
@Suite struct CrashReporterChild {
  @Test(.enabled(if: getenv("IMAGELOG_CRASH_CHILD") != nil, "only in a child process"))
  func crashingChild() throws {
    let request = String(cString: getenv("IMAGELOG_CRASH_CHILD")!)
    let parts = request.split(separator: ":", maxSplits: 1).map(String.init)
    try #require(parts.count == 2)
    if parts[0] == "stderr" {
      try CrashReporter.install(fileDescriptor: 2)
    } else {
      try CrashReporter.install(writingTo: parts[1])
    }
    let maps = try #require(readFile("/proc/self/maps"))
    let fd = open(parts[1] + ".maps", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    _ = maps.withCString { write(fd, $0, strlen($0)) }
    close(fd)
    switch parts[0] {
    case "fatalError", "stderr": triggerFatalError()
    case "nullPointer": triggerNullDereference()
    default: Issue.record("unknown mode \(parts[0])")
    }
  }
}

@inline(never) func triggerFatalError() {
  fatalError("CrashReporterChild: crashing on purpose")
}

@inline(never) func triggerNullDereference() {
  let pointer = UnsafeMutablePointer<Int>(bitPattern: Int(getpid() == 0 ? 1 : 0) + 8)
  pointer?.pointee = 42
}
