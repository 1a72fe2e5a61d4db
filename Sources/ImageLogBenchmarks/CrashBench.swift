internal import Glibc

/// Crash reports: the time from the fault to imagelog's report written (every thread asked and unwound, the
/// registers, the Binary Images), in a program whose other threads sleep in read(2), with 4 and with 64
/// threads, next to Swift's backtracer's own "Backtrace took" for the same crash of the same process.
///
/// The program is Tests/Programs/crash-program.c (`bench` mode) with the crash handler's C, built -O2 and
/// linked with libswiftCore, whose runtime installs Swift's backtracer before `main`. The program's own
/// SIGSEGV handler is installed after that and before ours: it runs when ours has written the report and
/// returned (the retried fault), prints the time since the fault, and hands the fault to Swift's backtracer
/// (`preset=full`: every thread; `symbolicate=off`, as our report is not symbolicated either). Before any
/// figure counts, both must list every thread, and the crashed thread's frames must be the same addresses.
func crashBenchmark() throws -> [BenchmarkTable] {
  guard let swiftc = try? runProcess(["sh", "-c", "command -v swiftc"]).output.split(separator: "\n").first,
        let slash = swiftc.lastIndex(of: "/") else { throw BenchError("no swiftc: Swift's backtracer comes with its runtime") }
  let directory = "/tmp/imagelog-bench-crash-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let program = try buildCrashProgram(in: directory, swiftLibraries: String(swiftc[..<slash]) + "/../lib/swift/linux")

  var rows: [[String]] = []
  for threads in [4, 64] {
    var ours: [Double] = [], swift: [Double] = []
    for run in 0..<11 {  // run 0 warms the page cache
      let report = "\(directory)/report-\(threads)-\(run).crash"
      let result = try runProcess(["env", "SWIFT_BACKTRACE=enable=yes,interactive=no,preset=full,symbolicate=off,color=no,output-to=stdout",
                                   program, "bench", report, "\(directory)/maps", String(threads)])
      let text = try String(decoding: readAll(report), as: UTF8.self)
      try checkSameAnswers(report: text, swift: result.output, threads: threads)
      guard let nanoseconds = field(result.output, "report-ns=").flatMap({ Double($0) }),
            let took = field(result.output, "Backtrace took ").flatMap({ Double($0.dropLast()) }) else {
        throw BenchError("no timings in the crash program's output: \(result.output.suffix(400))")
      }
      if run > 0 {
        ours.append(nanoseconds / 1e9)
        swift.append(took)
      }
    }
    // Swift prints its time to `swiftTimeResolution`: a median of 0 is under it, and no ratio can be taken from it.
    let (ourMedian, swiftMedian) = (median(ours), median(swift))
    rows.append([String(threads), formatDuration(ourMedian),
                 swiftMedian > 0 ? formatDuration(swiftMedian) : "under \(formatDuration(swiftTimeResolution)) (prints 0.00s)",
                 swiftMedian > 0 ? "\(rounded(swiftMedian / max(ourMedian, 1e-9)))x" : "-"])
  }
  return [BenchmarkTable(
    title: "Crash report of every thread vs Swift's backtracer",
    notes: "A program whose other threads sleep in read(2) crashes on its main thread (Tests/Programs/crash-program.c "
      + "`bench`, cc -O2, linked with libswiftCore). imagelog: from the fault to the report written (every thread "
      + "asked and unwound by CFI, registers, Binary Images), timed by a SIGSEGV handler that runs when ours returns. "
      + "Swift: its backtracer's own \"Backtrace took\" (\(formatDuration(swiftTimeResolution)) resolution) for the same crash, `preset=full,"
      + "symbolicate=off`. Both list every thread and the crashed thread's frames agree before a figure counts. "
      + "Median of 10 crashes.",
    header: ["threads", "imagelog report", "Swift backtracer (Backtrace took)", "Swift / imagelog"],
    rows: rows)]
}

