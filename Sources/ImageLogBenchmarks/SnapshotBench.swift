internal import CImageLog
internal import Glibc
@_spi(Benchmarks) import ImageLog
import Runtime
import Synchronization

/// `LoadedImages.snapshot()` against the Swift runtime's `ImageMap.capture()`, and the cost observers
/// add to a `dlopen`+`dlclose` cycle, measured side by side in this one process.
func snapshotBenchmark() throws -> [BenchmarkTable] {
  let batch = 100
  func perCall(_ iterations: Int, _ body: () -> Void) -> Double {
    medianSeconds(iterations: iterations) { for _ in 0..<batch { body() } } / Double(batch)
  }
  var imageCount = 0
  var mapCount = 0
  var cached = 0.0, uncached = 0.0, runtime = 0.0
  // Interleave rounds so machine noise falls on every contender alike; keep the best round's median.
  for round in 0..<5 {
    let c = perCall(30) { imageCount = LoadedImages.snapshot().count }
    let u = perCall(30) { imageCount = LoadedImages.uncachedSnapshot().count }
    let r = perCall(3) { mapCount = ImageMap.capture().count }
    cached = round == 0 ? c : min(cached, c)
    uncached = round == 0 ? u : min(uncached, u)
    runtime = round == 0 ? r : min(runtime, r)
  }
  let snapshotTable = BenchmarkTable(
    title: "In-process image list",
    notes: "`LoadedImages.snapshot()` against the Swift runtime's `Runtime.ImageMap.capture()` in the same "
      + "process (\(imageCount) images; ImageMap lists \(mapCount): it leaves out the vDSO). `snapshot()` returns "
      + "the previous values while the loader's dlpi_adds/dlpi_subs counters stay the same and, after a dlopen, "
      + "decodes only the new images; the rebuilt row decodes every image's program headers and PT_NOTE from "
      + "scratch, as the first call in a process does. Per call, median of batches of \(batch), best of 5 "
      + "interleaved rounds.",
    header: ["Operation", "Time per call", "vs ImageMap.capture()"],
    rows: [
      ["ImageMap.capture()", formatDuration(runtime), "1x"],
      ["LoadedImages.snapshot() (unchanged loader)", formatDuration(cached), "\(rounded(runtime / cached))x faster"],
      ["LoadedImages.snapshot() (rebuilt)", formatDuration(uncached), "\(rounded(runtime / uncached))x faster"],
    ])

  // A dlopen+dlclose cycle of a tiny library, built here with cc.
  guard haveTool("cc") else {
    printProgress("bench: cc not found, skipping the dlopen cycle")
    return [snapshotTable]
  }
  var template = Array("/tmp/imagelog-bench-XXXXXX".utf8CString)
  guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw BenchError("mkdtemp") }
  let directory = String(cString: made)
  let library = directory + "/libcore_bench.so"
  let source = directory + "/core_bench.c"
  let build = try runProcess(["sh", "-c", "echo 'int core_bench(void) { return 3; }' > \(source) && cc -shared -fPIC -o \(library) \(source)"],
                             discardOutput: true)
  guard build.status == 0 else { throw BenchError("cc failed") }

  // The worst case (a library that costs the loader almost nothing) and a typical system library
  // with a dependency of its own (two images per cycle).
  var subjects: [(String, String)] = [("one-function library", library)]
  let candidates: [String] = ["/usr/lib/x86_64-linux-gnu/libncurses.so.6", "/usr/lib/aarch64-linux-gnu/libncurses.so.6"]
  if let ncurses = candidates.first(where: { access($0, R_OK) == 0 }), !LoadedImages.snapshot().contains(where: { $0.name.hasPrefix("libncurses") }) {
    subjects.append(("libncurses.so.6 (+ libtinfo)", ncurses))
  }
  let cycles = 4000
  var rows: [[String]] = []
  var worst = 0.0
  var measured: [(label: String, runs: [(libc: Double, bare: Double, observed: Double, events: Int)])] = []
  for (label, path) in subjects {
    // Five measurements, each row the median of its five: one measurement swings by several percent
    // with what else the machine does.
    measured.append((label, (0..<5).map { _ in measureCycle(path, cycles: cycles) }))
  }
  // The crash-time image table, once started, stays for the process: measured after the rows above.
  CrashReporter.startImageTable()
  let histories = subjects.map { _, path in (0..<5).map { _ in measureHistory(path, cycles: cycles) } }
  for ((label, runs), history) in zip(measured, histories) {
    let libc = median(runs.map(\.libc)), bare = median(runs.map(\.bare)), observed = median(runs.map(\.observed))
    let events = runs[0].events
    func overhead(_ value: Double) -> String { "\(rounded((value - libc) / libc * 100))%" }
    worst = max(worst, (observed - libc) / libc * 100)
    rows.append(["\(label): libc dlopen+dlclose", formatDuration(libc), "-"])
    rows.append(["\(label): through the interposers, no observers", formatDuration(bare), overhead(bare)])
    rows.append(["\(label): with onAdd + onRemove observers (\(events) events per cycle)", formatDuration(observed), overhead(observed)])
    let tableLibc = median(history.map(\.libc))
    func tableOverhead(_ value: Double) -> String { "\(rounded((value - tableLibc) / tableLibc * 100))%" }
    let without = median(history.map(\.without)), with = median(history.map(\.with))
    rows.append(["\(label): with the crash image table, no unloaded history (libc: \(formatDuration(tableLibc)))",
                 formatDuration(without), tableOverhead(without)])
    rows.append(["\(label): with the crash image table and its unloaded history (16 kept)", formatDuration(with), tableOverhead(with)])
  }
  _ = unlink(library); _ = unlink(source); _ = rmdir(directory)
  let cycleTable = BenchmarkTable(
    title: "Observer cost on a dlopen+dlclose cycle",
    notes: "One `dlopen(RTLD_NOW)` + `dlclose`: libc's directly (`il_real_dlopen`), through imagelog's interposers "
      + "with no observer, and with an add and a remove observer registered (every cycle delivers its add and "
      + "remove events synchronously); then, after `CrashReporter.startImageTable()` (the crash handler's image table, fed by "
      + "its own observers: the Binary Images line formatted at each add), with `keepUnloadedImages(0)` and with the default 16, "
      + "whose removal copies the image (path, build-id, times, thread) into the history a crash report's Unloaded Images "
      + "come from; those two alternate in blocks the same way, with libc's median of their own run beside them. Each contender's cycle alternates with libc's, \(cycles) pairs each in 10 blocks that alternate between the two contenders, and which of a pair runs first alternates too; its time is libc's median plus the median of the paired differences. Each row is the median of five such measurements.",
    header: ["Cycle", "Time", "Overhead vs libc"],
    rows: rows)
  return [snapshotTable, cycleTable]
}

