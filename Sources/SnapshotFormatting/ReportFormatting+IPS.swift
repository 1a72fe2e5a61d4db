import ProcessInspection
import ImageReaders
import Snapshot

/// The classic `.crash` text of an `.ips` report, laid out as Apple's own translation (Console,
/// "Translated Report") lays out a macOS report: the header fields, the exception, termination and
/// Application Specific Information, every thread with `symbol + offset (File.swift:231)` and
/// `[inlined]` frames, the crashed thread's registers, `Binary Images:` and the External Modification
/// Summary. Values come from the report's JSON; a frame imagelog symbolicated shows imagelog's answer.
/// Text from the report is escaped (`TextEscaping`) line by line: a symbol holding a newline stays on
/// its frame's line.
extension ProcessSnapshot {
  func classicText() -> String {
    let body = document?.ipsBody ?? .object([])
    var out = ""
    func field(_ name: String, _ value: String?) { Self.appendCrashField(name, value, to: &out) }
    func bracketed(_ name: JSONValue?, _ number: JSONValue?) -> String? {
      guard let name = name?.string else { return nil }
      return name + (number?.integer.map { " [\($0)]" } ?? "")
    }
    let bundle = body["bundleInfo"]
    let version = bundle?["CFBundleShortVersionString"]?.string
    let build = bundle?["CFBundleVersion"]?.string
    field("Process", bracketed(body["procName"], body["pid"]))
    field("Path", body["procPath"]?.string)
    field("Identifier", bundle?["CFBundleIdentifier"]?.string ?? body["procName"]?.string)
    if version != nil || build != nil { field("Version", "\(version ?? "???") (\(build ?? "???"))") }
    field("Code Type", body["cpuType"]?.string.map { $0 + (body["translated"] == .bool(true) ? " (Translated)" : " (Native)") })
    field("Parent Process", bracketed(body["parentProc"], body["parentPid"]))
    field("Responsible", bracketed(body["responsibleProc"], body["responsiblePid"]))
    field("User ID", body["userID"]?.integer.map(String.init))
    out += "\n"
    field("Date/Time", body["captureTime"]?.string)
    let osVersion = body["osVersion"]
    field("OS Version", osVersion?["train"]?.string.map { train in train + (osVersion?["build"]?.string.map { " (\($0))" } ?? "") }
      ?? document?.ipsHeader?["os_version"]?.string)
    field("Report Version", "12")
    field("Anonymous UUID", body["crashReporterKey"]?.string)
    out += "\n"
    field("Sleep/Wake UUID", body["sleepWakeUUID"]?.string)
    out += "\n"
    field("Time Awake Since Boot", body["uptime"]?.integer.map { "\($0) seconds" })
    field("Time Since Wake", body["wakeTime"]?.integer.map { "\($0) seconds" })
    out += "\n"
    if let sip = body["sip"]?.string { field("System Integrity Protection", sip); out += "\n" }

    let threads = body["threads"]?.array ?? []
    let crashed = body["faultingThread"]?.integer ?? threads.firstIndex { $0["triggered"] == .bool(true) }
    if let crashed {
      let thread = threads.indices.contains(crashed) ? threads[crashed] : nil
      var parts = [String(crashed)]
      if let name = thread?["name"]?.string { parts.append(name) }
      if let queue = thread?["queue"]?.string { parts.append("Dispatch queue: " + queue) }
      field("Crashed Thread", parts.joined(separator: "  "))
      out += "\n"
    }
    if let exception = body["exception"] {
      field("Exception Type", (exception["type"]?.string ?? "") + (exception["signal"]?.string.map { " (\($0))" } ?? ""))
      // macOS writes the subtype as a first `Exception Codes:` line (iOS names it `Exception Subtype:`).
      field("Exception Codes", exception["subtype"]?.string)
      field("Exception Codes", exception["codes"]?.string)
      field("Exception Message", exception["message"]?.string)
      field("Exception Note", exception["notes"]?.array?.compactMap(\.string).joined(separator: ", "))
      out += "\n"
    }
    if let termination = body["termination"] {
      var reason = "Namespace \(termination["namespace"]?.string ?? "???"), Code \(Self.terminationCode(termination["code"]))"
      if let indicator = termination["indicator"]?.string { reason += " " + indicator }
      field("Termination Reason", reason)
      field("Terminating Process", bracketed(termination["byProc"], termination["byPid"]))
      out += "\n"
    }
    if let region = body["vmRegionInfo"]?.string {
      out += "VM Region Info: " + Self.escapedLines(region).joined(separator: "\n") + "\n\n"
    }
    if let triage = body["ktriageinfo"]?.string {
      out += "Kernel Triage:\n" + Self.escapedLines(triage).joined(separator: "\n") + "\n\n"
    }
    if case .object(let members)? = body["asi"] {
      out += "Application Specific Information:\n"
      for (_, messages) in members {
        for message in messages.array ?? [messages] {
          if let text = message.string { out += Self.escapedLines(text).joined(separator: "\n") + "\n" }
        }
      }
      out += "\n\n"
    }

    // Each answer by its place in the JSON: (thread, frame index); thread -1 is the exception backtrace.
    var answers: [Int: [Int: FrameSymbols]] = [:]
    for thread in self.threads {
      for frame in thread.frames {
        if let place = frame.position?.documentThread { answers[place, default: [:]][frame.number] = frame.symbols }
      }
    }
    if let backtrace = body["lastExceptionBacktrace"]?.array {
      out += "Last Exception Backtrace:\n"
      appendFrames(backtrace, answers: answers[-1] ?? [:], body: body, to: &out)
      out += "\n"
    }
    for (index, thread) in threads.enumerated() {
      out += "Thread \(index)" + (thread["triggered"] == .bool(true) || index == crashed ? " Crashed" : "") + ":"
      let name = thread["name"]?.string
      let queue = thread["queue"]?.string
      if name != nil || queue != nil {
        out += ": " + TextEscaping.escaped(name ?? "") + (queue.map { " Dispatch queue: " + TextEscaping.escaped($0) } ?? "")
      }
      out += "\n"
      appendFrames(thread["frames"]?.array ?? [], answers: answers[index] ?? [:], body: body, to: &out)
      out += "\n"
    }
    if let crashed, threads.indices.contains(crashed), let state = threads[crashed]["threadState"] {
      out += "\n" + Self.threadStateText(state, thread: crashed)
    }

    out += "\nBinary Images:\n"
    for image in body["usedImages"]?.array ?? [] {
      let base = image["base"]?.unsigned ?? 0
      let size = image["size"]?.unsigned ?? 0
      let name = image["CFBundleIdentifier"]?.string ?? image["name"]?.string ?? "???"
      let imageVersion = image["CFBundleShortVersionString"]?.string ?? "*"
      let uuid = image["uuid"]?.string.flatMap { ImageIdentity($0) }.map { HexText.uuid($0.bytes, uppercase: false) }
        ?? image["uuid"]?.string ?? ""
      // size 0 (Apple's `???` image) ends at 0xffffffffffffffff
      Self.appendCrashImageLine(start: base, end: base &+ size &- 1, name: name, version: imageVersion, identity: uuid,
                                path: image["path"]?.string ?? "???", to: &out)
    }
    if let modifications = body["extMods"] {
      out += "\nExternal Modification Summary:\n"
      for (key, title) in [("targeted", "Calls made by other processes targeting this process:"),
                           ("caller", "Calls made by this process:"),
                           ("system", "Calls made by all processes on this machine:")] {
        guard let counts = modifications[key] else { continue }
        out += "  " + title + "\n"
        for call in ["task_for_pid", "thread_create", "thread_set_state"] {
          out += "    \(call): \(counts[call]?.unsigned.map(String.init) ?? "0")\n"
        }
      }
    }
    if let summary = body["vmSummary"]?.string {
      out += "\nVM Region Summary:\n" + Self.escapedLines(summary).joined(separator: "\n") + "\n"
    }
    return out
  }

