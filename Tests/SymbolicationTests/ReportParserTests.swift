import Testing
import ImageLogTestSupport
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders

/// Report layouts as Apple's and Swift's tools write them (shapes from real reports; the addresses and
/// ids are made up), read back field by field.
@Suite struct ReportParserTests {
  static let appleCrash = SampleReports.appleCrash

  static let ips = """
    {"app_name":"MyApp","timestamp":"2026-11-23 09:00:00.00 +0000","bug_type":"309","os_version":"macOS 13.0 (22A380)","name":"MyApp"}
    {
      "procName" : "MyApp",
      "pid" : 4321,
      "procPath" : "/Applications/MyApp.app/Contents/MacOS/MyApp",
      "cpuType" : "ARM-64",
      "exception" : {"type":"EXC_BAD_ACCESS","signal":"SIGSEGV","subtype":"KERN_INVALID_ADDRESS at 0x0000000000000000"},
      "faultingThread" : 1,
      "threads" : [
        {"id":100,"queue":"com.apple.main-thread","frames":[{"imageOffset":4660,"imageIndex":0},{"imageOffset":99,"symbol":"start","symbolLocation":12,"imageIndex":1}]},
        {"id":101,"triggered":true,"frames":[{"imageOffset":5544712,"imageIndex":0},{"imageOffset":17,"imageIndex":7}]}
      ],
      "usedImages" : [
        {"source":"P","arch":"arm64","base":4295016448,"size":5586944,"uuid":"c299a741-488a-3656-a410-a7be59926b13","path":"/Applications/MyApp.app/Contents/MacOS/MyApp","name":"MyApp"},
        {"source":"P","arch":"arm64e","base":6480789504,"size":585728,"uuid":"5e4f7d4a-9b2c-3f1e-8d7a-1b2c3d4e5f60","path":"/usr/lib/dyld","name":"dyld"}
      ]
    }
    """

  static let swiftJSON = """
    Fatal error: boom

    *** Signal 4: Backtracing from 0x7f0000001000... done ***

    { "timestamp": "2026-11-23T08:53:10Z", "kind": "crashReport", "description": "Illegal instruction", "architecture": "x86_64", "threads": [ { "name": "main", "crashed": true, "frames": [ { "kind": "programCounter", "address": "0x00007f0000001000" }, { "kind": "returnAddress", "address": "0x000055550000153e" }, { "kind": "truncated" } ] }, { "frames": [ { "kind": "asyncResumePoint", "address": "0x0000555500001600" } ] } ], "omittedImages": 3, "images": [ { "name": "app", "buildId": "167ddc45f2bbbc485434077cf70e879175008f62", "path": "/tmp/app", "baseAddress": "0x0000555500000000", "endOfText": "0x0000555500002000" }, { "name": "libswiftCore.so", "buildId": "b521f25fdeacf504eca83d97c7308e8fc11be729", "path": "/opt/lib/libswiftCore.so", "baseAddress": "0x00007f0000000000", "endOfText": "0x00007f0000400000" } ], "backtraceTime": 0.01 }
    """

  @Test func swiftBacktraceJSON() throws {
    let report = try ReportParser.parse(Self.swiftJSON)
    #expect(report.format == .swiftBacktraceJSON)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.document?.preamble.hasPrefix("Fatal error: boom\n") == true)
    #expect(report.process.architecture == "x86_64")
    #expect(report.frames.map(\.address) == [0x7f0000001000, 0x55550000153e, 0x555500001600])
    #expect(report.frames.map(\.isReturnAddress) == [false, true, false])
    #expect(report.frames.map(\.imageIndex) == [1, 0, 0])
    #expect(report.threads.map(\.crashed) == [true, false])
    #expect(report.images[1].identity?.hex == "b521f25fdeacf504eca83d97c7308e8fc11be729")
    #expect(report.images[0].endAddress == 0x555500001fff)
  }

