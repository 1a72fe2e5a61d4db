/// One unit of `.debug_info` (DWARF 2–5, every unit type): its header, then, on first need, its unit
/// DIE's attributes, its line table and its map from addresses to subprograms and inlined subroutines.
final class DWARFUnit {
  /// The offset of the unit's header in `.debug_info`.
  let offset: Int
  /// The offset just past the unit.
  let end: Int
  /// The offset of its first DIE.
  let dieOffset: Int
  let version: UInt16
  /// `DW_UT_*`; `DW_UT_compile` (1) for DWARF 2–4.
  let unitType: UInt8
  let addressSize: Int
  /// 4 for 32-bit DWARF, 8 for 64-bit.
  let offsetSize: Int
  let abbrevOffset: Int

  // The unit DIE, read by `prepare`.
  var prepared = false
  var unitTag: UInt64 = 0
  var compilationDirectory: String?
  var statementList: Int?
  var baseAddress: UInt64 = 0
  var strOffsetsBase: Int?
  var addrBase: Int?
  var rnglistsBase: Int?
  var unitRanges: [(UInt64, UInt64)] = []
  var abbreviations: DWARFAbbreviations?

  // Built on first lookup in the unit.
  var lineTable: DWARFLineTable?
  var lineTableLoaded = false
  var subroutines: [Subroutine] = []
  var segmentStarts: [UInt64] = []
  var segmentValues: [Int32] = []
  var subroutinesLoaded = false

  /// A subprogram or inlined subroutine DIE, with what the inline chain needs.
  struct Subroutine {
    var dieOffset: Int
    /// The nearest enclosing subroutine (-1 at the top).
    var parent: Int32
    var isSubprogram: Bool
    var callFile: UInt64
    var callLine: UInt64
    var callColumn: UInt64
  }

  static let compileType: UInt8 = 1, typeType: UInt8 = 2, partialType: UInt8 = 3, skeletonType: UInt8 = 4
  static let splitCompileType: UInt8 = 5, splitTypeType: UInt8 = 6

  /// Decodes the unit header at `offset` of `info`.
  init(_ info: ByteReader, at offset: Int) throws(FormatError) {
    var reader = info
    try reader.seek(to: offset)
    let (count, offsetSize) = try DWARFForm.unitLength(&reader, section: ".debug_info", offset: offset)
    guard count >= 2 else {
      throw .dwarf(section: ".debug_info", offset: offset, "unit length \(count) leaves no room for a version")
    }
    end = reader.offset + count  // count <= remaining
    var unit = try info.slice(at: 0, length: end)
    try unit.seek(to: reader.offset)
    version = try unit.read(UInt16.self)
    guard (2...5).contains(version) else {
      throw .dwarf(section: ".debug_info", offset: offset, "unsupported unit version \(version)")
    }
    self.offset = offset
    self.offsetSize = offsetSize
    if version >= 5 {
      unitType = try unit.read(UInt8.self)
      addressSize = Int(try unit.read(UInt8.self))
      abbrevOffset = try DWARFForm.sectionOffset(&unit, offsetSize)
      switch unitType {
      case Self.skeletonType, Self.splitCompileType: try unit.skip(8)
      case Self.typeType, Self.splitTypeType: try unit.skip(8 + offsetSize)
      default: break
      }
    } else {
      unitType = Self.compileType
      abbrevOffset = try DWARFForm.sectionOffset(&unit, offsetSize)
      addressSize = Int(try unit.read(UInt8.self))
    }
    guard [1, 2, 4, 8].contains(addressSize) else {
      throw .dwarf(section: ".debug_info", offset: offset, "address size \(addressSize)")
    }
    dieOffset = unit.offset
  }

  /// True for units whose addresses a lookup considers (not type units).
  var holdsCode: Bool { unitType != Self.typeType && unitType != Self.splitTypeType }

  /// A reader over the unit's bytes, positioned at `position` (absolute in `.debug_info`).
  func reader(_ context: DWARFContext, at position: Int) throws(FormatError) -> ByteReader {
    var reader = try context.info.slice(at: 0, length: end)
    try reader.seek(to: position)
    return reader
  }

  /// Reads the unit DIE: bases, compilation directory, line table offset, the unit's ranges.
  func prepare(_ context: DWARFContext) throws(FormatError) {
    guard !prepared else { return }
    prepared = true
    let table = try context.abbreviations(self)
    abbreviations = table
    var reader = try reader(context, at: dieOffset)
    let values = try DWARFDIE.read(&reader, unit: self, table: table, context: context, want: .unit)
    guard let values else { return }  // a unit with no DIE: nothing to find in it
    unitTag = values.tag
    strOffsetsBase = values.strOffsetsBase
    addrBase = values.addrBase
    rnglistsBase = values.rnglistsBase
    statementList = values.statementList
    compilationDirectory = try values.compilationDirectory.flatMap { (s) throws(FormatError) in try context.string(s, unit: self) }
    if let low = try values.lowPC(self, context) { baseAddress = low }
    unitRanges = try values.ranges(self, context)
  }

