import ProcessInspection
import ImageReaders
import Snapshot

/// Apple's `.crash` text and imagelog's own report, which follows its layout: `Thread N:` headings,
/// `INDEX  IMAGE  0xADDRESS  REST` frames, and a `Binary Images:` section.
enum AppleCrashParser {
  /// Seconds since the epoch of imagelog's `YYYY-MM-DD HH:MM:SS +0000` (UTC only); `nil` for other forms.
  static func utcSeconds(_ text: String) -> Int64? {
    let parts = text.split(separator: " ")
    guard parts.count == 3, parts[2] == "+0000" else { return nil }
    let day = parts[0].split(separator: "-"), time = parts[1].split(separator: ":")
    guard day.count == 3, time.count == 3, day[0].count == 4, let year = Int64(day[0]), let month = Int64(day[1]),
          let date = Int64(day[2]), let hour = Int64(time[0]), let minute = Int64(time[1]), let second = Int64(time[2]),
          (1...12).contains(month), (1...31).contains(date), (0..<24).contains(hour), (0..<60).contains(minute),
          (0..<61).contains(second) else { return nil }
    // Howard Hinnant's days_from_civil, the inverse of the writer's civil_from_days; year has 4 digits: no overflow.
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + date - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = era * 146097 + dayOfEra - 719468
    return days * 86400 + hour * 3600 + minute * 60 + second
  }

