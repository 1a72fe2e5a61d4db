import ProcessInspection
import ImageReaders
import Snapshot

/// The classic `.crash` text of the Swift backtracer's JSON report (`--format crash`), laid out as the
/// `.ips` translation is: the header the document gives (time, platform, architecture, the crash's
/// description and fault address), the crashed thread, every thread with Apple's frame lines (imagelog's
/// answer where it symbolicated a frame, `0xBASE + OFFSET` where it did not), the crashed thread's
/// registers, and `Binary Images:` from the document's `images`. Text from the report is escaped.
extension ProcessSnapshot {
  func swiftJSONClassicText() -> String {
    let document = self.document?.swiftDocument ?? .object([])
    var out = ""
    func field(_ name: String, _ value: String?) { Self.appendCrashField(name, value, to: &out) }
    let threads = document["threads"]?.array ?? []
    let crashed = threads.firstIndex { $0["crashed"] == .bool(true) }
    field("Date/Time", document["timestamp"]?.string)
    field("OS Version", document["platform"]?.string)
    field("Code Type", document["architecture"]?.string)
    out += "\n"
    field("Exception Type", document["description"]?.string)
    field("Exception Codes", document["faultAddress"]?.string.map { "fault address " + $0 })
    if let crashed {
      field("Crashed Thread", ([String(crashed)] + (threads[crashed]["name"]?.string.map { [$0] } ?? [])).joined(separator: "  "))
    }
    out += "\n"

    // Each answer by its place in the document: (thread, frame index).
    var answers: [Int: [Int: Frame]] = [:]
    for thread in self.threads {
      for frame in thread.frames {
        if let place = frame.position?.documentThread { answers[place, default: [:]][frame.number] = frame }
      }
    }
    for (threadIndex, thread) in threads.enumerated() {
      out += "Thread \(threadIndex)" + (threadIndex == crashed ? " Crashed" : "") + ":"
      if let name = thread["name"]?.string { out += ": " + TextEscaping.escaped(name) }
      out += "\n"
      var number = 0
      for (frameIndex, entry) in (thread["frames"]?.array ?? []).enumerated() {
        guard let frame = answers[threadIndex]?[frameIndex] else {
          // `omittedFrames` and `truncated`: the backtracer's own `...`.
          if let kind = entry["kind"]?.string, kind == "omittedFrames" || kind == "truncated" { out += "...\n" }
          continue
        }
        let result = frame.symbols
        let image = frame.imageIndex.flatMap { images.indices.contains($0) ? images[$0] : nil }
        let imageName = result.imageName ?? image?.name ?? "???"
        if result.status == .symbolicated {
          for function in result.functions {
            let text = describeForCrash(name: function.name, offset: function.offset, file: function.file,
                                        line: function.line, inlined: function.isInlined)
            Self.appendCrashFrameLine(number: number, image: imageName, address: frame.address, text: text, to: &out)
            number += 1
          }
          continue
        }
        var text: String
        if let description = entry["description"]?.string {
          text = TextEscaping.escaped(description)  // a report the backtracer symbolicated itself
        } else if let image {
          text = "0x\(hexDigits(image.loadAddress)) + \(frame.address &- image.loadAddress)"
        } else {
          text = "???"
        }
        if case let .mismatch(reportID, fileID, path) = result.status {
          text += "  [UUID mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]"
        }
        Self.appendCrashFrameLine(number: number, image: imageName, address: frame.address, text: text, to: &out)
        number += 1
      }
      out += "\n"
    }
    if let crashed, let registers = Self.registers(threads[crashed]["registers"], architecture: process.architecture) {
      out += "Thread \(crashed) crashed with \(registers.architecture.appleThreadState):\n" + registers.threadStateText() + "\n"
    }

    out += "Binary Images:\n"
    for image in images {
      Self.appendCrashImageLine(start: image.loadAddress, end: image.endAddress ?? image.loadAddress, name: image.name,
                                version: "*", identity: image.identity?.text ?? "", path: image.path ?? "???", to: &out)
    }
    return out
  }

  /// The registers the backtracer lists for a thread (`{"rax": "0x…", "rflags": "0x…", …}`, found by
  /// name in `Registers`' table) for `architecture` (x86_64 or arm64): those Apple's rows show (without
  /// aarch64's `far` and `esr`), 0 when not listed (x86_64's `cr2`); `nil` for another architecture or
  /// none given.
  static func registers(_ listed: JSONValue?, architecture: String?) -> Registers? {
    guard let listed, case .object(let members) = listed else { return nil }
    var registers: Registers
    switch architecture {
    case "x86_64": registers = Registers(.x86_64)
    case "arm64": registers = Registers(.aarch64)
    default: return nil
    }
    for register in registers.table where register.appleName != nil && register.name != "far" && register.name != "esr" {
      registers[register.name] = 0
    }
    // Only those the rows show: the others (`cs`, `fs`) stay not given.
    for (name, value) in members where registers[name] != nil { registers[name] = value.unsigned ?? 0 }
    return registers
  }
}
