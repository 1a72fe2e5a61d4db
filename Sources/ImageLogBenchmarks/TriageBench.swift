internal import Glibc

import ImageLog

/// `imagelog triage` of N crash files (IMAGELOG_BENCH_TRIAGE_COUNT, default 10,000: the figure of issue
/// #37) against symbolicating each the two other ways: `symbolicate --output-dir` over all of them, and
/// one `symbolicate` process per crash. The crashes are those of TriageCommandTests: Tests/Programs/
/// triage-bugs.c built three times (cc -O1 -g, one of them with AddressSanitizer), crashed under `imagelog
/// run --crash-dir` (a .crash and a .dmp each) and with ASan (its log); the files are copies of these, 70%
/// reports under other crash names and dates, 15% minidumps, 15% sanitizer logs. Warm: an untimed run of
/// each way first, the symbol cache's builders awaited.
func triageBenchmark() throws -> [BenchmarkTable] {
  guard haveTool("cc") else { throw BenchError("no C compiler (cc)") }
  let count = getenv("IMAGELOG_BENCH_TRIAGE_COUNT").flatMap { Int(String(cString: $0)) }.map { max(20, $0) } ?? 10_000
  let root = String(#filePath.dropLast("Sources/ImageLogBenchmarks/TriageBench.swift".count))
  let imagelog = imagelogExecutable()
  let directory = "/tmp/imagelog-bench-triage-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let crashes = directory + "/crashes", made = directory + "/made"
  for folder in [crashes, made] { mkdir(folder, 0o755) }
  let source = root + "Tests/Programs/triage-bugs.c"
  for (name, flags) in [("alpha", ["-DBUILD=1"]), ("alpha2", ["-DBUILD=2"]), ("gamma", ["-DBUILD=4", "-fsanitize=address"])] {
    let built = try runProcess(["cc", "-g", "-O1"] + flags + ["-o", directory + "/" + name, source], discardOutput: true)
    guard built.status == 0 else { throw BenchError("cannot build \(source) as \(name)") }
  }
  for (program, mode) in [("alpha", "null"), ("alpha2", "null"), ("alpha", "abort")] {
    _ = try? runProcess([imagelog, "run", "--crash-dir", made, "--crash-wait", "-o", "/dev/null", "--", directory + "/" + program, mode],
                        discardOutput: true)
  }
  _ = try? measuredShell("ASAN_OPTIONS=detect_leaks=0 \(directory)/gamma overflow 2> \(made)/gamma.log")
  let names = FileSystem.contents(made)
  let reports = try names.filter { $0.hasSuffix(".crash") }.map { try readAll(made + "/" + $0) }
  let dumps = try names.filter { $0.hasSuffix(".dmp") }.map { try readAll(made + "/" + $0) }
  let log = try readAll(made + "/gamma.log")
  guard reports.count == 3, dumps.count == 3, !log.isEmpty else {
    throw BenchError("the crashes were not all written (\(names); imagelog run --crash-dir needs the audit module built)")
  }
  let clock = ContinuousClock()
  let start = clock.now
  for index in 0..<count {
    let kind = index % 20
    let day = 1 + index % 28
    let stamp = "202611\(day < 10 ? "0" : "")\(day)T\(10 + index % 10)0000Z"
    if kind < 14 {
      let text = String(decoding: reports[index % 3], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map { line in
        line.hasPrefix("Date/Time:") ? "Date/Time:       2026-11-\(day < 10 ? "0" : "")\(day) 10:00:00 +0000" : String(line)
      }.joined(separator: "\n")
      try writeFileAtomically("\(crashes)/prog.\(10_000 + index).\(stamp).crash", Array(text.utf8))
    } else if kind < 17 {
      try writeFileAtomically("\(crashes)/dump-\(index).dmp", dumps[index % 3])
    } else {
      try writeFileAtomically("\(crashes)/asan-\(index).log", log)
    }
  }
  let elapsed = clock.now - start
  let making = formatDuration(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
  printProgress("bench: \(count) crash files made in \(making)")

  let triage = "\(imagelog) triage \(crashes) > \(directory)/triage.txt"
  let batch = "\(imagelog) symbolicate --output-dir \(directory)/batch \(crashes)/* > /dev/null"
  // One process per crash: every crash when there are few, else a sample of 500 (the first 500 files
  // of the same mix), its time scaled to all.
  let sampleCount = min(count, 500)
  let each = "mkdir -p \(directory)/each && ls \(crashes) | head -n \(sampleCount) | while read f; do "
    + "\(imagelog) symbolicate \"\(crashes)/$f\" > \"\(directory)/each/$f\" 2>/dev/null; done"
  // Warm: the symbol cache filled and its builders done, the files in the page cache.
  _ = try? measuredShell(triage)
  _ = try? measuredShell(batch)
  try awaitCacheBuilders()
  var triageRuns: [Measurement] = []
  var batchRuns: [Measurement] = []
  for _ in 0..<3 {
    triageRuns.append(try measuredShell(triage + " || test $? -eq 1", peakMemory: true))
    batchRuns.append(try measuredShell(batch + " || test $? -eq 1", peakMemory: true))
  }
  let eachRun = try measuredShell(each)
  let state = "\(imagelog) triage --state \(directory)/state.json \(crashes) > /dev/null"
  _ = try measuredShell(state)
  let stateRun = try measuredShell(state, peakMemory: true)
  let table = (try? readAll(directory + "/triage.txt")).map { String(decoding: $0, as: UTF8.self) } ?? ""
  let summary = table.split(separator: "\n").first { $0.contains(" crashes in ") }.map(String.init) ?? "?"

  let triageWall = median(triageRuns.map(\.wall)), triageCPU = median(triageRuns.map(\.cpu))
  let batchWall = median(batchRuns.map(\.wall)), batchCPU = median(batchRuns.map(\.cpu))
  let scale = Double(count) / Double(sampleCount)
  func memory(_ runs: [Measurement]) -> String {
    let peak = median(runs.map { Double($0.maxRSSKiB) }) / 1024
    return peak > 0 ? "\(rounded(peak)) MiB" : ""
  }
  let rows = [
    ["`imagelog triage DIR` (groups, table)", formatDuration(triageWall), formatDuration(triageCPU), memory(triageRuns),
     formatDuration(triageWall / Double(count)), "1x"],
    ["`imagelog triage --state FILE DIR`, all from the state", formatDuration(stateRun.wall), formatDuration(stateRun.cpu),
     memory([stateRun]), formatDuration(stateRun.wall / Double(count)), "\(rounded(stateRun.wall / triageWall))x"],
    ["`imagelog symbolicate --output-dir OUT DIR/*` (writes each report)", formatDuration(batchWall), formatDuration(batchCPU),
     memory(batchRuns), formatDuration(batchWall / Double(count)), "\(rounded(batchWall / triageWall))x"],
    ["`imagelog symbolicate FILE > OUT`, one process per crash"
     + (sampleCount < count ? " (\(sampleCount) timed, scaled to \(count))" : ""),
     formatDuration(eachRun.wall * scale), formatDuration(eachRun.cpu * scale), "",
     formatDuration(eachRun.wall / Double(sampleCount)), "\(rounded(eachRun.wall * scale / triageWall))x"],
  ]
  return [BenchmarkTable(
    title: "Triage: \(count) crash files grouped by signature",
    notes: "Tests/Programs/triage-bugs.c built three times (cc -O1 -g; one with AddressSanitizer), crashed under "
      + "`imagelog run --crash-dir` and with ASan; \(count) files copied from those crashes (70% imagelog reports under "
      + "other crash names and dates, 15% minidumps, 15% ASan logs; made in \(making)). triage's result: \(summary). Warm: "
      + "an untimed run of each way first (symbol cache filled, files in the page cache). triage and --output-dir: "
      + "median of 3 runs; peak memory from GNU time.",
    header: ["way", "wall", "CPU", "peak memory", "per crash", "vs triage"], rows: rows)]
}
