internal import CImageLogProcess
internal import Glibc
import Synchronization

// Plain POSIX threads for the command-line tool's parallel work (reading files, demangling long
// address lists). Not Dispatch: linking libdispatch into the `imagelog` executable runs its
// initializer at every start-up (it reads /sys/devices/system/cpu/possible twice and asks for the
// CPU affinity), which a run over a few files pays for in full.

/// A started thread that must be joined.
package struct WorkerThread: @unchecked Sendable {
  private let thread: pthread_t

  /// Starts a thread running `body`, on another processor than the caller's when there is one
  /// (`il_start_thread` says why); `nil` when the system would not start one (the caller then does
  /// the work itself).
  package static func start(_ body: @escaping @Sendable () -> Void) -> WorkerThread? {
    var thread = pthread_t()
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    let started = il_start_thread(&thread, { context in
      // The thread owns the body: takeRetainedValue balances the passRetained that made `context`.
      guard let context else { return nil }
      Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().body()
      return nil
    }, context)
    guard started == 0 else {
      Unmanaged<ThreadBody>.fromOpaque(context).release()  // the thread never ran
      return nil
    }
    return WorkerThread(thread: thread)
  }

  /// Waits for the thread to finish. Call once, and not after `detach`.
  package func join() {
    pthread_join(thread, nil)
  }

  /// Lets the thread end on its own, unjoined: for a caller that already knows the thread's work is
  /// done, and would otherwise sleep in `join` while the thread exits. Call once, and not after `join`.
  package func detach() {
    pthread_detach(thread)
  }

  /// How many processors the calling thread may run on (at least 1): its affinity mask, which
  /// `taskset` and cpusets narrow, read without the file `sysconf` reads for the online count.
  package static var processorCount: Int {
    max(1, Int(il_processor_count()))
  }

  /// Calls `body` once for each of `0..<iterations`, on the calling thread and up to `threads - 1`
  /// more, and returns when every call has returned; `DispatchQueue.concurrentPerform` without
  /// Dispatch. Iterations are claimed one at a time, so a slow one holds up only itself.
  package static func perform(iterations: Int, threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let next = NextIteration()
    let work: @Sendable () -> Void = {
      while true {
        let index = next.value.wrappingAdd(1, ordering: .relaxed).oldValue
        guard index < iterations else { return }
        body(index)
      }
    }
    var helpers: [WorkerThread] = []
    for _ in 1..<max(1, min(threads, iterations)) {
      if let helper = start(work) { helpers.append(helper) }
    }
    work()
    for helper in helpers { helper.join() }
  }
}

private final class ThreadBody: Sendable {
  let body: @Sendable () -> Void
  init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

private final class NextIteration: Sendable {
  let value = Atomic<Int>(0)
}

/// CLOCK_MONOTONIC in nanoseconds.
package func monotonicNanoseconds() -> Int {
  var time = timespec()
  clock_gettime(CLOCK_MONOTONIC, &time)
  return time.tv_sec * 1_000_000_000 + time.tv_nsec
}
