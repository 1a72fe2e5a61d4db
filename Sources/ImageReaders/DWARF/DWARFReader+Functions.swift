/// A debugging information entry of the file a `DWARFReader` reads (or of its supplementary file), to
/// ask its name later.
package struct DWARFEntry: Hashable, Sendable {
  let reference: DWARFDIE.Reference

  /// Its offset in `.debug_info`.
  package var offset: Int { reference.offset }
  /// True for an entry of the supplementary (dwz) file.
  package var inSupplementary: Bool { reference.inSupplementary }
}

/// Where an entry's name is to be found.
package enum DWARFNameSource: Hashable, Sendable {
  /// The entry has a `DW_AT_linkage_name` or `DW_AT_name` of its own.
  case entry(DWARFEntry)
  /// It has none; the entry its `DW_AT_abstract_origin` (else `DW_AT_specification`) points at names it.
  case origin(DWARFEntry)
  /// It has neither a name nor a reference.
  case none
}

/// A function inlined into another, as a `DW_TAG_inlined_subroutine` says.
package struct DWARFInlinedCall: Sendable {
  /// How deep: 0 for a call made by the subprogram itself, 1 for a call inside a depth-0 inlined
  /// function, and so on. Lexical blocks between them add nothing.
  package var depth: Int
  /// The `DW_TAG_inlined_subroutine` entry (its name comes through `DW_AT_abstract_origin`).
  package var entry: DWARFEntry
  /// Where its name is: see `DWARFFunction.nameSource`.
  package var nameSource: DWARFNameSource
  /// Its code, in the order the entry lists it: non-empty ranges that do not start at 0.
  package var ranges: [Range<UInt64>]
  /// `DW_AT_call_file`: an index into the unit's line table's file names; `nil` without one.
  package var callFile: UInt64?
  /// `DW_AT_call_line`; 0 without one.
  package var callLine: UInt64
}

/// A `DW_TAG_subprogram` with code, and the calls inlined into it.
package struct DWARFFunction: Sendable {
  /// The subprogram entry.
  package var entry: DWARFEntry
  /// Where its name is: on the entry itself, or on what its `DW_AT_abstract_origin` or
  /// `DW_AT_specification` points at (for `DWARFReader.declaredName`, which many calls of one inlined
  /// function can then share).
  package var nameSource: DWARFNameSource
  /// Its code: `DW_AT_ranges`, else `[DW_AT_low_pc, DW_AT_high_pc)`, in the order the entry lists them;
  /// never empty. Ranges a linker discarded (starting at 0, at the tombstone, or empty) are left out.
  package var ranges: [Range<UInt64>]
  /// Every inlined subroutine under it, at any depth, in entry order (a subprogram nested inside it
  /// is a function of its own, and its inlined calls are its own).
  package var inlinedCalls: [DWARFInlinedCall]
}

/// The functions of one compilation unit.
package struct DWARFUnitFunctions: Sendable {
  /// The unit's index in `.debug_info` order (`0..<DWARFReader.unitCount`).
  package var unit: Int
  /// `DW_AT_language` of the unit, `nil` when it has none.
  package var language: UInt64?
  /// `DW_AT_comp_dir`, `nil` when it has none.
  package var compilationDirectory: String?
  /// Its functions, each after the ones nested inside it (the order a walk finishes them in).
  package var functions: [DWARFFunction]
}