/// The median dlopen+dlclose cycle of `path` with libc's functions, and what the interposers cost
/// without and with observers. Each contender's cycle alternates with libc's in one loop and its cost
/// is the median of the paired differences, so the machine's noise (other processes on these cores)
/// falls on both sides of each pair alike.
private func measureCycle(_ path: String, cycles: Int) -> (libc: Double, bare: Double, observed: Double, events: Int) {
  func swapped(_ first: Double, _ second: Double) -> (Double, Double) { (second, first) }
  func realCycle() -> Double { timedCycle(path, throughInterposers: false) }
  func wrappedCycle() -> Double { timedCycle(path, throughInterposers: true) }
  var libcSamples: [Double] = [], bareExtra: [Double] = [], observedExtra: [Double] = []
  _ = realCycle(); _ = wrappedCycle()
  let counter = Counter()
  var events = 0
  // Blocks without and with observers alternate, so a slow drift of the machine (frequency, other
  // processes) falls on both contenders alike; within a block each cycle is paired with libc's.
  let blocks = 10
  for _ in 0..<blocks {
    for pair in 0..<cycles / blocks {
      // Which of the two runs first alternates: the second of a pair finds warmer caches.
      let (libc, wrapped) = pair.isMultiple(of: 2) ? (realCycle(), wrappedCycle()) : swapped(wrappedCycle(), realCycle())
      libcSamples.append(libc)
      bareExtra.append(wrapped - libc)
    }
    let add = LoadedImages.onAdd { _ in counter.bump() }
    let remove = LoadedImages.onRemove { _ in counter.bump() }
    for pair in 0..<cycles / blocks {
      let libc: Double, wrapped: Double
      let before = counter.value
      if pair.isMultiple(of: 2) {
        libc = realCycle()
        LoadedImages.refresh()  // untimed: libc's cycle bypassed the hook; catch up so the next cycle starts clean
        wrapped = wrappedCycle()
      } else {
        wrapped = wrappedCycle()
        libc = realCycle()
        LoadedImages.refresh()
      }
      events = counter.value - before
      libcSamples.append(libc)
      observedExtra.append(wrapped - libc)
    }
    add.cancel()
    remove.cancel()
  }
  let libc = median(libcSamples)
  return (libc, libc + median(bareExtra), libc + median(observedExtra), events)
}

/// The median dlopen+dlclose cycle of `path` with libc's functions, and through the interposers with
/// the crash image table started and no unloaded history kept, then with the history (16 images):
/// blocks of the two alternate, each cycle paired with libc's, as in `measureCycle`.
private func measureHistory(_ path: String, cycles: Int) -> (libc: Double, without: Double, with: Double) {
  func realCycle() -> Double { timedCycle(path, throughInterposers: false) }
  func wrappedCycle() -> Double { timedCycle(path, throughInterposers: true) }
  var libcSamples: [Double] = [], withoutExtra: [Double] = [], withExtra: [Double] = []
  _ = realCycle(); _ = wrappedCycle()
  let blocks = 10
  for block in 0..<blocks * 2 {
    let keeping = block.isMultiple(of: 2) ? 0 : 16
    CrashReporter.keepUnloadedImages(keeping)
    for pair in 0..<cycles / blocks {
      let libc: Double, wrapped: Double
      if pair.isMultiple(of: 2) {
        libc = realCycle()
        LoadedImages.refresh()  // untimed, as in measureCycle
        wrapped = wrappedCycle()
      } else {
        wrapped = wrappedCycle()
        libc = realCycle()
        LoadedImages.refresh()
      }
      libcSamples.append(libc)
      if keeping == 0 { withoutExtra.append(wrapped - libc) } else { withExtra.append(wrapped - libc) }
    }
  }
  CrashReporter.keepUnloadedImages(16)
  let libc = median(libcSamples)
  return (libc, libc + median(withoutExtra), libc + median(withExtra))
}

/// The seconds one `dlopen(RTLD_NOW)` + `dlclose` of `path` takes: libc's own functions
/// (`il_real_dlopen`), or through imagelog's interposers (and whatever observes them).
private func timedCycle(_ path: String, throughInterposers: Bool) -> Double {
  let duration = ContinuousClock().measure {
    if throughInterposers {
      if let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) { _ = dlclose(handle) }
    } else if let handle = il_real_dlopen(path, RTLD_NOW | RTLD_LOCAL) {
      _ = il_real_dlclose(handle)
    }
  }
  return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

private final class Counter: Sendable {
  private let count = Atomic(0)
  func bump() { count.add(1, ordering: .relaxed) }
  var value: Int { count.load(ordering: .relaxed) }
}
