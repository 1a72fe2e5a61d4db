import ImageReaders

extension CrashDatabase {
  /// The reports as `imagelog crashes` prints them: one line each, `STATE NAME FILES DETAIL`.
  package static func listingText(_ reports: [Report]) -> String {
    var text = ""
    for report in reports {
      var detail: [String] = []
      if let record = report.record {
        if record.attempts > 0 { detail.append("\(record.attempts) attempt\(record.attempts == 1 ? "" : "s")") }
        if let id = record.crashID { detail.append("crash id \(id)") }
        if report.state != .sent, let reason = record.reason { detail.append(reason) }
        if report.state == .waiting, let next = record.nextAttempt { detail.append("next attempt at \(timeText(next))") }
      }
      if let problem = report.problem { detail.append(problem) }
      let state = report.state.rawValue
      text += state + String(repeating: " ", count: max(1, 12 - state.count)) + report.stem + "  "
        + report.files.joined(separator: ",") + (detail.isEmpty ? "" : "  " + detail.joined(separator: "; ")) + "\n"
    }
    return text
  }

  /// The reports as a JSON document (schema `imagelog.crashes`, version 1), with the one JSON writer.
  package static func listingJSON(_ reports: [Report], folder: String) -> String {
    var writer = JSONWriter()
    writer.beginObject()
    writer.member("schema", string: "imagelog.crashes")
    writer.member("version", number: 1)
    writer.member("folder", string: folder)
    writer.key("reports")
    writer.beginArray()
    for report in reports {
      writer.beginObject()
      writer.member("name", string: report.stem)
      writer.member("state", string: report.state.rawValue)
      writer.member("files", strings: report.files)
      if let record = report.record {
        writer.member("attempts", number: UInt64(max(record.attempts, 0)))
        func time(_ key: StaticString, _ value: Int64?) { if let value { writer.member(key, number: UInt64(max(value, 0))) } }
        time("last_attempt", record.lastAttempt)
        time("next_attempt", record.nextAttempt)
        if let reason = record.reason { writer.member("reason", string: reason) }
        if let id = record.reportID { writer.member("report_id", string: id) }
        if let url = record.url { writer.member("url", string: url) }
        if let status = record.httpStatus { writer.member("http_status", number: UInt64(max(status, 0))) }
        if let id = record.crashID { writer.member("crash_id", string: id) }
        time("sent_time", record.sentTime)
      }
      if let problem = report.problem { writer.member("problem", string: problem) }
      writer.endObject()
    }
    writer.endArray()
    writer.endObject()
    return String(decoding: writer.bytes, as: UTF8.self)
  }
}