  /// One thread's frames as Apple writes them: `N   image(30)\t   0xADDRESS symbol + offset (File:line)`,
  /// `[inlined]` after an inlined frame, `0xBASE + OFFSET` when no symbol is known. Frames imagelog
  /// symbolicated show its functions (inlined ones first); numbering follows the lines written.
  private func appendFrames(_ jsonFrames: [JSONValue], answers: [Int: FrameSymbols],
                            body: JSONValue, to out: inout String) {
    let images = body["usedImages"]?.array ?? []
    var number = 0
    func line(_ image: String, _ address: UInt64, _ text: String) {
      Self.appendCrashFrameLine(number: number, image: image, address: address, text: text, to: &out)
      number += 1
    }
    for (index, frame) in jsonFrames.enumerated() {
      let imageIndex = frame["imageIndex"]?.integer
      let image = imageIndex.flatMap { images.indices.contains($0) ? images[$0] : nil }
      let imageName = image?["name"]?.string ?? "???"
      let base = image?["base"]?.unsigned ?? 0
      let offset = frame["imageOffset"]?.unsigned ?? 0
      let address = base &+ offset
      if let result = answers[index], result.status == .symbolicated {
        // imagelog's own chain replaces the report's; an entry the report marked inline is part of
        // the chain of the real frame at the same address that follows it.
        if frame["inline"] == .bool(true) { continue }
        for function in result.functions {
          line(result.imageName ?? imageName, address,
               describeForCrash(name: function.name, offset: function.offset, file: function.file, line: function.line,
                                inlined: function.isInlined))
        }
        continue
      }
      var text: String
      if let symbol = frame["symbol"]?.string {
        text = describeForCrash(name: symbol, offset: frame["symbolLocation"]?.unsigned, file: frame["sourceFile"]?.string,
                                line: frame["sourceLine"]?.integer, inlined: frame["inline"] == .bool(true))
      } else {
        text = "0x\(hexDigits(base)) + \(offset)"
      }
      if let result = answers[index], case let .mismatch(reportID, fileID, path) = result.status {
        text += "  [UUID mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]"
      }
      line(imageName, address, text)
    }
  }

