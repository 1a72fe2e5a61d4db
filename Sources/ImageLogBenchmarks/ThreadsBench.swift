internal import Glibc
import ImageLog
import Synchronization

// `imagelog pid --threads PID` against `eu-stack -p PID` on the same live processes: a C program
// (Tests/Programs/process-threads.c, -O2 -fomit-frame-pointer) with 10 and with 200 threads, each
// blocked in a known call. Same answers first (thread ids, and each thread's functions in order), then
// the time of a whole run of each tool, and how long imagelog kept the process stopped.

func threadsBenchmarks() throws -> [BenchmarkTable] {
  guard haveTool("eu-stack"), haveTool("cc") else { throw BenchError("eu-stack (elfutils) and cc are needed") }
  let imagelog = benchSiblingExecutable("imagelog")
  guard access(imagelog, X_OK) == 0 else { throw BenchError("\(imagelog) is not built") }
  let directory = try benchTemporaryDirectory()
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let program = directory + "/process-threads"
  guard try runProcess(["cc", "-O2", "-fomit-frame-pointer", "-g", "-pthread", "Tests/Programs/process-threads.c",
                        "-o", program], discardOutput: true).status == 0 else {
    throw BenchError("cc failed on Tests/Programs/process-threads.c (run from the package root)")
  }
  var rows: [[String]] = []
  let iterations = 41
  for threadCount in [10, 200] {
    let target = try BenchChild([program, String(threadCount - 1)])
    defer { target.stop() }
    try target.wait(for: "ready")
    try waitForBlockedThreads(target.pid, count: threadCount)
    let pid = String(target.pid)
    // Same answers: names from the symbol tables as eu-stack gives them (no DWARF lines, not demangled).
    let ours = try runProcess([imagelog, "pid", "--threads", pid, "--no-lines", "--demangle", "none"])
    let theirs = try runProcess(["eu-stack", "-p", pid])
    let ourStacks = stacksOfOurReport(ours.output), theirStacks = stacksOfEuStack(theirs.output)
    let same = ours.status == 0 && ourStacks.count == threadCount && ourStacks.map(\.tid) == theirStacks.map(\.tid)
      && zip(ourStacks, theirStacks).allSatisfy { $0.functions == $1.functions }
    let differing = zip(ourStacks, theirStacks).filter { $0.functions != $1.functions }.count
    // Like for like: eu-stack names functions from the symbol tables; so does --no-lines. Both write to
    // /dev/null, and their runs alternate, so that each sees the machine as the other does. The default
    // run (with lines) is timed in rounds of its own: the run after one of it (which maps and frees
    // tens of MB) was slower, and interleaved it would have slowed one of the two compared.
    let runs = try interleavedRuns([
      { _ = try runProcess([imagelog, "pid", "--threads", pid, "--no-lines"], discardOutput: true) },
      { _ = try runProcess(["eu-stack", "-p", pid], discardOutput: true) },
    ], iterations: iterations).wall
    let (ourTime, theirTime) = (median(runs[0]), median(runs[1]))
    func spread(_ times: [Double]) -> String {
      formatDuration(percentile(times, 25)) + " – " + formatDuration(percentile(times, 75))
    }
    let uncachedTime = try medianSeconds(iterations: 21) {
      _ = try runProcess([imagelog, "pid", "--threads", pid, "--no-cache"], discardOutput: true)
    }
    // A first run with the cache starts its builders; the timed runs answer from what they built.
    _ = try runProcess([imagelog, "pid", "--threads", pid], discardOutput: true)
    try awaitCacheBuilders()
    let fullTime = try medianSeconds(iterations: 21) {
      _ = try runProcess([imagelog, "pid", "--threads", pid], discardOutput: true)
    }
    // How long the process was stopped, from the reports' Stopped: lines (runs of their own).
    var stopped: [Double] = []
    for _ in 0..<iterations {
      let run = try runProcess([imagelog, "pid", "--threads", pid, "--no-lines"])
      if let line = run.output.split(separator: "\n").first(where: { $0.hasPrefix("Stopped:") }),
         let value = Double(line.dropFirst("Stopped:".count).drop { $0 == " " }.dropLast(3)) {
        stopped.append(value / 1000)
      }
    }
    stopped.sort()
    let medianStop = stopped.isEmpty ? 0 : stopped[stopped.count / 2]
    rows.append(["\(threadCount) threads", formatDuration(ourTime), formatDuration(theirTime), "\(rounded(theirTime / ourTime))x",
                 spread(runs[0]), spread(runs[1]),
                 formatDuration(uncachedTime), formatDuration(fullTime),
                 formatDuration(medianStop), formatDuration(medianStop / Double(threadCount)),
                 same ? "yes" : "NO (\(ourStacks.count) vs \(theirStacks.count) threads, \(differing) differ)"])
  }
  return [BenchmarkTable(
    title: "imagelog pid --threads vs eu-stack -p",
    notes: "A C program built -O2 -fomit-frame-pointer (Tests/Programs/process-threads.c), its threads blocked in read, "
      + "nanosleep and pthread_cond_wait; medians of \(iterations) interleaved rounds of a whole run of each tool on the same live process, "
      + "eu-stack as it does by default (function names from the symbol tables) against imagelog with --no-lines (the "
      + "same: function names from the symbol tables). Beside them, from 21 runs of its own after those (a run right after "
      + "one of it was slower, so it is not interleaved with the two compared), imagelog's default: also file:line and "
      + "inlined frames from DWARF, here libc6-dbg's, which eu-stack does not read: with --no-cache (read from the "
      + "DWARF each time), and with the symbol cache a first run filled (its builders awaited). The percentiles show how far the "
      + "runs of each tool spread in this one run of the benchmark. \"Stopped\": the report's Stopped: line, from the first thread's interrupt to the last "
      + "thread's release (all threads are stopped together, so each one is stopped that long); \"per thread\" divides it "
      + "by the thread count. \"Same\": the same thread ids in the same order and, in each thread, the same functions in "
      + "the same order (imagelog with --no-lines --demangle none; symbol versions and glibc's __GI_/__libc_/_ alias "
      + "prefixes aside).",
    header: ["process", "imagelog pid --threads --no-lines", "eu-stack -p", "speed-up",
             "imagelog, 25th – 75th percentile", "eu-stack, 25th – 75th percentile",
             "imagelog pid --threads (lines, --no-cache)", "imagelog pid --threads (lines, cache)",
             "stopped", "stopped per thread", "same"],
    rows: rows)]
}

