import ImageLog
import ImageReaders

/// Writes a symbolicated report: in place (the report as it came, each frame's symbol part replaced,
/// same layout, the way `symbolicatecrash` does), as JSON (one object per frame), or for `.ips` as
/// the classic `.crash` text.
public enum ReportStyle: String, Sendable, CaseIterable {
  /// The report's own layout (for `.ips`: the JSON with `symbol`/`symbolLocation` filled in).
  case report
  /// `{"format":…, "frames":[one object per frame], "images":[…]}`.
  case json
  /// Apple's classic `.crash` text.
  case crash
}

extension SymbolicatedReport {
  /// The whole output for `style`, ending with a newline. For the text styles the summary of missing
  /// and mismatched images is at the end; JSON carries it in `images`.
  public func formatted(_ style: ReportStyle) -> String {
    switch style {
    case .json: return jsonText()
    case .crash:
      switch report.format {
      case .appleIPS: return classicText() + summary()
      case .swiftBacktraceJSON: return swiftJSONClassicText() + summary()
      default: return inPlaceText() + summary()
      }
    case .report:
      switch report.format {
      case .appleIPS: return ipsText()
      case .swiftBacktraceJSON: return swiftJSONText()
      case .addresses:
        var out = UTF8Output(capacity: min(frames.count, 1 << 16) * 160 + 256)  // grows past that
        addressLines(into: &out) { _ in }
        out.append(summary())
        return out.text
      default: return inPlaceText() + summary()
      }
    }
  }

  /// `formatted(style)` as UTF-8 bytes, ready to write. A list of addresses (thousands of lines) is
  /// written straight into bytes, with no string per line.
  public func formattedUTF8(_ style: ReportStyle) -> [UInt8] {
    var bytes: [UInt8] = []
    write(style, chunkSize: .max) { bytes.append(contentsOf: $0) }
    return bytes
  }

  /// `formatted(style)` handed to `write` in pieces of about `chunkSize` bytes (at least one, none
  /// empty), in order. A list of addresses is formatted a chunk at a time into one reused buffer, so
  /// its output never exists whole in memory; other styles come as one piece.
  public func write(_ style: ReportStyle, chunkSize: Int = 1 << 16, to write: (UnsafeRawBufferPointer) -> Void) {
    if style == .json { return writeJSON(chunkSize: chunkSize, to: write) }  // a frame at a time, never whole
    guard style == .report, report.format == .addresses else {
      var text = formatted(style)
      text.withUTF8 { if !$0.isEmpty { write(UnsafeRawBufferPointer($0)) } }
      return
    }
    let limit = max(1, chunkSize)
    var out = UTF8Output(capacity: min(limit, frames.count * 160) + 256)  // untouched capacity costs no page
    addressLines(into: &out) { out in out.drain(over: limit, to: write) }
    out.append(summary())
    out.drain(over: 0, to: write)
  }

  // MARK: In place

  func inPlaceText() -> String {
    if report.format.isLinuxLog { return insertedText() }
    // Each line's frame: -1 for none, -2 for more than one (left as it is).
    var frameOfLine = [Int](repeating: -1, count: report.lines.count)
    for (index, frame) in report.frames.enumerated() {
      if let line = frame.line, frameOfLine.indices.contains(line) { frameOfLine[line] = frameOfLine[line] == -1 ? index : -2 }
    }
    var out = ""
    // The lines, and room for what symbolication adds to the frames' (one allocation, not a growth per line).
    out.reserveCapacity(report.lines.reduce(0) { $0 + $1.utf8.count + 1 } + 64 * frames.count)
    for (lineIndex, line) in report.lines.enumerated() {
      let frameIndex = frameOfLine[lineIndex]
      guard frameIndex >= 0, let column = report.frames[frameIndex].symbolColumn else {
        out += line
        out += "\n"
        continue
      }
      let frame = report.frames[frameIndex]
      let result = frames[frameIndex]
      let prefix = Self.paddedPrefix(line, column)
      switch result.status {
      case .symbolicated:
        let mark = CrashReport.Frame.trustMark(frame.trust) ?? ""  // imagelog's trust stays on the line
        for function in result.functions {
          if function.isInlined, report.format == .swiftBacktrace {
            out += inlinedSwiftPrefix(prefix) + describe(function, image: result.imageName) + "\n"
          } else {
            // Appended piece by piece: `a + b + c` would make a string for each sum first.
            out += prefix
            out += describe(function, image: result.imageName)
            out += mark
            out += "\n"
          }
        }
      case let .mismatch(reportID, fileID, path):
        out += line + "  [UUID mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]\n"
      default:
        out += line + "\n"
      }
    }
    return out
  }