/// The rows of one unit's line table, as gimli's line program yields them and symbolic (which Mozilla's
/// `dump_syms` is built on) keeps them: per sequence, rows at address 0 dropped (a discarded function's
/// code), a row at an address already seen replacing the earlier one's file and line, rows going
/// backwards ignored; each row's size runs to the next row (the end of the sequence for the last).
package struct DWARFLineRows: Sendable {
  /// One row.
  package struct Row: Sendable, Equatable {
    /// Its first address.
    package var address: UInt64
    /// Up to the next row's address; `nil` for a last row with no end.
    package var size: UInt64?
    /// Index into the table's file names (1-based before DWARF 5, 0-based in DWARF 5).
    package var file: UInt64
    /// The line; 0 when the compiler attributes the code to no line.
    package var line: UInt64
  }

  struct Sequence {
    var start: UInt64
    var end: UInt64
    var firstRow: Int
    var endRow: Int
  }

  /// Every row, sequence after sequence (sequences sorted by their first address).
  package private(set) var rows: [Row] = []
  var sequences: [Sequence] = []
  /// For each sequence, the greatest end among it and those before it.
  var endsSoFar: [UInt64] = []

  init(_ table: DWARFLineTable) {
    rows.reserveCapacity(table.rows.count)
    var found: [(sequence: Sequence, programOrder: Int)] = []
    for sequence in table.sequences {
      let first = rows.count
      var previous: UInt64 = 0
      var index = sequence.firstRow
      let last = sequence.endRow - 1  // the end_sequence row (the table keeps sequences of 2 rows or more)
      while index < last {
        let row = table.rows[index]
        index += 1
        let address = row.address
        if address == 0 { continue }  // rustc's and linkers' sequences for discarded code
        if rows.count > first, address >= rows[rows.count - 1].address {
          rows[rows.count - 1].size = address - rows[rows.count - 1].address
        }
        guard address >= previous else { continue }  // "addresses may only increase"
        if rows.count > first, rows[rows.count - 1].address == address {
          rows[rows.count - 1].file = UInt64(row.file)
          rows[rows.count - 1].line = UInt64(row.line)
        } else {
          rows.append(Row(address: address, size: nil, file: UInt64(row.file), line: UInt64(row.line)))
        }
        previous = address
      }
      guard rows.count > first else { continue }
      let end = table.rows[last].address
      if end >= rows[rows.count - 1].address { rows[rows.count - 1].size = end - rows[rows.count - 1].address }
      // A defensive end, as symbolic's: an end_sequence below the last row still covers it.
      let sequenceEnd = end < previous ? previous &+ 1 : end
      found.append((Sequence(start: rows[first].address, end: sequenceEnd, firstRow: first, endRow: rows.count),
                    sequence.firstRow))
    }
    // By the first kept row's address; among equal starts in the program's order (the table's rows
    // are in program order).
    found.sort { ($0.sequence.start, $0.programOrder) < ($1.sequence.start, $1.programOrder) }
    sequences = found.map(\.sequence)
    var greatest: UInt64 = 0
    endsSoFar = sequences.map { greatest = max(greatest, $0.end); return greatest }
  }

  /// The rows symbolic gives a function's range: in the first sequence (by start address) that
  /// overlaps `range` and has a row at or before its start, that row and those after it below
  /// `range.upperBound`. The first row may start before the range. Empty when no sequence has such rows.
  package func rows(covering range: Range<UInt64>) -> ArraySlice<Row> {
    // Sequences before the first whose running end passes the range's start all end at or before it.
    var low = 0, high = sequences.count
    while low < high {
      let middle = (low + high) / 2
      if endsSoFar[middle] <= range.lowerBound { low = middle + 1 } else { high = middle }
    }
    var index = low
    while index < sequences.count {
      let sequence = sequences[index]
      index += 1
      // A sequence starting exactly at the range's end counts as overlapping, as in symbolic.
      if sequence.start > range.upperBound { break }
      if sequence.end <= range.lowerBound { continue }
      // The last row at or before the range's start...
      var first = sequence.firstRow, last = sequence.endRow
      while first < last {
        let middle = (first + last) / 2
        if rows[middle].address <= range.lowerBound { first = middle + 1 } else { last = middle }
      }
      guard first > sequence.firstRow else { continue }
      let from = first - 1
      // ...and the rows after it below the range's end.
      var end = from
      last = sequence.endRow
      while end < last {
        let middle = (end + last) / 2
        if rows[middle].address < range.upperBound { end = middle + 1 } else { last = middle }
      }
      return rows[from..<end]
    }
    return []
  }
}

