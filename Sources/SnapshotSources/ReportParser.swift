import ProcessInspection
import ImageReaders
public import Snapshot

/// Reads crash reports of every supported kind, telling them apart by their content.
public enum ReportParser {
  /// The largest report accepted (`ReportText.maximumSize`).
  package static let maximumSize = ReportText.maximumSize

  /// The most frames a report may have (`ReportText.maximumFrames`).
  package static let maximumFrames = ReportText.maximumFrames

  /// Reads `text` as whichever kind of report it is. `images` are the `--image PATH@LOADADDR` images
  /// for a list of bare addresses (ignored for other kinds).
  ///
  /// Throws only when nothing in the text is a report; unreadable parts of a report are named in
  /// `problems` and the rest is still returned.
  /// A report of any kind in which nothing was found to symbolicate (no frame and no image: an `.ips`
  /// whose body is `{}` or `[]`, a `.crash` with only headers) throws as text without frames does.
  public static func parse(_ text: String, images: [ProcessSnapshot.Image] = []) throws(ReportError) -> ProcessSnapshot {
    try checked(try parseAnyKind(text, images: images, splittingLinuxKinds: false)[0])
  }

  /// `report`, or the error `parse` throws for a report in which nothing was found to symbolicate.
  static func checked(_ report: ProcessSnapshot) throws(ReportError) -> ProcessSnapshot {
    guard report.frameCount > 0 || !report.images.isEmpty else {
      let header = report.document?.ipsHeader
      let kind = report.format == .appleIPS ? ".ips body (bug_type \(header?["bug_type"]?.string ?? "?"))"
        : header != nil ? "text after the JSON header line" : "\(report.format.rawValue) report"
      throw ReportError("not a crash report: no threads, frames or binary images found in the \(kind)")
    }
    return report
  }

  /// The report `text` is (one), or with `splittingLinuxKinds` the reports of different kinds a Linux
  /// log holds one after another (`LinuxLogParser.parseReports`); never empty.
  static func parseAnyKind(_ text: String, images: [ReportImage], splittingLinuxKinds: Bool) throws(ReportError) -> [ProcessSnapshot] {
    guard text.utf8.count <= maximumSize else {
      throw ReportError("too large for a crash report (\(text.utf8.count) bytes, limit \(maximumSize))")
    }
    // Nothing but addresses: no image to put them in is known before any line is kept, and with
    // --image no other kind of report is made of them alone (nor needs to look at each line).
    if AddressListParser.onlyAddresses(text) {
      if images.isEmpty { throw addressesWithoutImages }
      if let report = try AddressListParser.parse(ReportText.splitLines(text), images: images) { return [report] }
    }
    let hasBrace = text.utf8.withContiguousStorageIfAvailable { $0.contains(UInt8(ascii: "{")) }
      ?? text.utf8.contains(UInt8(ascii: "{"))
    // imagelog's own crash document, read back (its frames' names may quote any other kind's words).
    if hasBrace, text.contains("\"imagelog-crash\"") {
      let trimmed = text.drop { $0 == "\u{FEFF}" || $0.isWhitespace }
      if trimmed.first == "{", let (document, rest) = try? JSONValue.parsePrefix(trimmed), CrashDocumentParser.detect(document) {
        return try CrashDocumentParser.parseAll(first: document, rest: rest)
      }
    }
    if hasBrace, SwiftBacktraceJSONParser.detect(text) {
      var report = try SwiftBacktraceJSONParser.parse(text)
      report.readSwiftRuntimeMessage(ReportText.splitLines(report.document?.preamble ?? ""))
      return [report]
    }
    let trimmed = text.drop { $0 == "\u{FEFF}" || $0.isWhitespace }
    if trimmed.first == "{" {
      if let report = try parseJSONReport(trimmed) { return [report] }
    }
    let lines = ReportText.splitLines(text)
    if isSwiftBacktrace(lines) {
      var report = SwiftBacktraceParser.parse(lines)
      report.readSwiftRuntimeMessage(lines)
      return [report]
    }
    // Before Apple's: a TSan `Thread T1 (tid=…) created by main thread at:` heading looks like a thread.
    var linux = LinuxLogParser.parseReports(lines, splittingKinds: splittingLinuxKinds)
    for index in linux.indices { linux[index].readSanitizerKind(linux[index].document?.lines ?? []) }
    if !linux.isEmpty { return linux }
    if isAppleStyle(lines) { return [AppleCrashParser.parse(lines)] }
    if let report = try AddressListParser.parse(lines, images: images) { return [report] }
    throw ReportError("not a crash report: no threads, frames or binary images found "
                      + "(expected imagelog, Apple .crash or .ips, Swift backtracer output, a sanitizer report, "
                      + "systemd-coredump, an Android tombstone or glibc backtrace_symbols lines)")
  }