  /// The line up to the symbol column (padded when the line ended at the address).
  static func paddedPrefix(_ line: String, _ column: Int) -> String {
    // Columns count Characters. Where the first `column` bytes are ASCII without CR and the byte after
    // them is ASCII too (so nothing combines with the last of them), each of them is one Character:
    // nearly every line.
    let ascii = line.utf8.withContiguousStorageIfAvailable { bytes -> String? in
      let end = min(max(column, 0), bytes.count)
      for index in 0..<end where bytes[index] >= 0x80 || bytes[index] == UInt8(ascii: "\r") { return nil }
      guard end == bytes.count || bytes[end] < 0x80 else { return nil }
      return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<end]), as: UTF8.self)
    } ?? nil
    let head = ascii ?? String(line.prefix(column))
    let length = ascii == nil ? head.count : head.utf8.count
    return length < column ? head + String(repeating: " ", count: column - length) : head
  }

  /// `1 [ra] 0x…` becomes `1 [inlined] 0x…` for an inlined frame, as the backtracer writes them.
  func inlinedSwiftPrefix(_ prefix: String) -> String {
    for flag in ["[ra]", "[async]"] {
      if let range = prefix.firstRange(of: flag) {
        var copy = prefix
        copy.replaceSubrange(range, with: "[inlined]")
        return copy
      }
    }
    var copy = prefix
    if let range = copy.firstRange(of: "     0x") { copy.replaceSubrange(range, with: " [inlined] 0x") }
    return copy
  }

  /// One function in the report's own style: Apple's `name + 184 (main.swift:16)`, the Swift
  /// backtracer's `name + 184 in image at /path/main.swift:16:17`. Names and paths come from files:
  /// they are escaped (`TextEscaping`).
  func describe(_ function: SymbolicatedFrame.Function, image: String?) -> String {
    let name = function.name.map(TextEscaping.escaped) ?? "???"
    let offset = function.offset.map { " + \($0)" } ?? ""
    if report.format == .swiftBacktrace {
      var text = name + offset + " in " + (image.map(TextEscaping.escaped) ?? "???")
      if let file = function.file, let line = function.line {
        text += " at \(TextEscaping.escaped(file)):\(line):\(function.column ?? 0)"
      }
      return text
    }
    var text = name + offset
    if let file = function.file, let line = function.line { text += " (\(TextEscaping.escaped(Image.shortName(of: file))):\(line))" }
    return text
  }

  /// One line per address: `0x…  name + offset (in image)`, with file:line and inlined frames when known.
  func addressLines(into out: inout UTF8Output, afterEachLine: (inout UTF8Output) -> Void) {
    // Frames are read in place through buffer pointers: copies of the frames (or of their functions)
    // would retain, and so touch, every string of every frame.
    report.frames.withUnsafeBufferPointer { reportFrames in
      frames.withUnsafeBufferPointer { results in
        for index in 0..<min(reportFrames.count, results.count) {
          out.appendPaddedHex(reportFrames[index].address)
          if case .symbolicated = results[index].status {
            for inlined in results[index].inlinedFunctions {
              appendFunction(name: inlined.name, offset: inlined.offset, image: results[index].imageName,
                             file: inlined.file, line: inlined.line, column: inlined.column,
                             isInlined: inlined.isInlined, into: &out)
              out.append("\n                  " as StaticString)
            }
            if results[index].hasFunction {
              appendFunction(name: results[index].realFunction.name, offset: results[index].realFunction.offset,
                             image: results[index].imageName, file: results[index].realFunction.file,
                             line: results[index].realFunction.line, column: results[index].realFunction.column,
                             isInlined: results[index].realFunction.isInlined, into: &out)
            }
          } else {
            appendUnresolved(results[index], into: &out)
          }
          out.append(byte: UInt8(ascii: "\n"))
          afterEachLine(&out)
        }
      }
    }
  }

  private func appendFunction(name: String?, offset: UInt64?, image: String?, file: String?, line: Int?, column: Int?,
                              isInlined: Bool, into out: inout UTF8Output) {
    out.append(byte: UInt8(ascii: " "))
    if let name { out.appendEscaped(name) } else { out.append("???" as StaticString) }
    if let offset { out.append(" + " as StaticString); out.appendDecimal(offset) }
    out.append(" (in " as StaticString)
    if let image { out.appendEscaped(image) } else { out.append("???" as StaticString) }
    out.append(byte: UInt8(ascii: ")"))
    if let file, let line {
      out.append(" (" as StaticString); out.appendEscaped(file); out.append(byte: UInt8(ascii: ":"))
      out.appendDecimal(line); out.append(byte: UInt8(ascii: ":"))
      out.appendDecimal(column ?? 0); out.append(byte: UInt8(ascii: ")"))
    }
    if isInlined { out.append(" [inlined]" as StaticString) }
  }

  private func appendUnresolved(_ result: borrowing SymbolicatedFrame, into out: inout UTF8Output) {
    let image = result.imageName.map(TextEscaping.escaped) ?? "???"
    switch result.status {
    case .symbolicated: break
    case let .mismatch(reportID, fileID, path):
      out.append(" ??? [UUID mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]")
    case .noImage: out.append(" ??? (no image contains this address)" as StaticString)
    case .missingImage: out.append(" ??? (in \(image)) [image file not found]")
    case .noSymbol: out.append(" ??? (in \(image)) + \(result.imageOffset ?? 0)")
    case .notLookedUp: break  // the line stays as the report wrote it
    case .noModule: out.append(" ??? (no module)" as StaticString)
    case .otherBuild: out.append(" ??? (in \(image)) [another build]")
    }
  }

  // MARK: Summary

  /// The closing summary: how many images were found, and each missing or mismatched one.
  public func summary() -> String {
    var found = 0
    var lines: [String] = []
    for resolution in images {
      let image = report.images[resolution.imageIndex]
      let id = image.identity.map { " <\(TextEscaping.escaped($0.text))>" } ?? ""
      let name = TextEscaping.escaped(image.name)
      switch resolution.status {
      case .found: found += 1
      case .unverified(let path):
        found += 1
        lines.append("  unverified: the report has no build-id: \(name) \(TextEscaping.escaped(path))")
      case .missing: lines.append("  missing:    \(name)\(id)\(image.path.map { " " + TextEscaping.escaped($0) } ?? "")")
      case let .mismatch(reportID, fileID, path):
        lines.append("  mismatch:   \(name) report <\(reportID)> file <\(fileID)> \(TextEscaping.escaped(path))")
      case let .otherBuild(path, reason):
        lines.append("  mismatch:   \(name) \(TextEscaping.escaped(path)): \(TextEscaping.escaped(reason))")
      case .notSearched: break
      }
    }
    let mismatched = images.filter {
      switch $0.status {
      case .mismatch, .otherBuild: true
      default: false
      }
    }.count
    let missing = images.filter { $0.status == .missing }.count
    var symbolicated = 0
    for frame in frames { if case .symbolicated = frame.status { symbolicated += 1 } }
    var text = "\n-- symbolicated by imagelog: \(symbolicated) of \(frames.count) frames; "
    text += "\(found) of \(images.count) images found, \(missing) missing, \(mismatched) mismatched\n"
    for line in lines { text += line + "\n" }
    // Frames the report names no module for are kept as it wrote them: said, so the count above is read right.
    let withoutModule = frames.reduce(0) { $0 + ($1.status == .noModule ? 1 : 0) }
    if withoutModule > 0 {
      text += "  without a module: \(withoutModule) frame\(withoutModule == 1 ? "" : "s"), kept as the report wrote "
        + (withoutModule == 1 ? "it\n" : "them\n")
    }
    // Problems quote the report's own lines, and notes name paths: both escaped, as every text written.
    for problem in report.problems { text += "  unreadable: \(TextEscaping.escaped(problem))\n" }
    for note in notes { text += "  note: \(TextEscaping.escaped(note))\n" }
    return text
  }

  // MARK: JSON

  func jsonText() -> String {
    var text = ""
    writeJSON(chunkSize: .max) { text += String(decoding: $0, as: UTF8.self) }
    return text
  }

  /// `jsonText()` handed to `write` in pieces of about `chunkSize` bytes, frames formatted as written.
  func writeJSON(chunkSize: Int, to write: (UnsafeRawBufferPointer) -> Void) {
    let limit = max(1, chunkSize)
    var out = "{\"format\":\"\(report.format.rawValue)\",\"frames\":["
    for (index, (frame, result)) in zip(report.frames, frames).enumerated() {
      out += (index == 0 ? "\n" : ",\n") + frameJSON(frame, result).serialized()
      if out.utf8.count >= limit {
        out.withUTF8 { write(UnsafeRawBufferPointer($0)) }
        out.removeAll(keepingCapacity: true)
      }
    }
    out += "\n],\"threads\":" + threadsJSON().serialized() + ",\"images\":["
    for (index, resolution) in images.enumerated() {
      let image = report.images[resolution.imageIndex]
      var members: [(String, JSONValue)] = [("name", .string(image.name)), ("loadAddress", .string("0x" + hexDigits(image.loadAddress)))]
      if let identity = image.identity { members.append(("reportID", .string(identity.text))) }
      switch resolution.status {
      case let .found(path, how): members += [("status", .string("found")), ("file", .string(path)), ("via", .string(how))]
      case .unverified(let path): members += [("status", .string("unverified")), ("file", .string(path))]
      case .missing: members.append(("status", .string("missing")))
      case .notSearched: members.append(("status", .string("not-searched")))
      case let .mismatch(_, fileID, path):
        members += [("status", .string("uuid-mismatch")), ("fileID", .string(fileID)), ("file", .string(path))]
      case let .otherBuild(path, reason):
        members += [("status", .string("other-build")), ("file", .string(path)), ("reason", .string(reason))]
      }
      out += (index == 0 ? "\n" : ",\n") + JSONValue.object(members).serialized()
    }
    out += "\n],\"problems\":" + JSONValue.array(report.problems.map { .string($0) }).serialized()
    out += ",\"notes\":" + JSONValue.array(notes.map { .string($0) }).serialized() + "}\n"
    out.withUTF8 { write(UnsafeRawBufferPointer($0)) }
  }

  func frameJSON(_ frame: CrashReport.Frame, _ result: SymbolicatedFrame) -> JSONValue {
    var members: [(String, JSONValue)] = [
      ("thread", .number(String(frame.thread))), ("frame", .number(String(frame.index))),
      ("address", .string("0x" + hexDigits(frame.address, width: 16))),
    ]
    if let name = result.imageName { members.append(("image", .string(name))) }
    if let offset = result.imageOffset { members.append(("imageOffset", .number(String(offset)))) }
    if let trust = frame.trust { members.append(("trust", .string(trust))) }
    let status: String
    switch result.status {
    case .symbolicated: status = "symbolicated"
    case .noSymbol: status = "no-symbol"
    case .noImage: status = "no-image"
    case .missingImage: status = "missing-image"
    case .notLookedUp: status = "not-looked-up"
    case .noModule: status = "no-module"
    case .otherBuild: status = "other-build"  // the image's entry names the file; the names here are the report's
    case let .mismatch(reportID, fileID, path):
      status = "uuid-mismatch"
      members += [("reportID", .string(reportID)), ("fileID", .string(fileID)), ("file", .string(path))]
    }
    members.append(("status", .string(status)))
    if let real = result.functions.last {
      members += functionMembers(real)
      let inlined = result.functions.dropLast()
      if !inlined.isEmpty { members.append(("inlined", .array(inlined.map { .object(functionMembers($0)) }))) }
    }
    return .object(members)
  }

  /// `[{"index", "tid", "name", "crashed", "state", "problem", "registers"}]`: each thread the report lists, keys
  /// absent when the report does not give them (`crashed` is given when the report marks any thread
  /// crashed: a live process's threads have none). Frames name their thread by `index`.
  func threadsJSON() -> JSONValue {
    let marksCrash = report.threads.contains { $0.crashed }
    return .array(report.threads.map { thread in
      var members: [(String, JSONValue)] = [("index", .number(String(thread.number)))]
      if let tid = thread.tid { members.append(("tid", .number(String(tid)))) }
      if let name = thread.name { members.append(("name", .string(name))) }
      if marksCrash { members.append(("crashed", .bool(thread.crashed))) }
      if let state = thread.state { members.append(("state", .string(state))) }
      if let problem = thread.problem { members.append(("problem", .string(problem))) }
      if let registers = thread.registers {
        members.append(("registers", .object(registers.rows.joined().map {
          ($0.name, .string("0x" + hexDigits($0.value, width: $0.digits)))
        })))
      }
      return .object(members)
    })
  }

  func functionMembers(_ function: SymbolicatedFrame.Function) -> [(String, JSONValue)] {
    var members: [(String, JSONValue)] = []
    if let name = function.name { members.append(("symbol", .string(name))) }
    if let raw = function.rawName, raw != function.name { members.append(("mangledSymbol", .string(raw))) }
    if let offset = function.offset { members.append(("symbolOffset", .number(String(offset)))) }
    if let file = function.file { members.append(("file", .string(file))) }
    if let line = function.line { members.append(("line", .number(String(line)))) }
    if let column = function.column { members.append(("column", .number(String(column)))) }
    return members
  }

  // MARK: .ips

  /// The `.ips` header line and body with each symbolicated frame's `symbol`, `symbolLocation`,
  /// `sourceFile` and `sourceLine` filled in (inlined frames inserted before it with `"inline": true`),
  /// as Apple's symbolicated reports have them.
  func ipsText() -> String {
    guard var body = report.ipsBody else { return "" }
    var byThread: [Int: [(Int, SymbolicatedFrame)]] = [:]
    for (frame, result) in zip(report.frames, frames) {
      if let thread = frame.ipsThread { byThread[thread, default: []].append((frame.index, result)) }
    }
    if case .array(var threads)? = body["threads"] {
      for (threadIndex, entries) in byThread where threads.indices.contains(threadIndex) {
        guard case .array(let original)? = threads[threadIndex]["frames"] else { continue }
        threads[threadIndex].set("frames", .array(Self.filledIPSFrames(original, entries)))
      }
      body.set("threads", .array(threads))
    }
    if let entries = byThread[-1], case .array(let original)? = body["lastExceptionBacktrace"] {
      body.set("lastExceptionBacktrace", .array(Self.filledIPSFrames(original, entries)))
    }
    var out = ""
    if let header = report.ipsHeader { out += header.serialized() + "\n" }
    return out + body.serialized(indent: 2) + "\n"
  }

  /// The backtracer's JSON with each symbolicated frame filled in as `symbolicate=full` fills it:
  /// `symbol` (as stored), `offset`, `description` (`name + offset`), `image`, `sourceLocation`;
  /// inlined frames are inserted before their caller with `"inlined": true`.
  func swiftJSONText() -> String {
    guard var document = report.document else { return report.preamble }
    var results: [Int: [Int: SymbolicatedFrame]] = [:]
    for (frame, result) in zip(report.frames, frames) { if let thread = frame.ipsThread { results[thread, default: [:]][frame.index] = result } }
    if case .array(var threads)? = document["threads"] {
      for (threadIndex, byFrame) in results where threads.indices.contains(threadIndex) {
        guard case .array(let original)? = threads[threadIndex]["frames"] else { continue }
        var updated: [JSONValue] = []
        for (frameIndex, frame) in original.enumerated() {
          guard let result = byFrame[frameIndex], result.status == .symbolicated else { updated.append(frame); continue }
          for function in result.functions {
            var entry = frame
            if function.isInlined { entry.set("inlined", .bool(true)) }
            if let raw = function.rawName ?? function.name { entry.set("symbol", .string(raw)) }
            if let offset = function.offset { entry.set("offset", .number(String(offset))) }
            let name = function.name ?? "???"
            entry.set("description", .string(function.offset.map { "\(name) + \($0)" } ?? name))
            if let image = result.imageName { entry.set("image", .string(image)) }
            if let file = function.file, let line = function.line {
              entry.set("sourceLocation", .object([("file", .string(file)), ("line", .number(String(line))),
                                                   ("column", .number(String(function.column ?? 0)))]))
            }
            updated.append(entry)
          }
        }
        threads[threadIndex].set("frames", .array(updated))
      }
      document.set("threads", .array(threads))
    }
    return report.preamble + document.serialized() + "\n"
  }

  /// `.ips` frames with `symbol`, `symbolLocation`, `sourceFile`, `sourceLine` filled in from `entries`
  /// (frame index, answer); inlined functions become frames of their own with `"inline": true`.
  static func filledIPSFrames(_ original: [JSONValue], _ entries: [(Int, SymbolicatedFrame)]) -> [JSONValue] {
    var updated: [JSONValue] = []
    let results = Dictionary(entries, uniquingKeysWith: { first, _ in first })
    for (frameIndex, var frame) in original.enumerated() {
      guard let result = results[frameIndex], result.status == .symbolicated, let real = result.functions.last else {
        updated.append(frame)
        continue
      }
      for inlined in result.functions.dropLast() {
        var copy = frame
        copy.set("inline", .bool(true))
        if let name = inlined.name { copy.set("symbol", .string(name)) }
        copy.remove("symbolLocation")
        if let file = inlined.file { copy.set("sourceFile", .string(Image.shortName(of: file))) }
        if let line = inlined.line { copy.set("sourceLine", .number(String(line))) }
        updated.append(copy)
      }
      if let name = real.name { frame.set("symbol", .string(name)) }
      if let offset = real.offset { frame.set("symbolLocation", .number(String(offset))) }
      if let file = real.file { frame.set("sourceFile", .string(Image.shortName(of: file))) }
      if let line = real.line { frame.set("sourceLine", .number(String(line))) }
      updated.append(frame)
    }
    return updated
  }
}

extension String {
  func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
