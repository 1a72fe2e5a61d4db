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
  private(set) var storage: (any PinnedBytes)?
  /// Read on demand: lines, inlines and rows are read in `storage` when asked for.
  private(set) var onDemand = false
  /// Whether the file's bytes are kept (`withFileBytes`): read on demand.
  var holdsItsBytes: Bool { onDemand && storage != nil }
  /// Read on demand: `FILE` and `INLINE_ORIGIN` names, sorted by number (the file's order among equal
  /// numbers, the later one counting).
  private(set) var fileTable: [NameRange] = [], originTable: [NameRange] = []

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
}