  static let addressesWithoutImages =
    ReportError("addresses without images: give --image PATH@LOADADDR or image lines in imagelog's formats")

  /// `.ips` (a header line and a JSON body, or one JSON body), or a `.crash` behind a JSON header line.
  static func parseJSONReport(_ text: Substring) throws(ReportError) -> ProcessSnapshot? {
    let header: JSONValue
    let rest: Substring
    do {
      (header, rest) = try JSONValue.parsePrefix(text)
    } catch {
      // A half-written .ips: say where it broke rather than falling back to text.
      if text.contains("\"usedImages\"") || text.contains("\"bug_type\"") {
        throw ReportError("unreadable .ips header: \(error)")
      }
      return nil
    }
    let body = rest.drop { $0.isWhitespace }
    if body.isEmpty {
      guard header["usedImages"] != nil || header["threads"] != nil else {
        throw ReportError("a JSON document without threads or usedImages is not a crash report")
      }
      return try IPSParser.parse(header: nil, body: header)
    }
    if body.first == "{" {
      do {
        // Console's "Full Report", as people paste it, has the machine's profile (`Model: …`) after the body.
        let (document, after) = try JSONValue.parsePrefix(body)
        var report = try IPSParser.parse(header: header, body: document)
        if let first = after.split(separator: "\n").first(where: { !$0.allSatisfy(\.isWhitespace) }) {
          report.problems.append("text after the .ips body is not read: '\(first.prefix(80))'")
        }
        return report
      } catch let error as JSONError {
        throw ReportError("unreadable .ips body (bug_type \(header["bug_type"]?.string ?? "?")): \(error)")
      } catch let error as ReportError {
        throw error
      } catch {
        throw ReportError("\(error)")
      }
    }
    // bug_type 109 and friends: a one-line JSON header, then the classic text.
    let lines = ReportText.splitLines(String(text))
    var report = AppleCrashParser.parse(lines)
    report.document?.ipsHeader = header
    return report
  }

  // Both tests first look at a line's first byte: most lines of a long address list start with `0`.
  static func isSwiftBacktrace(_ lines: [String]) -> Bool {
    lines.contains { line in
      guard let first = line.utf8.first, first == UInt8(ascii: "*") || first == UInt8(ascii: "T") else { return false }
      return line.hasPrefix("*** Program crashed:") || (line.hasPrefix("Thread ") && line.hasSuffix(" crashed:"))
    }
  }

  static func isAppleStyle(_ lines: [String]) -> Bool {
    lines.contains { line in
      guard let first = line.utf8.first, first == UInt8(ascii: "B") || first == UInt8(ascii: "C")
        || first == UInt8(ascii: "T") || first == UInt8(ascii: "L") || first == UInt8(ascii: "A") else { return false }
      return line.hasPrefix("Binary Images:") || line.hasPrefix("Crashed Thread:")
        || (line.hasPrefix("Application Specific Backtrace ") && line.hasSuffix(":"))
        || ((line.hasPrefix("Thread ") || line.hasPrefix("Last Exception Backtrace")) && line.hasSuffix(":"))
    }
  }
}