extension DWARFReader {
  /// The functions of unit `index` (`0..<unitCount`), found as symbolic's DWARF reader finds them: a
  /// subprogram with code is a function wherever it is (nested ones included); inside it, each
  /// inlined subroutine with code is a call at its depth, and one without code hides the inlined
  /// calls beneath it. `nil` for a unit symbolic leaves out: a type unit, or one with neither
  /// `DW_AT_low_pc` (other than 0: a linker dropped it) nor `DW_AT_ranges`.
  ///
  /// Throws for DWARF that cannot be walked (the unit's functions are then all unknown, as in
  /// symbolic, where one bad entry costs its unit).
  package func functions(inUnit index: Int) throws(FormatError) -> DWARFUnitFunctions? {
    guard index >= 0, index < context.units.count else { return nil }
    let unit = context.units[index]
    guard unit.holdsCode else { return nil }
    try unit.prepare(context)
    guard let table = unit.abbreviations else { return nil }
    var reader = try unit.reader(context, at: unit.dieOffset)
    guard let root = try DWARFDIE.read(&reader, unit: unit, table: table, context: context, want: .unit) else { return nil }
    if case .none = root.ranges {
      guard let low = try root.lowPC(unit, context), low != 0 else { return nil }
    }
    var result = DWARFUnitFunctions(unit: index, language: root.language, compilationDirectory: unit.compilationDirectory,
                                    functions: [])

    // Where a walk is: collecting functions only, or inside function `function` at inline depth `depth`.
    enum Mode { case functions, inside(function: Int, depth: Int) }
    struct Scope {
      var depth: Int  // the tree depth of the entry whose children this covers
      var mode: Mode
      var finishes: Int?  // the function this entry opened, finished when the scope closes
    }
    var scopes: [Scope] = []
    var open: [DWARFFunction] = []  // by index: functions being walked
    var ranges: [(UInt64, UInt64)] = []
    var depth = 1  // the root's children
    var planCache = [UInt8](repeating: 255, count: table.specifications.count)
    let tombstone: UInt64 = unit.addressSize == 8 ? (unit.version <= 4 ? .max - 1 : .max)
      : (1 << (UInt64(unit.addressSize) * 8)) - (unit.version <= 4 ? 2 : 1)

    func close(above level: Int) {
      while let scope = scopes.last, scope.depth >= level {
        scopes.removeLast()
        if let finished = scope.finishes { result.functions.append(open[finished]) }
      }
    }

    // Each entry takes at least one byte: the loop ends within the unit's size.
    while reader.remaining > 0 {
      let start = reader.offset
      let code = try reader.readULEB128()
      if code == 0 {
        if depth > 1 { depth -= 1 }
        continue
      }
      guard let declaration = table.declaration(code) else {
        throw .dwarf(section: ".debug_info", offset: start,
                     "abbreviation code \(code) not in the table at 0x\(hexDigits(UInt64(unit.abbrevOffset)))")
      }
      let level = depth
      if declaration.hasChildren { depth += 1 }
      close(above: level)
      let mode = scopes.last?.mode ?? .functions
      let tag = declaration.tag
      let isSubprogram = tag == DWARFDIE.subprogramTag
      var isCall = false
      if tag == DWARFDIE.inlinedSubroutineTag, case .inside = mode { isCall = true }
      var plan = FunctionPlan.none
      if (isSubprogram || isCall) && declaration.specificationCount > 0 {
        // Declarations with attributes start at distinct specifications: one plan each.
        let slot = declaration.firstSpecification
        if planCache[slot] == 255 { planCache[slot] = Self.plan(declaration, table).rawValue }
        plan = FunctionPlan(rawValue: planCache[slot])
      }
      guard plan.contains(.hasCode) else {
        // A declaration (a class's member function): no code, so nothing beneath holds calls.
        try DWARFDIE.skipAttributes(&reader, declaration: declaration, unit: unit, table: table)
        if isSubprogram || isCall { scopes.append(Scope(depth: level, mode: .functions, finishes: nil)) }
        continue
      }
      let values = try DWARFDIE.readAttributes(&reader, declaration: declaration, dieOffset: start, unit: unit,
                                               table: table, context: context, want: .function)
      ranges.removeAll(keepingCapacity: true)
      try codeRanges(values, unit: unit, tombstone: tombstone, into: &ranges)
      let entry = DWARFEntry(reference: DWARFDIE.Reference(inSupplementary: context.isSupplementary, offset: start))
      let nameSource: DWARFNameSource = plan.contains(.hasOwnName) ? .entry(entry)
        : (values.abstractOrigin ?? values.specification).map { .origin(DWARFEntry(reference: $0)) } ?? .none
      let spans = ranges.map { $0.0..<$0.1 }
      if spans.isEmpty {
        // No code: what is beneath can only hold functions of its own.
        scopes.append(Scope(depth: level, mode: .functions, finishes: nil))
      } else if isSubprogram {
        open.append(DWARFFunction(entry: entry, nameSource: nameSource, ranges: spans, inlinedCalls: []))
        scopes.append(Scope(depth: level, mode: .inside(function: open.count - 1, depth: 0), finishes: open.count - 1))
      } else if case .inside(let function, let callDepth) = mode {
        let callFile: UInt64? = values.hasCallFile ? values.callFile : nil
        open[function].inlinedCalls.append(DWARFInlinedCall(depth: callDepth, entry: entry, nameSource: nameSource, ranges: spans,
                                                            callFile: callFile, callLine: values.callLine))
        scopes.append(Scope(depth: level, mode: .inside(function: function, depth: callDepth + 1), finishes: nil))
      }
    }
    close(above: 0)
    return result
  }

  /// What an abbreviation's attributes say of its entries before they are read.
  struct FunctionPlan: OptionSet {
    let rawValue: UInt8
    static let none: FunctionPlan = []
    /// `DW_AT_low_pc` or `DW_AT_ranges`: it may have code.
    static let hasCode = FunctionPlan(rawValue: 1)
    /// `DW_AT_name`, `DW_AT_linkage_name` or `DW_AT_MIPS_linkage_name`: it names itself.
    static let hasOwnName = FunctionPlan(rawValue: 2)
  }

