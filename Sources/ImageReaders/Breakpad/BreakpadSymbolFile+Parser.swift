internal import Glibc

extension BreakpadSymbolFile {
  /// The record-by-record reading, over the file's bytes in place.
  struct Parser {
    var module: Module?
    var codeID: String?
    var files: [UInt32: String] = [:]
    var origins: [UInt32: String] = [:]
    var functions: [Function] = []
    var lines: [Line] = []
    var inlines: [Inline] = []
    var inlineRanges: [Range<UInt64>] = []
    var publics: [Public] = []
    var frameEntries: [FrameEntry] = []
    var frameDeltas: [FrameDelta] = []
    /// Whether a `STACK CFI` record's rules were kept as a range of the bytes (they are read there later).
    var keptRules = false
    /// Reading on demand (`Reading.onDemand`): line, `INLINE` and `STACK CFI` row records are only
    /// skipped over, their bytes noted (`Function.body`, `FrameEntry.rows`), and `FILE` and
    /// `INLINE_ORIGIN` names kept as ranges in `fileTable`, `originTable`.
    var deferring = false
    /// Reading one function's body (`.body`) or one entry's rows (`.row`) again, on demand
    /// (`BreakpadSymbolFile.records(of:)`, `deltas(of:)`): other records are passed over, and the
    /// bytes are not copied.
    var rereading: Skimmed?
    var fileTable: [NameRange] = []
    var originTable: [NameRange] = []
    /// The `frameEntries` whose rows are not in address order.
    var unsortedDeltas: [Int] = []
    /// Whether functions, publics and CFI entries came in address order (checked as they are read).
    var functionsSorted = true, publicsSorted = true, entriesSorted = true
    /// `module != nil`, without copying the module's strings for each line.
    var hasModule = false
    var skippedWindowsFrames = 0
    /// The bytes from the first `STACK WIN` line to the end of the last, and the first one's line number.
    var windowsFrameLines: (bytes: Range<Int>, firstLine: Int)?
    var notes: [String] = []
    var noteCount = 0
    /// The bytes being parsed (valid during `parse`).
    var bytes = UnsafeRawBufferPointer(start: nil, count: 0)

    mutating func note(_ line: Int, _ text: String) {
      noteCount += 1
      if notes.count < BreakpadSymbolFile.noteLimit { notes.append("line \(line): \(text)") }
    }

    mutating func parse(_ bytes: UnsafeRawBufferPointer) throws(FormatError) {
      try parse(bytes, 0..<bytes.count)
    }

    /// Reads the lines in `range` of `bytes` (whole lines: it starts at a line's start).
    mutating func parse(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) throws(FormatError) {
      var position = range.lowerBound
      let limit = min(range.upperBound, bytes.count)
      var number = 0
      // Each round consumes a line (at least its `\n`, or the rest of the bytes): bounded by the size.
      self.bytes = bytes
      while position < limit {
        var end = Self.lineEnd(bytes, position, limit)
        let next = end + 1
        if end > position, bytes[end - 1] == 0x0D { end -= 1 }  // CR LF
        number += 1
        let start = position
        position = next
        if let rereading {
          guard Self.skimmed(bytes, start, end) == rereading else { continue }
        } else if deferring {
          switch Self.skimmed(bytes, start, end) {
          case .body:
            // A line or `INLINE` record of the last FUNC: read when a lookup needs it.
            guard !functions.isEmpty else { break }
            let last = functions.count - 1
            functions[last].body = functions[last].body.lowerBound..<end
            continue
          case .row:
            // A row of the last `STACK CFI INIT`, as `frameRecord` places it.
            guard !frameEntries.isEmpty else { break }
            let last = frameEntries.count - 1
            frameEntries[last].rows = frameEntries[last].rows.lowerBound..<end
            continue
          case .other:
            break
          }
        }
        var fields = Fields(bytes: bytes, position: start, end: end)
        guard let kind = fields.next() else { continue }  // an empty line
        let skipped = skippedWindowsFrames
        try record(kind, &fields, line: number)
        if skippedWindowsFrames != skipped {
          // Where the Windows frames' own reader starts and stops (BreakpadWindowsFrames(in:)).
          windowsFrameLines = ((windowsFrameLines?.bytes.lowerBound ?? start)..<min(next, limit),
                               windowsFrameLines?.firstLine ?? number)
        }
      }
    }