/// How long `waitForBlockedThreads` waits at most: far longer than a small program takes to start its threads.
private let blockedThreadsDeadline: Duration = .seconds(60)

/// Waits (up to `blockedThreadsDeadline`) until `pid` has `count` threads, each asleep in a system call.
func waitForBlockedThreads(_ pid: Int32, count: Int) throws {
  let clock = ContinuousClock()
  let deadline = clock.now + blockedThreadsDeadline
  while clock.now < deadline {
    let tids = (try? runProcess(["ls", "/proc/\(pid)/task"]).output.split(separator: "\n")) ?? []
    if tids.count == count, tids.allSatisfy({ tid in
      let stat = (try? benchReadFile("/proc/\(pid)/task/\(tid)/stat")).map { String(decoding: $0, as: UTF8.self) } ?? ""
      let syscall = (try? benchReadFile("/proc/\(pid)/task/\(tid)/syscall")).map { String(decoding: $0, as: UTF8.self) } ?? ""
      return stat.contains(") S ") && Int(syscall.split(separator: " ").first ?? "") != nil
    }) { return }
    var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
    nanosleep(&pause, nil)
  }
  throw BenchError("pid \(pid) never had \(count) threads asleep")
}

private struct ThreadStack { var tid: Int32; var functions: [String] }

/// A function name as both tools' symbol tables give it: without its symbol version, and without
/// glibc's `__GI_`, `__libc_` and `_` alias prefixes (eu-stack's `read` is the symbol table's `__read`).
private func canonicalFunction(_ name: Substring) -> String {
  var name = String(name.prefix { $0 != "@" })
  while true {
    if name.hasPrefix("__GI_") { name.removeFirst(5) } else if name.hasPrefix("__libc_") { name.removeFirst(7) }
    else if name.hasPrefix("_"), name.count > 1 { name.removeFirst() } else { break }
  }
  return name
}

/// Each thread of an imagelog report: `Thread N:  tid T` then frame lines `N   image   0xADDR name + off`.
private func stacksOfOurReport(_ text: String) -> [ThreadStack] {
  var stacks: [ThreadStack] = []
  for line in text.split(separator: "\n") {
    let words = line.split(separator: " ")
    if line.hasPrefix("Thread "), let tid = words.firstIndex(of: "tid"), tid + 1 < words.count {
      stacks.append(ThreadStack(tid: Int32(words[tid + 1]) ?? -1, functions: []))
    } else if !stacks.isEmpty, line.first?.isNumber == true {
      if let address = words.firstIndex(where: { $0.hasPrefix("0x") && $0.count == 18 }), address + 1 < words.count {
        stacks[stacks.count - 1].functions.append(canonicalFunction(words[address + 1]))
      }
    } else if line == "Binary Images:" {
      break
    }
  }
  return stacks
}

/// Each thread of eu-stack's output: `TID n:` then `#k  0xADDR name`.
private func stacksOfEuStack(_ text: String) -> [ThreadStack] {
  var stacks: [ThreadStack] = []
  for line in text.split(separator: "\n") {
    if line.hasPrefix("TID "), let tid = Int32(line.dropFirst(4).dropLast()) {
      stacks.append(ThreadStack(tid: tid, functions: []))
    } else if line.hasPrefix("#"), !stacks.isEmpty {
      let words = line.split(separator: " ")
      stacks[stacks.count - 1].functions.append(words.count > 2 ? canonicalFunction(words[2]) : "?")
    }
  }
  return stacks
}

// Set by the measured threads when they first run, and by the maker to wake a watching one.
private let workerRan = Atomic<Bool>(false)
private let wakeWorker = Atomic<Bool>(false)

/// How long the maker of each round sleeps first (under a second), and the longest a round is timed.
private let workerPause: Duration = .milliseconds(2)
private let workerRoundCap: Duration = .milliseconds(50)

