import ImageLog
import ImageReaders

/// Apple's `.ips` crash reports (`bug_type` 309): `usedImages` (`base`, `size`, `uuid`, `name`, `path`,
/// `arch`) and `threads[].frames` (`imageIndex`, `imageOffset`), `faultingThread`.
enum IPSParser {
  static func parse(header: JSONValue?, body: JSONValue) throws(ReportError) -> CrashReport {
    guard case .object = body else { throw ReportError(".ips body is not a JSON object") }
    var report = CrashReport(format: .appleIPS)
    report.ipsHeader = header
    report.ipsBody = body
    if let bugType = header?["bug_type"]?.string, bugType != "309" {
      report.problems.append("bug_type \(bugType) is not 309 (a crash); read as one anyway")
    }
    report.architecture = body["cpuType"]?.string.flatMap(ReportParser.architectureName)
    for (index, entry) in (body["usedImages"]?.array ?? []).enumerated() {
      guard let base = entry["base"]?.unsigned else {
        report.problems.append("usedImages[\(index)]: no base address")
        report.images.append(CrashReport.Image(name: "???", path: nil, loadAddress: 0, endAddress: nil, identity: nil, architecture: nil))
        continue
      }
      var end: Address?
      if let size = entry["size"]?.unsigned, size > 0 {
        let (sum, overflow) = base.addingReportingOverflow(size - 1)
        end = overflow ? nil : sum
      }
      let path = entry["path"]?.string
      let name = entry["name"]?.string ?? path.map(Image.shortName(of:)) ?? "???"
      report.images.append(CrashReport.Image(name: name, path: path, loadAddress: base, endAddress: end,
                                             identity: entry["uuid"]?.string.flatMap { ImageIdentity($0) },
                                             architecture: entry["arch"]?.string))
    }
    if body["usedImages"] == nil { report.problems.append("no usedImages: frames cannot be matched to files") }
    let faulting = body["faultingThread"]?.integer
    for (threadIndex, thread) in (body["threads"]?.array ?? []).enumerated() {
      let crashed = thread["triggered"] == .bool(true) || faulting == threadIndex
      var entry = CrashReport.Thread(number: threadIndex, crashed: crashed,
                                     name: thread["name"]?.string ?? thread["queue"]?.string)
      entry.tid = thread["id"]?.unsigned  // the thread's id (a Mach thread id, or Linux's tid)
      report.threads.append(entry)
      for (frameIndex, frame) in (thread["frames"]?.array ?? []).enumerated() {
        guard let imageIndex = frame["imageIndex"]?.integer, report.images.indices.contains(imageIndex),
              let offset = frame["imageOffset"]?.unsigned else {
          report.problems.append("threads[\(threadIndex)].frames[\(frameIndex)]: no usable imageIndex/imageOffset")
          continue
        }
        let (address, overflow) = report.images[imageIndex].loadAddress.addingReportingOverflow(offset)
        guard !overflow else {
          report.problems.append("threads[\(threadIndex)].frames[\(frameIndex)]: imageOffset overflows")
          continue
        }
        report.frames.append(CrashReport.Frame(thread: threadIndex, index: frameIndex, address: address,
                                               imageIndex: imageIndex, isReturnAddress: frameIndex > 0, line: nil,
                                               symbolColumn: nil, reportedSymbol: frame["symbol"]?.string,
                                               ipsThread: threadIndex))
      }
    }
    // An uncaught exception's backtrace, as thread -1 (the text report's `Last Exception Backtrace:`).
    if let frames = body["lastExceptionBacktrace"]?.array {
      report.threads.append(CrashReport.Thread(number: -1, crashed: false, name: "Last Exception Backtrace"))
      for (frameIndex, frame) in frames.enumerated() {
        guard let imageIndex = frame["imageIndex"]?.integer, report.images.indices.contains(imageIndex),
              let offset = frame["imageOffset"]?.unsigned else {
          report.problems.append("lastExceptionBacktrace[\(frameIndex)]: no usable imageIndex/imageOffset")
          continue
        }
        let (address, overflow) = report.images[imageIndex].loadAddress.addingReportingOverflow(offset)
        guard !overflow else { continue }
        report.frames.append(CrashReport.Frame(thread: -1, index: frameIndex, address: address, imageIndex: imageIndex,
                                               isReturnAddress: frameIndex > 0, line: nil, symbolColumn: nil,
                                               reportedSymbol: frame["symbol"]?.string, ipsThread: -1))
      }
    }
    if body["threads"] == nil { report.problems.append("no threads in the .ips body") }
    return report
  }
}