  @Test func appleCrashVariants() throws {
    let report = try ReportParser.parse(Self.appleCrash)
    #expect(report.format == .appleCrash)
    #expect(report.process.architecture == "arm64")
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.images.map(\.name) == ["MyApp", "libsystem_kernel.dylib", "Google Chrome Framework",
                                          "libsystem_pthread.dylib", "???", "com.example.app"])
    #expect(report.images.map(\.architecture) == ["arm64", "arm64e", "arm64", nil, nil, nil])
    #expect(report.images.map(\.path) == ["/private/var/containers/Bundle/Application/ABC/MyApp.app/MyApp",
                                          "/usr/lib/system/libsystem_kernel.dylib", "/Applications/Google Chrome.app/Framework",
                                          "/usr/lib/system/libsystem_pthread.dylib", nil, "/Applications/Example.app/Contents/MacOS/Example"])
    #expect(report.images[0].identity?.hex == "c299a741488a3656a410a7be59926b13")
    #expect(report.images[5].identity?.hex == "c299a741488a3656a410a7be59926b13")
    #expect(report.images[4].identity == nil)
    #expect(report.images[1].loadAddress == 0x1a2b10000 && report.images[1].endAddress == 0x1a2b47fff)
    #expect(report.frames.map(\.address) == [0x1a2b3c4d8, 0x10064db08, 0x110002000, 0x1e1c3e0c4])
    #expect(report.frames.map(\.imageIndex) == [1, 0, 2, 3])
    #expect(report.frames.map(\.thread) == [0, 0, 0, 1])
    #expect(report.frames.map(\.isReturnAddress) == [false, true, true, false])
    #expect(report.frames[0].reportedSymbol == "__pthread_kill + 8")
    // An address in no listed image is not given to the all-covering `???` image.
    let stray = try ReportParser.parse(Self.appleCrash.replacingFirst("0x00000001e1c3e0c4 start_wqthread", with: "0x00000009e1c3e0c4 start_wqthread"))
    #expect(stray.frames[3].imageIndex == 3)  // still found by its image column's name
    #expect(report.frames[1].reportedSymbol == nil)
    #expect(report.crashedThreadNumber == 0)
  }

  /// macOS 12+ text (translated from .ips): `Thread 0 Crashed::  Dispatch queue: ...`, addresses
  /// right-aligned without zero padding, `(*)` versions, dashed UUIDs.
  @Test func newStyleThreadsAndFrames() throws {
    let text = """
      Process:               MyApp [1234]
      Code Type:             X86-64 (Native)
      Crashed Thread:        0  Dispatch queue: com.apple.main-thread

      Thread 0 Crashed::  Dispatch queue: com.apple.main-thread
      0   MyApp                         \t       0x10d5c2f50 0x10d5c1000 + 8016
      1   libdyld.dylib                 \t    0x7fff2035c621 start + 1

      Thread 1::  com.apple.NSURLConnectionLoader
      0   libsystem_kernel.dylib        \t    0x7fff2030a2ba mach_msg_trap + 10


      Binary Images:
             0x10d5c1000 -        0x10d5c4fff com.example.MyApp (1.0) <C299A741-488A-3656-A410-A7BE59926B13> /Applications/MyApp.app/Contents/MacOS/MyApp
          0x7fff2035b000 -     0x7fff2035cfff libdyld.dylib (*) <5E4F7D4A-9B2C-3F1E-8D7A-1B2C3D4E5F60> /usr/lib/system/libdyld.dylib
      """
    let report = try ReportParser.parse(text)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.process.architecture == "x86_64")
    #expect(report.threads.map(\.number) == [0, 1])
    #expect(report.threads.map(\.crashed) == [true, false])
    #expect(report.threads.map(\.name) == ["Dispatch queue: com.apple.main-thread", "com.apple.NSURLConnectionLoader"])
    #expect(report.frames.map(\.address) == [0x10d5c2f50, 0x7fff2035c621, 0x7fff2030a2ba])
    #expect(report.frames.map(\.imageIndex) == [0, 1, nil])
    #expect(report.images.map(\.name) == ["com.example.MyApp", "libdyld.dylib"])
  }

  @Test func crashBehindAJSONHeader() throws {
    let header = #"{"app_name":"MyApp","timestamp":"2026-11-23 09:00:00.00 +0000","bug_type":"109","name":"MyApp"}"#
    let report = try ReportParser.parse(header + "\n" + Self.appleCrash)
    #expect(report.format == .appleCrash)
    #expect(report.images.count == 6)
    #expect(report.frames.count == 4)
    #expect(report.frames[1].line == 12)  // lines count from the header line
    #expect(report.document?.ipsHeader?["bug_type"]?.string == "109")
  }

  @Test func ipsReport() throws {
    let report = try ReportParser.parse(Self.ips)
    #expect(report.format == .appleIPS)
    #expect(report.process.architecture == "arm64")
    #expect(report.images.map(\.name) == ["MyApp", "dyld"])
    #expect(report.images[0].loadAddress == 4295016448)
    #expect(report.images[0].endAddress == 4_300_603_391)
    let expected: [UInt64] = [4_295_021_108, 6_480_789_603, 4_300_561_160]  // base + imageOffset
    #expect(report.frames.map(\.address) == expected)
    #expect(report.frames[1].reportedSymbol == "start")
    #expect(report.crashedThreadNumber == 1)
    #expect(report.threads[0].name == "com.apple.main-thread")
    // The frame pointing at an image that is not there is named, not fatal.
    #expect(report.problems == ["threads[1].frames[1]: no usable imageIndex/imageOffset"])
  }

  @Test func ipsOutputKeepsTheJSON() throws {
    let report = try ReportParser.parse(Self.ips)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let text = Symbolicator.symbolicated(report, options: options).formatted(.report)
    let lines = text.split(separator: "\n", maxSplits: 1)
    let header = try JSONValue.parse(lines[0])
    let body = try JSONValue.parse(lines[1])
    #expect(header == (try JSONValue.parsePrefix(Self.ips[...]).0))
    let original = try JSONValue.parse(Self.ips.split(separator: "\n", maxSplits: 1)[1])
    #expect(body == original)  // nothing found to symbolicate: the document is unchanged
  }

  @Test func swiftBacktraceLayout() throws {
    let text = """
      *** Program crashed: Bad pointer dereference at 0x0000000000000000 ***

      Platform: x86_64 Linux (Debian GNU/Linux 12 (bookworm))

      Thread 0 "crasher" crashed:

      0      0x000055851ccfb91c
      1 [ra] 0x000055851ccfb53e
      2 [ra] [thunk] 0x00007f0000001000
      3      ...

      Thread 1 "worker":

      0      0x00007f0000001010

      Registers:

      rax 0x0000000000000000  0

      Images (12 omitted):

      0x000055851ccfa000–0x000055851ccfbd38 167ddc45f2bbbc485434077cf70e879175008f62 crasher      /tmp/my dir/crasher
      0x00007f0000000000–0x00007f0000002000 <no build ID>                            libnone.so   /usr/lib/libnone.so

      Backtrace took 0.00s
      """
    let report = try ReportParser.parse(text)
    #expect(report.format == .swiftBacktrace)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.process.architecture == "x86_64")
    #expect(report.threads.map(\.heading) == [ThreadHeading(number: 0, crashed: true, name: "crasher"), ThreadHeading(number: 1, crashed: false, name: "worker")])
    #expect(report.frames.map(\.address) == [0x55851ccfb91c, 0x55851ccfb53e, 0x7f0000001000, 0x7f0000001010])
    #expect(report.frames.map(\.isReturnAddress) == [false, true, true, false])
    #expect(report.frames.map(\.imageIndex) == [0, 0, 1, 1])
    #expect(report.images[0].path == "/tmp/my dir/crasher")
    #expect(report.images[0].identity?.hex == "167ddc45f2bbbc485434077cf70e879175008f62")
    #expect(report.images[1].identity == nil)
  }

  @Test func addressesNeedImages() throws {
    #expect(throws: ReportError.self) { try ReportParser.parse("0x1234 0x5678\n") }
    let image = ProcessSnapshot.Image(name: "lib", path: "/nonexistent/lib", loadAddress: 0x1000, endAddress: nil,
                                  identity: nil, architecture: nil)
    let report = try ReportParser.parse("0x1234 0x5678\nnot-an-address\n", images: [image])
    #expect(report.format == .addresses)
    #expect(report.frames.map(\.address) == [0x1234, 0x5678])
    #expect(report.frames.map(\.imageIndex) == [0, 0])
    #expect(report.problems == ["line 2: 'not-an-address' is not an address"])
  }
}