    /// The index of the first `\n` at or after `start`, `limit` when there is none before it: libc's
    /// `memchr`, which reads a word at a time (a byte loop was most of the time a large file took).
    static func lineEnd(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ limit: Int) -> Int {
      guard start < limit, limit <= bytes.count, let base = bytes.baseAddress else { return limit }
      guard let found = memchr(base + start, 0x0A, limit - start) else { return limit }
      return base.distance(to: UnsafeRawPointer(found))  // inside [start, limit): memchr looked no further
    }

    enum Skimmed { case body, row, other }

    /// What a line is, by its first bytes alone: a line record (a lowercase hex digit or a decimal
    /// one first: no record kind starts so) or `INLINE `, a `STACK CFI` row (not `INIT`), or another.
    static func skimmed(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Skimmed {
      guard start < end else { return .other }
      switch bytes[start] {
      case 0x30...0x39, 0x61...0x66: return .body
      case UInt8(ascii: "I"): return matches(bytes, start, end, "INLINE ") ? .body : .other
      case UInt8(ascii: "S"):
        return matches(bytes, start, end, "STACK CFI ") && !matches(bytes, start + 10, end, "INIT ") ? .row : .other
      case 0x41...0x46:
        // Uppercase hex: a line record when the whole first field is hex, as `record` reads it.
        var index = start
        while index < end, bytes[index] != 0x20 {
          guard Fields.hexValue(bytes[index]) != nil else { return .other }
          index += 1
        }
        return .body
      default: return .other
      }
    }

    /// True when the bytes at `start` (before `end`) begin with `word`.
    static func matches(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ word: StaticString) -> Bool {
      guard start <= end, word.utf8CodeUnitCount <= end - start else { return false }
      return word.withUTF8Buffer { expected in
        var index = start
        for byte in expected {
          guard bytes[index] == byte else { return false }
          index += 1
        }
        return true
      }
    }

    /// The record kinds, told apart by their bytes (a String per line costs more than the line's reading).
    static let kinds: [(word: StaticString, kind: Kind)] = [
      ("STACK", .stack), ("FUNC", .function), ("PUBLIC", .public), ("FILE", .file), ("INLINE", .inline),
      ("INLINE_ORIGIN", .inlineOrigin), ("INFO", .info), ("MODULE", .module),
    ]
    enum Kind { case module, info, file, inlineOrigin, function, `public`, inline, stack, other }

    private mutating func record(_ kindRange: Range<Int>, _ fields: inout Fields, line: Int) throws(FormatError) {
      var kind = Kind.other
      for candidate in Self.kinds where fields.equals(kindRange, candidate.word) {
        kind = candidate.kind
        break
      }
      if !hasModule && kind != .module {
        throw .breakpad(line: line, "the first record is \(Self.quoted(fields.text(kindRange))), not MODULE: not a Breakpad symbol file")
      }
      switch kind {
      case .module:
        guard !hasModule else { return note(line, "a second MODULE record is ignored") }
        guard let system = fields.next(), let architecture = fields.next(), let id = fields.next() else {
          throw .breakpad(line: line, "MODULE needs an operating system, an architecture, an id and a name")
        }
        module = Module(operatingSystem: fields.text(system), architecture: fields.text(architecture), id: fields.text(id),
                        name: fields.rest())
        hasModule = true
      case .info:
        guard let key = fields.next(), fields.text(key) == "CODE_ID" else { return }
        guard let value = fields.next() else { throw .breakpad(line: line, "INFO CODE_ID without a value") }
        codeID = fields.text(value)
      case .file:
        let number = try fields.decimal(line, "FILE", "number")
        if deferring { return fileTable.append(NameRange(number: UInt64(number), name: fields.restRange())) }
        if files[number] != nil { note(line, "FILE \(number) again: the later name is kept") }
        files[number] = fields.rest()
      case .inlineOrigin:
        let number = try fields.decimal(line, "INLINE_ORIGIN", "number")
        if deferring { return originTable.append(NameRange(number: UInt64(number), name: fields.restRange())) }
        if origins[number] != nil { note(line, "INLINE_ORIGIN \(number) again: the later name is kept") }
        origins[number] = fields.rest()
      case .function:
        let multiple = fields.skip("m")
        let address = try fields.hex(line, "FUNC", "address")
        let size = try fields.hex(line, "FUNC", "size")
        let parameterSize = try fields.hex(line, "FUNC", "parameter size")
        if let last = functions.last, last.address > address { functionsSorted = false }
        let name = fields.restRange()
        functions.append(Function(address: address, size: size, parameterSize: parameterSize,
                                  name: deferring ? "" : fields.text(name), isMultiple: multiple,
                                  lines: lines.count..<lines.count, inlines: inlines.count..<inlines.count,
                                  nameBytes: name, body: fields.end..<fields.end))
      case .public:
        let multiple = fields.skip("m")
        let address = try fields.hex(line, "PUBLIC", "address")
        let parameterSize = try fields.hex(line, "PUBLIC", "parameter size")
        if let last = publics.last, last.address > address { publicsSorted = false }
        publics.append(Public(address: address, parameterSize: parameterSize, name: fields.rest(), isMultiple: multiple))
      case .inline:
        let depth = try fields.decimal(line, "INLINE", "nest level")
        let callLine = try fields.decimal(line, "INLINE", "call line")
        let callFile = try fields.decimal(line, "INLINE", "call file number")
        let origin = try fields.decimal(line, "INLINE", "origin number")
        let first = inlineRanges.count
        while fields.hasMore {
          let address = try fields.hex(line, "INLINE", "range address")
          guard fields.hasMore else {
            inlineRanges.removeSubrange(first...)
            throw .breakpad(line: line, "INLINE range at \(hexDigits(address)) has no size")
          }
          let size = try fields.hex(line, "INLINE", "range size")
          let (end, overflow) = address.addingReportingOverflow(size)
          inlineRanges.append(address..<(overflow ? .max : end))
        }
        guard inlineRanges.count > first else { throw .breakpad(line: line, "INLINE without an address range") }
        guard !functions.isEmpty else {
          inlineRanges.removeSubrange(first...)
          return note(line, "INLINE before any FUNC is ignored")
        }
        inlines.append(Inline(depth: depth, callLine: callLine, callFile: callFile, origin: origin,
                              ranges: first..<inlineRanges.count))
        functions[functions.count - 1].inlines = functions[functions.count - 1].inlines.lowerBound..<inlines.count
      case .stack:
        guard let stackKind = fields.next() else { throw .breakpad(line: line, "STACK without CFI or WIN") }
        if fields.equals(stackKind, "CFI") {
          try frameRecord(&fields, line: line)
        } else if fields.equals(stackKind, "WIN") {
          skippedWindowsFrames += 1
        } else {
          note(line, "STACK \(Self.quoted(fields.text(stackKind))) is not a record kind this reader knows: ignored")
        }
      case .other:
        guard kindRange.allSatisfy({ Fields.hexValue(fields.bytes[$0]) != nil }) else {
          return note(line, "\(Self.quoted(fields.text(kindRange))) is not a record kind this reader knows: ignored")
        }
        // A line record: `address size line filenum`.
        var record = Fields(bytes: fields.bytes, position: kindRange.lowerBound, end: fields.end)
        let address = try record.hex(line, "line record", "address")
        let size = try record.hex(line, "line record", "size")
        let number = try record.decimal(line, "line record", "line")
        let file = try record.decimal(line, "line record", "file number")
        guard !functions.isEmpty else { return note(line, "a line record before any FUNC is ignored") }
        lines.append(Line(address: address, size: size, line: number, file: file))
        functions[functions.count - 1].lines = functions[functions.count - 1].lines.lowerBound..<lines.count
      }
    }

    /// `STACK CFI INIT address size rules` or `STACK CFI address rules`.
    private mutating func frameRecord(_ fields: inout Fields, line: Int) throws(FormatError) {
      if fields.skip("INIT") {
        let address = try fields.hex(line, "STACK CFI INIT", "address")
        let size = try fields.hex(line, "STACK CFI INIT", "size")
        if let last = frameEntries.last, last.address > address { entriesSorted = false }
        frameEntries.append(FrameEntry(address: address, size: size, rules: keepRules(&fields),
                                       deltas: frameDeltas.count..<frameDeltas.count, rows: fields.end..<fields.end))
        return
      }
      let address = try fields.hex(line, "STACK CFI", "address")
      guard let entry = frameEntries.last else { return note(line, "STACK CFI before any STACK CFI INIT is ignored") }
      guard address > entry.address, address - entry.address < entry.size else {
        return note(line, "STACK CFI at \(hexDigits(address)) is outside its INIT record's range: ignored")
      }
      guard entry.deltas.upperBound == frameDeltas.count else {
        return note(line, "STACK CFI at \(hexDigits(address)) does not follow its INIT record: ignored")
      }
      if entry.deltas.count > 0, frameDeltas[frameDeltas.count - 1].address > address,
         unsortedDeltas.last != frameEntries.count - 1 {
        unsortedDeltas.append(frameEntries.count - 1)
      }
      frameDeltas.append(FrameDelta(address: address, rules: keepRules(&fields)))
      frameEntries[frameEntries.count - 1].deltas = entry.deltas.lowerBound..<frameDeltas.count
    }

    /// Where the rest of the line (as `Fields.rest`) is in the file's bytes, which are kept (one copy or
    /// none, instead of one per record).
    private mutating func keepRules(_ fields: inout Fields) -> Range<Int> {
      keptRules = true
      return fields.restRange()
    }

    static func quoted(_ word: String) -> String {
      "'" + (word.utf8.count > 40 ? String(decoding: word.utf8.prefix(40), as: UTF8.self) + "..." : word) + "'"
    }
  }

