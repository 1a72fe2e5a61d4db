import ProcessInspection
import ImageReaders
import Snapshot

/// Swift's backtracer output (`SWIFT_BACKTRACE=enable=yes,interactive=no,symbolicate=off`):
/// `Thread 0 "name" crashed:` headings, `INDEX [ra] 0xADDRESS` frames and an
/// `Images (N omitted):` section of `START–END BUILDID NAME PATH` lines.
enum SwiftBacktraceParser {
  static func parse(_ lines: [String]) -> ProcessSnapshot {
    var report = ProcessSnapshot(format: .swiftBacktrace, document: ReportDocument(lines: lines))
    var inThread: Int?
    var inImages = false
    for (lineIndex, line) in lines.enumerated() {
      if let platform = AppleCrashParser.field(line, "Platform:") {
        report.process.architecture = Architecture(reportName: platform)?.name
        continue
      }
      if line.hasPrefix("Thread "), line.hasSuffix(":"), let thread = heading(line) {
        report.threads.append(thread)
        inThread = report.threads.count - 1
        inImages = false
        continue
      }
      if line.hasPrefix("Images") && line.hasSuffix(":") {
        inImages = true
        inThread = nil
        continue
      }
      if line.hasPrefix("Registers:") || line.hasPrefix("Backtrace took") || line.hasPrefix("***") {
        inThread = nil
        inImages = false
        continue
      }
      let trimmed = line.trimmingSpaces
      if trimmed.isEmpty { continue }
      if let thread = inThread {
        if trimmed.hasSuffix("...") { continue }  // frames left out by the backtracer's limit
        if isRegisterLine(trimmed) { continue }  // `registers=all` prints each thread's registers before its frames
        guard var frame = frame(line) else {
          report.problems.append("line \(lineIndex + 1): unreadable frame '\(line.prefix(80))'")
          continue
        }
        frame.position?.line = lineIndex
        report.threads[thread].frames.append(frame)
      } else if inImages {
        guard let image = image(trimmed) else {
          report.problems.append("line \(lineIndex + 1): unreadable image '\(line.prefix(80))'")
          continue
        }
        report.images.append(image)
      }
    }
    report.placeFrames()
    if report.images.isEmpty { report.problems.append("no Images section: frames cannot be matched to files") }
    return report
  }

  /// A register line of `registers=all`: `rax 0x0000000000000000  0`, ` r8 0x…`, `rflags 0x… PF`,
  /// `cs 0x0033  fs 0x0000  gs 0x0000`, `x29 0x…`: a name that starts with a letter, then `0x` and hex.
  /// Frames start with their number.
  static func isRegisterLine(_ trimmed: String) -> Bool {
    let words = trimmed.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
    guard words.count >= 2, let first = words[0].unicodeScalars.first, first.properties.isAlphabetic, first.isASCII,
          words[0].unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) })
    else { return false }
    return words[1].hasPrefix("0x") && ReportText.hexNumber(words[1]) != nil
  }

  /// `Thread 0 "crasher" crashed:`, `Thread 1:`, `Thread 2 "worker":`.
  static func heading(_ line: String) -> ReportThread? {
    let body = line.dropFirst("Thread ".count).dropLast()
    let numberText = body.prefix { $0.isNumber }
    guard let number = Int(numberText) else { return nil }
    var rest = body.dropFirst(numberText.count).trimmingSpaces[...]
    var crashed = false
    if rest.hasSuffix("crashed") { crashed = true; rest = rest.dropLast("crashed".count).trimmingSpaces[...] }
    var name: String?
    if rest.hasPrefix("\""), rest.hasSuffix("\""), rest.count >= 2 { name = String(rest.dropFirst().dropLast()) } else if !rest.isEmpty { return nil }
    return ReportThread(number: number, name: name, crashed: crashed)
  }

  /// `0      0x00007fe929d6df7f`, `1 [ra] 0x00007fe929ef961f`, `3 [ra] [thunk] 0x... rest`.
  static func frame(_ line: String) -> ReportFrame? {
    let characters = Array(line)
    var position = 0
    while position < characters.count, characters[position] == " " { position += 1 }
    let numberStart = position
    while position < characters.count, characters[position].isASCII, characters[position].isNumber { position += 1 }
    guard position > numberStart, let index = Int(String(characters[numberStart..<position])) else { return nil }
    var flags: [String] = []
    while true {
      while position < characters.count, characters[position] == " " { position += 1 }
      guard position < characters.count, characters[position] == "[" else { break }
      guard let close = characters[position...].firstIndex(of: "]") else { return nil }
      flags.append(String(characters[(position + 1)..<close]))
      position = close + 1
    }
    let tokenStart = position
    while position < characters.count, characters[position] != " " { position += 1 }
    guard let address = ReportText.hexNumber(String(characters[tokenStart..<position])) else { return nil }
    let rest = String(characters[position...]).trimmingSpaces
    return ReportFrame(number: index, address: address, isReturnAddress: flags.contains("ra"),
                       reportedSymbol: rest.isEmpty ? nil : rest, position: ProcessSnapshot.Position(column: position + 1))
  }

  /// `0x0000556b4c1d8000–0x0000556b4c1d9d38 167ddc45... crasher   /tmp/sym/crasher`
  /// (an en dash; `<no build ID>` when the image has none).
  static func image(_ line: String) -> ReportImage? {
    var words = line.split(separator: " ", omittingEmptySubsequences: true)[...]
    guard let range = words.popFirst() else { return nil }
    let bounds = range.split(whereSeparator: { $0 == "–" || $0 == "-" })
    guard bounds.count == 2, let start = ReportText.hexNumber(bounds[0]), let end = ReportText.hexNumber(bounds[1]) else {
      return nil
    }
    var identity: ImageIdentity?
    if words.first == "<no", words.count >= 3 {
      words = words.dropFirst(3)  // `<no build ID>`
    } else if let id = words.popFirst() {
      identity = ImageIdentity(id)
      guard identity != nil || id.allSatisfy({ $0 == "0" }) else { return nil }
    }
    guard let name = words.popFirst() else { return nil }
    let path = words.isEmpty ? nil : words.joined(separator: " ")
    // The backtracer's end is the end of text, exclusive; reports elsewhere use the last byte.
    return ReportImage(name: String(name), path: path, loadAddress: start, endAddress: end > start ? end - 1 : end,
                       identity: identity, architecture: nil)
  }
}
