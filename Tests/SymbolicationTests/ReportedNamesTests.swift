import ImageLogTestSupport
import ImageReaders
import Testing
import Snapshot
import SnapshotFormatting
@testable import SnapshotSources
import Symbolication

/// A frame whose module is not found keeps the name its report gives, in JSON too, marked as the
/// report's own (`"reported"`, apart from imagelog's `symbol`): for every kind of report that names
/// frames. Each expected value is read by hand from the report's line, never from our output.
@Suite struct ReportedNamesTests {
  static let linux = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/"
  static let apple = packageRoot + "/Tests/SymbolicationTests/Fixtures/apple-reports/"

  /// The JSON frames of `text` symbolicated without system folders or DWARF (nothing to find here).
  static func jsonFrames(_ text: String) throws -> [JSONValue] {
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.lineInfo = false
    let result = Symbolicator.symbolicated(try ReportParser.parse(text), options: options)
    let json = try JSONValue.parse(result.formatted(.json)[...])
    if CrashDocumentSchema.unavailableReason == nil { #expect(try CrashDocumentSchema.problems(result.formatted(.json)) == []) }
    return try #require(json["frames"]?.array)
  }

  /// The `"reported"` object a report's name is written as.
  static func reported(_ symbol: String, offset: Int? = nil, file: String? = nil, line: Int? = nil,
                       column: Int? = nil) -> JSONValue {
    var members: [(String, JSONValue)] = [("symbol", .string(symbol))]
    if let offset { members.append(("symbolOffset", .number(String(offset)))) }
    if let file { members.append(("file", .string(file))) }
    if let line { members.append(("line", .number(String(line)))) }
    if let column { members.append(("column", .number(String(column)))) }
    return .object(members)
  }

  /// `frames[index]` was not looked up in any file (its module is missing) and carries `expected`.
  static func expect(_ frames: [JSONValue], _ index: Int, status: String, _ expected: JSONValue?,
                     sourceLocation: SourceLocation = #_sourceLocation) {
    guard frames.indices.contains(index) else {
      Issue.record("no frame \(index) in \(frames.count)", sourceLocation: sourceLocation)
      return
    }
    #expect(frames[index]["status"]?.string == status, "\(frames[index].serialized())", sourceLocation: sourceLocation)
    #expect(frames[index]["reported"] == expected, "\(frames[index].serialized())", sourceLocation: sourceLocation)
  }

  /// The issue's line: `#1 0x4010a4 in _start (/…/a.out+0x4010a4)`, its module nowhere.
  @Test func sanitizer() throws {
    let text = """
      ==7==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000 (pc 0x401136 bp 0x7ffd0 sp 0x7ffd0 T0)
          #0 0x401136 in main /src/a.c:5:3 (/nonexistent/imagelog-test/a.out+0x401136)
          #1 0x4010a4 in _start (/nonexistent/imagelog-test/a.out+0x4010a4)

      """
    let frames = try Self.jsonFrames(text)
    #expect(frames.count == 2)
    Self.expect(frames, 0, status: "missing-image", Self.reported("main", file: "/src/a.c", line: 5, column: 3))
    Self.expect(frames, 1, status: "missing-image", Self.reported("_start"))
    #expect(frames[1]["symbol"] == nil)  // imagelog's own answer: none
  }

  /// systemd-coredump: `#4  0x00007f7b5c828153 __libc_start_main (libc.so.6 + 0x27153)`; `n/a` is no name.
  @Test func coredump() throws {
    let frames = try Self.jsonFrames(try #require(readFile(Self.linux + "coredump-systemd-13798.txt")))
    Self.expect(frames, 4, status: "missing-image", Self.reported("__libc_start_main"))
    Self.expect(frames, 0, status: "missing-image", nil)
  }

  /// Android: `#00  pc 000000000006a7d8  /system/lib64/libc.so (tgkill+8)`, the offset decimal.
  @Test func androidTombstone() throws {
    let frames = try Self.jsonFrames(try #require(readFile(Self.linux + "tombstone-trustwallet-31.txt")))
    Self.expect(frames, 0, status: "missing-image", Self.reported("tgkill", offset: 8))
    Self.expect(frames, 9, status: "missing-image",
                Self.reported("Java_com_wallet_crypto_trustapp_jni_BitcoinTransactionSigner_sign", offset: 204))
  }

  /// glibc: `./stacktrace(print_stacktrace+0x1f) [0x4004d5]`, `./stacktrace(main+0x9) [0x40058d]`.
  @Test func glibcBacktrace() throws {
    let frames = try Self.jsonFrames(try #require(readFile(Self.linux + "glibc-nvme-cli-3716.txt")))
    Self.expect(frames, 0, status: "missing-image", Self.reported("print_stacktrace", offset: 0x1f))
    Self.expect(frames, 3, status: "missing-image", Self.reported("main", offset: 9))
  }

  /// Apple's `.crash`: `5   RTImageAssets   0x0000000104766915 -[IAImageAssets allFilesInDirectoryAtPath:] + 223`
  /// (no Binary Images: no image at all), and a frame with its file and line.
  @Test func appleCrash() throws {
    let real = try Self.jsonFrames(try #require(readFile(Self.apple + "app-specific-backtrace-rtimageassets-5.crash")))
    Self.expect(real, 5, status: "no-image", Self.reported("-[IAImageAssets allFilesInDirectoryAtPath:]", offset: 223))
    let text = """
      Incident Identifier: 6156F33D-7F2B-4C4A-9E2C-3E6F0C1D2E3F
      Process:             MyApp [1234]
      Code Type:           ARM-64 (Native)
      Crashed Thread:  0

      Thread 0 Crashed:
      0   MyApp                         \t0x0000000100f0a8b4 main + 12 (main.swift:16)
      1   MyApp                         \t0x0000000100f0a800 0x100f00000 + 43008

      Binary Images:
             0x100f00000 -        0x100f0bfff MyApp arm64  <5e4f7d4a-9b2c-3f1e-8d7a-1b2c3d4e5f61> /nonexistent/MyApp

      """
    let frames = try Self.jsonFrames(text)
    Self.expect(frames, 0, status: "missing-image", Self.reported("main", offset: 12, file: "main.swift", line: 16))
    Self.expect(frames, 1, status: "missing-image", nil)
  }

  /// `.ips`: thread 0's first frame is `{"symbol":"__pthread_kill","symbolLocation":8,…}` in a macOS library.
  @Test func appleIPS() throws {
    let frames = try Self.jsonFrames(try #require(readFile(Self.apple + "focustogether-abort.ips")))
    Self.expect(frames, 0, status: "missing-image", Self.reported("__pthread_kill", offset: 8))
    Self.expect(frames, 3, status: "missing-image", Self.reported("std::sys::pal::unix::abort_internal::hb2eff0c11ee55adc", offset: 12))
  }

  /// The backtracer's text: `NAME + OFF in IMAGE at FILE:LINE:COLUMN`, and a name with ` in ` of its own.
  @Test func swiftBacktrace() throws {
    let text = """
      *** Program crashed: Bad pointer dereference at 0x0000000000000000 ***

      Thread 0 "crasher" crashed:

      0      0x000055851ccfb91c Crasher.run(_:) + 332 in crasher at /tmp/sym/main.swift:8:26
      1 [ra] 0x000055851ccfb53e closure #1 in main() + 12 in crasher

      Images (12 omitted):

      0x000055851ccfa000–0x000055851ccfbd38 167ddc45f2bbbc485434077cf70e879175008f62 crasher      /nonexistent/imagelog-test/crasher

      Backtrace took 0.00s

      """
    let frames = try Self.jsonFrames(text)
    Self.expect(frames, 0, status: "missing-image", Self.reported("Crasher.run(_:)", offset: 332, file: "/tmp/sym/main.swift", line: 8, column: 26))
    Self.expect(frames, 1, status: "missing-image", Self.reported("closure #1 in main()", offset: 12))
  }

  /// The backtracer's JSON: a frame's `symbol`, `offset` and `sourceLocation`.
  @Test func swiftBacktraceJSON() throws {
    var text = try #require(readFile(Self.linux + "swift-backtrace-crasher.json"))
    let frame = #"{ "kind": "returnAddress", "address": "0x00005555555552fd" }"#
    try #require(text.contains(frame))
    text = text.replacing(frame, with: #"{ "kind": "returnAddress", "address": "0x00005555555552fd", "symbol": "$s7crasher7CrasherV3runyySiF", "offset": 332, "description": "Crasher.run(_:) + 332", "image": "crasher", "sourceLocation": { "file": "/tmp/sym/main.swift", "line": 8, "column": 26 } }"#)
    let frames = try Self.jsonFrames(text)
    let named = try #require(frames.firstIndex { $0["address"]?.string == "0x00005555555552fd" })
    #expect(frames[named]["status"]?.string != "symbolicated")
    #expect(frames[named]["reported"] == Self.reported("$s7crasher7CrasherV3runyySiF", offset: 332, file: "/tmp/sym/main.swift",
                                                          line: 8, column: 26))
  }

  /// `--no-symbolicate` keeps the names too (nothing looked up).
  @Test func notLookedUp() throws {
    var report = try ReportParser.parse(try #require(readFile(Self.linux + "glibc-nvme-cli-3716.txt")))
    Symbolicator.placeWithoutLookingUp(&report)
    let json = try JSONValue.parse(report.formatted(.json)[...])
    let frames = try #require(json["frames"]?.array)
    Self.expect(frames, 3, status: "not-looked-up", Self.reported("main", offset: 9))
  }

  /// The text layouts keep the report's names of frames whose module is missing: a text report's lines
  /// as written (its own layout and `--format crash`), an `.ips`' and the backtracer JSON's frames as
  /// their documents name them (their own layout, and Apple's translation).
  @Test func textLayoutsKeepTheNames() throws {
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.lineInfo = false
    let asan = "==7==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000\n"
      + "    #1 0x4010a4 in _start (/nonexistent/imagelog-test/a.out+0x4010a4)\n"
    let linux = Symbolicator.symbolicated(try ReportParser.parse(asan), options: options)
    for style in [ReportStyle.report, .crash] {
      #expect(linux.formatted(style).hasPrefix(asan), "\(style)")
    }
    let ips = Symbolicator.symbolicated(try ReportParser.parse(try #require(readFile(Self.apple + "focustogether-abort.ips"))),
                                        options: options)
    #expect(ips.formatted(.report).contains(#""symbol" : "__pthread_kill""#))
    #expect(ips.formatted(.crash).contains("__pthread_kill + 8"))
    var text = try #require(readFile(Self.linux + "swift-backtrace-crasher.json"))
    text = text.replacing(#"{ "kind": "returnAddress", "address": "0x00005555555552fd" }"#,
                          with: #"{ "kind": "returnAddress", "address": "0x00005555555552fd", "symbol": "$s7crasher7CrasherV3runyySiF", "offset": 332, "description": "Crasher.run(_:) + 332" }"#)
    let swift = Symbolicator.symbolicated(try ReportParser.parse(text), options: options)
    #expect(swift.formatted(.report).contains(#""description":"Crasher.run(_:) + 332""#))
    #expect(swift.formatted(.crash).contains("Crasher.run(_:) + 332"))
  }
}