/// Garbage, half-written and truncated reports: a `ReportError` or a partial result naming what could
/// not be read, never a crash.
@Suite struct MalformedReportTests {
  @Test(arguments: [
    ("", "not a crash report"),
    ("hello world\n", "not a crash report"),
    ("{\"bug_type\":\"309\"}\n{\"threads\": [", "unreadable .ips body"),
    ("{\"bug_type\":\"309\", \"usedIm", "unreadable .ips header"),
    ("[1,2,3]", "not a crash report"),
    // Nothing to symbolicate in a report of a known kind: the same error (and status) as text without frames.
    ("{\"bug_type\":\"309\"}\n{}\n", "not a crash report: no threads, frames or binary images found in the .ips body (bug_type 309)"),
    ("{\"bug_type\":\"309\"}\n[]\n", "not a crash report: no threads, frames or binary images found"),
    ("{\"bug_type\":\"309\"}\n{\"threads\":[],\"usedImages\":[]}\n", "not a crash report: no threads, frames or binary images found"),
    ("Crashed Thread:  0\n\nThread 0 Crashed:\n", "not a crash report: no threads, frames or binary images found in the crash report"),
  ])
  func rejects(text: String, message: String) {
    do {
      _ = try ReportParser.parse(text)
      Issue.record("parsed: \(text)")
    } catch {
      #expect(error.description.hasPrefix(message), "\(error.description)")
    }
  }

