import Glibc
import Synchronization
import ImageLogTestSupport
import Testing
@testable import ImageLog

/// `WorkerThread.start`: the body runs once, on a thread of its own, and that thread may run on every
/// processor its maker may (il_start_thread first puts it on another one, then widens it again).
struct WorkerThreadTests {
  /// The calling thread's tid and affinity (`Pid:` and `Cpus_allowed_list:` of /proc/thread-self/status).
  static func threadStatus() -> (tid: String, allowed: String)? {
    let file = fopen("/proc/thread-self/status", "r")
    guard let file else { return nil }
    defer { fclose(file) }
    var tid: String?, allowed: String?
    var buffer = [CChar](repeating: 0, count: 4096)
    while fgets(&buffer, Int32(buffer.count), file) != nil {
      let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
      guard words.count == 2 else { continue }
      if words[0] == "Pid:" { tid = String(words[1]) }
      if words[0] == "Cpus_allowed_list:" { allowed = String(words[1]) }
    }
    guard let tid, let allowed else { return nil }
    return (tid, allowed)
  }

  /// The number of processors in a `Cpus_allowed_list` (`0-3,6,8-9`).
  static func count(_ list: String) -> Int? {
    var total = 0
    for part in list.split(separator: ",") {
      let bounds = part.split(separator: "-").map { Int($0) }
      guard let first = bounds.first ?? nil, let last = bounds.last ?? nil, bounds.count <= 2, first <= last else { return nil }
      total += last - first + 1
    }
    return total
  }

  /// The processors the calling thread may use, as the kernel lists them for it.
  /// A detached thread (pid --threads lets its search thread end on its own once it has said it is
  /// done) runs its body to the end, and ends.
  @Test func aDetachedThreadRunsToItsEnd() throws {
    let seen = Seen()
    let worker = try #require(WorkerThread.start { seen.value.withLock { $0 = .some(Self.threadStatus()) } })
    worker.detach()
    try waitUntil("the detached thread ran") { seen.value.withLock { $0 != nil } }
    let tid = try #require(seen.value.withLock { $0 ?? nil }?.tid)
    try waitUntil("/proc/self/task/\(tid) is gone") { access("/proc/self/task/\(tid)", F_OK) != 0 }
  }

  @Test func processorCountIsTheAffinityMasks() throws {
    let mine = try #require(Self.threadStatus())
    #expect(WorkerThread.processorCount == Self.count(mine.allowed))
  }

  /// What a started thread saw.
  final class Seen: Sendable {
    let value = Mutex<(tid: String, allowed: String)??>(nil)
  }

  @Test func theBodyRunsOnAThreadAllowedWhereItsMakerIs() throws {
    let mine = try #require(Self.threadStatus())
    let seen = Seen()
    let worker = try #require(WorkerThread.start { seen.value.withLock { $0 = .some(Self.threadStatus()) } })
    worker.join()
    let ran = try #require(seen.value.withLock { $0 }, "the body did not run")
    let theirs = try #require(ran, "/proc/thread-self/status unreadable on the worker")
    #expect(theirs.tid != mine.tid)
    #expect(theirs.allowed == mine.allowed)
  }
}