/// How soon a worker thread runs while the thread that made it keeps working, as in `pid --threads`,
/// whose main thread makes its file-search thread and later hands it the stacks while it goes on. Two
/// ways against the usual ones: a thread made by `WorkerThread.start` (il_start_thread) against
/// `pthread_create`, and a waiting thread that watches a flag (yielding) against one blocked in a
/// semaphore. Each round the maker sleeps `workerPause` (as it waits on the target's threads), then makes
/// the thread or wakes it, and works (spins) until it has run: timed from the call; capped at `workerRoundCap`.
func workerStartBenchmark() throws -> [BenchmarkTable] {
  guard WorkerThread.processorCount > 1 else { throw BenchError("one processor: no other to start a thread on") }
  var capped = 0
  let clock = ContinuousClock()
  func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }
  func pause() {
    var pause = timespec(tv_sec: 0, tv_nsec: Int(workerPause.components.attoseconds / 1_000_000_000)), rest = timespec()
    while nanosleep(&pause, &rest) != 0 { pause = rest }  // EINTR: the rest
  }
  /// From `go` to the thread's first step, working meanwhile.
  func timed(_ go: () throws -> Void) rethrows -> Double {
    let begin = clock.now
    try go()
    while !workerRan.load(ordering: .acquiring) {
      if clock.now - begin > workerRoundCap { capped += 1; break }
    }
    return seconds(clock.now - begin)
  }
  /// A thread made after the pause by `start`, which returns its join.
  func started(_ start: () throws -> () -> Void) throws -> Double {
    workerRan.store(false, ordering: .relaxed)
    pause()
    var join: () -> Void = {}
    let elapsed = try timed { join = try start() }
    join()
    return elapsed
  }
  /// A thread made before the pause, which waits as `wait` does, woken by `wake` after it.
  func woken(wait: @escaping @Sendable () -> Void, wake: () -> Void) throws -> Double {
    workerRan.store(false, ordering: .relaxed)
    wakeWorker.store(false, ordering: .relaxed)
    guard let worker = WorkerThread.start({ wait(); workerRan.store(true, ordering: .releasing) }) else {
      throw BenchError("WorkerThread.start could not start a thread")
    }
    pause()
    let elapsed = timed(wake)
    worker.join()
    return elapsed
  }
  let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
  sem_init(semaphore, 0, 0)
  defer { sem_destroy(semaphore); semaphore.deallocate() }
  nonisolated(unsafe) let shared = semaphore
  let iterations = 101
  var times = [[Double]](repeating: [], count: 4)
  for _ in 0..<iterations {
    times[0].append(try started {
      guard let worker = WorkerThread.start({ workerRan.store(true, ordering: .releasing) }) else {
        throw BenchError("WorkerThread.start could not start a thread")
      }
      return { worker.join() }
    })
    times[1].append(try started {
      var thread = pthread_t()
      guard pthread_create(&thread, nil, { _ in workerRan.store(true, ordering: .releasing); return nil }, nil) == 0 else {
        throw BenchError("pthread_create could not start a thread")
      }
      return { _ = pthread_join(thread, nil) }
    })
    times[2].append(try woken(wait: { while !wakeWorker.load(ordering: .acquiring) { sched_yield() } },
                              wake: { wakeWorker.store(true, ordering: .releasing) }))
    times[3].append(try woken(wait: { while sem_wait(shared) != 0 {} }, wake: { sem_post(semaphore) }))
  }
  let medians = times.map(median)
  let quartiles = times.map { percentile($0, 75) }  // the slow quarter starts here
  return [BenchmarkTable(
    title: "A worker thread's start while its maker works",
    notes: "Medians of \(iterations) interleaved rounds on \(WorkerThread.processorCount) processors: the maker sleeps \(formatDuration(seconds(workerPause))) "
      + "(as pid --threads waits on the target's threads), then makes the thread or wakes it, and spins until the "
      + "thread has run; timed from that call. Here Linux puts a new thread on the maker's processor, where it waits for "
      + "the maker's time slice to end, and a thread woken from a semaphore often so (the 75th percentile). "
      + "WorkerThread.start (il_start_thread: "
      + "the file search of pid --threads, the readers of imagelog file) makes the thread on another processor, then "
      + "allows it every one; the file search watches for the stacks (yielding) instead of sleeping in a semaphore. "
      + "Rounds capped at \(formatDuration(seconds(workerRoundCap))): \(capped).",
    header: ["", "imagelog's way", "the usual way", "speed-up", "imagelog's way, 75th percentile",
             "the usual way, 75th percentile"],
    rows: [["a new thread: WorkerThread.start / pthread_create", formatDuration(medians[0]), formatDuration(medians[1]),
            "\(rounded(medians[1] / medians[0]))x", formatDuration(quartiles[0]), formatDuration(quartiles[1])],
           ["a waiting thread: watching a flag / sem_wait", formatDuration(medians[2]), formatDuration(medians[3]),
            "\(rounded(medians[3] / medians[2]))x", formatDuration(quartiles[2]), formatDuration(quartiles[3])]])]
}