  static func parse(_ lines: [String]) -> ProcessSnapshot {
    var report = ProcessSnapshot(format: .appleCrash, document: ReportDocument(lines: lines))
    var section: Section = .header
    var frameImageNames: [ProcessSnapshot.FrameRef: String] = [:]
    var crashedFromHeader: Int?
    var currentThread = 0
    var sawLinux = false
    var crashedTID: UInt64?
    var unlisted = 0
    // Thread number to its first entry in report.threads: a report of many threads stays linear.
    var threadIndex: [Int: Int] = [:]
    // Each section's thread and registers; a section of another machine (PowerPC's) is passed over.
    var registers: [(Int, Registers?)] = []
    for (lineIndex, line) in lines.enumerated() {
      let trimmed = line.drop { $0 == " " || $0 == "\t" }
      if lineIndex == 0, line.hasPrefix("{") { continue }  // the JSON header line
      if trimmed.isEmpty {
        if (section == .images && !report.images.isEmpty) || section == .unloaded || section == .timeline { section = .header }
        if case .thread = section { section = .header }
        if section == .registers { section = .header }
        continue
      }
      if line.hasPrefix("Binary Images:") { section = .images; continue }
      if line.hasPrefix("Unloaded Images:") { section = .unloaded; continue }
      if line.hasPrefix("Image Timeline:") { section = .timeline; continue }
      if line.hasPrefix("Last Exception Backtrace:") {
        section = .thread(-1)
        currentThread = -1
        report.threads.append(ReportThread(number: -1, name: "Last Exception Backtrace"))
        if threadIndex[-1] == nil { threadIndex[-1] = report.threads.count - 1 }
        continue
      }
      // macOS's Objective-C exception crashes: `Application Specific Backtrace 1:` inside Application
      // Specific Information, with frames in the thread layout. Numbered -1 - N (-1 is Last Exception Backtrace).
      if line.hasPrefix("Application Specific Backtrace "), line.hasSuffix(":"),
         let number = Int(line.dropFirst("Application Specific Backtrace ".count).dropLast()), number >= 0, number < 1 << 20 {
        section = .thread(-1 - number)
        currentThread = -1 - number
        report.threads.append(ReportThread(number: currentThread, name: String(line.dropLast())))
        if threadIndex[currentThread] == nil { threadIndex[currentThread] = report.threads.count - 1 }
        continue
      }
      if line.hasPrefix("Thread "), let heading = threadHeading(line) {
        switch heading {
        case let .frames(number, crashed, name, tid, state, unreadable):
          if let unreadable {
            report.problems.append("line \(lineIndex + 1): unreadable words in the thread heading '\(unreadable.prefix(80))'")
          }
          section = .thread(number)
          currentThread = number
          let existing = threadIndex[number] ?? {
            report.threads.append(ReportThread(number: number))
            threadIndex[number] = report.threads.count - 1
            return report.threads.count - 1
          }()
          report.threads[existing].crashed = report.threads[existing].crashed || crashed
          if let name { report.threads[existing].name = name }
          if let tid { report.threads[existing].tid = tid }
          if let state { report.threads[existing].state = state }
        case .name(let number, let name):
          report.threads.append(ReportThread(number: number, name: name))
          if threadIndex[number] == nil { threadIndex[number] = report.threads.count - 1 }
          section = .header
        case let .registers(number, title):
          registers.append((number, Registers.Architecture(appleThreadState: title).map { Registers($0) }))
          section = .registers
        }
        continue
      }
      if section == .registers {
        // Register rows are indented; anything else ends the section (Apple's `Logical CPU:` lines).
        if line.hasPrefix(" ") || line.hasPrefix("\t"), let row = registerRow(line), !registers.isEmpty {
          for (name, value) in row { registers[registers.count - 1].1?[name] = value }
          continue
        }
        section = .header
      }
      switch section {
      case .header:
        if let value = field(line, "Crashed Thread:") {
          let words = value.split(separator: " ")
          crashedFromHeader = words.first.flatMap { Int($0) }
          // imagelog's `Crashed Thread:  2  tid 12345`.
          if words.count >= 3, words[1] == "tid" { crashedTID = UInt64(words[2]) }
        } else if let value = field(line, "Abort Message:"), report.abortMessage == nil {
          // imagelog's line, escaped as its text is.
          let text = value.trimmingSpaces
          report.abortMessage = TextEscaping.unescaped(text).map { String(decoding: $0, as: UTF8.self) } ?? text
        } else if let value = field(line, "Threads:"), let count = Int(value.trimmingSpaces), count >= 0 {
          report.process.threadCount = count
        } else if line.hasPrefix("("), line.hasSuffix(" more threads not listed)"),
                  case let digits = line.dropFirst().prefix(while: { $0.isASCII && $0.isNumber }), digits.count <= 9,
                  let count = Int(digits) {
          // The crash handler ran out of room for their tids. Below 10^9 each, in at most 64 MiB of lines: no overflow.
          unlisted += count
        } else if let value = field(line, "Process:"), report.process.name == nil {
          // `NAME [PID]`, as imagelog's and Apple's reports write it.
          let text = value.trimmingSpaces
          if text.hasSuffix("]"), let open = text.lastIndex(of: "["),
             let pid = Int32(text[text.index(after: open)..<text.index(before: text.endIndex)]) {
            report.process.name = String(text[..<open]).trimmingSpaces
            report.process.pid = pid
          } else {
            report.process.name = text
          }
        } else if let value = field(line, "Path:"), report.process.path == nil {
          report.process.path = value.trimmingSpaces
        } else if let value = field(line, "Date/Time:"), report.process.date == nil {
          report.process.date = utcSeconds(value.trimmingSpaces)
        } else if let value = field(line, "Code Type:") {
          report.process.architecture = Architecture(reportName: value)?.name
        } else if let value = field(line, "OS Version:"), value.hasPrefix("Linux") {
          report.process.osVersion = value.trimmingSpaces
          sawLinux = true
          report.process.architecture = report.process.architecture ?? value.split(separator: " ").last.map(String.init)
        } else if let value = field(line, "OS Version:"), report.process.osVersion == nil {
          report.process.osVersion = value.trimmingSpaces
        } else if let value = field(line, "Exception Codes:"), value.hasPrefix("signal") {
          sawLinux = true
        }
      case .thread:
        if let problem = notUnwound(line) {
          if let index = threadIndex[currentThread] {
            report.threads[index].problem = problem
          }
          continue
        }
        guard let parsed = frame(line) else {
          report.problems.append("line \(lineIndex + 1): unreadable frame '\(line.prefix(80))'")
          continue
        }
        guard let thread = threadIndex[currentThread] else { continue }  // every section's heading made its thread
        var frame = parsed.frame
        frame.position?.line = lineIndex
        if let name = parsed.imageName {
          frameImageNames[ProcessSnapshot.FrameRef(thread: thread, frame: report.threads[thread].frames.count)] = name
        }
        report.threads[thread].frames.append(frame)
      case .registers:
        break  // handled above
      case .images:
        if line.hasPrefix("EOF") { section = .header; continue }
        guard let image = binaryImage(line) else {
          report.problems.append("line \(lineIndex + 1): unreadable binary image '\(line.prefix(80))'")
          continue
        }
        report.images.append(image)
      case .unloaded:
        guard let image = unloadedImage(line) else {
          report.problems.append("line \(lineIndex + 1): unreadable unloaded image '\(line.prefix(80))'")
          continue
        }
        report.unloadedImages.append(image)
      case .timeline:
        guard let event = timelineEvent(line) else {
          report.problems.append("line \(lineIndex + 1): unreadable image timeline event '\(line.prefix(80))'")
          continue
        }
        report.imageTimeline.append(event)
      }
    }
    if let crashedFromHeader, let index = threadIndex[crashedFromHeader] {
      report.threads[index].crashed = true
      if report.threads[index].tid == nil { report.threads[index].tid = crashedTID }
    }
    for case let (number, state?) in registers {
      // The heading says the thread crashed; a report that lists no such thread still keeps its registers.
      if let index = threadIndex[number] {
        report.threads[index].registers = state
      } else {
        report.threads.append(ReportThread(number: number, crashed: true, registers: state))
        threadIndex[number] = report.threads.count - 1
      }
    }
    if let count = report.process.threadCount {
      let listed = report.threads.filter { $0.number >= 0 }.count
      if listed + unlisted != count {
        report.problems.append("the header says \(count) threads, the report lists \(listed)"
                               + (unlisted > 0 ? " and \(unlisted) more not listed" : ""))
      }
    }
    if sawLinux {
      report.format = .imagelog
      // imagelog's writers (crash.c, ThreadsReport, the Binary Images lines) escape thread names, image
      // names and paths with TextEscaping's scheme: the model holds the name or path itself, its bytes
      // kept (`PathBytes`), so a path is opened as it is and escaped once when written again. Text that
      // is not in that scheme is kept as written.
      func original(_ text: String) -> String { TextEscaping.unescaped(text).map(PathBytes.string) ?? text }
      for index in report.threads.indices {
        if let name = report.threads[index].name { report.threads[index].name = original(name) }
      }
      for index in report.images.indices {
        report.images[index].name = original(report.images[index].name)
        if let path = report.images[index].path { report.images[index].path = original(path) }
      }
      report.process.name = report.process.name.map(original)
      report.process.path = report.process.path.map(original)
      report.process.osVersion = report.process.osVersion.map(original)
      for (frame, name) in frameImageNames { frameImageNames[frame] = original(name) }
      for index in report.unloadedImages.indices { report.unloadedImages[index].path = original(report.unloadedImages[index].path) }
      for index in report.imageTimeline.indices { report.imageTimeline[index].name = original(report.imageTimeline[index].name) }
    }
    report.placeFrames { thread, frame in frameImageNames[ProcessSnapshot.FrameRef(thread: thread, frame: frame)] }
    if report.images.isEmpty { report.problems.append("no Binary Images section: frames cannot be matched to files") }
    return report
  }

