import Glibc
import ImageLogTestSupport
import SnapshotSources
import Testing

/// A core read from a pipe (`CoreStream`, what `imagelog core-handler` reads) may be anything: seeded
/// bit flips and overwrites of its headers and notes, and cuts anywhere, over the committed cores.
/// Reading one may throw `CoreStreamError` (typed throws: nothing else), never trap, hang or keep more
/// than its memory limit. Reaching the end is the assertion; the counts show both outcomes happened.
@Suite struct CoreStreamMutationTests {
  static let cores = ["linkmap-x86_64.core", "linkmap-i386.core"].map { "\(packageRoot)/Tests/ImageReadersTests/Fixtures/cores/\($0)" }

  /// Reads `bytes` through a pipe as a core of a process that does not exist (so the memory is the
  /// core's own); true when a snapshot came out.
  static func read(_ bytes: [UInt8], memoryLimit: Int) throws -> Bool {
    var ends: [Int32] = [0, 0]
    try #require(pipe(&ends) == 0)
    defer { close(ends[0]) }
    // The fixtures are smaller than a pipe's buffer: written whole before the reader starts.
    try #require(bytes.count < 65536)
    let wrote = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
    close(ends[1])
    try #require(wrote == bytes.count || bytes.isEmpty)
    let stream = CoreStream(descriptor: ends[0], pid: 4_194_301, limits: CoreStreamLimits(memoryBytes: memoryLimit))
    do {
      let (capture, count) = try stream.read { $0.snapshot.threads.count }
      #expect(capture.snapshot.threads.count == count)
      #expect(stream.bytesRead == bytes.count)
      return true
    } catch {
      return false
    }
  }

  @Test func mutatedAndCutCoresOnlyThrow() throws {
    var rng = SeededGenerator(seed: 0xC057_2026)
    var decoded = 0, rejected = 0
    for path in Self.cores {
      let original = try #require(readFileBytes(path))
      #expect(try Self.read(original, memoryLimit: 1 << 20), "\(path) reads as it is")
      for round in 0..<300 {
        var bytes = original
        // The header, the program headers and the notes lie in the first pages.
        for _ in 0..<(1 + round % 4) {
          let at = Int(rng.next() % UInt64(min(bytes.count, 8192)))
          bytes[at] = round % 2 == 0 ? bytes[at] ^ UInt8(1 << (rng.next() % 8)) : UInt8(truncatingIfNeeded: rng.next())
        }
        if round % 3 == 0 { bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1)))) }
        if try Self.read(bytes, memoryLimit: round % 5 == 0 ? 4096 : 1 << 20) { decoded += 1 } else { rejected += 1 }
      }
    }
    #expect(decoded > 0 && rejected > 0, "\(decoded) decoded, \(rejected) rejected")
  }
}
