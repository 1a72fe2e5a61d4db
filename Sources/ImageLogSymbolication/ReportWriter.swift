public import ImageLog
import ImageReaders

/// A report of a process's threads taken from outside (`imagelog pid --threads`, a core file), written
/// in the layout imagelog's crash handler writes at crash time, so that `imagelog symbolicate` (and
/// its parser) reads both the same way. `text()` writes it; the symbolication pipeline takes it from there.
public struct ThreadsReport: Sendable {
  /// The signal a crashed process (a core) died of.
  public struct Exception: Sendable {
    /// The signal number (`si_signo`).
    public var signal: Int32
    /// `si_code`.
    public var code: Int32
    /// The fault address (`si_addr`), 0 when the signal has none.
    public var address: UInt64

    public init(signal: Int32, code: Int32, address: UInt64) {
      self.signal = signal
      self.code = code
      self.address = address
    }
  }

  /// One frame of a thread's backtrace.
  public struct Frame: Sendable {
    /// The PC (frame 0) or return address (the others), as unwound.
    public var address: UInt64
    /// How the frame was found, as `FrameTrust` names it: `"frame-pointer"` and `"scan"` are marked in
    /// the text; `nil`, `"context"` and `"cfi"` are not.
    public var trust: String?

    public init(address: UInt64, trust: String? = nil) {
      self.address = address
      self.trust = trust
    }

    /// A frame as `StackUnwinder` found it: its pc and how.
    public init(_ frame: UnwoundFrame) {
      self.init(address: frame.pc, trust: frame.trust.rawValue)
    }
  }

  /// One thread of the process.
  public struct Thread: Sendable {
    /// The kernel's thread id.
    public var tid: Int32
    /// `/proc/PID/task/TID/comm`, when known.
    public var name: String?
    /// The state letter of `/proc/PID/task/TID/stat` (`pid --threads` only).
    public var state: String?
    /// True for the thread that crashed (cores).
    public var crashed: Bool
    /// The backtrace, innermost frame first.
    public var frames: [Frame]
    /// Why the thread was not unwound (written as `(not unwound: PROBLEM)`), `nil` when it was.
    public var problem: String?

    public init(tid: Int32, name: String? = nil, state: String? = nil, crashed: Bool = false, frames: [Frame] = [],
                problem: String? = nil) {
      self.tid = tid
      self.name = name
      self.state = state
      self.crashed = crashed
      self.frames = frames
      self.problem = problem
    }
  }

  /// The process's name (`/proc/PID/comm`, or the core's `NT_PRPSINFO`).
  public var processName: String
  /// The executable's path.
  public var path: String
  public var pid: Int32
  /// When the report was taken (or the core written), seconds since the epoch; written in UTC.
  public var date: Int64
  /// `Linux RELEASE MACHINE`, as `uname` gives them.
  public var osVersion: String
  /// The signal, for a crash (core); `nil` for a live process.
  public var exception: Exception?
  /// How long the threads were stopped (`pid --threads`), in nanoseconds.
  public var stoppedNanoseconds: UInt64?
  /// Every thread, in `/proc/PID/task` order (the main thread first).
  public var threads: [Thread]
  /// The crashed thread's registers (cores); written after the threads.
  public var registers: RegisterState?
  /// The process's images: frames are placed in the one whose text range holds them, and each is
  /// listed under `Binary Images:`.
  public var images: [Image]

  public init(processName: String, path: String, pid: Int32, date: Int64, osVersion: String,
              exception: Exception? = nil, stoppedNanoseconds: UInt64? = nil, threads: [Thread],
              registers: RegisterState? = nil, images: [Image]) {
    self.processName = processName
    self.path = path
    self.pid = pid
    self.date = date
    self.osVersion = osVersion
    self.exception = exception
    self.stoppedNanoseconds = stoppedNanoseconds
    self.threads = threads
    self.registers = registers
    self.images = images
  }

  /// The report in imagelog's crash-report layout (the crash handler's, README.md's "Crash reports"), ending
  /// with a newline: the header, each thread's headings and frames, the crashed thread's registers,
  /// `Binary Images:`. Names from the process are escaped (`TextEscaping`), so none can forge a line.
  public func text() -> String {
    var out = ""
    for line in layout().lines {
      out += line
      out += "\n"
    }
    return out
  }

