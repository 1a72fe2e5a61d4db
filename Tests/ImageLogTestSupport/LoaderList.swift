import Glibc
import Synchronization
import Testing

/// Gives a test the process's loader list to itself: while it runs, no other test carrying this trait
/// runs, in any suite or test target of the test product.
///
/// Swift Testing runs every test of the product in parallel in one process, and `.serialized` orders
/// only the tests of one suite, so it cannot keep a test in one suite from loading a library while a
/// test in another compares two snapshots. Every test that loads or unloads libraries in this process,
/// and every test that compares a snapshot of the loader's list with anything (/proc/self/maps, another
/// snapshot, a tool's view, the crash table), or reads an image's memory through a snapshot's
/// addresses, carries `.loaderList`. Tests without it run alongside as before.
///
/// Waiting tests suspend (they hold no thread of the pool), so a long holder cannot starve the
/// others of threads. The lock is taken per test case and is reentrant within its task, so the trait
/// may sit on a suite and on a test of it at once.
public struct LoaderListTrait: TestTrait, SuiteTrait, TestScoping {
  public var isRecursive: Bool { true }

  public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
    testCase == nil ? nil : self  // around each test case, never around a whole suite
  }

  public func provideScope(for test: Test, testCase: Test.Case?,
                           performing function: @Sendable () async throws -> Void) async throws {
    if Self.isHeld { return try await function() }
    await loaderListGate.acquire()
    defer { loaderListGate.release() }
    _ = Self.lazilyLoadedLibraries
    try await Self.$isHeld.withValue(true) { try await function() }
  }

  @TaskLocal static var isHeld = false

  /// The libraries the code under test loads with `dlopen` the first time it needs them, from tests
  /// that do not carry the trait (the DWARF reader's decompressors: libz and libzstd). They are loaded
  /// and kept before the first `.loaderList` test runs, under the lock, so a later lazy load only finds
  /// them loaded and cannot change the list under a comparison. Absent ones are simply not loaded.
  static let lazilyLoadedLibraries: Int = ["libz.so.1", "libzstd.so.1"].filter { (name: String) in
    dlopen(name, RTLD_NOW | RTLD_LOCAL) != nil  // the handles are kept open: never dlclosed
  }.count
}

extension Trait where Self == LoaderListTrait {
  /// The test (or each test of the suite) runs while no other `.loaderList` test runs.
  public static var loaderList: Self { LoaderListTrait() }
}

/// A first-come first-served lock whose waiters suspend instead of blocking a thread.
final class AsyncGate: Sendable {
  private struct State: ~Copyable {
    var busy = false
    var waiters: [CheckedContinuation<Void, Never>] = []
  }
  private let state = Mutex(State())

  func acquire() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let now = state.withLock { state -> Bool in
        if state.busy { state.waiters.append(waiter); return false }
        state.busy = true
        return true
      }
      if now { waiter.resume() }
    }
  }

  func release() {
    let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
      if state.waiters.isEmpty { state.busy = false; return nil }
      return state.waiters.removeFirst()  // stays busy: handed over
    }
    next?.resume()
  }
}

let loaderListGate = AsyncGate()