  /// A header field as Apple writes it, `Name:` then the value escaped from column 23 (one space after
  /// longer labels); nothing for a missing or empty value.
  static func appendCrashField(_ name: String, _ value: String?, to out: inout String) {
    guard let value, !value.isEmpty else { return }
    out += name + ":" + String(repeating: " ", count: max(1, 22 - name.count)) + TextEscaping.escaped(value) + "\n"
  }

  /// One `Binary Images:` line as Apple writes it: `0xSTART - 0xEND name (version) <uuid> path`, the
  /// addresses right-aligned in 18 columns, the text escaped.
  static func appendCrashImageLine(start: UInt64, end: UInt64, name: String, version: String, identity: String,
                                   path: String, to out: inout String) {
    let start = "0x" + hexDigits(start), end = "0x" + hexDigits(end)
    out += String(repeating: " ", count: max(0, 18 - start.count)) + start + " - "
    out += String(repeating: " ", count: max(0, 18 - end.count)) + end + " "
    out += TextEscaping.escaped(name) + " (" + TextEscaping.escaped(version) + ") <" + TextEscaping.escaped(identity) + "> "
      + TextEscaping.escaped(path) + "\n"
  }

  /// One frame line as Apple writes it: `N   image(30)\t   0xADDRESS text`, the image escaped.
  static func appendCrashFrameLine(number: Int, image: String, address: UInt64, text: String, to out: inout String) {
    let hex = "0x" + hexDigits(address)
    out += String(number).padding(4) + TextEscaping.escaped(image).padding(30) + "\t"
      + String(repeating: " ", count: max(0, 18 - hex.count)) + hex + " " + text + "\n"
  }

  /// `name + offset (File.swift:231) [inlined]`: the file's last component, as Apple shows it; no
  /// location without a line (Apple leaves out `<compiler-generated>`).
  func describeForCrash(name: String?, offset: UInt64?, file: String?, line: Int?, inlined: Bool) -> String {
    var text = name.map(TextEscaping.escaped) ?? "???"
    if let offset { text += " + \(offset)" }
    if let file, let line { text += " (\(TextEscaping.escaped(ProcessInspection.Image.shortName(of: file))):\(line))" }
    if inlined { text += " [inlined]" }
    return text
  }

  /// Each line of a multi-line report value, escaped.
  static func escapedLines(_ text: String) -> [String] {
    text.split(separator: "\n", omittingEmptySubsequences: false).map { TextEscaping.escaped(String($0)) }
  }

  /// Termination codes as Apple writes them: small ones in decimal (`Code 6`), others in hex (`0x8badf00d`).
  static func terminationCode(_ value: JSONValue?) -> String {
    guard let code = value?.unsigned else { return value?.string ?? "???" }
    return code < 0x10000 ? String(code) : "0x" + hexDigits(code)
  }

  /// The crashed thread's registers in Apple's layout: `ARM Thread State (64-bit)` (x0…x28 four to a
  /// row, fp lr, sp pc cpsr, far esr) or `X86 Thread State (64-bit)`.
  static func threadStateText(_ state: JSONValue, thread: Int) -> String {
    func value(_ key: String) -> UInt64? { state[key]?["value"]?.unsigned }
    var out = ""
    if let listed = state["x"]?.array {
      var registers = Registers(.aarch64)
      for (number, entry) in listed.prefix(29).enumerated() { registers["x\(number)"] = entry["value"]?.unsigned ?? 0 }
      for name in ["fp", "lr", "sp", "pc", "cpsr", "far"] { registers[name] = value(name) ?? 0 }
      registers["esr"] = value("esr")
      out += "Thread \(thread) crashed with \(registers.architecture.appleThreadState):\n" + registers.threadStateText()
      if registers["esr"] != nil {
        // Apple writes the syndrome's description after esr, the last cell.
        out.removeLast()
        out += " " + TextEscaping.escaped(state["esr"]?["description"]?.string ?? "") + "\n"
      }
    } else if state["rip"] != nil {
      var registers = Registers(.x86_64)
      for name in registers.table.compactMap(\.appleName) { registers[name] = value(name == "rfl" ? "rflags" : name) ?? 0 }
      out += "Thread \(thread) crashed with \(registers.architecture.appleThreadState):\n" + registers.threadStateText()
      out += "  \n"
      if let cpu = value("cpu") { out += "Logical CPU:     \(cpu)\n" }
      if let error = value("err") {
        // Apple keeps the fault's description with the trap number and writes it after the error code.
        let description = state["trap"]?["description"]?.string.map { " " + TextEscaping.escaped($0) } ?? ""
        out += "Error Code:      0x\(hexDigits(error, width: 8))\(description)\n"
      }
      if let trap = value("trap") { out += "Trap Number:     \(trap)\n" }
    }
    return out
  }
}