  enum Section: Equatable { case header, thread(Int), registers, images, unloaded, timeline }

  /// The trust imagelog's report layout marks at a frame line's end (`  (frame pointer)`,
  /// `  (stack scan)`), with the mark's length.
  static func trust(endingLine line: some StringProtocol) -> (trust: FrameTrust, markLength: Int)? {
    for trust in [FrameTrust.framePointer, .stackScan] {
      let mark = ProcessSnapshot.Frame.trustMark(trust)
      if line.hasSuffix(mark) { return (trust, mark.count) }
    }
    return nil
  }

  enum Heading {
    /// `unreadable`: the words after the colon that are neither `tid T` nor `state S`, if any.
    case frames(Int, crashed: Bool, name: String?, tid: UInt64?, state: String?, unreadable: String? = nil)
    case name(Int, String)
    /// `Thread N crashed with TITLE:` (or imagelog's `requested the dump with`), the registers' heading.
    case registers(Int, title: String)
  }

  /// `Thread 3:`, `Thread 0 Crashed:`, `Thread 0 name:  Dispatch queue: ...`,
  /// `Thread 0 crashed with ARM Thread State (64-bit):`, macOS 12's `Thread 0 Crashed::  Dispatch
  /// queue: com.apple.main-thread` / `Thread 1::  Dispatch queue: ...` (the name after a double colon),
  /// and imagelog's `Thread 1:  tid 12341  state S` / `Thread 2 Crashed:  tid 12345`.
  static func threadHeading(_ line: String) -> Heading? {
    var rest = line.dropFirst("Thread ".count)
    let digits = rest.prefix { $0.isASCII && $0.isNumber }
    guard digits.count <= 9, let number = Int(digits) else { return nil }
    rest = rest.dropFirst(digits.count)
    if rest.hasPrefix(" name:") { return .name(number, String(rest.dropFirst(6).drop { $0 == " " })) }
    if rest.hasPrefix(" crashed with") || rest.utf8Range(of: "Thread State") != nil {
      // imagelog's report of a dump requested without a crash: `Thread N requested the dump with TITLE:`.
      let lead = [" crashed with", " requested the dump with"].first { rest.hasPrefix($0) }
      var title = lead.map { rest.dropFirst($0.count) } ?? rest
      if title.hasSuffix(":") { title = title.dropLast() }
      return .registers(number, title: title.trimmingSpaces)
    }
    var crashed = false
    if rest.hasPrefix(" Crashed") { crashed = true; rest = rest.dropFirst(8) }
    guard rest.hasPrefix(":") else { return nil }
    rest = rest.dropFirst()
    if rest.hasPrefix(":") {
      let name = rest.dropFirst().trimmingSpaces
      return .frames(number, crashed: crashed, name: name.isEmpty ? nil : name, tid: nil, state: nil)
    }
    // imagelog's `tid T` and `state S`, in that order, each at most once.
    let words = rest.split(separator: " ", omittingEmptySubsequences: true)
    var tid: UInt64?
    var state: String?
    var position = 0
    if position + 1 < words.count, words[position] == "tid", let value = UInt64(words[position + 1]) {
      tid = value
      position += 2
    }
    if position + 1 < words.count, words[position] == "state" {
      state = String(words[position + 1])
      position += 2
    }
    // Words of a later layout (or damage) leave the heading a heading: its frames are still read.
    let unreadable = position < words.count ? words[position...].joined(separator: " ") : nil
    return .frames(number, crashed: crashed, name: nil, tid: tid, state: state, unreadable: unreadable)
  }

