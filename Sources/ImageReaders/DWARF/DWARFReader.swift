/// One source location of an address: a function and where in it, the innermost inlined one first.
package struct DWARFFrame: Sendable, Equatable {
  /// The function as DWARF names it: `DW_AT_linkage_name` when there is one (mangled), else
  /// `DW_AT_name`, found through `DW_AT_abstract_origin` and `DW_AT_specification`; `nil` when unknown.
  package var function: String?
  /// The source file, joined with its include directory and the compilation directory as
  /// `llvm-symbolizer` joins them; "" when the line table does not name one.
  package var file: String
  /// 1-based line; 0 when the compiler attributes the address to no line.
  package var line: Int
  /// 1-based column; 0 when unknown.
  package var column: Int
  /// True for a function inlined into the next frame.
  package var isInlined: Bool

  /// A frame with these fields.
  package init(function: String?, file: String, line: Int, column: Int, isInlined: Bool) {
    self.function = function
    self.file = file
    self.line = line
    self.column = column
    self.isInlined = isInlined
  }
}

/// Answers "which source lines and functions does this address belong to" from a file's DWARF, as
/// `llvm-symbolizer --inlines` does. Built once per file: unit headers and an address index of units
/// (`.debug_aranges` where present, else each unit's `DW_AT_ranges`/`low_pc`/`high_pc`); a unit's DIE
/// tree and line table are read the first time an address falls in it, and kept.
///
/// Not thread-safe: its caches fill in as it answers.
package final class DWARFReader {
  let context: DWARFContext
  let unitStarts: [UInt64]
  let unitValues: [Int32]
  private var names: [DWARFDIE.Reference: String?] = [:]

  /// Reads the unit headers and builds the address index. Throws when `.debug_info` is unreadable from
  /// its first unit; a later broken unit ends the index there (the units before it still answer).
  package convenience init(_ sections: DWARFSections) throws(FormatError) {
    try self.init(sections, indexed: true)
  }

  /// `indexed: false` reads the unit headers only: a reader for walking units (`functions(inUnit:)`),
  /// whose address lookups answer nothing.
  package init(_ sections: DWARFSections, indexed: Bool) throws(FormatError) {
    context = try DWARFContext(sections)
    guard indexed else {
      (unitStarts, unitValues) = ([], [])
      problems = context.unitsProblem.map { [$0] } ?? []
      return
    }
    var problems: [FormatError] = context.unitsProblem.map { [$0] } ?? []
    let claims = Self.unitClaims(context, problems: &problems)
    (unitStarts, unitValues) = (claims.starts, claims.values)
    self.problems = problems
  }

  /// The address index of units: `.debug_aranges` where a unit has a set there, else its
  /// `DW_AT_ranges`/`low_pc`/`high_pc`; where units claim the same address, the lowest unit offset
  /// wins (LLVM's `DWARFDebugAranges`, which llvm-symbolizer answers from). A unit whose DIE cannot
  /// be read is left out (its error appended to `problems`); the others still answer.
  static func unitClaims(_ context: DWARFContext, problems: inout [FormatError]) -> DWARFUnitClaims {
    var ranges: [DWARFRangeMap.Range] = []
    var covered = Set<Int>()
    for (unitOffset, low, high) in context.arangeSets() {
      guard let index = context.unitIndex(at: unitOffset) else { continue }
      covered.insert(index)
      ranges.append(DWARFRangeMap.Range(low: low, high: high, priority: UInt64.max - UInt64(unitOffset),
                                        value: Int32(truncatingIfNeeded: index)))
    }
    for (index, unit) in context.units.enumerated() where unit.holdsCode && !covered.contains(index) {
      do {
        try unit.prepare(context)
      } catch {
        problems.append(error)
        continue
      }
      for (low, high) in unit.unitRanges where low < high {
        ranges.append(DWARFRangeMap.Range(low: low, high: high, priority: UInt64.max - UInt64(unit.offset),
                                          value: Int32(truncatingIfNeeded: index)))
      }
    }
    let (starts, values) = DWARFRangeMap.segments(&ranges)
    return DWARFUnitClaims(starts: starts, values: values)
  }

  /// The unit index `frames(at:)` answers from, for a walk of units (`functions(inUnit:)`) to ask
  /// which unit an address belongs to: built here for a reader made with `indexed: false` (problems
  /// with unit DIEs are the walk's to report).
  package func unitClaims() -> DWARFUnitClaims {
    if !unitStarts.isEmpty { return DWARFUnitClaims(starts: unitStarts, values: unitValues) }
    var ignored: [FormatError] = []
    return Self.unitClaims(context, problems: &ignored)
  }

  /// What made the index leave units out: a unit header that ends the walk of `.debug_info`, unit DIEs
  /// that cannot be read. Addresses in those units answer nothing.
  package let problems: [FormatError]

  /// The addresses where the unit index changes from one unit (or none) to another, ascending: each
  /// unit's first address among them (the fuzz target and the mutation tests probe these).
  var indexedAddresses: [UInt64] { unitStarts }

  /// The number of units in `.debug_info`.
  package var unitCount: Int { context.units.count }

  /// The frames of `address` (a link-time address), innermost first, the last being the subprogram
  /// itself: each inlined frame's file, line and column come from the line table for the innermost and
  /// from the `DW_AT_call_*` of the frame inside it for the others. A unit with a line table but no
  /// subprogram for the address gives one frame without a function. Empty when no unit covers it.
  package func frames(at address: UInt64) throws(FormatError) -> [DWARFFrame] {
    guard let found = DWARFRangeMap.lookup(address, starts: unitStarts, values: unitValues),
          Int(found) < context.units.count else { return [] }
    let unit = context.units[Int(found)]
    let chain = try unit.chain(at: address, context)
    let table = try unit.lines(context)
    let directory = unit.compilationDirectory
    guard !chain.isEmpty else {
      guard let table, let row = table.row(for: address) else { return [] }
      return [DWARFFrame(function: nil, file: table.path(UInt64(row.file), compilationDirectory: directory) ?? "",
                         line: Int(row.line), column: Int(row.column), isInlined: false)]
    }
    var frames: [DWARFFrame] = []
    frames.reserveCapacity(chain.count)
    for (position, subroutine) in chain.enumerated() {
      var frame = DWARFFrame(function: try name(DWARFDIE.Reference(inSupplementary: false, offset: subroutine.dieOffset)),
                             file: "", line: 0, column: 0, isInlined: !subroutine.isSubprogram)
      if position == 0 {
        if let table, let row = table.row(for: address) {
          frame.file = table.path(UInt64(row.file), compilationDirectory: directory) ?? ""
          frame.line = Int(row.line)
          frame.column = Int(row.column)
        }
      } else {
        let inner = chain[position - 1]
        frame.file = table?.path(inner.callFile, compilationDirectory: directory) ?? ""
        frame.line = Int(clamping: inner.callLine)
        frame.column = Int(clamping: inner.callColumn)
      }
      frames.append(frame)
    }
    return frames
  }

  /// LLVM's `DWARFDie::getName(LinkageName)`: the first linkage name found walking the DIE and what its
  /// `DW_AT_specification` and `DW_AT_abstract_origin` lead to (depth first, specification first, each
  /// DIE once), else the first `DW_AT_name` in the same walk. The walk visits at most 64 DIEs.
  func name(_ reference: DWARFDIE.Reference) throws(FormatError) -> String? {
    if let cached = names[reference] { return cached }
    var work = [reference]
    var seen: Set<DWARFDIE.Reference> = [reference]
    var linkage: String?
    var plain: String?
    var steps = 0
    while let next = work.popLast(), steps < 64 {
      steps += 1
      guard let (values, unit, owner) = try die(at: next) else { continue }
      if linkage == nil, let value = values.linkageName { linkage = try owner.string(value, unit: unit) }
      if linkage != nil { break }
      if plain == nil, let value = values.name { plain = try owner.string(value, unit: unit) }
      if let origin = values.abstractOrigin, seen.insert(origin).inserted { work.append(origin) }
      if let specification = values.specification, seen.insert(specification).inserted { work.append(specification) }
    }
    let result = linkage ?? plain
    names[reference] = result
    return result
  }

  /// The names-related attributes of the DIE `reference` points at, with its unit and file; `nil` when
  /// it points into a supplementary file we were not given.
  func die(at reference: DWARFDIE.Reference) throws(FormatError)
    -> (DWARFDIE.Values, DWARFUnit, DWARFContext)? {
    let owner: DWARFContext
    if reference.inSupplementary {
      guard let supplementary = context.supplementary else { return nil }
      owner = supplementary
    } else {
      owner = context
    }
    guard let unit = owner.unit(containing: reference.offset), reference.offset >= unit.dieOffset else {
      throw .dwarf(section: reference.inSupplementary ? ".debug_info (supplementary)" : ".debug_info",
                   offset: reference.offset, "reference outside every unit's DIEs")
    }
    try unit.prepare(owner)
    guard let table = unit.abbreviations else { return nil }
    var reader = try unit.reader(owner, at: reference.offset)
    guard let values = try DWARFDIE.read(&reader, unit: unit, table: table, context: owner, want: .names) else { return nil }
    return (values, unit, owner)
  }
}