  /// The report as `ReportParser.parse(text())` reads it, made from the values themselves: the same
  /// lines, threads, frames (with their lines and symbol columns) and images, for the names a process
  /// gives. Where the text loses something, the values are kept: a thread name's leading spaces, and a
  /// thread's problem and state unescaped. `imagelog pid --threads` symbolicates this.
  package func crashReport() -> CrashReport {
    let (lines, placed) = layout()
    var report = CrashReport(format: .imagelog, lines: lines, images: images.map(Self.reportImage))
    report.threadCount = threads.count
    if osVersion.hasPrefix("Linux") { report.architecture = osVersion.split(separator: " ").last.map(String.init) }
    let crashedIndex = threads.firstIndex { $0.crashed }
    report.threads.reserveCapacity(threads.count)
    report.frames.reserveCapacity(placed.count)
    for (number, thread) in threads.enumerated() {
      report.threads.append(CrashReport.Thread(
        number: number, crashed: thread.crashed, name: thread.name, tid: thread.tid >= 0 ? UInt64(thread.tid) : nil,
        state: thread.state, problem: thread.problem,
        registers: number == crashedIndex ? registers : nil))
    }
    var frameImageNames: [Int: String] = [:]
    for place in placed {
      let frame = threads[place.thread].frames[place.index]
      var entry = CrashReport.Frame(thread: place.thread, index: place.index, address: frame.address, imageIndex: nil,
                                    isReturnAddress: place.index > 0, line: place.line, symbolColumn: place.column,
                                    reportedSymbol: nil, ipsThread: nil)
      entry.trust = CrashReport.Frame.trustMark(frame.trust) == nil ? nil : frame.trust
      // As the parser does: the frame goes in the image whose Binary Images range holds it; the name on
      // its line is the fallback it would use, needed only when its own image has no such range.
      if let image = place.image, !report.images[image].isRanged,
         case let name = TextEscaping.escaped(images[image].name).trimmingSpaces, !name.isEmpty, name != "???" {
        frameImageNames[report.frames.count] = name
      }
      report.frames.append(entry)
    }
    ReportParser.attachImages(&report, frameImageNames: frameImageNames)
    if report.images.isEmpty { report.problems.append("no Binary Images section: frames cannot be matched to files") }
    return report
  }

  /// Where `layout` put a frame: its thread and index, its line, the column its symbol part starts at
  /// (after the address and one space), and the image it was placed in (an index into `images`), if any.
  private struct FramePlace {
    var thread: Int
    var index: Int
    var line: Int
    var column: Int
    var image: Int?
  }

  /// The report's lines, without terminators, and where each frame is.
  private func layout() -> (lines: [String], frames: [FramePlace]) {
    var lines: [String] = []
    var places: [FramePlace] = []
    func field(_ label: String, _ value: String) {
      lines.append(label + String(repeating: " ", count: max(1, 17 - label.count)) + value)
    }
    field("Process:", "\(TextEscaping.escaped(processName)) [\(pid)]")
    field("Path:", TextEscaping.escaped(path))
    field("Date/Time:", Self.dateText(date))
    field("OS Version:", TextEscaping.escaped(osVersion))
    let crashedIndex = threads.firstIndex { $0.crashed }
    if let exception {
      let name = Self.signalName(exception.signal) ?? "signal \(exception.signal)"
      let code = Self.codeName(signal: exception.signal, code: exception.code) ?? String(exception.code)
      field("Exception Type:", "\(name) (\(code))")
      field("Exception Codes:", "signal \(exception.signal), code \(exception.code), address 0x\(hexDigits(exception.address, width: 16))")
    }
    if let crashedIndex { field("Crashed Thread:", "\(crashedIndex)  tid \(threads[crashedIndex].tid)") }
    field("Threads:", String(threads.count))
    if let stoppedNanoseconds { field("Stopped:", ImageFormatter.milliseconds(stoppedNanoseconds) + " ms") }

    // The images by text start, to place frames in; each one's name as frame lines write it, made
    // once per image rather than once per frame.
    let byStart = images.indices.sorted { images[$0].textRange.lowerBound < images[$1].textRange.lowerBound }
    let sorted = byStart.map { images[$0] }
    let names = sorted.map { TextEscaping.escaped($0.name) }
    for (index, thread) in threads.enumerated() {
      lines.append("")
      if let name = thread.name { lines.append("Thread \(index) name:  \(TextEscaping.escaped(name))") }
      var heading = "Thread \(index)\(thread.crashed ? " Crashed" : ""):  tid \(thread.tid)"
      if let state = thread.state { heading += "  state \(TextEscaping.escaped(state))" }
      lines.append(heading)
      for (frameIndex, frame) in thread.frames.enumerated() {
        let position = Self.imageIndex(containing: frame.address, in: sorted)
        let (line, column) = Self.frameLine(frameIndex, frame, name: position.map { names[$0] } ?? "???",
                                            base: position.map { sorted[$0].loadAddress } ?? frame.address)
        places.append(FramePlace(thread: index, index: frameIndex, line: lines.count, column: column,
                                 image: position.map { byStart[$0] }))
        lines.append(line)
      }
      if let problem = thread.problem { lines.append("(not unwound: \(TextEscaping.escaped(problem)))") }
    }
    if let registers, let crashedIndex {  // only a crash has them: `pid --threads` writes none
      lines.append("")
      lines.append("Thread \(crashedIndex) crashed with \(registers.title):")
      lines += registers.text().split(separator: "\n").map(String.init)  // one line a row, each with text
    }
    lines.append("")
    lines.append("Binary Images:")
    let formatter = ImageFormatter(style: .crash)
    for image in images { lines.append(formatter.format(image)) }
    return (lines, places)
  }

