import ImageLog
import ImageReaders

extension SymbolicatedReport {
  /// A Linux log with each frame line's function (and file:line:column when known) inserted where
  /// the frame's `symbolColumn` says, as a sanitizer's `symbolize=1` writes it (`in main /src/a.c:5:3`);
  /// every other line, and every other character of a frame line, as it came.
  func insertedText() -> String {
    var framesByLine: [Int: Int] = [:]
    for (index, frame) in report.frames.enumerated() { if let line = frame.line { framesByLine[line] = index } }
    var unverified = Set<Int>()
    for resolution in images { if case .unverified = resolution.status { unverified.insert(resolution.imageIndex) } }
    var out = ""
    for (lineIndex, line) in report.lines.enumerated() {
      guard let frameIndex = framesByLine[lineIndex], let column = report.frames[frameIndex].symbolColumn else {
        out += line + "\n"
        continue
      }
      let result = frames[frameIndex]
      var insertion = ""
      switch result.status {
      case .symbolicated:
        insertion = " in " + result.functions.reversed().map(Self.sanitizerStyle).joined(separator: " <- inlined ")
        if let image = report.frames[frameIndex].imageIndex, unverified.contains(image) {
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
  static func sanitizerStyle(_ function: SymbolicatedFrame.Function) -> String {
    let name = function.name.map(TextEscaping.escaped) ?? "???"
    if let file = function.file, let line = function.line {
      return "\(name) \(TextEscaping.escaped(file)):\(line):\(function.column ?? 0)"
    }
    return function.offset.map { "\(name)+0x\(hexDigits($0))" } ?? name
  }
}
