import ImageReaders

extension ProcessSnapshot {
  /// The function and source location a frame line gives itself (a sanitizer's `in main /src/a.c:12:3`,
  /// TSan's `<null> <null>`): what a frame the source already symbolized keeps.
  public struct ReportedFunction: Sendable, Equatable {
    /// The function as written (`main`, `operator new(unsigned long)`, `abort+164`); `nil` for `<null>`.
    public var name: String?
    /// The source file as written (`/src/a.c`, `../sysdeps/nptl/libc_start_call_main.h`).
    public var file: String?
    public var line: Int?
    public var column: Int?

    public init(name: String?, file: String? = nil, line: Int? = nil, column: Int? = nil) {
      self.name = name
      self.file = file
      self.line = line
      self.column = column
    }
    /// A sanitizer frame's text before its groups, as the report wrote it: `in NAME LOCATION`, `in NAME`,
    /// TSan's `NAME LOCATION` and `<null> <null>`. The location is the rest after the first blank outside
    /// parentheses (`operator new(unsigned long) ../src/new.cpp:98`) that reads as `FILE:LINE[:COLUMN]`
    /// with no parenthesis in FILE, or as a file name alone (`worker sanitizer-uaf.c`: a symbol table's
    /// `STT_FILE`, no line); `??:0` and `??:?` (addr2line's unknown) are no location.
    package static func functionAndLocation(_ text: String) -> (String?, String?, Int?, Int?) {
      var rest = Substring(text)
      if rest.hasPrefix("in ") { rest = rest.dropFirst(3) }
      guard !rest.isEmpty, rest != "n/a" else { return (nil, nil, nil, nil) }
      // A location holds no parenthesis: only blanks after the last one can start it, and a few are tried
      // (a line is bounded by the report alone).
      var index = rest.lastIndex { $0 == "(" || $0 == ")" }.map { rest.index(after: $0) } ?? rest.startIndex
      var tries = 0
      while index < rest.endIndex, tries < 32 {
        if rest[index] == " " {
          tries += 1
          let name = rest[..<index].trimmingSpaces
          let tail = rest[rest.index(after: index)...].trimmingSpaces
          if tail == "<null>" || tail == "??:0" || tail == "??:?" { return (function(name), nil, nil, nil) }
          if let (file, line, column) = location(tail) { return (function(name), file, line, column) }
          if isFileName(tail) { return (function(name), tail, nil, nil) }
        }
        index = rest.index(after: index)
      }
      return (function(rest.trimmingSpaces), nil, nil, nil)
    }

    private static func function(_ name: String) -> String? { name.isEmpty || name == "<null>" ? nil : name }

    /// A file's name with a short extension of letters (`a.c`, `asan_malloc_linux.cpp`), no blank or parenthesis.
    package static func isFileName(_ text: String) -> Bool {
      guard !text.contains(" "), !text.contains("("), !text.contains(")"), let dot = text.lastIndex(of: "."),
            dot > text.startIndex else { return false }
      let suffix = text[text.index(after: dot)...]
      return (1...5).contains(suffix.count) && suffix.allSatisfy { $0.isLetter || $0.isNumber } && suffix.first?.isLetter == true
    }

    /// `FILE:LINE` or `FILE:LINE:COLUMN`, FILE without parentheses.
    static func location(_ text: String) -> (String, Int, Int?)? {
      guard !text.contains("("), !text.contains(")") else { return nil }
      let parts = text.split(separator: ":", omittingEmptySubsequences: false)
      guard parts.count >= 2 else { return nil }
      if parts.count >= 3, let line = Int(parts[parts.count - 2]), let column = Int(parts[parts.count - 1]) {
        let file = parts.dropLast(2).joined(separator: ":")
        return file.isEmpty ? nil : (file, line, column)
      }
      guard let line = Int(parts[parts.count - 1]) else { return nil }
      let file = parts.dropLast().joined(separator: ":")
      return file.isEmpty ? nil : (file, line, nil)
    }
  }
}

extension ProcessSnapshot.Frame {
  /// `reportedSymbol` split into the function and the location a Linux frame line gives (a sanitizer's
  /// `main /src/a.c:12:3`, TSan's `<null> <null>`); `nil` when the source names nothing. Split when
  /// asked, not kept: a frame stays small.
  public var reportedFunction: ProcessSnapshot.ReportedFunction? {
    guard let reportedSymbol else { return nil }
    let (name, file, line, column) = ProcessSnapshot.ReportedFunction.functionAndLocation(reportedSymbol)
    return name == nil && file == nil ? nil : ProcessSnapshot.ReportedFunction(name: name, file: file, line: line, column: column)
  }
}
