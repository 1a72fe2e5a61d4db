/// The lookups of a symbol file: the function, public symbol, source frames and line of an address,
/// the records and rows read on demand, the `FILE` and `INLINE_ORIGIN` names, and the CFI rules in force.
extension BreakpadSymbolFile {
  /// The `FUNC` holding `address`: of those starting at or below it, the nearest that contains it
  /// (with overlapping records, a few before the nearest are tried too).
  package func function(containing address: UInt64) -> Function? {
    guard let index = functionIndex(containing: address) else { return nil }
    guard onDemand else { return functions[index] }
    var function = functions[index]
    function.name = ruleText(function.nameBytes)
    return function
  }

  /// The index in `functions` of the `FUNC` `function(containing:)` finds, its name not read: what a
  /// question about the record alone asks (a stack scan's "is this word in a function?").
  package func functionIndex(containing address: UInt64) -> Int? {
    var index = Self.lastIndex(functions, atOrBelow: address, \.address)
    var tries = 0
    while let current = index, tries < 8 {
      if functions[current].contains(address) { return current }
      index = current > 0 ? current - 1 : nil
      tries += 1
    }
    return nil
  }

  /// The `PUBLIC` naming `address` when no `FUNC` holds it: the nearest at or below it, unless a
  /// `FUNC` starts between them (a package extends to the next address a record names).
  package func publicSymbol(at address: UInt64) -> Public? {
    guard functionIndex(containing: address) == nil else { return nil }
    return publicIndex(outsideFunctionsAt: address).map { publics[$0] }
  }

  /// Whether a `FUNC` or a `PUBLIC` record names `address` (no name read).
  package func namesAddress(_ address: UInt64) -> Bool {
    functionIndex(containing: address) != nil || publicIndex(outsideFunctionsAt: address) != nil
  }

  /// `publicSymbol(at:)`'s record, for an address no `FUNC` holds.
  private func publicIndex(outsideFunctionsAt address: UInt64) -> Int? {
    guard let index = Self.lastIndex(publics, atOrBelow: address, \.address) else { return nil }
    if let nearest = Self.lastIndex(functions, atOrBelow: address, \.address), functions[nearest].address > publics[index].address {
      return nil
    }
    return index
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
