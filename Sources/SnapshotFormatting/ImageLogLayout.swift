import ProcessInspection
import ImageReaders
public import Snapshot

extension ProcessSnapshot {
  /// A header line of imagelog's layout: the label, padded to 17 columns, and the value.
  static func headerField(_ label: String, _ value: String) -> String {
    label + String(repeating: " ", count: max(1, 17 - label.count)) + value + "\n"
  }

  /// The snapshot in imagelog's report layout, the one its crash handler writes: the header (Process,
  /// Path, Date/Time, OS Version, the exception, Crashed Thread, Threads, Stopped), each thread's
  /// headings and frames, the crashed thread's registers, and `Binary Images:`; each line ends with a
  /// newline. A frame symbolication named is written `name + offset (file:line)`, one line per inlined
  /// function; any other frame `0xLOAD + OFFSET`. Text from the process is escaped (`TextEscaping`),
  /// so no name can forge a line.
  public func imagelogReportText() -> String {
    var out = ""
    out.reserveCapacity(256 + 120 * frameCount + 200 * images.count)
    func field(_ label: String, _ value: String) { out += Self.headerField(label, value) }
    field("Process:", "\(TextEscaping.escaped(process.name ?? "???")) [\(process.pid ?? 0)]")
    field("Path:", TextEscaping.escaped(process.path ?? "???"))
    field("Date/Time:", Self.dateText(process.date ?? 0))
    field("OS Version:", TextEscaping.escaped(process.osVersion ?? "???"))
    let crashedIndex = crashedThreadIndex
    if let exception, let reason = exception.reason {
      // Not a signal: the platform's own name, its raw code and flags.
      field("Exception Type:", TextEscaping.escaped(reason))
      field("Exception Codes:", "code 0x\(hexDigits(UInt64(UInt32(bitPattern: exception.signal)), width: 8)), flags "
              + "0x\(hexDigits(UInt64(UInt32(bitPattern: exception.code)), width: 8)), address 0x\(hexDigits(exception.address, width: 16))")
    } else if let exception {
      let name = Self.signalName(exception.signal) ?? "signal \(exception.signal)"
      let code = Self.codeName(signal: exception.signal, code: exception.code) ?? String(exception.code)
      field("Exception Type:", "\(name) (\(code))")
      field("Exception Codes:", "signal \(exception.signal), code \(exception.code), address 0x\(hexDigits(exception.address, width: 16))")
    }
    if let abortMessage { field("Abort Message:", TextEscaping.escaped(abortMessage)) }
    if let crashedIndex { field("Crashed Thread:", "\(crashedIndex)  tid \(threads[crashedIndex].tid ?? 0)") }
    if let requesting = threads.firstIndex(where: \.requestedDump) {
      field("Dump Requested:", "by thread \(requesting)  tid \(threads[requesting].tid ?? 0) (nothing crashed)")
    }
    field("Threads:", String(process.threadCount ?? threads.count))
    if let signature { field("Signature:", TextEscaping.escaped(signature)) }
    if let stopped = process.stoppedNanoseconds { field("Stopped:", ImageFormatter.milliseconds(stopped) + " ms") }

    // Each image's name as frame lines write it, made once per image rather than once per frame.
    let names = images.map { TextEscaping.escaped($0.name) }
    for (index, thread) in threads.enumerated() {
      out += "\n"
      if let name = thread.name, !name.isEmpty { out += "Thread \(index) name:  \(TextEscaping.escaped(name))\n" }
      out += "Thread \(index)\(thread.crashed ? " Crashed" : thread.requestedDump ? " Requested Dump" : ""):  tid \(thread.tid ?? 0)"
      if let state = thread.state { out += "  state \(TextEscaping.escaped(state))" }
      out += "\n"
      for frame in thread.frames {
        let image = frame.imageIndex.flatMap { images.indices.contains($0) ? $0 : nil }
        // Code no longer mapped, in an image removed before the crash: named, with when it went.
        let gone = image == nil ? unloadedImage(holding: frame.address) : nil
        let prefix = Self.framePrefix(frame.number, name: gone.map { TextEscaping.escaped($0.name) } ?? image.map { names[$0] } ?? "???",
                                      address: frame.address)
        let mark = (unloadedNote(frame) ?? "") + ProcessSnapshot.Frame.trustMark(frame.trust)
        let base = gone?.baseAddress ?? image.map { images[$0].loadAddress } ?? frame.address
        switch frame.symbols.status {
        case .symbolicated:
          for function in frame.symbols.functions {
            out += prefix
            out += Self.appleStyle(function)
            out += mark
            out += "\n"
          }
        case let .mismatch(reportID, fileID, path):
          Self.appendAddressPart(frame.address, base: base, to: &out, prefix: prefix, mark: mark)
          out.removeLast()
          out += "  [UUID mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]\n"
        default:
          Self.appendAddressPart(frame.address, base: base, to: &out, prefix: prefix, mark: mark)
        }
      }
      if let problem = thread.problem { out += "(not unwound: \(TextEscaping.escaped(problem)))\n" }
    }
    if let crashedIndex, let registers = threads[crashedIndex].registers {
      out += "\nThread \(crashedIndex) crashed with \(registers.architecture.appleThreadState):\n"
      out += registers.threadStateText()
    } else if let requesting = threads.firstIndex(where: \.requestedDump), let registers = threads[requesting].registers {
      out += "\nThread \(requesting) requested the dump with \(registers.architecture.appleThreadState):\n"
      out += registers.threadStateText()
    }
    out += "\nBinary Images:\n"
    let formatter = ImageFormatter(style: .crash)
    for image in images {
      if let loaded = image.loaded, loaded.buildID != nil || image.identity == nil {
        out += formatter.format(loaded)
      } else {
        out += "0x\(hexDigits(image.loadAddress)) - 0x\(hexDigits(image.endAddress ?? image.loadAddress)) "
          + "\(TextEscaping.escaped(image.name)) \(image.architecture ?? "???")  "
          + "<\(image.identity.map { TextEscaping.escaped($0.text) } ?? "")> \(TextEscaping.escaped(image.path ?? "???"))"
      }
      out += "\n"
    }
    if !unloadedImages.isEmpty {
      out += "\nUnloaded Images:\n"
      let architecture = images.lazy.compactMap(\.architecture).first ?? "???"
      for gone in unloadedImages { out += Self.unloadedLine(gone, architecture: architecture) + "\n" }
    }
    if !imageTimeline.isEmpty {
      out += "\nImage Timeline:\n"
      for event in imageTimeline { out += Self.timelineLine(event) + "\n" }
    }
    return out
  }

