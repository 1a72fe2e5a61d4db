#if canImport(Glibc)
internal import Glibc
#endif
import Synchronization

extension FileCommand {
  /// How many threads read files: one per processor up to four, and one for short lists, where
  /// starting a thread costs more than it saves. The environment variable `IMAGELOG_THREADS` sets the
  /// number (1 to 16) for long lists (`make bench` shows the one-thread figure with it).
  static func readerThreads(for fileCount: Int) -> Int {
    guard fileCount >= 16 else { return 1 }
    if let text = getenv("IMAGELOG_THREADS"), let forced = Int(String(cString: text)), (1...16).contains(forced) {
      return forced
    }
    let processors = sysconf(Int32(_SC_NPROCESSORS_ONLN))
    return max(1, min(4, processors, fileCount / 8))
  }
}

/// Runs `work(0..<count)` on `threads` threads (the calling thread is one of them) and calls `consume`
/// on the calling thread with every result in index order, each as soon as it and all before it are
/// done. Indices are claimed one at a time, so a slow file does not hold up a whole share.
func forEachInOrder<Result: Sendable>(count: Int, threads: Int, work: @escaping @Sendable (Int) -> Result,
                                      consume: (Int, Result) -> Void) {
  guard threads > 1, count > 1 else {
    for index in 0..<count { consume(index, work(index)) }
    return
  }
  let shared = OrderedResults<Result>(count: count, work: work)
  var helpers: [pthread_t] = []
  for _ in 1..<threads {
    if let thread = startThread({ shared.runUntilDone() }) { helpers.append(thread) }
  }
  var next = 0
  func drain() {
    while let result = shared.take(next) {
      consume(next, result)
      next += 1
    }
  }
  while shared.runOne() { drain() }
  for thread in helpers { pthread_join(thread, nil) }
  drain()
}

/// Starts a thread running `body`; nil when the system would not start one (the caller does the work).
private func startThread(_ body: @escaping @Sendable () -> Void) -> pthread_t? {
  var thread = pthread_t()
  let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
  let started = pthread_create(&thread, nil, { context in
    // The thread owns the body: takeRetainedValue balances the passRetained that made `context`.
    guard let context else { return nil }
    Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().body()
    return nil
  }, context)
  guard started == 0 else {
    Unmanaged<ThreadBody>.fromOpaque(context).release()  // the thread never ran
    return nil
  }
  return thread
}

private final class ThreadBody: Sendable {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
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
