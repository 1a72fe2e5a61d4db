#if canImport(Glibc)
internal import Glibc
#endif

import ImageLog

/// `imagelog file`'s standard output: lines gathered and written 64 KiB at a time when standard output
/// is a pipe or a file, and line by line on a terminal, as stdio buffers them, but without a stdio
/// call per line or a `write` per 4 KiB (`writeOutput`). `flush` before returning.
struct OutputLines {
  private var buffer: [UInt8] = []
  private let lineBuffered: Bool
  static let flushSize = 64 * 1024

  init() {
    lineBuffered = isatty(1) == 1
    buffer.reserveCapacity(Self.flushSize + 4096)
  }

  /// `text` and a newline.
  mutating func line(_ text: String) {
    var text = text
    text.withUTF8 { buffer.append(contentsOf: $0) }
    endLine()
  }

  /// `bytes` (UTF-8), then `suffix` when given, then a newline.
  mutating func line(_ bytes: [UInt8], suffix: UInt8? = nil) {
    buffer.append(contentsOf: bytes)
    if let suffix { buffer.append(suffix) }
    endLine()
  }

  private mutating func endLine() {
    buffer.append(UInt8(ascii: "\n"))
    if lineBuffered || buffer.count >= Self.flushSize { flush() }
  }

  /// Writes what is gathered to file descriptor 1. A failed write (a closed pipe) drops the rest, as
  /// stdio does.
  mutating func flush() {
    buffer.withUnsafeBytes { writeOutput($0) }
    buffer.removeAll(keepingCapacity: true)
  }
}

/// Streams a JSON array to standard output, one element per line, so a long walk prints as it goes.
struct JSONArrayPrinter {
  private var pending: [UInt8]?

  mutating func begin(_ output: inout OutputLines) { output.line("[") }

  /// Adds an element already written as compact JSON text.
  mutating func element(_ text: [UInt8], _ output: inout OutputLines) {
    if let pending { output.line(pending, suffix: UInt8(ascii: ",")) }
    pending = text
  }

  mutating func end(_ output: inout OutputLines) {
    if let pending { output.line(pending) }
    pending = nil
    output.line("]")
  }
}
