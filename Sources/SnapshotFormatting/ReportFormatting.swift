import ProcessInspection
import ImageReaders
public import Snapshot

/// How a snapshot is written: in its report's own layout (a report's text with each frame's symbol
/// part replaced, the way `symbolicatecrash` does; imagelog's layout for a capture), as JSON (one object
/// per frame), or as the classic `.crash` text.
public enum ReportStyle: String, Sendable, CaseIterable {
  /// The report's own layout (for `.ips`: the JSON with `symbol`/`symbolLocation` filled in).
  case report
  /// imagelog's crash document (`Schemas/imagelog-crash.schema.json`, `schemaVersion` 1): the process,
  /// system, exception, every thread with its frames, every image; the per-frame list `frames` and the
  /// frames' `images` written before the document kept in it.
  case json
  /// Apple's classic `.crash` text.
  case crash
  /// `minidump-stackwalk --json`'s schema (rust-minidump's), for tools built on it (Socorro, siggen).
  case stackwalkJSON = "stackwalk-json"
}

extension ProcessSnapshot {
  /// The whole output for `style`, ending with a newline. For the text styles the summary of missing
  /// and mismatched images is at the end; JSON carries it in `images`.
  public func formatted(_ style: ReportStyle) -> String {
    switch style {
    case .json: return jsonText()
    case .stackwalkJSON: return stackwalkJSONText()
    case _ where document == nil && (format == .appleIPS || format == .swiftBacktraceJSON):
      return reportText() + summary()  // read from a crash document: no JSON of the report's own to annotate
    case .crash:
      switch format {
      case .appleIPS: return classicText() + summary() + signatureLine
      case .swiftBacktraceJSON: return swiftJSONClassicText() + summary() + signatureLine
      default: return reportText() + summary() + signatureLine
      }
    case .report:
      switch format {
      case .appleIPS: return ipsText()
      case .swiftBacktraceJSON: return swiftJSONText()
      case .addresses:
        var out = UTF8Output(capacity: min(frameCount, 1 << 16) * 160 + 256)  // grows past that
        addressLines(into: &out) { _ in }
        out.append(summary() + signatureLine)
        return out.text
      default: return reportText() + summary() + signatureLine
      }
    }
  }

  /// `Signature: ...` after a report's own text, whose layout has no place for it (imagelog's layout has
  /// it among its header fields); empty without a signature, and for a list of addresses (no crash).
  var signatureLine: String {
    guard let signature, document != nil, format != .imagelog, format != .addresses else { return "" }
    return "Signature: \(TextEscaping.escaped(signature))\n"
  }

  /// The report in its own layout, symbolicated: a report read from text, annotated in place; a capture
  /// (a live process, a core, a minidump), in imagelog's layout.
  func reportText() -> String {
    document == nil ? imagelogReportText() : inPlaceText()
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
    guard style == .report, format == .addresses else {
      // A report's own lines are kept as written: a byte of theirs that is not UTF-8 (a scalar that
      // stands for it since the report was read: PathBytes) is written back as that byte.
      PathBytes.withBytes(formatted(style)) { if !$0.isEmpty { write($0) } }
      return
    }
    let limit = max(1, chunkSize)
    var out = UTF8Output(capacity: min(limit, frameCount * 160) + 256)  // untouched capacity costs no page
    addressLines(into: &out) { out in out.drain(over: limit, to: write) }
    out.append(summary() + signatureLine)
    out.drain(over: 0, to: write)
  }

  // MARK: In place

  func inPlaceText() -> String {
    if format.isLinuxLog { return insertedText() }
    let lines = document?.lines ?? []
    let refs = frameRefs
    // Each line's frame: -1 for none, -2 for more than one (left as it is).
    var frameOfLine = [Int](repeating: -1, count: lines.count)
    for (index, ref) in refs.enumerated() {
      if let line = self[ref].position?.line, frameOfLine.indices.contains(line) {
        frameOfLine[line] = frameOfLine[line] == -1 ? index : -2
      }
    }
    var out = ""
    // The lines, and room for what symbolication adds to the frames' (one allocation, not a growth per line).
    out.reserveCapacity(lines.reduce(0) { $0 + $1.utf8.count + 1 } + 64 * refs.count)
    for (lineIndex, line) in lines.enumerated() {
      let frameIndex = frameOfLine[lineIndex]
      guard frameIndex >= 0, let column = self[refs[frameIndex]].position?.column else {
        // imagelog's own report read back: its signature made again, where imagelog's layout puts it.
        if let signature, format == .imagelog, frameIndex == -1 {
          if line.hasPrefix("Signature:") { continue }
          if line.hasPrefix("Threads:") {
            out += line + "\n" + Self.headerField("Signature:", TextEscaping.escaped(signature))
            continue
          }
        }
        out += line
        out += "\n"
        continue
      }
      let frame = self[refs[frameIndex]]
      let result = frame.symbols
      let prefix = Self.paddedPrefix(line, column)
      switch result.status {
      case .symbolicated:
        // imagelog's trust, and its note on a frame in an unloaded image, stay on the line.
        let mark = (format == .imagelog ? unloadedNote(frame) ?? "" : "") + ProcessSnapshot.Frame.trustMark(frame.trust)
        for function in result.functions {
          if function.isInlined, format == .swiftBacktrace {
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
  func describe(_ function: FrameSymbols.Function, image: String?) -> String {
    let name = function.name.map(TextEscaping.escaped) ?? "???"
    let offset = function.offset.map { " + \($0)" } ?? ""
    if format == .swiftBacktrace {
      var text = name + offset + " in " + (image.map(TextEscaping.escaped) ?? "???")
      if let file = function.file, let line = function.line {
        text += " at \(TextEscaping.escaped(file)):\(line):\(function.column ?? 0)"
      }
      return text
    }
    var text = name + offset
    if let file = function.file, let line = function.line {
      text += " (\(TextEscaping.escaped(ProcessInspection.Image.shortName(of: file))):\(line))"
    }
    return text
  }
}

extension String {
  func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}
