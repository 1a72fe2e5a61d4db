import ProcessInspection
import ImageReaders
import Snapshot

/// Apple's `.ips` crash reports (`bug_type` 309): `usedImages` (`base`, `size`, `uuid`, `name`, `path`,
/// `arch`) and `threads[].frames` (`imageIndex`, `imageOffset`), `faultingThread`.
enum IPSParser {
  static func parse(header: JSONValue?, body: JSONValue) throws(ReportError) -> ProcessSnapshot {
    guard case .object = body else { throw ReportError(".ips body is not a JSON object") }
    var report = ProcessSnapshot(format: .appleIPS, document: ReportDocument(ipsHeader: header, ipsBody: body))
    if let bugType = header?["bug_type"]?.string, bugType != "309" {
      report.problems.append("bug_type \(bugType) is not 309 (a crash); read as one anyway")
    }
    report.process.architecture = body["cpuType"]?.string.flatMap { Architecture(reportName: $0)?.name }
    for (index, entry) in (body["usedImages"]?.array ?? []).enumerated() {
      guard let base = entry["base"]?.unsigned else {
        report.problems.append("usedImages[\(index)]: no base address")
        report.images.append(ReportImage(name: "???", path: nil, loadAddress: 0, endAddress: nil, identity: nil, architecture: nil))
        continue
      }
      var end: Address?
      if let size = entry["size"]?.unsigned, size > 0 {
        let (sum, overflow) = base.addingReportingOverflow(size - 1)
        end = overflow ? nil : sum
      }
      let path = entry["path"]?.string
      let name = entry["name"]?.string ?? path.map(Image.shortName(of:)) ?? "???"
      report.images.append(ReportImage(name: name, path: path, loadAddress: base, endAddress: end,
                                       identity: entry["uuid"]?.string.flatMap { ImageIdentity($0) },
                                       architecture: entry["arch"]?.string))
    }
    if body["usedImages"] == nil { report.problems.append("no usedImages: frames cannot be matched to files") }
    let faulting = body["faultingThread"]?.integer
    for (threadIndex, thread) in (body["threads"]?.array ?? []).enumerated() {
      let crashed = thread["triggered"] == .bool(true) || faulting == threadIndex
      var entry = ReportThread(number: threadIndex, tid: thread["id"]?.unsigned,  // a Mach thread id, or Linux's tid
                               name: thread["name"]?.string ?? thread["queue"]?.string, crashed: crashed)
      entry.frames = frames(thread["frames"]?.array ?? [], in: &report, documentThread: threadIndex,
                            label: "threads[\(threadIndex)].frames")
      report.threads.append(entry)
    }
    // An uncaught exception's backtrace, as thread -1 (the text report's `Last Exception Backtrace:`).
    if let backtrace = body["lastExceptionBacktrace"]?.array {
      var entry = ReportThread(number: -1, name: "Last Exception Backtrace")
      entry.frames = frames(backtrace, in: &report, documentThread: -1, label: "lastExceptionBacktrace")
      report.threads.append(entry)
    }
    if body["threads"] == nil { report.problems.append("no threads in the .ips body") }
    return report
  }

  /// The frames of one JSON array (`imageIndex`, `imageOffset`), each placed in its image.
  static func frames(_ entries: [JSONValue], in report: inout ProcessSnapshot, documentThread: Int,
                     label: String) -> [ReportFrame] {
    var frames: [ReportFrame] = []
    for (frameIndex, frame) in entries.enumerated() {
      guard let imageIndex = frame["imageIndex"]?.integer, report.images.indices.contains(imageIndex),
            let offset = frame["imageOffset"]?.unsigned else {
        report.problems.append("\(label)[\(frameIndex)]: no usable imageIndex/imageOffset")
        continue
      }
      let (address, overflow) = report.images[imageIndex].loadAddress.addingReportingOverflow(offset)
      guard !overflow else {
        if documentThread >= 0 { report.problems.append("\(label)[\(frameIndex)]: imageOffset overflows") }
        continue
      }
      frames.append(ReportFrame(number: frameIndex, address: address, isReturnAddress: frameIndex > 0,
                                imageIndex: imageIndex, reportedSymbol: frame["symbol"]?.string,
                                position: ProcessSnapshot.Position(documentThread: documentThread)))
    }
    return frames
  }
}
