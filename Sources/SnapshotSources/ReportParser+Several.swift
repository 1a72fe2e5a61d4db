public import Snapshot
/// Files that hold several reports one after another (a collector's dump, a CI log with two
/// crashes): Apple's `.crash` text, `.ips` reports and the Swift backtracer's, each read on its own, in order;
/// and a Linux log holding reports of different kinds (V8's glibc-style stack, then the AddressSanitizer
/// trap it ends in), each read as its own kind.
extension ReportParser {
  /// Each report in `text`, in order: one result per report, an error for a part that is no report.
  /// Text with one report (or of another kind: addresses) gives one result, as `parse(_:images:)`
  /// does; its failure is the one error.
  public static func parseAll(_ text: String, images: [ProcessSnapshot.Image] = []) -> [Result<ProcessSnapshot, ReportError>] {
    var starts = reportStarts(text)
    if starts.count <= 1 { starts = ipsStarts(text) }
    guard starts.count > 1 else {
      do {
        let reports = try parseAnyKind(text, images: images, splittingLinuxKinds: true)
        guard reports.count > 1 else { return [.success(try checked(reports[0]))] }
        return reports.enumerated().map { index, report in
          Result { () throws(ReportError) in try checked(report) }
            .mapError { ReportError("report \(index + 1) of \(reports.count): \($0.description)") }
        }
      } catch {
        return [.failure(error)]
      }
    }
    let lines = ReportText.splitLines(text)
    var results: [Result<ProcessSnapshot, ReportError>] = []
    for (index, start) in starts.enumerated() {
      let end = index + 1 < starts.count ? starts[index + 1] : lines.count
      let part = lines[start..<end].joined(separator: "\n") + "\n"
      do {
        results.append(.success(try parse(part, images: images)))
      } catch {
        results.append(.failure(ReportError("report \(index + 1) of \(starts.count) (line \(start + 1)): \(error.description)")))
      }
    }
    return results
  }

  /// The first line of each report when the text holds two or more Apple `.crash` or Swift backtracer
  /// reports; otherwise `[0]`.
  static func reportStarts(_ text: String) -> [Int] {
    // Cheap first: most files are one report, and a long address list must not be split into lines twice.
    let incidents = occurrences(of: "\nIncident Identifier:", in: text) + (text.hasPrefix("Incident Identifier:") ? 1 : 0)
    let crashes = occurrences(of: "*** Program crashed:", in: text)
    guard incidents > 1 || crashes > 1 else { return [0] }
    let lines = ReportText.splitLines(text)
    var starts: [Int] = []
    if incidents > 1 {
      for (index, line) in lines.enumerated() where line.hasPrefix("Incident Identifier:") {
        // A `.crash` behind its one-line JSON header (bug_type 109) starts at the header.
        starts.append(index > 0 && lines[index - 1].hasPrefix("{") ? index - 1 : index)
      }
    } else {
      var previousEnd = 0
      for (index, line) in lines.enumerated() {
        if line.hasPrefix("Backtrace took") { previousEnd = index + 1; continue }
        guard line.hasPrefix("*** Program crashed:") else { continue }
        // The report's own preamble (`Fatal error: …`, `*** Signal 4: Backtracing from … ***`) is
        // everything after the previous report's `Backtrace took` line.
        starts.append(starts.isEmpty ? 0 : max(previousEnd, (starts.last ?? 0) + 1))
      }
    }
    if let first = starts.first, first > 0 { starts[0] = 0 }  // text before the first report belongs to it
    return starts
  }

  static func occurrences(of needle: String, in text: String) -> Int {
    // On UTF-8 bytes: a collector's batch reads every report through here, and a 64 MiB list too.
    var text = text
    var needle = needle
    return text.withUTF8 { bytes in
      needle.withUTF8 { needle in
        guard let first = needle.first, needle.count <= bytes.count else { return 0 }
        var count = 0
        var start = 0
        while start <= bytes.count - needle.count {
          guard let found = bytes[start...].firstIndex(of: first), found <= bytes.count - needle.count else { break }
          if UnsafeBufferPointer(rebasing: bytes[found..<found + needle.count]).elementsEqual(needle) {
            count += 1
            start = found + needle.count
          } else {
            start = found + 1
          }
        }
        return count
      }
    }
  }

  /// The header line of each `.ips` report when the text holds two or more (each a one-line JSON
  /// header naming its `bug_type`, then its JSON body); otherwise `[0]`.
  static func ipsStarts(_ text: String) -> [Int] {
    // Cheap first: the text starts with a header, and one .ips has one line starting `{"` (its
    // header; Apple's body starts with a lone `{`).
    guard text.drop(while: { $0 == "\u{FEFF}" || $0.isWhitespace }).hasPrefix("{\""),
          occurrences(of: "\n{\"", in: text) > 0 else { return [0] }
    var starts: [Int] = []
    var bodyNext = false
    for (index, line) in ReportText.splitLines(text).enumerated() {
      guard line.hasPrefix("{") else {
        // A header followed by text is a `.crash` behind its header (bug_type 109), not an .ips.
        if bodyNext, !line.allSatisfy(\.isWhitespace) { return [0] }
        continue
      }
      if bodyNext {
        bodyNext = false  // the body's first line (a one-line body may name bug_type too)
      } else if line.contains("\"bug_type\"") {
        starts.append(index)
        bodyNext = true
      }
    }
    guard starts.count > 1 else { return [0] }
    starts[0] = 0  // text before the first report belongs to it
    return starts
  }
}
