import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders

/// An `.ips` report of a real crash (the crash program's frames and images written as Apple's JSON):
/// symbolicated output keeps the JSON and fills `symbol`, `symbolLocation`, `sourceFile`, `sourceLine`
/// with what Swift's backtracer prints for the same crash; `--format crash` gives the classic text.
@Suite(.enabled(if: CrashPrograms.haveCompilers, "needs swiftc and clang to build the crash program"))
struct IPSSymbolicationTests {
  @Test func fillsSymbolsLikeTheBacktracer() throws {
    let backtrace = try ReportParser.parse(try CrashPrograms.crash("null", symbolicate: "off"))
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash("null", symbolicate: "full"))
    var images: [JSONValue] = []
    for image in backtrace.images {
      images.append(.object([
        ("source", .string("P")), ("arch", .string("x86_64")), ("base", .number(String(image.loadAddress))),
        ("size", .number(String((image.endAddress ?? image.loadAddress) - image.loadAddress + 1))),
        ("uuid", .string(BuildID(image.identity?.bytes ?? []).uuid.lowercased())),
        ("path", .string(image.path ?? "")), ("name", .string(image.name)),
      ]))
    }
    let frames: [JSONValue] = backtrace.frames.filter { $0.thread == 0 }.map { frame in
      let base = backtrace.images[frame.imageIndex ?? 0].loadAddress
      return .object([("imageOffset", .number(String(frame.address - base))), ("imageIndex", .number(String(frame.imageIndex ?? 0)))])
    }
    let body = JSONValue.object([
      ("procName", .string("symbolicate-crasher")), ("cpuType", .string("X86-64")), ("faultingThread", .number("0")),
      ("threads", .array([.object([("triggered", .bool(true)), ("id", .number("1")), ("frames", .array(frames))])])),
      ("usedImages", .array(images)),
    ])
    let text = #"{"app_name":"symbolicate-crasher","bug_type":"309","os_version":"Linux"}"# + "\n" + body.serialized(indent: 2)
    let report = try ReportParser.parse(text)
    #expect(report.format == .appleIPS)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)

    let output = result.formatted(.report).split(separator: "\n", maxSplits: 1)
    let symbolicated = try JSONValue.parse(output[1])
    let outFrames = try #require(symbolicated["threads"]?.array?.first?["frames"]?.array)
    #expect(outFrames.map { $0["symbol"]?.string ?? "" } == expected.map(\.name))
    for (index, (frame, expectation)) in zip(outFrames, expected).enumerated() {
      // Apple measures a return address's offset from the address itself, the backtracer from address - 1.
      #expect(frame["symbolLocation"]?.integer == expectation.offset + (index > 0 ? 1 : 0))
      if let location = expectation.location {
        let parts = location.split(separator: ":")
        #expect(frame["sourceFile"]?.string == parts[0].split(separator: "/").last.map(String.init))
        #expect(frame["sourceLine"]?.integer == Int(parts[1]))
      }
    }
    // Everything else is as it came.
    var stripped = symbolicated
    if case .array(var threads)? = stripped["threads"] {
      threads[0].set("frames", .array(outFrames.map { frame in
        var copy = frame
        for key in ["symbol", "symbolLocation", "sourceFile", "sourceLine"] { copy.remove(key) }
        return copy
      }))
      stripped.set("threads", .array(threads))
    }
    #expect(stripped == body)

    let classic = result.formatted(.crash)
    #expect(classic.contains("Thread 0 Crashed:"))
    #expect(classic.contains("Binary Images:"))
    for expectation in expected { #expect(classic.contains(" \(expectation.name) + ")) }
    // The classic text reads back as a report with the same frames and images.
    let reread = try ReportParser.parse(classic)
    #expect(reread.frames.map(\.address) == report.frames.map(\.address))
    #expect(reread.images.map(\.identity) == report.images.map(\.identity))
  }
}