  /// The unit's line table (`DW_AT_stmt_list`), parsed on first call; `nil` when it has none.
  func lines(_ context: DWARFContext) throws(FormatError) -> DWARFLineTable? {
    try prepare(context)
    if lineTableLoaded { return lineTable }
    lineTableLoaded = true
    guard let statementList, !context.line.withUnsafeBytes({ $0.isEmpty }) else { return nil }
    let strings = DWARFLineTable.Strings(str: context.str, lineStr: context.lineStr, strOffsets: context.strOffsets,
                                         strOffsetsBase: strOffsetsBase, supStr: context.supplementary?.str)
    lineTable = try DWARFLineTable(context.line, offset: statementList, strings: strings)
    return lineTable
  }

  /// Walks the unit's DIEs once: every subprogram and inlined subroutine, and a map from addresses to
  /// the one LLVM's `DWARFUnit::getSubroutineForAddress` answers (of the DIEs whose ranges hold an
  /// address, the last in DIE order: the innermost).
  func loadSubroutines(_ context: DWARFContext) throws(FormatError) {
    try prepare(context)
    guard !subroutinesLoaded else { return }
    subroutinesLoaded = true
    guard let table = abbreviations else { return }
    var reader = try reader(context, at: dieOffset)
    var parents: [Int32] = [-1]
    var found: [Subroutine] = []
    var ranges: [DWARFRangeMap.Range] = []
    var dieRanges: [(UInt64, UInt64)] = []
    // Each DIE takes at least one byte: the loop ends within the unit's size.
    while reader.remaining > 0 {
      let start = reader.offset
      let code = try reader.readULEB128()
      if code == 0 {
        if parents.count > 1 { parents.removeLast() }
        continue
      }
      guard let declaration = table.declaration(code) else {
        throw .dwarf(section: ".debug_info", offset: start, "abbreviation code \(code) not in the table at 0x\(hexDigits(UInt64(abbrevOffset)))")
      }
      let enclosing = parents.last ?? -1
      let tag = declaration.tag
      if tag == DWARFDIE.subprogramTag || tag == DWARFDIE.inlinedSubroutineTag {
        let values = try DWARFDIE.readAttributes(&reader, declaration: declaration, dieOffset: start, unit: self,
                                                 table: table, context: context, want: .subroutine)
        let index = Int32(truncatingIfNeeded: found.count)
        found.append(Subroutine(dieOffset: start, parent: enclosing, isSubprogram: tag == DWARFDIE.subprogramTag,
                                callFile: values.callFile, callLine: values.callLine, callColumn: values.callColumn))
        dieRanges.removeAll(keepingCapacity: true)
        try values.appendRanges(to: &dieRanges, self, context)
        for (low, high) in dieRanges where low < high {
          ranges.append(DWARFRangeMap.Range(low: low, high: high, priority: UInt64(start), value: index))
        }
        if declaration.hasChildren { parents.append(index) }
      } else {
        try DWARFDIE.skipAttributes(&reader, declaration: declaration, unit: self, table: table)
        if declaration.hasChildren { parents.append(enclosing) }
      }
    }
    subroutines = found
    (segmentStarts, segmentValues) = DWARFRangeMap.segments(&ranges)
  }

  /// The chain of subroutines holding `address`, innermost first, ending at its subprogram.
  func chain(at address: UInt64, _ context: DWARFContext) throws(FormatError) -> [Subroutine] {
    try loadSubroutines(context)
    guard let found = DWARFRangeMap.lookup(address, starts: segmentStarts, values: segmentValues) else { return [] }
    var result: [Subroutine] = []
    var index = Int(found)
    // Parents come before their children: each step goes to a smaller index, so this ends.
    while index >= 0 && index < subroutines.count {
      let subroutine = subroutines[index]
      result.append(subroutine)
      if subroutine.isSubprogram { break }
      guard Int(subroutine.parent) < index else { break }
      index = Int(subroutine.parent)
    }
    return result
  }
}

/// Address ranges flattened into disjoint segments for binary search.
/// Which compilation unit an address belongs to, when several claim it (GCC's comdat copies and
/// thunks: the linker points every unit's ranges at the one copy it kept): `DWARFReader.unitClaims`.
package struct DWARFUnitClaims: Sendable {
  let starts: [UInt64]
  let values: [Int32]

  /// The unit (an index `0..<unitCount`) the address belongs to; `nil` when no unit claims it.
  package func unit(at address: UInt64) -> Int? {
    DWARFRangeMap.lookup(address, starts: starts, values: values).map { Int($0) }
  }
}

enum DWARFRangeMap {
  struct Range {
    var low: UInt64
    var high: UInt64
    /// Where ranges overlap, the highest priority wins.
    var priority: UInt64
    var value: Int32
  }