  /// `image` as a report reads it back from its `Binary Images:` line (`text()` writes one per image):
  /// what symbolication will look for, known before the report is written. The line is written and
  /// read only when its words could read back as other than the image's own (spaces, escapes, an
  /// architecture the parser does not know); otherwise the fields are taken as they are.
  package static func reportImage(_ image: Image) -> CrashReport.Image {
    func plainWord(_ text: String) -> Bool {
      var text = text
      return !text.isEmpty && text.withUTF8 { bytes in
        TextEscaping.isPlain(UnsafeRawBufferPointer(bytes))
          && !bytes.contains { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") }
      }
    }
    let name = image.name, path = image.path
    if plainWord(name), name != "???", name.utf8.first != UInt8(ascii: "+"), name.utf8.last != UInt8(ascii: ")"),
       plainWord(image.architecture), ReportParser.isKnownArchitecture(image.architecture), plainWord(path), path != "???" {
      return CrashReport.Image(name: name, path: path, loadAddress: image.loadAddress, endAddress: image.crashLineEnd,
                               identity: image.buildID.flatMap { ImageIdentity($0.compactUUID) },
                               architecture: image.architecture)
    }
    return AppleCrashParser.binaryImage(ImageFormatter(style: .crash).format(image))
      ?? CrashReport.Image(name: image.name, path: image.path, loadAddress: image.loadAddress, endAddress: nil,
                           identity: image.buildID.map(ImageIdentity.init), architecture: image.architecture)
  }

  /// `N   name(padded to 30)  0x%016llx 0xBASE + OFFSET` and the trust mark, as the crash handler's
  /// `w_frame` writes it (`???` as `name` and the address itself as `base` when no image holds the
  /// address), with the column after the address and its space, in `Character`s as the parser counts
  /// them (escaped names keep their non-ASCII letters). `name` is escaped already.
  static func frameLine(_ index: Int, _ frame: Frame, name: String, base: UInt64) -> (line: String, column: Int) {
    let mark = CrashReport.Frame.trustMark(frame.trust) ?? ""
    var name = name
    var column = 0
    // Written as bytes into one string: the line is made once per frame of every thread.
    let line = name.withUTF8 { nameBytes in
      String(unsafeUninitializedCapacity: nameBytes.count + mark.utf8.count + 120) { buffer in
        guard let out = buffer.baseAddress else { return 0 }
        var position = 0
        func decimal(_ value: UInt64) {
          var count = 0
          var rest = value
          repeat { count += 1; rest /= 10 } while rest > 0
          rest = value
          var at = position + count
          repeat { at -= 1; out[at] = UInt8(ascii: "0") + UInt8(rest % 10); rest /= 10 } while at > position
          position += count
        }
        func spaces(_ count: Int) {
          for _ in 0..<count { out[position] = UInt8(ascii: " "); position += 1 }
        }
        decimal(UInt64(max(index, 0)))
        spaces(index < 10 ? 3 : index < 100 ? 2 : 1)
        for byte in nameBytes { out[position] = byte; position += 1 }
        spaces(nameBytes.count < 30 ? 30 - nameBytes.count : 1)
        out[position] = UInt8(ascii: "0"); out[position + 1] = UInt8(ascii: "x")
        position = HexText.writeDigits(frame.address, count: 16, to: out, at: position + 2)
        column = position
        out[position] = UInt8(ascii: " ")
        out[position + 1] = UInt8(ascii: "0"); out[position + 2] = UInt8(ascii: "x")
        position = HexText.writeHex(base, to: out, at: position + 3)
        for byte in " + ".utf8 { out[position] = byte; position += 1 }
        decimal(frame.address &- base)
        for byte in mark.utf8 { out[position] = byte; position += 1 }
        return position
      }
    }
    // A name that is not ASCII: the column counted in Characters, as the parser reads the line.
    if !name.utf8.allSatisfy({ $0 < 0x80 }) { column = String(decoding: line.utf8.prefix(column), as: UTF8.self).count }
    return (line, column + 1)
  }

  /// The index in `sorted` (by text start) of the image whose text range holds `address` (the crash
  /// handler's `table_lookup`).
  static func imageIndex(containing address: UInt64, in sorted: [Image]) -> Int? {
    // The last image starting at or below the address, found by bisection.
    var low = 0, high = sorted.count
    while low < high {
      let middle = (low + high) / 2
      if sorted[middle].textRange.lowerBound <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0, sorted[low - 1].textRange.contains(address) else {
      return sorted.firstIndex { $0.textRange.contains(address) }  // overlapping ranges: any that holds it
    }
    return low - 1
  }

  /// `YYYY-MM-DD HH:MM:SS +0000` for `seconds` since the epoch (UTC), as the crash handler's `w_date`.
  static func dateText(_ seconds: Int64) -> String {
    // Howard Hinnant's civil_from_days, as crash.c uses it.
    let days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400)
    let rest = seconds - days * 86400
    let z = days + 719468
    let era = (z >= 0 ? z : z - 146096) / 146097
    let dayOfEra = z - era * 146097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365
    var year = yearOfEra + era * 400
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    if month <= 2 { year += 1 }
    func digits(_ value: Int64, _ width: Int) -> String {
      let text = String(value)
      return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(digits(year, 4))-\(digits(month, 2))-\(digits(day, 2)) "
      + "\(digits(rest / 3600, 2)):\(digits(rest / 60 % 60, 2)):\(digits(rest % 60, 2)) +0000"
  }

  /// The crash handler's `signal_name`: the signals it handles by name, `nil` for others.
  static func signalName(_ signal: Int32) -> String? {
    switch signal {
    case 11: "SIGSEGV"
    case 7: "SIGBUS"
    case 4: "SIGILL"
    case 8: "SIGFPE"
    case 6: "SIGABRT"
    case 5: "SIGTRAP"
    default: nil
    }
  }

  /// The crash handler's `code_name`: `si_code`'s `<signal.h>` name for `signal`, `nil` when unknown.
  static func codeName(signal: Int32, code: Int32) -> String? {
    switch code {
    case 0: return "SI_USER"
    case 0x80: return "SI_KERNEL"
    case -1: return "SI_QUEUE"
    case -2: return "SI_TIMER"
    case -3: return "SI_MESGQ"
    case -4: return "SI_ASYNCIO"
    case -5: return "SI_SIGIO"
    case -6: return "SI_TKILL"
    default: break
    }
    let names: [String]
    switch signal {
    case 11: names = ["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI", "SEGV_ADIDERR",
                      "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR", "SEGV_CPERR"]
    case 7: names = ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]
    case 4: names = ["ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC",
                     "ILL_BADSTK", "ILL_BADIADDR"]
    case 8: names = ["FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV",
                     "FPE_FLTSUB", "FPE_FLTUNK", "FPE_CONDTRAP"]
    case 5: names = ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"]
    default: return nil
    }
    return code >= 1 && Int(code) <= names.count ? names[Int(code) - 1] : nil
  }
}