/// Tests/Programs/crash-program.c with the crash handler's C, built -O2 into `directory`, linked with
/// libswiftCore from `swiftLibraries` (whose runtime installs Swift's backtracer before `main`).
private func buildCrashProgram(in directory: String, swiftLibraries: String) throws -> String {
  guard haveTool("cc") else { throw BenchError("no C compiler (cc)") }
  let root = String(#filePath.dropLast("Sources/ImageLogBenchmarks/CrashBench.swift".count))
  let program = directory + "/crash-program"
  let build = try runProcess(["cc", "-O2", "-g", "-fPIE", "-pie", "-pthread",
                              "-I", root + "Sources/CImageLog/include", "-I", root + "Sources/CImageLogImage/include",
                              "-I", root + "Sources/CImageLogUnwind/include",
                              root + "Sources/CImageLog/crash_table.c", root + "Sources/CImageLog/crash_memory.c",
                              root + "Sources/CImageLog/crash_threads.c", root + "Sources/CImageLog/crash_report.c",
                              root + "Sources/CImageLog/crash_handler.c", root + "Sources/CImageLog/crash_helper.c",
                              root + "Sources/CImageLogUnwind/cfi.c", root + "Sources/CImageLogUnwind/cfi_expression.c",
                              root + "Sources/CImageLogUnwind/unwind.c",
                              root + "Sources/CImageLog/interpose.c", root + "Tests/Programs/crash-program.c",
                              "-o", program, "-ldl", "-L", swiftLibraries, "-Wl,-rpath," + swiftLibraries,
                              "-Wl,--no-as-needed", "-lswiftCore"], discardOutput: true)
  guard build.status == 0 else { throw BenchError("cannot build the crash program") }
  let plugin = directory + "/libplugin.so"
  let built = try runProcess(["cc", "-shared", "-fPIC", "-Wl,--build-id=sha1", root + "Tests/Programs/unloaded-plugin.c",
                              "-o", plugin], discardOutput: true)
  guard built.status == 0 else { throw BenchError("cannot build the plugin") }
  return program
}

/// The crash handler's time with the image history (issue 39): the same crash (4 threads, as the table above)
/// with no history kept (`keepUnloadedImages(0)`), and with the default history (16 unloaded images, 32
/// timeline events) or the largest (64, 128) after the plugin was opened and closed 200 times, so each ring is
/// full and the report has its Unloaded Images and Image Timeline sections at their longest for that size.
func crashHistoryBenchmark() throws -> [BenchmarkTable] {
  guard let swiftc = try? runProcess(["sh", "-c", "command -v swiftc"]).output.split(separator: "\n").first,
        let slash = swiftc.lastIndex(of: "/") else { throw BenchError("no swiftc: the crash program links libswiftCore") }
  let directory = "/tmp/imagelog-bench-history-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let program = try buildCrashProgram(in: directory, swiftLibraries: String(swiftc[..<slash]) + "/../lib/swift/linux")
  // The configurations interleaved, run by run: a busy machine slows them alike.
  let configurations = [(0, 0), (0, 200), (16, 200), (64, 200)]
  var times = [[Double]](repeating: [], count: configurations.count)
  for run in 0..<22 {  // run 0 warms the page cache
    for (index, (keep, cycles)) in configurations.enumerated() {
      let report = "\(directory)/report-\(keep)-\(cycles)-\(run).crash"
      let result = try runProcess(["env", "SWIFT_BACKTRACE=enable=no", "CRASH_KEEP_UNLOADED=\(keep)",
                                   "CRASH_CYCLES=\(cycles)", "CRASH_PLUGIN=\(directory)/libplugin.so",
                                   program, "bench", report, "\(directory)/maps", "4"])
      let text = try String(decoding: readAll(report), as: UTF8.self)
      let timeline = text.split(separator: "\n").filter { $0.hasPrefix("-") && $0.contains(" ms  ") }.count
      guard text.split(separator: "\n").filter({ $0.hasPrefix("Thread ") && $0.contains(":  tid ") }).count == 4,
            timeline == min(2 * keep, 2 * cycles) else {
        throw BenchError("the report (keep \(keep), \(cycles) cycles) lists not 4 threads or \(timeline) timeline events")
      }
      guard let nanoseconds = field(result.output, "report-ns=").flatMap({ Double($0) }) else {
        throw BenchError("no timing in the crash program's output: \(result.output.suffix(400))")
      }
      if run > 0 { times[index].append(nanoseconds / 1e9) }
    }
  }
  let rows = configurations.enumerated().map { index, configuration in
    [configuration.0 == 0 ? "0 (keepUnloadedImages(0))" : String(configuration.0), String(configuration.1),
     formatDuration(median(times[index]))]
  }
  return [BenchmarkTable(
    title: "Crash report with the image history",
    notes: "The table above's program (4 threads, cc -O2) opens and closes Tests/Programs/unloaded-plugin.c "
      + "CYCLES times (each put in and taken out of the crash table as the observers do), then crashes; the time "
      + "from the fault to the report written, with the history of that size (its Unloaded Images and Image "
      + "Timeline sections full). Median of 21 crashes of each, the four run in turn.",
    header: ["unloaded images kept", "plugin opened and closed", "imagelog report"],
    rows: rows)]
}

/// The resolution of the Swift backtracer's "Backtrace took" figure, in seconds: it prints two decimals.
private let swiftTimeResolution = 0.01

/// The value after `prefix` on the line that has it.
private func field(_ output: String, _ prefix: String) -> String? {
  guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
  return String(line.dropFirst(prefix.count))
}

/// The whole file at `path`.
func readAll(_ path: String) throws -> [UInt8] {
  let fd = open(path, O_RDONLY)
  guard fd >= 0 else { throw BenchError("\(path): no report") }
  defer { close(fd) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if count <= 0 { break }
    bytes += buffer[0..<count]
  }
  return bytes
}

/// Our report lists `threads` threads, each unwound; Swift's lists as many; the crashed thread's frame
/// addresses agree as far as Swift's go (in this -O2 C program its unwinder stops after frame 0: "...").
private func checkSameAnswers(report: String, swift: String, threads: Int) throws {
  let lines = report.split(separator: "\n", omittingEmptySubsequences: false)
  let listed = lines.filter { $0.hasPrefix("Thread ") && $0.contains(":  tid ") }.count
  guard listed == threads, !report.contains("(not unwound") else {
    throw BenchError("our report lists \(listed) of \(threads) threads, or one not unwound")
  }
  let swiftLines = swift.split(separator: "\n", omittingEmptySubsequences: false)
  let swiftThreads = swiftLines.filter { $0.hasPrefix("Thread ") && $0.hasSuffix(":") }.count
  guard swiftThreads == threads else { throw BenchError("Swift's backtracer lists \(swiftThreads) of \(threads) threads") }
  func addresses<S: Collection>(_ frames: S) -> [UInt64] where S.Element == Substring {
    frames.prefix { !$0.isEmpty }.compactMap { line in
      line.split(separator: " ").first { $0.hasPrefix("0x") && $0.count == 18 }.flatMap { UInt64($0.dropFirst(2), radix: 16) }
    }
  }
  guard let ourStart = lines.firstIndex(where: { $0.hasPrefix("Thread ") && $0.contains(" Crashed:  tid ") }),
        let swiftStart = swiftLines.firstIndex(where: { $0.hasPrefix("Thread ") && $0.hasSuffix("crashed:") }) else {
    throw BenchError("no crashed thread")
  }
  let ourFrames = addresses(lines[(ourStart + 1)...])
  let swiftFrames = addresses(swiftLines[(swiftStart + 2)...])  // a blank line follows Swift's heading
  let common = min(ourFrames.count, swiftFrames.count)
  guard common >= 1, Array(ourFrames.prefix(common)) == Array(swiftFrames.prefix(common)) else {
    throw BenchError("the crashed thread's frames differ: ours \(ourFrames), Swift's \(swiftFrames)")
  }
}