  @Test func brokenLinesAreNamed() throws {
    let text = ReportParserTests.appleCrash.replacingFirst("\t0x000000010064db08 0x100104000 + 5544712", with: "garbage")
      .replacingFirst("0x110000000 - 0x110ffffff", with: "0xZZZ - what")
    let report = try ReportParser.parse(text)
    #expect(report.frames.count == 3)
    #expect(report.images.count == 5)
    try #require(report.problems.count == 2)
    #expect(report.problems[0].hasPrefix("line 12: unreadable frame"))
    #expect(report.problems[1].hasPrefix("line 24: unreadable binary image"))
  }

  @Test func everyTruncationAndByteFlipOnlyThrows() {
    var rng = SeededGenerator(seed: 0x5EED)
    let crashWithHeader = #"{"bug_type":"109"}"# + "\n" + ReportParserTests.appleCrash
    for original in [ReportParserTests.appleCrash, ReportParserTests.ips, crashWithHeader, ReportParserTests.swiftJSON,
                     ReportThreadsTests.multiThread, ReportThreadsTests.appleX86Registers] {
      let bytes = Array(original.utf8)
      for length in stride(from: 0, through: bytes.count, by: 7) { parseAnything(Array(bytes.prefix(length))) }
      for _ in 0..<400 {
        var mutated = bytes
        for _ in 0..<Int.random(in: 1...8, using: &rng) {
          mutated[Int.random(in: 0..<mutated.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
        }
        parseAnything(mutated)
      }
    }
    var noise: [UInt8] = []
    for _ in 0..<20_000 { noise.append(UInt8.random(in: 0...255, using: &rng)) }
    parseAnything(noise)
    parseAnything(Array(String(repeating: "[", count: 100_000).utf8))
    parseAnything(Array(("{\"usedImages\":" + String(repeating: "{\"a\":", count: 50_000)).utf8))
  }

  func parseAnything(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    guard let report = try? ReportParser.parse(text) else { return }
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.lineInfo = false
    for style in ReportStyle.allCases { _ = Symbolicator.symbolicated(report, options: options).formatted(style) }
  }
}

extension String {
  func replacingFirst(_ target: String, with replacement: String) -> String {
    guard let range = firstRange(of: target) else { return self }
    var copy = self
    copy.replaceSubrange(range, with: replacement)
    return copy
  }
}
