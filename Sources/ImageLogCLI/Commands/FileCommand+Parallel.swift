#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Synchronization

extension FileCommand {
  /// How many threads read files, and whether they start at once. Lists of `parallelFileCount` files or
  /// more are read on one thread more than there are processors (four at most), started at once: a
  /// file in the page cache costs a few system calls and a parse, and one thread more than processors
  /// keeps both busy while the other waits in a system call or for the printing thread (the figures
  /// for 1, 2 and 3 threads are in BENCHMARKS.md). Shorter lists start on the calling thread
  /// alone, and the others join when the files turn out slow to read (cold files, network folders).
  /// One processor: one thread. `IMAGELOG_THREADS` (1 to 16) sets the number and starts them at once,
  /// for lists of 16 files or more (tests; `make bench` shows the one-thread figure with it).
  static func readerThreads(for fileCount: Int) -> (count: Int, atOnce: Bool) {
    guard fileCount >= 16 else { return (1, false) }
    if let text = getenv("IMAGELOG_THREADS"), let forced = Int(String(cString: text)), (1...16).contains(forced) {
      return (forced, true)
    }
    let processors = WorkerThread.processorCount
    guard processors > 1 else { return (1, false) }
    if fileCount >= parallelFileCount { return (min(4, processors + 1), true) }
    return (max(1, min(4, processors, fileCount / 8)), false)
  }

  /// From this many files on, the reader threads start at once (`readerThreads`).
  static let parallelFileCount = 64
}

/// Runs `work(0..<count)` on up to `threads` threads (the calling thread is one of them) and calls
/// `consume` on the calling thread with every result in index order, each as soon as it and all before
/// it are done. Indices are claimed one at a time, so a slow file does not hold up a whole share.
/// Unless `atOnce`, the other threads start only when items `warmUp` to `probe` took more than
/// `slowItem` nanoseconds each on average (then they help with the rest); the first items also pay
/// for the process's first use of code and types, so they are not timed.
func forEachInOrder<Result: Sendable>(count: Int, threads: Int, atOnce: Bool = true, warmUp: Int = 16,
                                      probe: Int = 64, slowItem: Int = 60_000,
                                      work: @escaping @Sendable (Int) -> Result, consume: (Int, Result) -> Void) {
  guard threads > 1, count > 1, atOnce || count > probe else {
    for index in 0..<count { consume(index, work(index)) }
    return
  }
  let shared = OrderedResults<Result>(count: count, work: work)
  var helpers: [WorkerThread] = []
  func startHelpers() {
    for _ in 1..<threads {
      if let thread = WorkerThread.start({ shared.runUntilDone() }) { helpers.append(thread) }
    }
  }
  if atOnce { startHelpers() }
  var started = 0
  var next = 0
  func drain() {
    while let result = shared.take(next) {
      consume(next, result)
      next += 1
    }
  }
  var ran = 0
  while shared.runOne() {
    drain()
    ran += 1
    if ran == warmUp && !atOnce { started = monotonicNanoseconds() }
    if ran == probe && helpers.isEmpty && !atOnce && monotonicNanoseconds() - started > (probe - warmUp) * slowItem {
      startHelpers()
    }
  }
  for thread in helpers { thread.join() }
  drain()
}

/// The shared state of `forEachInOrder`: the next index to claim and the finished results not yet consumed.
private final class OrderedResults<Result: Sendable>: Sendable {
  private let next = Atomic<Int>(0)
  private let count: Int
  private let work: @Sendable (Int) -> Result
  private let done: Mutex<[Result?]>

  init(count: Int, work: @escaping @Sendable (Int) -> Result) {
    self.count = count
    self.work = work
    done = Mutex([Result?](repeating: nil, count: count))
  }

  /// Claims and runs one index; false when none was left.
  func runOne() -> Bool {
    let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
    guard index < count else { return false }
    let result = work(index)
    done.withLock { $0[index] = result }
    return true
  }

  func runUntilDone() { while runOne() {} }

  /// The result for `index` if it is done (and `index` in range), moved out.
  func take(_ index: Int) -> Result? {
    guard index < count else { return nil }
    return done.withLock { results in
      let result = results[index]
      results[index] = nil
      return result
    }
  }
}
