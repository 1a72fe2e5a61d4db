import ProcessInspection
import ImageReaders
import Snapshot

extension ProcessSnapshot {
  /// A Linux log with each frame line's function (and file:line:column when known) inserted where
  /// the frame's `symbolColumn` says, as a sanitizer's `symbolize=1` writes it (`in main /src/a.c:5:3`);
  /// every other line, and every other character of a frame line, as it came.
  func insertedText() -> String {
    var framesByLine: [Int: FrameRef] = [:]
    for ref in frameRefs { if let line = self[ref].position?.line { framesByLine[line] = ref } }
    var out = ""
    for (lineIndex, line) in (document?.lines ?? []).enumerated() {
      guard let ref = framesByLine[lineIndex], let column = self[ref].position?.column else {
        out += line + "\n"
        continue
      }
      let result = self[ref].symbols
      var insertion = ""
      switch result.status {
      case .symbolicated:
        insertion = " in " + result.functions.reversed().map(Self.sanitizerStyle).joined(separator: " <- inlined ")
        if let image = self[ref].imageIndex, case .unverified? = images[image].resolution {
          insertion += " [unverified: the report has no build-id]"
        }
      case let .mismatch(reportID, fileID, path):
        insertion = " [build-id mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]"
      default:
        break
      }
      let head = line.prefix(column)
      out += head + insertion + line.dropFirst(head.count) + "\n"
    }
    return out
  }

  /// `name file:line:column`, or `name+0xoffset` without a line, as sanitizers write a frame. Names
  /// and paths come from files: escaped, so a newline in a symbol cannot break the log's lines.
  static func sanitizerStyle(_ function: FrameSymbols.Function) -> String {
    let name = function.name.map(TextEscaping.escaped) ?? "???"
    if let file = function.file, let line = function.line {
      return "\(name) \(TextEscaping.escaped(file)):\(line):\(function.column ?? 0)"
    }
    return function.offset.map { "\(name)+0x\(hexDigits($0))" } ?? name
  }
}
