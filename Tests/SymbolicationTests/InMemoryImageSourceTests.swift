import Glibc
import ImageLog
import ImageLogTestSupport
import ImageReaders
import Testing
@testable import Snapshot
@testable import SnapshotSources
@testable import Symbolication

/// A source that reads a process's memory attaches the images only that memory holds (the vDSO) to its
/// snapshot itself, so symbolication names their frames with no copy made by the caller: a live
/// capture and a core. The bytes are held to readelf's reading of them.
@Suite struct InMemoryImageSourceTests {
  /// The build-id `readelf -n` finds in `bytes`, written to a file in `directory`.
  static func readelfBuildID(_ bytes: [UInt8], in directory: String) throws -> String? {
    let path = directory + "/image.so"
    try writeFile(path, bytes: bytes)
    let run = try runTool(["readelf", "-n", path])
    return run.output.split(separator: "\n").first { $0.contains("Build ID:") }
      .map { String($0.split(separator: " ").last ?? "") }
  }

  /// The snapshot's in-memory images are its images that exist only in memory, each with the build-id
  /// readelf reads from the bytes kept.
  static func expectInMemoryImages(_ snapshot: ProcessSnapshot, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let onlyInMemory = snapshot.images.compactMap(\.loaded).filter { $0.existsOnlyInMemory && $0.buildID != nil }
    try #require(!onlyInMemory.isEmpty, "the source lists the vDSO: \(snapshot.images.map(\.name))", sourceLocation: sourceLocation)
    #expect(snapshot.inMemoryImages.map(\.buildID) == onlyInMemory.compactMap(\.buildID), sourceLocation: sourceLocation)
    let directory = try makeTemporaryDirectory("imagelog-in-memory")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    for image in snapshot.inMemoryImages {
      #expect(try Self.readelfBuildID(image.bytes, in: directory) == image.buildID.description, "\(image.path)",
              sourceLocation: sourceLocation)
    }
  }

  @Test(.enabled(if: haveTool("readelf"), "needs readelf"))
  func liveCaptureKeepsTheVDSO() throws {
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let capture = try ProcessSnapshot.capture(pid: child.pid)
    try Self.expectInMemoryImages(capture.snapshot)
  }

  /// gdb's core of a running process (the repository's fixture cores have no vDSO build-id).
  @Test(.enabled(if: haveTool("readelf") && haveTool("gcore"), "needs readelf and gcore (gdb)"))
  func coreKeepsTheVDSO() throws {
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let directory = try makeTemporaryDirectory("imagelog-in-memory-core")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let gcore = try runTool(["gcore", "-o", directory + "/core", String(child.pid)])
    let path = directory + "/core.\(child.pid)"
    try #require(gcore.status == 0 && access(path, R_OK) == 0, "gcore: \(gcore.error)")
    let dump = try CoreDump(path: path)
    try Self.expectInMemoryImages(ProcessSnapshot.core(dump).snapshot)
  }
}
