import ProcessInspection
import ImageReaders
import Snapshot

/// Swift's backtracer output in JSON (`SWIFT_BACKTRACE=...,format=json,symbolicate=off`): whatever the
/// program printed before it, then one object with `threads[].frames[]` (`kind`, `address`) and
/// `images[]` (`name`, `buildId`, `path`, `baseAddress`, `endOfText`).
enum SwiftBacktraceJSONParser {
  /// True when `text` holds a backtracer JSON report.
  static func detect(_ text: String) -> Bool {
    text.contains("\"kind\": \"crashReport\"") || text.contains("\"kind\":\"crashReport\"")
  }

  static func parse(_ text: String) throws(ReportError) -> ProcessSnapshot {
    // The document starts at the first `{` that opens a line.
    var start: String.Index?
    var index = text.startIndex
    var atLineStart = true
    while index < text.endIndex {
      let character = text[index]
      if atLineStart, character == "{" { start = index; break }
      atLineStart = character == "\n"
      index = text.index(after: index)
    }
    guard let start else { throw ReportError("no JSON object in the Swift backtrace") }
    let document: JSONValue
    do { (document, _) = try JSONValue.parsePrefix(text[start...]) } catch {
      throw ReportError("unreadable Swift backtrace JSON: \(error)")
    }
    var report = ProcessSnapshot(format: .swiftBacktraceJSON,
                                 document: ReportDocument(preamble: String(text[..<start]), swiftDocument: document))
    report.process.architecture = document["architecture"]?.string.flatMap { Architecture(reportName: $0)?.name }
    for (index, entry) in (document["images"]?.array ?? []).enumerated() {
      guard let base = entry["baseAddress"]?.unsigned else {
        report.problems.append("images[\(index)]: no baseAddress")
        report.images.append(ReportImage(name: "???", path: nil, loadAddress: 0, endAddress: 0, identity: nil, architecture: nil))
        continue
      }
      let end = entry["endOfText"]?.unsigned.map { $0 > base ? $0 - 1 : base }
      report.images.append(ReportImage(name: entry["name"]?.string ?? "???", path: entry["path"]?.string,
                                             loadAddress: base, endAddress: end,
                                             identity: entry["buildId"]?.string.flatMap { ImageIdentity($0) },
                                             architecture: nil))
    }
    for (threadIndex, thread) in (document["threads"]?.array ?? []).enumerated() {
      var entry = ReportThread(number: threadIndex, name: thread["name"]?.string, crashed: thread["crashed"] == .bool(true))
      for (frameIndex, frame) in (thread["frames"]?.array ?? []).enumerated() {
        let kind = frame["kind"]?.string ?? ""
        guard kind == "programCounter" || kind == "returnAddress" || kind == "asyncResumePoint" else { continue }
        guard let address = frame["address"]?.unsigned else {
          report.problems.append("threads[\(threadIndex)].frames[\(frameIndex)]: no address")
          continue
        }
        entry.frames.append(ReportFrame(number: frameIndex, address: address, isReturnAddress: kind == "returnAddress",
                                        reportedSymbol: frame["symbol"]?.string,
                                        position: ProcessSnapshot.Position(documentThread: threadIndex)))
      }
      report.threads.append(entry)
    }
    if document["threads"] == nil { report.problems.append("no threads in the Swift backtrace JSON") }
    report.placeFrames()
    return report
  }
}