  static func plan(_ declaration: DWARFAbbreviations.Declaration, _ table: DWARFAbbreviations) -> FunctionPlan {
    var plan = FunctionPlan.none
    let specifications = table.specifications
    var index = declaration.firstSpecification
    let end = index + declaration.specificationCount  // both from the table's own arrays
    while index < end {
      switch specifications[index].attribute {
      case DWARFDIE.lowPCAttribute, DWARFDIE.rangesAttribute: plan.insert(.hasCode)
      case DWARFDIE.nameAttribute, DWARFDIE.linkageNameAttribute, DWARFDIE.mipsLinkageNameAttribute: plan.insert(.hasOwnName)
      default: break
      }
      index += 1
    }
    return plan
  }

  /// The code of a subprogram or inlined subroutine as gimli and symbolic read it: the entries of
  /// `DW_AT_ranges` that are not empty, not at the tombstone and do not start at 0; when none, a
  /// `[low_pc, high_pc)` that is not empty, does not start at 0 or a tombstone and does not run backwards.
  private func codeRanges(_ values: DWARFDIE.Values, unit: DWARFUnit, tombstone: UInt64,
                          into result: inout [(UInt64, UInt64)]) throws(FormatError) {
    var hasRangeList = false
    switch values.ranges {
    case .sectionOffset, .constant, .rangeListIndex: hasRangeList = true
    default: break
    }
    if hasRangeList {
      var listed = values
      listed.low = .none
      try listed.appendRanges(to: &result, unit, context)
      result.removeAll { $0.0 >= $0.1 || $0.0 == 0 || $0.0 == tombstone }
      if !result.isEmpty { return }
    }
    guard let low = try context.address(values.low, unit: unit), low != 0, low < UInt64.max - 1 else { return }
    var plain = values
    plain.ranges = .none
    try plain.appendRanges(to: &result, unit, context)
    result.removeAll { $0.0 >= $0.1 }
  }

  /// The name symbolic gives a function or inlined call: the entry's own `DW_AT_linkage_name` (or
  /// `DW_AT_MIPS_linkage_name`), which is mangled; else its own `DW_AT_name`; else the name of what
  /// its `DW_AT_abstract_origin` or `DW_AT_specification` points at, found the same way (at most 16
  /// steps). `nil` when there is none. References into the supplementary file are followed (symbolic
  /// does not: it names functions dwz moved there nothing).
  package func declaredName(of source: DWARFNameSource) throws(FormatError) -> (text: String, isMangled: Bool)? {
    var reference: DWARFDIE.Reference
    switch source {
    case .entry(let entry), .origin(let entry): reference = entry.reference
    case .none: return nil
    }
    var seen: Set<DWARFDIE.Reference> = [reference]
    for _ in 0..<16 {
      guard let (values, unit, owner) = try die(at: reference) else { return nil }
      if let value = values.linkageName, let text = try owner.string(value, unit: unit) { return (text, true) }
      if let value = values.name {
        guard let text = try owner.string(value, unit: unit) else { return nil }
        return (text, false)
      }
      guard let next = values.abstractOrigin ?? values.specification, seen.insert(next).inserted else { return nil }
      reference = next
    }
    return nil
  }

  /// The line rows of unit `index` (see `DWARFLineRows`); `nil` when it has no line table.
  package func lineRows(inUnit index: Int) throws(FormatError) -> DWARFLineRows? {
    guard index >= 0, index < context.units.count, let table = try context.units[index].lines(context) else { return nil }
    return DWARFLineRows(table)
  }

  /// Drops unit `index`'s parsed line table (parsed again if asked for later): for a walk done with the
  /// unit, whose next unit's table then reuses the memory instead of touching fresh pages.
  package func forgetLineTable(inUnit index: Int) {
    guard index >= 0, index < context.units.count else { return }
    context.units[index].lineTable = nil
    context.units[index].lineTableLoaded = false
  }

  /// The path of file `file` of unit `index`'s line table, joined as `DWARFFrame.file` is (see
  /// `DWARFLineTable.path`); `nil` for an index the table does not have.
  package func filePath(inUnit index: Int, file: UInt64) throws(FormatError) -> String? {
    guard index >= 0, index < context.units.count else { return nil }
    let unit = context.units[index]
    guard let table = try unit.lines(context) else { return nil }
    return table.path(file, compilationDirectory: unit.compilationDirectory)
  }
}

extension DWARFReader {
  /// Unit `index`'s `DW_AT_comp_dir`; `nil` when it has none or its DIE cannot be read.
  package func compilationDirectory(inUnit index: Int) -> String? {
    guard index >= 0, index < context.units.count else { return nil }
    let unit = context.units[index]
    do { try unit.prepare(context) } catch { return nil }
    return unit.compilationDirectory
  }

  /// The sections this reader reads (for another reader over them: a reader is for one thread).
  package var sections: DWARFSections { context.sections }

  /// The size in bytes of unit `index` in `.debug_info` (0 outside `0..<unitCount`).
  package func unitSize(_ index: Int) -> Int {
    guard index >= 0, index < context.units.count else { return 0 }
    return context.units[index].end - context.units[index].offset
  }
}
