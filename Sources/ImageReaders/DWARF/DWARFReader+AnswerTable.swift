/// Every answer `DWARFReader.frames(at:)` gives, for all addresses at once: sorted address ranges, each
/// with the innermost frame's location (or nothing), the chains of subroutines those locations start,
/// and the strings they name. What a symbol cache stores.
package struct DWARFAnswerTable: Sendable {
  /// Where the innermost frame of a range is.
  package struct Location: Equatable, Sendable {
    /// Index into `subroutines` of the innermost subroutine; -1 for a line row with no subroutine
    /// (one frame without a function).
    package var subroutine: Int32
    /// Index into `strings` of the file ("" when the line table names none, or has no row); -1, with
    /// `subroutine` -1, for a range with no answer.
    package var file: Int32
    package var line: UInt32
    package var column: UInt32

    /// A range no unit, subroutine or line row covers.
    package static let nothing = Location(subroutine: -1, file: -1, line: 0, column: 0)
  }

  /// A subprogram or inlined subroutine, and where the next frame out (its caller) is.
  package struct Subroutine: Sendable, Equatable {
  /// Index into `strings`; -1 when it has no name.
    package var name: Int32
    /// Index of the next frame's subroutine, always below this one's; -1 where the chain ends.
    package var next: Int32
    package var isInlined: Bool
    /// The next frame's file (index into `strings`), line and column: this one's `DW_AT_call_*`.
    package var callFile: Int32
    package var callLine: UInt32
    package var callColumn: UInt32
  }

  /// Range starts, ascending; each range runs to the next start, the last to the end of the address
  /// space.
  package var starts: [UInt64] = []
  /// Per range: its innermost frame's location, or `Location.nothing`.
  package var locations: [Location] = []
  package var subroutines: [Subroutine] = []
  package var strings: [String] = []

  package init() {}

  /// The frames of `address`, innermost first, as `DWARFReader.frames(at:)` gives them. The table is
  /// ours (built, not read): indexes are in range by construction.
  package func frames(at address: UInt64) -> [DWARFFrame] {
    var low = 0, high = starts.count
    while low < high {
      let middle = (low + high) / 2
      if starts[middle] <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0, locations[low - 1] != .nothing else { return [] }
    let location = locations[low - 1]
    guard location.subroutine >= 0 else {
      return [DWARFFrame(function: nil, file: strings[Int(location.file)], line: Int(location.line),
                         column: Int(location.column), isInlined: false)]
    }
    var frames: [DWARFFrame] = []
    var index = Int(location.subroutine)
    var file = strings[Int(location.file)], line = Int(location.line), column = Int(location.column)
    while index >= 0 {
      let subroutine = subroutines[index]
      frames.append(DWARFFrame(function: subroutine.name >= 0 ? strings[Int(subroutine.name)] : nil, file: file,
                               line: line, column: column, isInlined: subroutine.isInlined))
      file = strings[Int(subroutine.callFile)]
      line = Int(subroutine.callLine)
      column = Int(subroutine.callColumn)
      index = Int(subroutine.next)
    }
    return frames
  }
}

extension DWARFReader {
  /// Why a file's answers cannot be put in a table (the caller keeps reading its DWARF).
  package enum AnswerTableError: Error, Sendable, CustomStringConvertible {
    /// The DWARF is broken somewhere: `frames(at:)` throws there.
    case format(FormatError)
    /// A call line or column above 2^32 - 1, or more than 2^31 - 1 entries of a kind.
    case tooLarge(String)

    package var description: String {
      switch self {
      case .format(let error): "\(error)"
      case .tooLarge(let what): "\(what) too large for a table"
      }
    }
  }

  /// Every answer of `frames(at:)`, built by asking it, in effect, at every address where one of its
  /// lookups can change: the starts of the unit index's segments, and within each unit the starts of
  /// its subroutine segments and every line-table row, sequence start and end. Between two such
  /// addresses each binary search `frames(at:)` makes compares the same way, so its answer is the same;
  /// the table holds the answer at each of them (equal neighbours merged). Reads every unit's DIEs and
  /// line table; throws where `frames(at:)` would throw for some address.
  package func answerTable() throws(AnswerTableError) -> DWARFAnswerTable {
    var table = DWARFAnswerTable()
    var strings: [String: Int32] = [:]
    let unitCount = context.units.count
    var globalSubroutines = [[Int32]?](repeating: nil, count: unitCount)  // unit -> local subroutine -> table index
    var filePaths = [[Int32]?](repeating: nil, count: unitCount)  // unit -> line-table file -> string (-1: not yet)

    func intern(_ text: String) throws(AnswerTableError) -> Int32 {
      if let known = strings[text] { return known }
      guard let index = Int32(exactly: table.strings.count) else { throw .tooLarge("string count") }
      table.strings.append(text)
      strings[text] = index
      return index
    }
    func narrow(_ value: UInt64, _ what: String) throws(AnswerTableError) -> UInt32 {
      guard let narrow = UInt32(exactly: value) else { throw .tooLarge(what) }
      return narrow
    }
    func path(_ file: UInt64, unit: Int, _ lines: DWARFLineTable?) throws(AnswerTableError) -> Int32 {
      guard let lines, lines.hasFile(file) else { return try intern("") }
      let position = Int(file)  // hasFile bounds it by the file count
      if let known = filePaths[unit]?[position], known >= 0 { return known }
      let index = try intern(lines.path(file, compilationDirectory: context.units[unit].compilationDirectory) ?? "")
      if filePaths[unit] == nil { filePaths[unit] = [Int32](repeating: -1, count: lines.files.count + 1) }
      filePaths[unit]?[position] = index
      return index
    }
    /// The table index of the chain `frames(at:)` starts at local subroutine `leaf` of `unit`: outer
    /// subroutines are added first, so each `next` is below its subroutine.
    func subroutine(_ leaf: Int, unit: Int, _ lines: DWARFLineTable?) throws(AnswerTableError) -> Int32 {
      let dwarfUnit = context.units[unit]
      if globalSubroutines[unit] == nil {
        globalSubroutines[unit] = [Int32](repeating: -1, count: dwarfUnit.subroutines.count)
      }
      if let known = globalSubroutines[unit]?[leaf], known >= 0 { return known }
      // The chain as `DWARFUnit.chain(at:)` walks it.
      var chain: [Int] = []
      var index = leaf
      while index >= 0 && index < dwarfUnit.subroutines.count {
        chain.append(index)
        let found = dwarfUnit.subroutines[index]
        if found.isSubprogram { break }
        guard Int(found.parent) < index else { break }
        index = Int(found.parent)
      }
      var next: Int32 = -1
      for (position, local) in chain.enumerated().reversed() {
        if let known = globalSubroutines[unit]?[local], known >= 0 {
          next = known
          continue
        }
        let found = dwarfUnit.subroutines[local]
        let name: String?
        do {
          name = try self.name(DWARFDIE.Reference(inSupplementary: false, offset: found.dieOffset))
        } catch {
          throw .format(error)
        }
        // The next frame out takes this one's call site; the outermost's is never read.
        let hasCaller = position + 1 < chain.count
        let entry = DWARFAnswerTable.Subroutine(
          name: name == nil ? -1 : try intern(name ?? ""),
          next: next, isInlined: !found.isSubprogram,
          callFile: hasCaller ? try path(found.callFile, unit: unit, lines) : try intern(""),
          callLine: hasCaller ? try narrow(found.callLine, "call line") : 0,
          callColumn: hasCaller ? try narrow(found.callColumn, "call column") : 0)
        guard let global = Int32(exactly: table.subroutines.count) else { throw .tooLarge("subroutine count") }
        table.subroutines.append(entry)
        globalSubroutines[unit]?[local] = global
        next = global
      }
      return next
    }
    func append(_ start: UInt64, _ location: DWARFAnswerTable.Location) {
      if table.locations.last == location { return }
      table.starts.append(start)
      table.locations.append(location)
    }

    let empty = try intern("")
    var candidates = [[UInt64]?](repeating: nil, count: unitCount)
    for (segment, start) in unitStarts.enumerated() {
      let value = unitValues[segment]
      guard value >= 0, Int(value) < unitCount else {
        append(start, .nothing)
        continue
      }
      let unitIndex = Int(value)
      let unit = context.units[unitIndex]
      let lines: DWARFLineTable?
      do {
        try unit.loadSubroutines(context)
        lines = try unit.lines(context)
      } catch {
        throw .format(error)
      }
      if candidates[unitIndex] == nil {
        var points = unit.segmentStarts
        if let lines {
          points.reserveCapacity(points.count + lines.rows.count + 2 * lines.sequences.count)
          for row in lines.rows { points.append(row.address) }
          for sequence in lines.sequences {
            points.append(sequence.lowPC)
            points.append(sequence.highPC)
          }
        }
        points.sort()
        candidates[unitIndex] = points
      }
      let points = candidates[unitIndex] ?? []
      let end = segment + 1 < unitStarts.count ? unitStarts[segment + 1] : UInt64.max
      var position = 0, high = points.count
      while position < high {
        let middle = (position + high) / 2
        if points[middle] <= start { position = middle + 1 } else { high = middle }
      }
      var point = start
      while true {
        var location = DWARFAnswerTable.Location.nothing
        let leaf = DWARFRangeMap.lookup(point, starts: unit.segmentStarts, values: unit.segmentValues)
        var row: DWARFLineTable.Row?
        if let lines, let index = lines.rowIndex(for: point) { row = lines.rows[index] }
        if leaf != nil || row != nil {
          location = DWARFAnswerTable.Location(subroutine: -1, file: empty, line: 0, column: 0)
          if let leaf { location.subroutine = try subroutine(Int(leaf), unit: unitIndex, lines) }
          if let row {
            location.file = try path(UInt64(row.file), unit: unitIndex, lines)
            location.line = row.line
            location.column = row.column
          }
        }
        append(point, location)
        // The next candidate inside this segment.
        while position < points.count && points[position] <= point { position += 1 }
        guard position < points.count, points[position] < end else { break }
        point = points[position]
      }
    }
    return table
  }
}
