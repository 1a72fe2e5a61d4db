import ImageLogTestSupport
import ImageReaders
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources

/// imagelog's crash document read back (`CrashDocumentParser`): what was written is read into the same
/// snapshot facts, and a document cut short or with bytes changed only throws, never traps.
@Suite struct CrashDocumentReaderTests {
  @Test func readBackKeepsTheFacts() throws {
    let report = try ReportParser.parse(ReportParserTests.appleCrash)
    let read = try ReportParser.parse(report.formatted(.json))
    #expect(read.format == .appleCrash)
    #expect(read.process == report.process)
    #expect(read.threads.map(\.name) == report.threads.map(\.name))
    #expect(read.threads.map(\.crashed) == report.threads.map(\.crashed))
    #expect(read.threads.map(\.registers) == report.threads.map(\.registers))
    #expect(read.threads.map { $0.frames.map(\.address) } == report.threads.map { $0.frames.map(\.address) })
    #expect(read.threads.map { $0.frames.map(\.isReturnAddress) } == report.threads.map { $0.frames.map(\.isReturnAddress) })
    #expect(read.threads.map { $0.frames.map(\.imageIndex) } == report.threads.map { $0.frames.map(\.imageIndex) })
    #expect(read.images.map(\.name) == report.images.map(\.name))
    #expect(read.images.map(\.path) == report.images.map(\.path))
    #expect(read.images.map(\.loadAddress) == report.images.map(\.loadAddress))
    #expect(read.images.map(\.endAddress) == report.images.map(\.endAddress))
    #expect(read.images.map(\.identity) == report.images.map(\.identity))
    // The report's own names, which only its text held, come from the document.
    let names = { (snapshot: ProcessSnapshot) in snapshot.threads.indices.flatMap { thread in
      snapshot.threads[thread].frames.map { snapshot.reportedFunction(of: $0) }
    } }
    #expect(names(read) == names(report))
    #expect(names(read).contains { $0?.name == "__pthread_kill" })
  }

  /// The image timeline (issue 39) read back: the same events, in order; a kind that is neither is refused.
  @Test func timelineReadBack() throws {
    var report = try ReportParser.parse(ReportParserTests.appleCrash)
    report.imageTimeline = [
      .init(kind: .loaded, name: "libplugin.so", baseAddress: 0x7f00_0000_0000, crashOffsetNanoseconds: -15_200_000, tid: 4),
      .init(kind: .unloaded, name: "lib \"odd\".so", baseAddress: 0x7f00_0000_0000, crashOffsetNanoseconds: -3_200_000,
            loadedForNanoseconds: 12_000_000),
    ]
    let document = report.formatted(.json)
    #expect(try ReportParser.parse(document).imageTimeline == report.imageTimeline)
    let odd = document.replacing("\"kind\":\"loaded\"", with: "\"kind\":\"mapped\"")
    #expect(odd != document)
    #expect(throws: ReportError.self) { try ReportParser.parse(odd) }
  }

  @Test func truncationsAndBitFlipsOnlyThrow() throws {
    let document = Array(try ReportParser.parse(ReportParserTests.appleCrash).formatted(.json).utf8)
    var random = SeededGenerator(seed: 0x36)
    var refused = 0
    for _ in 0..<400 {
      var bytes = Array(document.prefix(Int.random(in: document.count / 2...document.count, using: &random)))
      if let index = bytes.indices.randomElement(using: &random) { bytes[index] ^= 1 << UInt8.random(in: 0...6, using: &random) }
      do { _ = try ReportParser.parse(String(decoding: bytes, as: UTF8.self)) } catch { refused += 1 }
    }
    #expect(refused > 0)  // a cut document is refused with its reason, not read as something else
  }
}
