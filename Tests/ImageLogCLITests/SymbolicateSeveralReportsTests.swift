import ImageLogTestSupport
import Glibc
import Testing

/// `imagelog symbolicate` on a file holding several reports: each is written in turn with its own summary.
@Suite struct SymbolicateSeveralReportsTests {
  static func crash(_ incident: String, _ symbol: String) -> String {
    """
    Incident Identifier: \(incident)
    Process:             MyApp [1234]
    Code Type:           ARM-64 (Native)
    Crashed Thread:  0

    Thread 0 Crashed:
    0   libsystem_kernel.dylib        \t0x00000001a2b3c4d8 \(symbol)

    Binary Images:
           0x1a2b10000 -        0x1a2b47fff libsystem_kernel.dylib arm64e  <5e4f7d4a-9b2c-3f1e-8d7a-1b2c3d4e5f60> /usr/lib/system/libsystem_kernel.dylib

    """
  }

  @Test func eachReportInOrderWithItsSummary() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    let path = directory + "/three.crash"
    let first = Self.crash("6156F33D-7F2B-4C4A-9E2C-3E6F0C1D2E3F", "__pthread_kill + 8")
    let second = Self.crash("7156F33D-7F2B-4C4A-9E2C-3E6F0C1D2E3F", "abort + 12")
    let broken = "Incident Identifier: 8156F33D-7F2B-4C4A-9E2C-3E6F0C1D2E3F\nnothing else\n"
    try writeFile(path, first + "\n" + second + "\n" + broken)
    let result = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", path])
    // The third part is no report: named on standard error, status 1; the first two are still written.
    #expect(result.status == 1 << 8)
    #expect(result.error.contains("imagelog: \(path): report 3 of 3 (line 23): not a crash report"), "\(result.error)")
    let summaries = result.output.split(separator: "\n").filter { $0.hasPrefix("-- symbolicated by imagelog: 0 of 1 frames") }
    #expect(summaries.count == 2, "\(result.output)")
    let firstAt = try #require(result.output.firstRange(of: "__pthread_kill + 8"))
    let secondAt = try #require(result.output.firstRange(of: "abort + 12"))
    #expect(firstAt.lowerBound < secondAt.lowerBound)
    // Each report's summary comes right after that report, before the next one starts.
    let firstSummary = try #require(result.output.firstRange(of: "-- symbolicated by imagelog"))
    #expect(firstAt.upperBound < firstSummary.lowerBound && firstSummary.upperBound < secondAt.lowerBound)
    #expect(result.output.contains("missing:    libsystem_kernel.dylib <5e4f7d4a-9b2c-3f1e-8d7a-1b2c3d4e5f60>"))
  }

  /// Several `.ips` reports one after another (header line, body, header line, body…): each in order,
  /// with its own summary; a part that is no report is named by its number and line.
  @Test func severalIPSReports() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-ips")
    let real = try #require(readFile(packageRoot + "/Tests/SymbolicationTests/Fixtures/apple-reports/focustogether-abort.ips"))
    // A second report in Apple's compact form: a one-line body that also names its bug_type.
    let small = #"{"bug_type":"309","os_version":"macOS 14.4 (23E214)","name":"Small"}"# + "\n"
      + #"{"bug_type":"309","procName":"Small","pid":77,"cpuType":"X86-64","faultingThread":0,"#
      + #""threads":[{"triggered":true,"frames":[{"imageOffset":4096,"symbol":"boom","symbolLocation":12,"imageIndex":0}]}],"#
      + #""usedImages":[{"base":4294967296,"size":8192,"uuid":"11111111-2222-3333-4444-555555555555","path":"/x/Small","name":"Small"}]}"# + "\n"
    let broken = #"{"bug_type":"309","name":"Broken"}"# + "\n{\n  \"threads\" : [\n"
    let path = directory + "/three.ips"
    try writeFile(path, real + small + broken)
    let result = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--format", "crash", path])
    #expect(result.status == 1 << 8)
    let realLines = real.split(separator: "\n", omittingEmptySubsequences: false).count - 1
    #expect(result.error.contains("imagelog: \(path): report 3 of 3 (line \(realLines + 3)): unreadable .ips body"), "\(result.error)")
    let summaries = result.output.split(separator: "\n").filter { $0.hasPrefix("-- symbolicated by imagelog:") }
    #expect(summaries.count == 2, "\(result.output)")
    let first = try #require(result.output.firstRange(of: "Process:               FocusTogether [9376]"))
    let firstSummary = try #require(result.output.firstRange(of: "-- symbolicated by imagelog"))
    let second = try #require(result.output.firstRange(of: "Process:               Small [77]"))
    #expect(first.upperBound < firstSummary.lowerBound && firstSummary.upperBound < second.lowerBound)
    #expect(result.output.contains("0   Small                         \t       0x100001000 boom + 12\n"))
    // As JSON (the report style) each report stays a document of its own on standard output.
    let json = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", path])
    #expect(json.output.components(separatedBy: #""procName" : "FocusTogether""#).count == 2)
    #expect(json.output.contains(#""procName" : "Small""#))
  }

  /// V8's `d8` log: its `==== C stack trace` (11 lines in glibc's form), then the AddressSanitizer trap it
  /// ends in (21 `#N` lines; counted in the fixture, README.md): two reports, each with its summary, the
  /// text kept line for line; in JSON two documents, one per kind.
  @Test func v8StackThenSanitizerTrapAreTwoReports() throws {
    let path = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/v8-d8-dcheck-asan-374627491.txt"
    let text = try #require(readFile(path))
    let result = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", path])
    #expect(result.status == 0, "\(result.error)")
    let summaries = result.output.split(separator: "\n").filter { $0.hasPrefix("-- symbolicated by imagelog:") }
    #expect(summaries.map { $0.prefix { $0 != ";" } } == ["-- symbolicated by imagelog: 0 of 11 frames",
                                                          "-- symbolicated by imagelog: 0 of 21 frames"], "\(result.output)")
    // The glibc stack's report ends at its last frame line; the sanitizer's starts with its own heading.
    let firstSummary = try #require(result.output.firstRange(of: "[0x7fc63523cafd]\n\n-- symbolicated by imagelog: 0 of 11 frames"))
    let heading = try #require(result.output.firstRange(of: "\nAddressSanitizer:DEADLYSIGNAL\n"))
    #expect(firstSummary.upperBound < heading.lowerBound)
    // Every line of the log is written, in order (the summaries between).
    var rest = result.output[...]
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
      guard let found = rest.firstRange(of: line + "\n") else {
        Issue.record("line not written in order: \(line)")
        break
      }
      rest = rest[found.upperBound...]
    }
    let json = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--format", "json", path])
    #expect(json.output.components(separatedBy: #"{"format":"glibc-backtrace","frames":["#).count == 2, "\(json.output)")
    #expect(json.output.components(separatedBy: #"{"format":"sanitizer","frames":["#).count == 2)
  }
}