  /// The reason in imagelog's `(not unwound: REASON)` line, else `nil`.
  static func notUnwound(_ line: String) -> String? {
    let trimmed = line.trimmingSpaces
    guard trimmed.hasPrefix("(not unwound: "), trimmed.hasSuffix(")") else { return nil }
    return String(trimmed.dropFirst("(not unwound: ".count).dropLast())
  }

  /// One line of a `Thread State` section: each `name: 0xHEX` cell (`  rax: 0x…  rbx: 0x…`,
  /// `    x0: 0x…   x1: 0x…`); words that are no cell (Apple's `(Data Abort) byte read`) are passed
  /// over. `nil` when the line has no cell.
  static func registerRow(_ line: String) -> [(name: String, value: UInt64)]? {
    let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
    var row: [(name: String, value: UInt64)] = []
    var index = 0
    while index + 1 < words.count {
      let name = words[index], value = words[index + 1]
      if name.count > 1, name.hasSuffix(":"), value.hasPrefix("0x"), let number = ReportText.hexNumber(value) {
        row.append((String(name.dropLast()), number))
        index += 2
      } else {
        index += 1
      }
    }
    return row.isEmpty ? nil : row
  }

  static func field(_ line: String, _ name: String) -> Substring? {
    guard line.hasPrefix(name) else { return nil }
    return line.dropFirst(name.count).drop { $0 == " " || $0 == "\t" }
  }