  /// Sorts `ranges` and sweeps them: each segment starts where the winning range changes; `-1` where
  /// none covers. O(n log n): a max-heap of open ranges, expired ones dropped when they surface.
  static func segments(_ ranges: inout [Range]) -> (starts: [UInt64], values: [Int32]) {
    guard !ranges.isEmpty else { return ([], []) }
    ranges.sort { $0.low < $1.low }
    var points: [UInt64] = []
    points.reserveCapacity(ranges.count * 2)
    for range in ranges { points.append(range.low); points.append(range.high) }
    points.sort()
    var heap: [Int] = []
    func before(_ a: Int, _ b: Int) -> Bool { ranges[a].priority > ranges[b].priority }
    var starts: [UInt64] = []
    var values: [Int32] = []
    var next = 0
    var previous: UInt64? = nil
    for point in points {
      if point == previous { continue }
      previous = point
      while next < ranges.count && ranges[next].low <= point {
        heap.append(next)
        var child = heap.count - 1
        while child > 0 {
          let parent = (child - 1) / 2
          guard before(heap[child], heap[parent]) else { break }
          heap.swapAt(child, parent)
          child = parent
        }
        next += 1
      }
      while let top = heap.first, ranges[top].high <= point {
        let last = heap.removeLast()
        if heap.isEmpty { break }
        heap[0] = last
        var parent = 0
        while true {
          let left = 2 * parent + 1, right = left + 1
          var best = parent
          if left < heap.count && before(heap[left], heap[best]) { best = left }
          if right < heap.count && before(heap[right], heap[best]) { best = right }
          if best == parent { break }
          heap.swapAt(parent, best)
          parent = best
        }
      }
      let value = heap.first.map { ranges[$0].value } ?? -1
      if values.last != value {
        starts.append(point)
        values.append(value)
      }
    }
    return (starts, values)
  }

  /// The value of the segment holding `address`, `nil` outside every range.
  @inline(__always)
  static func lookup(_ address: UInt64, starts: [UInt64], values: [Int32]) -> Int32? {
    var low = 0, high = starts.count
    while low < high {
      let middle = (low + high) / 2
      if starts[middle] <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0, values[low - 1] >= 0 else { return nil }
    return values[low - 1]
  }
}

/// One abbreviation table of `.debug_abbrev`, decoded once per unit shape.
final class DWARFAbbreviations {
  struct Declaration {
    var code: UInt64
    var tag: UInt64
    var hasChildren: Bool
    var firstSpecification: Int
    var specificationCount: Int
    /// The bytes all attributes take when every form has a fixed size for the unit; -1 otherwise.
    var fixedSize: Int
  }

  struct Specification {
    var attribute: UInt64
    var form: UInt64
    var implicitConstant: Int64
  }

  private(set) var declarations: [Declaration] = []
  private(set) var specifications: [Specification] = []
  private var dense = true
  private var byCode: [UInt64: Int] = [:]

  init(_ section: ByteReader, at offset: Int, unit: DWARFUnit) throws(FormatError) {
    var reader = section
    try reader.seek(to: offset)
    // Built in locals and stored once: a class's stored arrays are checked for exclusive access at
    // every append.
    var declarations: [Declaration] = []
    var specifications: [Specification] = []
    var dense = true
    // Each declaration takes at least three bytes: the loop ends within the section's size.
    while true {
      let code = try reader.readULEB128()
      if code == 0 { break }
      let tag = try reader.readULEB128()
      let hasChildren = try reader.read(UInt8.self) != 0
      let first = specifications.count
      var fixed = 0
      while true {
        let attribute = try reader.readULEB128()
        let form = try reader.readULEB128()
        if attribute == 0 && form == 0 { break }
        var constant: Int64 = 0
        if form == DWARFForm.implicitConst { constant = try reader.readSLEB128() }
        specifications.append(Specification(attribute: attribute, form: form, implicitConstant: constant))
        if fixed >= 0, let size = DWARFForm.fixedSize(form, addressSize: unit.addressSize, offsetSize: unit.offsetSize,
                                                      version: unit.version) {
          fixed += size
        } else {
          fixed = -1
        }
      }
      if code != UInt64(declarations.count) + 1 { dense = false }
      declarations.append(Declaration(code: code, tag: tag, hasChildren: hasChildren, firstSpecification: first,
                                      specificationCount: specifications.count - first, fixedSize: fixed))
    }
    // Codes 1, 2, 3... (what compilers write) are found by position; others by the first declaration
    // with the code.
    if !dense {
      for (index, declaration) in declarations.enumerated() where byCode[declaration.code] == nil {
        byCode[declaration.code] = index
      }
    }
    self.declarations = declarations
    self.specifications = specifications
    self.dense = dense
  }

  @inline(__always)
  func declaration(_ code: UInt64) -> Declaration? {
    if dense {
      guard code >= 1 && code <= UInt64(declarations.count) else { return nil }
      return declarations[Int(code) - 1]  // code <= declarations.count
    }
    return byCode[code].map { declarations[$0] }
  }
}
