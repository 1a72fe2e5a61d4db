/// A Breakpad symbol file (`.sym`, Google's `docs/symbol_files.md`) read into records with lookups: the
/// function, inlined calls and source line of an address, and the CFI rules in force at it.
///
/// Read strictly where a record's own fields are concerned (bad hex, a missing field, a number past
/// its width, an `INLINE` with an odd address list: an error naming the line) and tolerantly about
/// order and placement, as symbol files in the wild need: records out of order are sorted, line and
/// `INLINE` records with no `FUNC` before them, duplicate numbers, unknown record kinds and
/// `STACK CFI` rows outside their `INIT` range are left out with a note, `STACK WIN` records are
/// counted and skipped. Nothing is allocated by a count the file states: every record costs the bytes
/// of its own line. Lines end with `\n` or `\r\n`.
///
/// Read `.onDemand` (as symbol stores read it), only the records that say where things are (`FUNC`,
/// `PUBLIC`, `STACK CFI INIT`, `FILE`, `INLINE_ORIGIN` numbers) are parsed; the line, `INLINE` and
/// `STACK CFI` row records after them are passed over, their bytes noted, and read when a lookup
/// lands in their function or entry: they are most of a file, and a dump's frames fall in a few.
/// Lookups answer the same either way; what is not read is not checked, so a malformed record there
/// is not an error but reads as no records (its function without lines, its entry without rows).
package struct BreakpadSymbolFile: Sendable {
  /// How much of the file `init` reads.
  package enum Reading: Sendable {
    /// Every record, each checked (an error names the first malformed one).
    case everything
    /// Only what finding an address's records needs (see the type's summary).
    case onDemand
  }

  /// `MODULE os arch id name`.
  package struct Module: Sendable, Equatable {
    package var operatingSystem: String
    package var architecture: String
    package var id: String
    package var name: String
  }

  /// `FUNC [m] address size parameter_size name`, with its line and `INLINE` records.
  package struct Function: Sendable, Equatable {
    package var address: UInt64
    package var size: UInt64
    package var parameterSize: UInt64
    /// Its name; read on demand, empty in `functions` and given by `function(containing:)`.
    package var name: String
    package var isMultiple: Bool
    /// Its line records in `lines`, sorted by address.
    package var lines: Range<Int>
    /// Its `INLINE` records in `inlines`.
    package var inlines: Range<Int>
    /// Where its name is in the file's bytes.
    var nameBytes: Range<Int>
    /// Read on demand: where its line and `INLINE` records are in the file's bytes.
    var body: Range<Int>

    /// True when `address` is in `[address, address + size)`.
    package func contains(_ address: UInt64) -> Bool { address >= self.address && address - self.address < size }
  }

  /// `address size line filenum`.
  package struct Line: Sendable, Equatable {
    package var address: UInt64
    package var size: UInt64
    package var line: UInt32
    package var file: UInt32

    package init(address: UInt64, size: UInt64, line: UInt32, file: UInt32) {
      self.address = address
      self.size = size
      self.line = line
      self.file = file
    }
  }

  /// `INLINE depth call_line call_file origin [address size]+`.
  package struct Inline: Sendable, Equatable {
    package var depth: UInt32
    package var callLine: UInt32
    package var callFile: UInt32
    package var origin: UInt32
    /// Its address ranges in `inlineRanges`.
    package var ranges: Range<Int>

    package init(depth: UInt32, callLine: UInt32, callFile: UInt32, origin: UInt32, ranges: Range<Int>) {
      self.depth = depth
      self.callLine = callLine
      self.callFile = callFile
      self.origin = origin
      self.ranges = ranges
    }
  }

  /// `PUBLIC [m] address parameter_size name`.
  package struct Public: Sendable, Equatable {
    package var address: UInt64
    package var parameterSize: UInt64
    package var name: String
    package var isMultiple: Bool
  }

  /// `STACK CFI INIT address size rules`, with its `STACK CFI address rules` rows in `frameDeltas`.
  package struct FrameEntry: Sendable, Equatable {
    package var address: UInt64
    package var size: UInt64
    /// Where its rules' text is in the file's bytes (`ruleText(_:)`): kept as bytes, as most are never read.
    package var rules: Range<Int>
    package var deltas: Range<Int>
    /// Read on demand: where its rows are in the file's bytes.
    var rows: Range<Int>
  }

  /// `STACK CFI address rules`.
  package struct FrameDelta: Sendable, Equatable {
    package var address: UInt64
    /// Where its rules' text is in the file's bytes.
    package var rules: Range<Int>
  }

  /// One source frame of an address: a function, or an inlined call, and where in the source.
  package struct SourceFrame: Sendable, Equatable {
    /// The function's name (`FUNC`, `INLINE_ORIGIN` or `PUBLIC`).
    package var function: String
    /// The source file, `nil` when unknown (a `PUBLIC`, a number with no `FILE` record).
    package var file: String?
    /// The line, `nil` when unknown.
    package var line: UInt32?
    /// True for a function inlined into the next frame.
    package var isInlined: Bool
    /// The start of the `FUNC` or `PUBLIC` (for the outermost frame; the function's for inlined ones).
    package var functionAddress: UInt64
  }

  package private(set) var module: Module
  /// `INFO CODE_ID`'s value, `nil` when the file has none.
  package private(set) var codeID: String?
  /// `FILE` names by number (empty read on demand: `fileName(_:)` answers).
  package private(set) var files: [UInt32: String] = [:]
  /// `INLINE_ORIGIN` names by number (empty read on demand: `originName(_:)` answers).
  package private(set) var inlineOrigins: [UInt32: String] = [:]
  /// `FUNC` records, sorted by address (the file's order among equal addresses).
  package private(set) var functions: [Function] = []
  /// Line, `INLINE` records and their ranges (empty read on demand: `records(of:)` reads a function's).
  package private(set) var lines: [Line] = []
  package private(set) var inlines: [Inline] = []
  package private(set) var inlineRanges: [Range<UInt64>] = []
  /// `PUBLIC` records, sorted by address.
  package private(set) var publics: [Public] = []
  /// `STACK CFI INIT` records, sorted by address.
  package private(set) var frameEntries: [FrameEntry] = []
  /// `STACK CFI` rows (empty read on demand: `deltas(of:)` reads an entry's).
  package private(set) var frameDeltas: [FrameDelta] = []
  /// The `STACK WIN` records skipped.
  package private(set) var skippedWindowsFrames = 0
  /// The bytes from the first `STACK WIN` line to the end of the last, and that first line's number.
  var windowsFrameLines: (bytes: Range<Int>, firstLine: Int)?
  /// What was left out and why, one line each naming the line; at most `noteLimit`, then one more
  /// saying how many others there were.
  package private(set) var notes: [String] = []

  /// The file's bytes, where names read on demand, rules, lines, inlines and rows are found again: the
  /// file itself when it was given as `PinnedBytes`, else a copy (made when there is something to find
  /// there later), else `nil`.
  private var storage: (any PinnedBytes)?
  /// Read on demand: lines, inlines and rows are read in `storage` when asked for.
  private var onDemand = false
  /// Whether the file's bytes are kept (`withFileBytes`): read on demand.
  var holdsItsBytes: Bool { onDemand && storage != nil }
  /// Read on demand: `FILE` and `INLINE_ORIGIN` names, sorted by number (the file's order among equal
  /// numbers, the later one counting).
  private var fileTable: [NameRange] = [], originTable: [NameRange] = []

  /// The most notes kept.
  package static let noteLimit = 100

  /// Reads the symbol file in `bytes`. Throws `FormatError.breakpad` naming the line for a record that
  /// breaks the format, and for a file whose first record is not `MODULE`. What is read later (on
  /// demand, and rules) is read in a copy of the bytes, made when there is any.
  package init(_ bytes: ByteReader, reading: Reading = .everything) throws(FormatError) {
    var storage: (any PinnedBytes)?
    let parser = try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(FormatError) -> Parser in
      let parser = try Self.parse(raw, reading: reading)
      if parser.deferring || parser.keptRules { storage = CopiedBytes(raw) }
      return parser
    }
    try self.init(parser, storage: storage)
  }

  /// Reads the symbol file in `bytes`, as `init(_:reading:)` does, and keeps `bytes` (not a copy) for
  /// what is read later.
  package init(_ bytes: some PinnedBytes, reading: Reading = .everything) throws(FormatError) {
    let parser = try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(FormatError) -> Parser in
      try Self.parse(raw, reading: reading)
    }
    try self.init(parser, storage: bytes)
  }

  private static func parse(_ raw: UnsafeRawBufferPointer, reading: Reading) throws(FormatError) -> Parser {
    var parser = Parser()
    parser.deferring = reading == .onDemand
    try parser.parse(raw)
    return parser
  }

  /// The file `parser` read, whose bytes are `storage`.
  private init(_ parser: Parser, storage: (any PinnedBytes)?) throws(FormatError) {
    guard let module = parser.module else { throw .breakpad(line: 1, "no MODULE record: not a Breakpad symbol file") }
    self.module = module
    codeID = parser.codeID
    files = parser.files
    inlineOrigins = parser.origins
    lines = parser.lines
    inlines = parser.inlines
    inlineRanges = parser.inlineRanges
    frameDeltas = parser.frameDeltas
    self.storage = storage
    skippedWindowsFrames = parser.skippedWindowsFrames
    windowsFrameLines = parser.windowsFrameLines
    onDemand = parser.deferring
    fileTable = Self.sortedByNumber(parser.fileTable)
    originTable = Self.sortedByNumber(parser.originTable)
    var notes = parser.notes
    var noteCount = parser.noteCount
    func note(_ text: String) {
      noteCount += 1
      if notes.count < Self.noteLimit { notes.append(text) }
    }
    // Lines within a function in address order; functions, publics and CFI entries too.
    var functions = parser.functions
    for function in functions where !Self.linesSorted(lines, function.lines) {
      lines.replaceSubrange(function.lines, with: Self.stableSorted(Array(lines[function.lines]), by: { $0.address }))
    }
    if !parser.functionsSorted {
      functions = Self.stableSorted(functions, by: { $0.address })
    }
    var overlaps = 0
    var reach: UInt64 = 0
    for (index, function) in functions.enumerated() {
      if index > 0, function.address < reach { overlaps += 1 }
      let (end, overflow) = function.address.addingReportingOverflow(function.size)
      reach = max(reach, overflow ? .max : end)
    }
    if overlaps > 0 { note("\(overlaps) FUNC records overlap the one before them (an address gets the nearest start)") }
    self.functions = functions
    var publics = parser.publics
    if !parser.publicsSorted {
      publics = Self.stableSorted(publics, by: { $0.address })
    }
    self.publics = publics
    var entries = parser.frameEntries
    for index in parser.unsortedDeltas {
      let entry = entries[index]
      note("the STACK CFI rows after the INIT record at \(hexDigits(entry.address)) are out of order: sorted")
      frameDeltas.replaceSubrange(entries[index].deltas, with: Self.stableSorted(Array(frameDeltas[entry.deltas]), by: { $0.address }))
    }
    if !parser.entriesSorted {
      entries = Self.stableSorted(entries, by: { $0.address })
    }
    frameEntries = entries
    if noteCount > notes.count { notes.append("\(noteCount - notes.count) more notes") }
    self.notes = notes
  }

  /// `table` sorted by number, keeping the file's order among equal numbers.
  private static func sortedByNumber(_ table: [NameRange]) -> [NameRange] {
    stableSorted(table, by: { $0.number })
  }

  /// `items` in the order of their `key`, those with equal keys in their order in `items`. Records a
  /// file gives in a few sorted parts (dump_syms writes a Mach-O file's `STACK CFI INIT` records in
  /// two) are merged part by part, a pass each; more parts than `mergedRuns` are sorted as a whole.
  static func stableSorted<T>(_ items: [T], by key: (T) -> UInt64) -> [T] {
    var starts = [0]
    for index in items.indices.dropFirst() where key(items[index]) < key(items[index - 1]) {
      starts.append(index)
      guard starts.count <= mergedRuns else {
        return items.enumerated().sorted { (key($0.element), $0.offset) < (key($1.element), $1.offset) }
          .map(\.element)
      }
    }
    guard starts.count > 1 else { return items }
    var merged = Array(items[0..<starts[1]])
    for (run, start) in starts.enumerated().dropFirst() {
      let part = items[start..<(run + 1 < starts.count ? starts[run + 1] : items.count)]
      var next: [T] = []
      next.reserveCapacity(merged.count + part.count)
      var left = merged.startIndex, right = part.startIndex
      // Each round takes one item: bounded by the two runs' sizes. On equal keys the earlier run's first.
      while left < merged.endIndex, right < part.endIndex {
        if key(part[right]) < key(merged[left]) {
          next.append(part[right])
          right += 1
        } else {
          next.append(merged[left])
          left += 1
        }
      }
      next += merged[left...]
      next += part[right...]
      merged = next
    }
    return merged
  }

  /// The most sorted parts `stableSorted` merges.
  static let mergedRuns = 8

  /// True when `lines[range]` is in address order.
  static func linesSorted(_ lines: [Line], _ range: Range<Int>) -> Bool {
    var index = range.lowerBound
    while index + 1 < range.upperBound {
      if lines[index].address > lines[index + 1].address { return false }
      index += 1
    }
    return true
  }

  // MARK: Lookups

  /// The `FUNC` holding `address`: of those starting at or below it, the nearest that contains it
  /// (with overlapping records, a few before the nearest are tried too).
  package func function(containing address: UInt64) -> Function? {
    var index = Self.lastIndex(functions, atOrBelow: address, \.address)
    var tries = 0
    while let current = index, tries < 8 {
      if functions[current].contains(address) {
        guard onDemand else { return functions[current] }
        var function = functions[current]
        function.name = ruleText(function.nameBytes)
        return function
      }
      index = current > 0 ? current - 1 : nil
      tries += 1
    }
    return nil
  }

  /// The `PUBLIC` naming `address` when no `FUNC` holds it: the nearest at or below it, unless a
  /// `FUNC` starts between them (a package extends to the next address a record names).
  package func publicSymbol(at address: UInt64) -> Public? {
    guard function(containing: address) == nil, let index = Self.lastIndex(publics, atOrBelow: address, \.address) else {
      return nil
    }
    let symbol = publics[index]
    if let nearest = Self.lastIndex(functions, atOrBelow: address, \.address), functions[nearest].address > symbol.address {
      return nil
    }
    return symbol
  }

  /// The source frames of `address`, innermost first: the inlined calls holding it (deepest first),
  /// then its `FUNC`; the innermost with the line record's file and line, each outer one with the call
  /// site of the frame inside it. A `PUBLIC` gives one frame without a file. Empty when no record names
  /// the address.
  package func frames(at address: UInt64) -> [SourceFrame] {
    guard let function = function(containing: address) else {
      guard let symbol = publicSymbol(at: address) else { return [] }
      return [SourceFrame(function: symbol.name, file: nil, line: nil, isInlined: false, functionAddress: symbol.address)]
    }
    let records = records(of: function)
    let line = Self.lineRecord(records.lines, at: address)
    // The calls holding the address, one per depth (the first listed wins), outermost first.
    var calls: [Inline] = []
    for inline in records.inlines where records.inlineRanges[inline.ranges].contains(where: { $0.contains(address) }) {
      if !calls.contains(where: { $0.depth == inline.depth }) { calls.append(inline) }
    }
    calls.sort { $0.depth < $1.depth }
    var frames: [SourceFrame] = []
    frames.reserveCapacity(calls.count + 1)
    var file = line.flatMap { fileName($0.file) }
    var lineNumber = line?.line
    for call in calls.reversed() {
      frames.append(SourceFrame(function: originName(call.origin) ?? "", file: file, line: lineNumber, isInlined: true,
                                functionAddress: function.address))
      file = fileName(call.callFile)
      lineNumber = call.callLine
    }
    frames.append(SourceFrame(function: function.name, file: file, line: lineNumber, isInlined: false,
                              functionAddress: function.address))
    return frames
  }

  /// The line record of `function` holding `address`, `nil` when none does.
  package func lineRecord(in function: Function, at address: UInt64) -> Line? {
    Self.lineRecord(records(of: function).lines, at: address)
  }

  /// The record of `records` (sorted by address) holding `address`.
  private static func lineRecord(_ records: ArraySlice<Line>, at address: UInt64) -> Line? {
    guard let index = lastIndex(records, atOrBelow: address, \.address) else { return nil }
    let record = records[index]
    return address - record.address < record.size ? record : nil
  }

  /// A function's line records (sorted by address) and `INLINE` records, with the address ranges
  /// those index.
  package struct FunctionRecords {
    package var lines: ArraySlice<Line>
    package var inlines: ArraySlice<Inline>
    package var inlineRanges: [Range<UInt64>]
  }

  /// The line and `INLINE` records of `function`: read from its bytes now when the file is read on
  /// demand (none when one of them is malformed).
  package func records(of function: Function) -> FunctionRecords {
    guard onDemand else {
      return FunctionRecords(lines: lines[function.lines], inlines: inlines[function.inlines], inlineRanges: inlineRanges)
    }
    var parser = Parser()
    parser.rereading = .body
    parser.hasModule = true
    parser.functions = [Function(address: function.address, size: function.size, parameterSize: 0, name: "",
                                 isMultiple: false, lines: 0..<0, inlines: 0..<0, nameBytes: 0..<0, body: function.body)]
    guard reread(function.body, &parser) else { return FunctionRecords(lines: [], inlines: [], inlineRanges: []) }
    var lines = parser.lines
    if !Self.linesSorted(lines, lines.indices) {
      lines = Self.stableSorted(lines, by: { $0.address })
    }
    return FunctionRecords(lines: lines[...], inlines: parser.inlines[...], inlineRanges: parser.inlineRanges)
  }

  /// The `STACK CFI` rows of `entry`, sorted by address: read from its bytes now when the file is read
  /// on demand (those before a malformed one only).
  package func deltas(of entry: FrameEntry) -> ArraySlice<FrameDelta> {
    guard onDemand else { return frameDeltas[entry.deltas] }
    var parser = Parser()
    parser.rereading = .row
    parser.hasModule = true
    parser.frameEntries = [FrameEntry(address: entry.address, size: entry.size, rules: entry.rules, deltas: 0..<0,
                                      rows: entry.rows)]
    _ = reread(entry.rows, &parser)
    var deltas = parser.frameDeltas
    if !parser.unsortedDeltas.isEmpty {
      deltas = Self.stableSorted(deltas, by: { $0.address })
    }
    return deltas[...]
  }

  /// Runs `parser` over `range` of the file's bytes; false when a record there is malformed.
  private func reread(_ range: Range<Int>, _ parser: inout Parser) -> Bool {
    withFileBytes { raw in
      do {
        try parser.parse(raw, range)
        return true
      } catch {
        return false
      }
    } ?? false
  }

  /// Calls `body` with the file's bytes, `nil` when they were not kept (read whole, without `STACK
  /// CFI` records).
  func withFileBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R? {
    storage?.withUnsafeBytes(body)
  }

  /// The name of `FILE` record `number`, `nil` when there is none.
  package func fileName(_ number: UInt32) -> String? {
    onDemand ? name(number, in: fileTable) : files[number]
  }

  /// The name of `INLINE_ORIGIN` record `number`, `nil` when there is none.
  package func originName(_ number: UInt32) -> String? {
    onDemand ? name(number, in: originTable) : inlineOrigins[number]
  }

  private func name(_ number: UInt32, in table: [NameRange]) -> String? {
    guard let index = Self.lastIndex(table, atOrBelow: UInt64(number), \.number), table[index].number == UInt64(number) else {
      return nil
    }
    return ruleText(table[index].name)
  }

  /// The text of a `STACK CFI` record's rules (`FrameEntry.rules`, `FrameDelta.rules`).
  package func ruleText(_ range: Range<Int>) -> String {
    withRuleBytes(range) { String(decoding: $0, as: UTF8.self) }
  }

  /// Calls `body` with the bytes of a `STACK CFI` record's rules (`FrameEntry.rules`, `FrameDelta.rules`).
  package func withRuleBytes<R>(_ range: Range<Int>, _ body: (UnsafeRawBufferPointer) -> R) -> R {
    // The ranges are the reader's own, in these bytes; without them (no rules read) the text is empty.
    withFileBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) } ?? body(UnsafeRawBufferPointer(start: nil, count: 0))
  }

  /// The index in `frameEntries` of the `STACK CFI INIT` record whose range holds `address`, `nil` when none does.
  package func frameEntryIndex(containing address: UInt64) -> Int? {
    guard let index = Self.lastIndex(frameEntries, atOrBelow: address, \.address),
          address - frameEntries[index].address < frameEntries[index].size else { return nil }
    return index
  }

  /// The CFI rules in force at `address`: the `STACK CFI INIT` record's whose range holds it, then each
  /// `STACK CFI` row at or below it overriding what it names, as `(register, expression)` pairs in the
  /// order they were first given (`.cfa` usually first). `nil` when no entry holds the address.
  package func frameRules(at address: UInt64) -> [(register: String, expression: String)]? {
    guard let index = frameEntryIndex(containing: address) else { return nil }
    let entry = frameEntries[index]
    var rules = Self.rules(ruleText(entry.rules))
    for delta in deltas(of: entry) where delta.address <= address {
      for (register, expression) in Self.rules(ruleText(delta.rules)) {
        if let existing = rules.firstIndex(where: { $0.register == register }) {
          rules[existing].expression = expression
        } else {
          rules.append((register, expression))
        }
      }
    }
    return rules
  }

  /// `REG: EXPR REG: EXPR ...`: a token ending with `:` names a register; the tokens up to the next
  /// one are its postfix expression.
  package static func rules(_ text: String) -> [(register: String, expression: String)] {
    var result: [(register: String, expression: String)] = []
    for token in text.spaceSeparatedWords {
      if token.utf8.last == UInt8(ascii: ":") {
        result.append((String(token.dropLast()), ""))
      } else if !result.isEmpty {
        result[result.count - 1].expression += result[result.count - 1].expression.isEmpty ? String(token) : " " + token
      }
    }
    return result
  }

  /// The index of the last element whose key is at or below `value` in a collection sorted by it.
  static func lastIndex<C: RandomAccessCollection>(_ items: C, atOrBelow value: UInt64, _ key: KeyPath<C.Element, UInt64>)
    -> C.Index? where C.Index == Int {
    var low = items.startIndex, high = items.endIndex
    while low < high {
      let middle = low + (high - low) / 2
      if items[middle][keyPath: key] <= value { low = middle + 1 } else { high = middle }
    }
    return low > items.startIndex ? low - 1 : nil
  }
}