  /// `0   libsystem_kernel.dylib   0x00000001a2b3c4d8 __pthread_kill + 8` or
  /// `0   MyApp   0x000000010064db08 0x100104000 + 5544712`. The image name may contain spaces.
  static func frame(_ line: String) -> (frame: ReportFrame, imageName: String?)? {
    // imagelog's trust mark ends the line; the rest is read without it.
    let trust = trust(endingLine: line)
    let body = line.dropLast(trust?.markLength ?? 0)
    // Scanned as one byte per Character: an ASCII line (nearly every one) is its own UTF-8, with no
    // grapheme breaking and no Character values; in any other line each Character that is not one ASCII
    // byte stands as 0x80, which no test below accepts, so positions stay Character columns.
    let ascii = body.utf8.allSatisfy { $0 < 0x80 && $0 != UInt8(ascii: "\r") }
    let characters: [Character] = ascii ? [] : Array(body)
    let units: [UInt8] = ascii ? Array(body.utf8) : characters.map { $0.utf8.count == 1 ? $0.utf8.first! : 0x80 }
    func text(_ range: Range<Int>) -> String {
      ascii ? String(decoding: units[range], as: UTF8.self) : String(characters[range])
    }
    let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
    var position = 0
    while position < units.count, units[position] == space { position += 1 }
    let numberStart = position
    while position < units.count, units[position] >= UInt8(ascii: "0"), units[position] <= UInt8(ascii: "9") { position += 1 }
    guard position > numberStart, let index = Int(text(numberStart..<position)) else { return nil }
    // Find the first whitespace-delimited `0x...` token after the image name.
    var tokenStart: Int?
    var scan = position
    while scan < units.count {
      while scan < units.count, units[scan] == space || units[scan] == tab { scan += 1 }
      let start = scan
      while scan < units.count, units[scan] != space, units[scan] != tab { scan += 1 }
      // `0x` first: no string is made for the image name's and other tokens.
      if start + 1 < scan, units[start] == UInt8(ascii: "0"), units[start + 1] == UInt8(ascii: "x") || units[start + 1] == UInt8(ascii: "X"),
         ReportText.hexNumber(text(start..<scan)) != nil, start > position + 1 {
        tokenStart = start
        break
      }
    }
    guard let tokenStart else { return nil }
    var tokenEnd = tokenStart
    while tokenEnd < units.count, units[tokenEnd] != space, units[tokenEnd] != tab { tokenEnd += 1 }
    guard let address = ReportText.hexNumber(text(tokenStart..<tokenEnd)) else { return nil }
    let name = text(position..<tokenStart).trimmingSpaces
    var symbolColumn = tokenEnd
    while symbolColumn < units.count, units[symbolColumn] == space { symbolColumn += 1 }
    let rest = text(symbolColumn..<units.count)
    let reported: String? = rest.hasPrefix("0x") || rest.isEmpty || rest == "???" ? nil : rest
    let frame = ReportFrame(number: index, address: address, isReturnAddress: index > 0, trust: trust?.trust,
                            reportedSymbol: reported, position: ProcessSnapshot.Position(column: tokenEnd + 1))
    return (frame, name.isEmpty || name == "???" ? nil : name)
  }

  /// One `Binary Images:` line in any of its variants:
  /// `0x100104000 -        0x100657fff +MyApp arm64  <c299a741488a3656a410a7be59926b13> /path`,
  /// `       0x1a2b3c000 -        0x1a2b73fff libsystem_kernel.dylib (*) <C299A741-...> /usr/lib/...`,
  /// `0x10d5c1000 - 0x10d5c4fff +com.example.app (1.0 - 1) <UUID> /path`, `??? (*) <0000...> ???`.
  static func binaryImage(_ line: String) -> ReportImage? {
    let text = line.drop { $0 == " " || $0 == "\t" }
    guard let dash = text.utf8Range(of: " - ") ?? text.utf8Range(of: "-") else { return nil }
    guard let start = ReportText.hexNumber(text[..<dash.lowerBound].trimmingSpaces) else { return nil }
    let afterDash = text[dash.upperBound...].drop { $0 == " " }
    let endToken = afterDash.prefix { $0 != " " }
    let end = ReportText.hexNumber(endToken)
    var rest = afterDash.dropFirst(endToken.count).drop { $0 == " " }
    var identity: ImageIdentity?
    var path: String?
    var middle: Substring
    if let open = rest.lastIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
      identity = ImageIdentity(rest[rest.index(after: open)..<close])
      middle = rest[..<open]
      let pathText = rest[rest.index(after: close)...].trimmingSpaces
      path = pathText.isEmpty || pathText == "???" ? nil : pathText
    } else {
      // No identity: the path is the last word that starts with `/`.
      if let slash = rest.utf8Range(of: " /") {
        path = String(rest[rest.index(after: slash.lowerBound)...]).trimmingSpaces
        middle = rest[..<slash.lowerBound]
      } else {
        middle = rest
      }
    }
    var head = middle.trimmingSpaces[...]
    if head.hasPrefix("+") { head = head.dropFirst() }
    if head.hasSuffix(")"), let open = head.lastIndex(of: "(") { head = head[..<open] }
    var words = head.split(separator: " ")
    var architecture: String?
    if words.count > 1, let last = words.last, Architecture(String(last)).isImageLineName {
      architecture = String(last)
      words.removeLast()
    }
    rest = words.joined(separator: " ")[...]
    let name = rest.isEmpty ? (path.map(Image.shortName(of:)) ?? "???") : String(rest)
    return ReportImage(name: name, path: path, loadAddress: start, endAddress: end, identity: identity,
                       architecture: architecture)
  }
}