  /// A `FILE` or `INLINE_ORIGIN` name's place in the file's bytes, by its number (reading on demand).
  struct NameRange: Sendable, Equatable {
    var number: UInt64
    var name: Range<Int>
  }

  /// The space-separated fields of one line, read in place.
  struct Fields {
    let bytes: UnsafeRawBufferPointer
    var position: Int
    let end: Int

    /// The next field (one or more spaces before it are skipped), `nil` at the end of the line.
    mutating func next() -> Range<Int>? {
      while position < end, bytes[position] == 0x20 { position += 1 }
      guard position < end else { return nil }
      let start = position
      while position < end, bytes[position] != 0x20 { position += 1 }
      return start..<position
    }

    var hasMore: Bool {
      var probe = position
      while probe < end, bytes[probe] == 0x20 { probe += 1 }
      return probe < end
    }

    /// True when the field at `range` is `word`.
    func equals(_ range: Range<Int>, _ word: StaticString) -> Bool {
      guard range.count == word.utf8CodeUnitCount else { return false }
      return word.withUTF8Buffer { expected in
        var index = range.lowerBound
        for byte in expected {
          guard bytes[index] == byte else { return false }
          index += 1
        }
        return true
      }
    }

    /// Consumes the next field when it is `word`.
    mutating func skip(_ word: StaticString) -> Bool {
      var probe = self
      guard let field = probe.next(), field.count == word.utf8CodeUnitCount else { return false }
      let matches = word.withUTF8Buffer { expected in
        zip(expected, UnsafeRawBufferPointer(rebasing: bytes[field])).allSatisfy { $0 == $1 }
      }
      if matches { self = probe }
      return matches
    }