  /// An Image Timeline line, the bytes `crash_unloaded.h`'s `il_unloaded_event_line` writes:
  /// `-T ms  unloaded NAME at ADDRESS (loaded for L ms) by thread N`,
  /// `-T ms  loaded NAME at ADDRESS by thread N` (T and L with three decimals).
  static func timelineLine(_ event: ImageEvent) -> String {
    let offset = event.crashOffsetNanoseconds
    var line = (offset <= 0 ? "-" : "+") + ImageFormatter.milliseconds(offset.magnitude) + " ms  "
    line += "\(event.kind.rawValue) \(TextEscaping.escaped(event.name)) at 0x\(hexDigits(event.baseAddress))"
    if event.kind == .unloaded, let loadedFor = event.loadedForNanoseconds {
      line += " (loaded for \(ImageFormatter.milliseconds(loadedFor)) ms)"
    }
    if let tid = event.tid { line += " by thread \(UInt32(bitPattern: tid))" }
    return line
  }

  /// The note imagelog's layout writes on a frame in an image removed before the crash,
  /// `  (unloaded T ms before the crash by thread N)`, or in a mapped image where such an image had
  /// been, `  (libplugin.so was here, unloaded ...)`; `nil` for the others.
  func unloadedNote(_ frame: Frame) -> String? {
    if let index = frame.imageIndex, images.indices.contains(index) {
      return previousImage(at: frame.address, in: images[index]).map { "  (\(TextEscaping.escaped($0.name)) was here, \($0.whenText))" }
    }
    return unloadedImage(holding: frame.address).map { "  (\($0.whenText))" }
  }

  /// An Unloaded Images line, the bytes `crash_unloaded.h`'s `il_unloaded_line` writes: the image's
  /// Binary Images line with its whole build-id, then when it went and how long it had been loaded.
  static func unloadedLine(_ gone: UnloadedImage, architecture: String) -> String {
    let last = gone.size == 0 ? gone.baseAddress : gone.baseAddress &+ gone.size &- 1
    var line = "0x\(hexDigits(gone.baseAddress)) - 0x\(hexDigits(last)) \(TextEscaping.escaped(gone.name)) \(architecture)  "
    line += "<\(HexText.bytes(gone.buildID))> \(TextEscaping.escaped(gone.path))  \(gone.whenText)"
    if let loadedFor = gone.loadedForNanoseconds { line += ", loaded for \(ImageFormatter.milliseconds(loadedFor)) ms" }
    return line
  }

  /// `N   name(padded to 30)  0x%016llx ` of a frame line, as the crash handler's `w_frame` writes it: the
  /// part a symbolicated line keeps. `name` is escaped already.
  static func framePrefix(_ number: Int, name: String, address: Address) -> String {
    var line = String(max(number, 0))
    line += String(repeating: " ", count: number < 10 ? 3 : number < 100 ? 2 : 1)
    line += name
    let width = name.utf8.count
    line += String(repeating: " ", count: width < 30 ? 30 - width : 1)
    line += "0x" + hexDigits(address, width: 16) + " "
    return line
  }

  /// `0xBASE + OFFSET`, the mark and a newline after `prefix`: an address not named.
  static func appendAddressPart(_ address: Address, base: Address, to out: inout String, prefix: String, mark: String) {
    out += prefix
    out += "0x" + hexDigits(base) + " + " + String(address &- base)
    out += mark
    out += "\n"
  }

  /// One function as Apple's reports write it: `name + 184 (main.swift:16)`. Names and paths come
  /// from files: they are escaped (`TextEscaping`).
  static func appleStyle(_ function: FrameSymbols.Function) -> String {
    var text = function.name.map(TextEscaping.escaped) ?? "???"
    if let offset = function.offset { text += " + \(offset)" }
    if let file = function.file, let line = function.line {
      text += " (\(TextEscaping.escaped(ProcessInspection.Image.shortName(of: file))):\(line))"
    }
    return text
  }
}
