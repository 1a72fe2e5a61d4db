import ImageLogTestSupport
import Testing

/// `imagelog symbolicate` on issue #26's fixtures (Scripts/make-linux-report-fixtures): what reaches
/// standard output and standard error.
@Suite struct SymbolicateReportShapeTests {
  static let fixtures = packageRoot + "/Tests/ImageLogSymbolicationTests/Fixtures/linux-reports/"

  static func imagelog(_ arguments: [String]) throws -> ChildResult {
    try runChild([builtProduct("imagelog")] + arguments)
  }

  /// The control characters in `text` other than the line breaks: C0, DEL, C1.
  static func controls(_ text: some StringProtocol) -> [UInt32] {
    text.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }.map(\.value)
  }

  /// The note quoting an unreadable frame line (standard output) and the one quoting the text after an
  /// `.ips` body (standard error, the JSON keeping standard output) are escaped: no ESC, CR, NUL, DEL or
  /// C1 control of the report's reaches the terminal through them.
  @Test func notesQuoteTheReportEscaped() throws {
    let frameLine = try Self.imagelog(["symbolicate", "--no-system-debug", Self.fixtures + "hostile-frame-line.txt"])
    #expect(frameLine.exitCode == 0)
    let summary = try #require(frameLine.output.firstRange(of: "\n-- symbolicated by imagelog: ").map { frameLine.output[$0.lowerBound...] })
    #expect(Self.controls(summary).isEmpty, "\(Self.controls(summary))")
    #expect(summary.contains(#"  unreadable: line 4: unreadable frame address '    #1 0x55a7\x1b[2J\x1b[31mFORGED\r  note: forged\x00\x7f\u{9b}"#))

    let ips = try Self.imagelog(["symbolicate", "--no-system-debug", Self.fixtures + "hostile-ips-trailer.ips"])
    #expect(ips.exitCode == 0)
    #expect(Self.controls(ips.error).isEmpty, "\(Self.controls(ips.error))")
    #expect(Self.controls(ips.output).isEmpty, "\(Self.controls(ips.output))")
    #expect(ips.error.contains(#"  unreadable: text after the .ips body is not read: 'Model: Mac14,2\x1b[2J\x1b[31mFORGED\r  note: forged"#))
  }

  /// `--format crash` of the Swift backtracer's JSON prints its thread, frames and images.
  @Test func swiftBacktraceJSONAsCrash() throws {
    let run = try Self.imagelog(["symbolicate", "--format", "crash", "--no-system-debug", Self.fixtures + "swift-backtrace-crasher.json"])
    #expect(run.exitCode == 0)
    #expect(run.output.contains("\nThread 0 Crashed:: crasher\n0   libswiftCore.so"), "\(run.output)")
    let images = run.output.split(separator: "\n").drop { $0 != "Binary Images:" }.dropFirst().prefix { !$0.hasPrefix("--") }
    #expect(images.count == 3, "\(run.output)")
    #expect(run.output.contains("-- symbolicated by imagelog: "))
  }
}
