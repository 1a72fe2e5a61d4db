import ImageReaders
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
import Testing

/// The triage model and its writers on hand-made crashes: hostile names stay text in every style, the
/// state file reads back to what was written, the chart's buckets cover every day.
@Suite struct CrashTriageTests {
  static let hostile = "a<script>alert(\"x\")</script> | b&c\u{1B}[2J"

  func sample() -> CrashTriage {
    var triage = CrashTriage()
    let day: Int64 = 86_400
    for index in 0..<5 {
      let crash = CrashTriage.Crash(path: "/c/\(index)\u{1B}.crash", size: 100, modified: 1_000, signature: Self.hostile,
                                    time: 1_790_000_000 + Int64(index) * 40 * day, program: "p",
                                    build: index < 2 ? "p <b>" : nil, os: "Linux", reason: "SIGSEGV / SEGV_MAPERR")
      triage.add(crash) {
        CrashTriage.Example(path: crash.path, thread: "Thread 0 crashed", frames: [
          CrashTriage.Frame(number: 0, address: 0x1234, module: "p", function: "f<int>&", file: "/s/<a>.c", line: 7),
          CrashTriage.Frame(number: 1, address: 0x5678, module: nil, function: nil, file: nil, line: nil),
        ])
      }
    }
    triage.add(CrashTriage.Crash(path: "/c/other", size: 1, modified: 2, signature: "other", time: 1_790_000_000)) { nil }
    return triage
  }

  @Test func htmlKeepsHostileNamesAsText() {
    let page = sample().html()
    #expect(!page.contains("<script"))
    #expect(page.contains("a&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; | b&amp;c"))
    #expect(page.contains("<td class=\"place\">/s/&lt;a&gt;.c:7</td>"))
    #expect(page.contains("<td>0x0000000000005678</td>"), "a frame without a name shows its address")
  }

  @Test func tableEscapesControlCharacters() {
    let table = sample().table()
    #expect(!table.contains("\u{1B}"))
    for line in table.split(separator: "\n") where !line.hasPrefix("unreadable") { #expect(line.count <= 100) }
  }

  @Test func jsonParsesWithEveryFieldAndExactShare() throws {
    let document = try JSONValue.parse(Substring(String(decoding: sample().json(), as: UTF8.self)))
    let group = try #require(document["groups"]?.array?.first)
    #expect(group["signature"]?.string == Self.hostile)
    #expect(group["count"]?.integer == 5)
    #expect(group["share"] == .number("0.8333"))
    #expect(group["files"]?.array?.count == 5)
    #expect(group["example"]?["frames"]?.array?[1]["function"] == .null)
    #expect(document["groups"]?.array?[1]["example"] == .null)
  }

  @Test func stateReadsBackAsWritten() throws {
    let triage = sample()
    var crashes: [CrashTriage.Crash] = []
    for group in triage.rankedGroups {
      for (index, path) in group.files.enumerated() {
        crashes.append(CrashTriage.Crash(path: path, size: Int64(index), modified: 3, signature: group.signature, time: 4,
                                         program: index == 0 ? nil : "p", build: "b", os: nil, reason: "r"))
      }
    }
    let unreadable = [CrashTriage.Unreadable(path: "/u\u{0}", size: 9, modified: 8, problem: "not a crash report")]
    let examples = triage.rankedGroups.map(\.example)
    let bytes = CrashTriage.state(crashes: crashes, unreadable: unreadable, examples: examples)
    let state = try CrashTriageStateParser.parse(String(decoding: bytes, as: UTF8.self))
    #expect(state.crashes.values.flatMap { $0 }.count == crashes.count)
    for crash in crashes { #expect(state.crashes[crash.path]?.contains(crash) == true) }
    #expect(state.unreadable["/u\u{0}"] == unreadable[0])
    #expect(state.examples["/c/0\u{1B}.crash"] == examples[0])
  }

  @Test(arguments: [
    ("{\"schema\":\"imagelog-triage-state\",\"schemaVersion\":2}", "triage state schemaVersion 2 is not 1"),
    ("{\"schema\":\"imagelog-triage-state\",\"schemaVersion\":1,\"crashes\":[{\"path\":\"/a\"}]}",
     "triage state: crash 0 lacks its path, signature, size, modified or time"),
    ("{\"threads\":[]}", "not a triage state file (no \"schema\": \"imagelog-triage-state\")"),
  ])
  func foreignOrDamagedStateIsRefused(text: String, expected: String) {
    #expect(throws: ReportError(expected)) { try CrashTriageStateParser.parse(text) }
  }

  @Test func truncatedStateIsRefusedNamingTheJSONError() {
    do {
      _ = try CrashTriageStateParser.parse("{\"schema\":\"imagelog-triage-state\",\"crashes\":[1,2")
      Issue.record("a truncated state was read")
    } catch {
      #expect("\(error)".hasPrefix("not a triage state file: invalid JSON at byte "), "\(error)")
    }
  }

  @Test func bucketsCoverEveryDayAndHoldEveryCrash() throws {
    let triage = sample()
    let range = try #require(triage.dayRange)
    let buckets = CrashTriage.buckets(range)
    #expect(buckets.count <= 30)
    #expect(buckets.start + Int64(buckets.count) * buckets.width > range.upperBound)
    for group in triage.rankedGroups {
      #expect(CrashTriage.histogram(group, start: buckets.start, width: buckets.width, count: buckets.count).reduce(0, +) == group.count)
    }
    #expect(CrashTriage.day(of: -1) == -1)
    #expect(CrashTriage.day(of: 86_399) == 0)
  }

  @Test func jsonWriterFixedPointNumbers() {
    for (units, scale, text) in [(UInt64(1234), 3, "1.234"), (5, 4, "0.0005"), (7, 0, "7"), (10_000, 4, "1.0000")] {
      var writer = JSONWriter()
      writer.beginArray()
      writer.number(units, scale: scale)
      writer.number(1)
      writer.endArray()
      #expect(String(decoding: writer.bytes, as: UTF8.self) == "[\(text),1]")
    }
  }
}
