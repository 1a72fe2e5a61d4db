import ImageReaders

/// How `ImageFormatter` writes one image.
public enum ImageFormatStyle: String, CaseIterable, Sendable {
  /// The classic image logger: `Added: 0xLOAD (0xTEXTSIZE) /path <UUID>`.
  case logger
  /// Apple "Binary Images": `0xSTART - 0xEND [+]name arch  <id> /path`.
  case crash
  /// `eu-unstrip -n -p PID`: `0xSTART+0xSIZE BUILDID@0xADDR FILE DEBUGFILE NAME`.
  case unstrip
  /// JSON Lines: one object per image with stable field names.
  case json
}

/// Whether an image is being reported as loaded or unloaded.
public enum ImageEvent: Sendable {
  case added
  case removed
}

/// When the loader reported an image, as `imagelog run`'s audit module measures it.
public struct ImageTiming: Sendable, Equatable {
  /// Nanoseconds from the program's start to the image's arrival.
  public var sinceStart: UInt64
  /// Nanoseconds the loader took to map the image (since the previous loader step).
  public var loadDuration: UInt64

  /// A timing of `sinceStart` and `loadDuration` nanoseconds.
  public init(sinceStart: UInt64, loadDuration: UInt64) {
    self.sinceStart = sinceStart
    self.loadDuration = loadDuration
  }
}

/// Formats one image as one line (no newline) in a given style.
///
/// - `logger`: `Added: 0x7f3a1c200000 (0x5d3000) /usr/lib/x86_64-linux-gnu/libstdc++.so.6 <1A2B3C4D-...>`:
///   load address, text size in hex, path, the build-id's UUID form (`BuildID.uuid`; all zeros when the
///   image has no build-id). `Removed:` for `.removed`.
/// - `crash`: `0xSTART - 0xEND +name arch  <id> /path`: START the load address, END the last byte of
///   the text range (inclusive, as Apple's and PLCrashReporter's are), `+` only before the main
///   executable, two spaces before `<`, id = the first 16 build-id bytes as 32 lowercase hex digits
///   (`BuildID.compactUUID`; zeros when there is none), or the whole build-id with `fullBuildIDs`.
/// - `unstrip`: as `eu-unstrip -n -p PID` prints a module: START the load address, SIZE up to the end of
///   the last file-backed page (`Image.fileMappedRange`), the full build-id with `@` the address of its
///   bytes (`-` when none), the file, `-` for the debug file (we do no file I/O to look for one),
///   and the name (the path; `[vdso]` for the vDSO).
/// - `json`: `{"event":"added","path":...,"name":...,"loadAddress":"0x...","loadBias":"0x...",
///   "textStart":"0x...","textEnd":"0x...","textSize":N,"loadEnd":"0x...","loadSize":N,
///   "fileMappedEnd":"0x...","buildID":"hex"|null,"uuid":...|null,"debugID":...|null,
///   "buildIDAddress":"0x..."|null,"architecture":"x86_64","isMainExecutable":false}`. Addresses are hex
///   strings (JSON numbers lose 64-bit precision), ends are exclusive, sizes are numbers. `textStart`
///   is `loadAddress`: the text range starts where the image starts, headers included, as Mach-O's
///   `__TEXT` does; it is not the first executable byte.
///
/// A line can also carry the process it came from (`pid`: `[pid N] ` before a text line, a first
/// `"pid"` member in JSON) and when the loader reported it (`timing`: `  +T ms (loaded in D ms)` after
/// a text line, `"addedAtNanoseconds"` and `"loadNanoseconds"` members last in JSON). Paths and names
/// in the text styles are escaped with `TextEscaping` (a file name cannot forge a line or drive the
/// terminal); JSON escapes them as JSON.
public struct ImageFormatter: Sendable {
  /// The layout of each line.
  public var style: ImageFormatStyle
  /// In the `crash` style, print the whole build-id between `<` and `>` instead of its first 16 bytes.
  public var fullBuildIDs: Bool

  /// A formatter for `style`; `fullBuildIDs` prints whole build-ids in the `crash` style.
  public init(style: ImageFormatStyle, fullBuildIDs: Bool = false) {
    self.style = style
    self.fullBuildIDs = fullBuildIDs
  }

  /// One line for `image`, without a newline, with the process `pid` and the `timing` when given.
  public func format(_ image: Image, event: ImageEvent = .added, pid: Int32? = nil, timing: ImageTiming? = nil)
    -> String
  {
    switch style {
    case .logger: return textLine(logger(image, event: event), pid: pid, timing: timing)
    case .crash: return textLine(crash(image), pid: pid, timing: timing)
    case .unstrip: return textLine(unstrip(image), pid: pid, timing: timing)
    case .json: return json(image, event: event, pid: pid, timing: timing)
    }
  }

  /// One event line (`imagelog watch`, `imagelog run`): the logger and JSON styles name the event
  /// themselves; the crash and unstrip lines get an `Added: ` or `Removed: ` prefix (after `[pid N] `).
  /// A removal with `loadedFor` (nanoseconds the image was loaded) ends `  (loaded for D ms)`, or has a
  /// last `"loadedForNanoseconds"` member in JSON (`CImageLogImageLine.h`'s `loaded_for_ns`).
  package func eventLine(_ image: Image, event: ImageEvent, pid: Int32? = nil, timing: ImageTiming? = nil,
                         loadedFor: UInt64? = nil) -> String {
    let loadedFor = event == .removed ? loadedFor : nil
    switch style {
    case .json:
      let line = json(image, event: event, pid: pid, timing: timing)
      guard let loadedFor else { return line }
      return String(line.dropLast()) + ",\"loadedForNanoseconds\":\(loadedFor)}"
    case .logger:
      return format(image, event: event, pid: pid, timing: timing) + (loadedFor.map(Self.loadedForText) ?? "")
    case .crash, .unstrip:
      let verb = event == .added ? "Added: " : "Removed: "
      return textLine(verb + (style == .crash ? crash(image) : unstrip(image)), pid: pid, timing: timing)
        + (loadedFor.map(Self.loadedForText) ?? "")
    }
  }

