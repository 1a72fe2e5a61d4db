import ImageReaders

extension ProcessSnapshot {
  /// The function and source location a frame line gives itself (a sanitizer's `in main /src/a.c:12:3`,
  /// TSan's `<null> <null>`, glibc's `main+0x1d`, Apple's `main + 12 (main.c:3)`): what a frame the source
  /// already symbolized keeps, and what every output writes as the report's own word.
  public struct ReportedFunction: Sendable, Equatable {
    /// The function as written (`main`, `operator new(unsigned long)`, `abort`); `nil` for `<null>`.
    public var name: String?
    /// Bytes from the function's start to the frame, when the source writes it apart from the name
    /// (glibc's `+0x1d`, Android's `+160`, Apple's `+ 12`, `.ips`' `symbolLocation`), as the source
    /// measures it: from the frame's address, or in Swift's backtracer from the address less one
    /// (`Format.measuresOffsetsFromLookup`). All the source says: no start address is derived from it
    /// (a frame it names keeps it as `FrameSymbols.Function.offset`, with `startAddress` `nil`).
    public var offset: UInt64?
    /// The source file as written (`/src/a.c`, `../sysdeps/nptl/libc_start_call_main.h`).
    public var file: String?
    /// The line, when given.
    public var line: Int?
    /// The column, when given.
    public var column: Int?

    /// A function as a frame line gives it.
    public init(name: String?, offset: UInt64? = nil, file: String? = nil, line: Int? = nil, column: Int? = nil) {
      self.name = name
      self.offset = offset
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

extension ProcessSnapshot {
  /// What the source says `frame` is, read the way this kind of report writes it: a sanitizer's or
  /// systemd-coredump's `NAME LOCATION` (`reportedFunction`), glibc's `NAME+0xOFF`, Android's `NAME+OFF`,
  /// Apple's `NAME + OFF (FILE:LINE)`, the Swift backtracer's `NAME + OFF in IMAGE at FILE:LINE:COLUMN`,
  /// and the `symbol`, `symbolLocation`/`offset` and source members of an `.ips` or backtracer JSON frame.
  /// `nil` when the source names nothing. This is the report's word, not checked against any file.
  public func reportedFunction(of frame: Frame) -> ReportedFunction? {
    if !documentReported.isEmpty, let place = frame.position, let thread = place.documentThread, let index = place.line {
      return documentReported[FrameRef(thread: thread, frame: index)]
    }
    switch format {
    case .sanitizer, .coredump:
      return frame.reportedFunction
    case .glibcBacktrace:
      return frame.symbolOffset.map { ReportedFunction(name: $0.name, offset: $0.offset) }
    case .androidTombstone:
      guard let written = frame.reportedSymbol, !written.isEmpty else { return nil }
      let (name, offset) = Self.nameAndOffset(Substring(written), separator: "+")
      return ReportedFunction(name: name, offset: offset)
    case .appleCrash:
      return frame.reportedSymbol.flatMap(Self.appleFunction)
    case .swiftBacktrace:
      return frame.reportedSymbol.flatMap(Self.backtracerFunction)
    case .appleIPS, .swiftBacktraceJSON:
      return documentFunction(of: frame)
    case .imagelog, .addresses, .minidump:
      return nil
    }
  }

  /// `NAME<separator>DIGITS` split at the last separator when DIGITS are decimal; else the whole name.
  static func nameAndOffset(_ text: Substring, separator: String) -> (String, UInt64?) {
    if let range = text.ranges(of: separator).last, range.lowerBound > text.startIndex,
       let offset = UInt64(text[range.upperBound...]) {
      return (String(text[..<range.lowerBound]), offset)
    }
    return (String(text), nil)
  }

  /// Apple's `NAME + OFF (FILE:LINE)`, `NAME + OFF`, `NAME (in IMAGE) + OFF`, with ` [inlined]` after.
  static func appleFunction(_ written: String) -> ReportedFunction? {
    var rest = Substring(written).trimmingSpaces[...]
    if rest.hasSuffix(" [inlined]") { rest = rest.dropLast(" [inlined]".count) }
    var file: String?, line: Int?, column: Int?
    if rest.hasSuffix(")"), let open = rest.lastIndex(of: "("), open > rest.startIndex,
       let (name, number, columnNumber) = ReportedFunction.location(String(rest[rest.index(after: open)..<rest.index(before: rest.endIndex)])) {
      (file, line, column) = (name, number, columnNumber)
      rest = rest[..<open].trimmingSpaces[...]
    }
    var (name, offset) = nameAndOffset(rest, separator: " + ")
    if let range = name.ranges(of: " (in ").last, name.hasSuffix(")") { name = String(name[..<range.lowerBound]) }
    guard !name.isEmpty, name != "???" else { return nil }
    return ReportedFunction(name: name, offset: offset, file: file, line: line, column: column)
  }

  /// The backtracer's `NAME + OFF in IMAGE at FILE:LINE:COLUMN` (each part after the name optional).
  static func backtracerFunction(_ written: String) -> ReportedFunction? {
    var rest = Substring(written).trimmingSpaces[...]
    var file: String?, line: Int?, column: Int?
    if let at = rest.ranges(of: " at ").last,
       let (name, number, columnNumber) = ReportedFunction.location(String(rest[at.upperBound...])) {
      (file, line, column) = (name, number, columnNumber)
      rest = rest[..<at.lowerBound]
    }
    // ` in IMAGE`: an image's name has no blank or parenthesis (`closure #1 in main()` is a name).
    if let range = rest.ranges(of: " in ").last,
       !rest[range.upperBound...].contains(where: { $0 == " " || $0 == "(" || $0 == ")" }) {
      rest = rest[..<range.lowerBound]
    }
    let (name, offset) = nameAndOffset(rest, separator: " + ")
    guard !name.isEmpty, name != "???" else { return nil }
    return ReportedFunction(name: name, offset: offset, file: file, line: line, column: column)
  }

  /// The `.ips` or backtracer JSON frame `frame` was read from, and what it names.
  private func documentFunction(of frame: Frame) -> ReportedFunction? {
    guard let place = frame.position?.documentThread else { return nil }
    let entry: JSONValue?
    if format == .appleIPS {
      let frames = place == -1 ? document?.ipsBody?["lastExceptionBacktrace"]?.array
        : document?.ipsBody?["threads"]?.array.flatMap { $0.indices.contains(place) ? $0[place]["frames"]?.array : nil }
      entry = frames.flatMap { $0.indices.contains(frame.number) ? $0[frame.number] : nil }
    } else {
      let frames = document?.swiftDocument?["threads"]?.array.flatMap { $0.indices.contains(place) ? $0[place]["frames"]?.array : nil }
      entry = frames.flatMap { $0.indices.contains(frame.number) ? $0[frame.number] : nil }
    }
    guard let entry, let name = entry["symbol"]?.string, !name.isEmpty else { return nil }
    if format == .appleIPS {
      return ReportedFunction(name: name, offset: entry["symbolLocation"]?.unsigned, file: entry["sourceFile"]?.string,
                              line: entry["sourceLine"]?.integer)
    }
    let location = entry["sourceLocation"]
    return ReportedFunction(name: name, offset: entry["offset"]?.unsigned, file: location?["file"]?.string,
                            line: location?["line"]?.integer, column: location?["column"]?.integer)
  }
}
