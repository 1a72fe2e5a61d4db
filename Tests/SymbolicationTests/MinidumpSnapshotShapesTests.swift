import ImageLog
import ImageLogTestSupport
import Snapshot
import SnapshotSources
import Testing

/// `ProcessSnapshot.minidump` over the hostile shapes of issue 35 (`MinidumpShapes`, from the committed
/// writer fixture): what it holds and how it reads the file, counted rather than timed.
@Suite struct MinidumpSnapshotShapesTests {
  static let fixture = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump/writer-x86_64.dmp"
  static let mebibyte = 1 << 20

  /// `bytes` written to a file of the test's own and opened as the CLI opens a dump.
  static func opened(_ bytes: [UInt8], _ body: (FileBytes) throws -> Void) throws {
    let folder = try makeTemporaryDirectory("imagelog-minidump-snapshot")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/shape.dmp", bytes: bytes)
    try body(try FileBytes(path: folder + "/shape.dmp"))
  }

  /// 200 threads naming one 1 MiB stack: the snapshot's threads share one copy of it (the old code made
  /// 200, and 1,000 threads took 1 GiB), each at its thread's address.
  @Test func threadsNamingOneStackShareOneCopy() throws {
    let base = try #require(readFileBytes(Self.fixture))
    let bytes = try #require(MinidumpShapes.replicating(base, threads: 200, modules: 1, stackSize: Self.mebibyte,
                                                        stackAddressStep: UInt64(Self.mebibyte)))
    try Self.opened(bytes) { file in
      let snapshot = try ProcessSnapshot.minidump(file)
      #expect(snapshot.threads.count == 200 && snapshot.threads.allSatisfy { $0.stack?.bytes.count == Self.mebibyte })
      let held = MinidumpShapes.heldBytes(snapshot.threads.map { $0.stack?.bytes })
      #expect(held.distinct == Self.mebibyte, "\(held.distinct / Self.mebibyte) MiB held for 200 threads")
      let addresses = snapshot.threads.compactMap { $0.stack?.address }
      #expect(addresses.count == 200 && zip(addresses, addresses.dropFirst()).allSatisfy { $1 - $0 == UInt64(Self.mebibyte) })
    }
  }

  /// 5,000 threads, each with its context of its own as writers lay them out: the dump is fetched from
  /// its file once. Fetched range by range, each of thousands of fetches was looked for among all the
  /// earlier ones (20,000 such threads: 6.8 s of processor time, where 5,000 took 0.7 s).
  @Test func threadsWithTheirOwnContextsFetchTheFileOnce() throws {
    let base = try #require(readFileBytes(Self.fixture))
    let bytes = try #require(MinidumpShapes.replicating(base, threads: 5000, modules: 2, ownContexts: true))
    try Self.opened(bytes) { file in
      let snapshot = try ProcessSnapshot.minidump(file)
      #expect(snapshot.threads.count == 5000 && snapshot.threads.allSatisfy { $0.registers != nil })
      #expect(file.fetchCount == 1, "\(file.fetchCount) fetches")
    }
  }
}