  /// `  (loaded for D ms)`: how long a removed image had been loaded, milliseconds with three decimals.
  package static func loadedForText(_ nanoseconds: UInt64) -> String { "  (loaded for \(milliseconds(nanoseconds)) ms)" }

  private func textLine(_ line: String, pid: Int32?, timing: ImageTiming?) -> String {
    var line = line
    if let pid { line = "[pid \(pid)] " + line }
    if let timing { line += Self.timingText(timing) }
    return line
  }

  /// `  +T ms (loaded in D ms)`: the text styles' timing, milliseconds with three decimals.
  package static func timingText(_ timing: ImageTiming) -> String {
    "  +\(milliseconds(timing.sinceStart)) ms (loaded in \(milliseconds(timing.loadDuration)) ms)"
  }

  /// `nanoseconds` as milliseconds with three decimals (`12.345`): the text styles' durations (also
  /// a threads report's `Stopped:`).
  package static func milliseconds(_ nanoseconds: UInt64) -> String {
    let micro = nanoseconds / 1000
    let fraction = String(micro % 1000)
    return "\(micro / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
  }

  private static let zeroUUID = "00000000-0000-0000-0000-000000000000"

  private func logger(_ image: Image, event: ImageEvent) -> String {
    let verb = event == .added ? "Added:" : "Removed:"
    return "\(verb) 0x\(hexDigits(image.loadAddress)) (0x\(hexDigits(image.textSize))) \(TextEscaping.escaped(image.path)) "
      + "<\(image.buildID?.uuid ?? Self.zeroUUID)>"
  }

  private func crash(_ image: Image) -> String {
    let end = image.crashLineEnd  // an empty text range (never seen) prints START as END
    let id = image.buildID.map { fullBuildIDs ? $0.hex : $0.compactUUID } ?? String(repeating: "0", count: 32)
    let plus = image.isMainExecutable ? "+" : ""
    return "0x\(hexDigits(image.loadAddress)) - 0x\(hexDigits(end)) \(plus)\(TextEscaping.escaped(image.name)) "
      + "\(TextEscaping.escaped(image.architecture))  <\(id)> \(TextEscaping.escaped(image.path))"
  }

  private func unstrip(_ image: Image) -> String {
    // elfutils prints the size with "%#" PRIx64, which writes a zero size as "0".
    let size = image.fileMappedRange.upperBound - image.fileMappedRange.lowerBound
    var line = "0x\(hexDigits(image.loadAddress))+\(size == 0 ? "0" : "0x" + hexDigits(size)) "
    if let buildID = image.buildID, !buildID.bytes.isEmpty {
      line += buildID.hex
      if let address = image.buildIDAddress, address != 0 { line += "@0x\(hexDigits(address))" }
    } else {
      line += "-"
    }
    let path = TextEscaping.escaped(image.path)
    return line + " \(path.isEmpty ? "-" : path) - \(path.isEmpty ? TextEscaping.escaped(image.name) : path)"
  }

  private func json(_ image: Image, event: ImageEvent, pid: Int32?, timing: ImageTiming?) -> String {
    func hex(_ value: UInt64) -> String { "\"0x\(hexDigits(value))\"" }
    var fields: [String] = []
    if let pid { fields.append("\"pid\":\(pid)") }
    fields.append("\"event\":\(event == .added ? "\"added\"" : "\"removed\"")")
    fields.append("\"path\":\(jsonStringLiteral(image.path))")
    fields.append("\"name\":\(jsonStringLiteral(image.name))")
    fields.append("\"loadAddress\":\(hex(image.loadAddress))")
    fields.append("\"loadBias\":\(hex(image.loadBias))")
    fields.append("\"textStart\":\(hex(image.textRange.lowerBound))")
    fields.append("\"textEnd\":\(hex(image.textRange.upperBound))")
    fields.append("\"textSize\":\(image.textSize)")
    fields.append("\"loadEnd\":\(hex(image.loadRange.upperBound))")
    fields.append("\"loadSize\":\(image.loadSize)")
    fields.append("\"fileMappedEnd\":\(hex(image.fileMappedRange.upperBound))")
    fields.append("\"buildID\":\(image.buildID.map { "\"\($0.hex)\"" } ?? "null")")
    fields.append("\"uuid\":\(image.buildID.map { "\"\($0.uuid)\"" } ?? "null")")
    fields.append("\"debugID\":\(image.buildID.map { "\"\($0.debugID)\"" } ?? "null")")
    fields.append("\"buildIDAddress\":\(image.buildIDAddress.map(hex) ?? "null")")
    fields.append("\"architecture\":\(jsonStringLiteral(image.architecture))")
    fields.append("\"isMainExecutable\":\(image.isMainExecutable)")
    if let timing {
      fields.append("\"addedAtNanoseconds\":\(timing.sinceStart)")
      fields.append("\"loadNanoseconds\":\(timing.loadDuration)")
    }
    return "{" + fields.joined(separator: ",") + "}"
  }
}