    func text(_ range: Range<Int>) -> String {
      String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// The rest of the line after the separating space (a name: it may hold spaces, or be empty).
    mutating func rest() -> String { text(restRange()) }

    /// Where `rest()` is, consumed.
    mutating func restRange() -> Range<Int> {
      if position < end, bytes[position] == 0x20 { position += 1 }
      defer { position = end }
      return position..<end
    }

    static func hexValue(_ byte: UInt8) -> UInt64? {
      switch byte {
      case 0x30...0x39: UInt64(byte - 0x30)
      case 0x61...0x66: UInt64(byte - 0x61 + 10)
      case 0x41...0x46: UInt64(byte - 0x41 + 10)
      default: nil
      }
    }

    /// The next field as hex (at most 16 digits, no `0x`).
    mutating func hex(_ line: Int, _ record: String, _ name: String) throws(FormatError) -> UInt64 {
      guard let field = next() else { throw .breakpad(line: line, "\(record) has no \(name)") }
      guard field.count <= 16 else {
        throw .breakpad(line: line, "\(record) \(name) \(BreakpadSymbolFile.Parser.quoted(text(field))) has more than 16 hex digits")
      }
      var value: UInt64 = 0
      for index in field {
        guard let digit = Self.hexValue(bytes[index]) else {
          throw .breakpad(line: line, "\(record) \(name) \(BreakpadSymbolFile.Parser.quoted(text(field))) is not hex")
        }
        value = value << 4 | digit  // at most 16 digits: no bits lost
      }
      return value
    }

    /// The next field as a decimal number that fits in 32 bits.
    mutating func decimal(_ line: Int, _ record: String, _ name: String) throws(FormatError) -> UInt32 {
      guard let field = next() else { throw .breakpad(line: line, "\(record) has no \(name)") }
      var value: UInt64 = 0
      for index in field {
        let byte = bytes[index]
        guard byte >= 0x30, byte <= 0x39 else {
          throw .breakpad(line: line, "\(record) \(name) \(BreakpadSymbolFile.Parser.quoted(text(field))) is not a decimal number")
        }
        value = value * 10 + UInt64(byte - 0x30)  // below 2^33 before each step: no overflow
        guard value <= UInt64(UInt32.max) else {
          throw .breakpad(line: line, "\(record) \(name) \(BreakpadSymbolFile.Parser.quoted(text(field))) does not fit in 32 bits")
        }
      }
      return UInt32(value)  // checked above
    }
  }
}
