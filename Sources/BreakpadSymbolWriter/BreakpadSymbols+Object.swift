import ProcessInspection
import ImageReaders

/// A FUNC or PUBLIC record before it is written.
struct BreakpadSymbol {
  var name: String
  /// Relative to the module's load address.
  var address: UInt64
  /// A FUNC's size; a PUBLIC's symbol size (only used to tell whether a later symbol lies inside it).
  var size: UInt64
  var isPublic: Bool
  var isMultiple = false
  /// `<.plt ELF section in NAME>`: made up, replaced by any real symbol at its address.
  var isSynthetic = false
  var lines: Range<Int> = 0..<0
  var inlines: Range<Int> = 0..<0
}

/// The FUNC and PUBLIC records by address (`dump_syms`' `Symbols`, a `BTreeMap`).
struct BreakpadSymbolMap {
  private(set) var symbols: [BreakpadSymbol] = []
  private var byAddress: [UInt64: Int] = [:]

  var count: Int { symbols.count }

  func index(at address: UInt64) -> Int? { byAddress[address] }

  subscript(index: Int) -> BreakpadSymbol {
    get { symbols[index] }
    set { symbols[index] = newValue }
  }

  /// Adds `symbol`, whose address must be free.
  mutating func insert(_ symbol: BreakpadSymbol) {
    byAddress[symbol.address] = symbols.count
    symbols.append(symbol)
  }

  /// Every record in address order.
  var sorted: [BreakpadSymbol] { symbols.sorted { $0.address < $1.address } }
}

/// `dump_syms`' `is_inside_symbol` while records are added: the record with the greatest address below
/// a given one, among those added so far, covers it when it ends past it. Addresses are known up front
/// (`candidates`), so the greatest added one below an address is a prefix maximum (a Fenwick tree).
struct BreakpadPredecessors {
  private let addresses: [UInt64]
  private var ends: [UInt64]
  private var tree: [Int32]

  init(candidates: [UInt64]) {
    var sorted = candidates.sorted()
    var kept = 0
    for index in sorted.indices where kept == 0 || sorted[kept - 1] != sorted[index] {
      sorted[kept] = sorted[index]
      kept += 1
    }
    sorted.removeLast(sorted.count - kept)
    addresses = sorted
    ends = [UInt64](repeating: 0, count: sorted.count)
    tree = [Int32](repeating: 0, count: sorted.count + 1)
  }

  private func position(of address: UInt64) -> Int {
    var low = 0, high = addresses.count
    while low < high {
      let middle = (low + high) / 2
      if addresses[middle] < address { low = middle + 1 } else { high = middle }
    }
    return low
  }

  /// Records a symbol at `address` (one of the candidates) reaching up to `end`.
  mutating func add(_ address: UInt64, end: UInt64) {
    let at = position(of: address)
    guard at < addresses.count, addresses[at] == address else { return }
    ends[at] = end
    var node = at + 1
    let value = Int32(truncatingIfNeeded: at + 1)
    while node < tree.count {
      if tree[node] < value { tree[node] = value }
      node += node & -node
    }
  }

  /// True when the nearest added symbol below `address` reaches past it.
  func isInside(_ address: UInt64) -> Bool {
    var node = position(of: address)  // the candidates below `address`
    var best: Int32 = 0
    while node > 0 {
      if tree[node] > best { best = tree[node] }
      node -= node & -node
    }
    guard best > 0 else { return false }
    return address < ends[Int(best) - 1]
  }
}

/// A call frame section to write as STACK CFI records: bytes kept alive by `owner` (immutable: read by
/// a worker thread).
struct BreakpadFrameSection: @unchecked Sendable {
  var bytes: UnsafeRawBufferPointer
  var owner: AnyObject
  var vmAddress: UInt64
  var isEHFrame: Bool
  var loadAddress: UInt64
  var addressSize: Int
  var path: String
}

/// Everything `dump_syms` gathers from one file (its `ObjectInfo`): a binary's and its debug file's are
/// then merged.
struct BreakpadObject {
  var path: String
  /// The MODULE name: the `DT_SONAME` / `LC_ID_DYLIB` name, else the file's name.
  var moduleName: String
  var isMachO: Bool
  var hasDebugInfo: Bool
  var debugID: String
  var codeID: String?
  var architecture: String
  var symbols = BreakpadSymbolMap()
  var files = BreakpadFileTable()
  var origins = BreakpadOriginTable()
  var records = BreakpadRecords()
  var frames: [BreakpadFrameSection] = []
  /// Which opened files' STACK CFI records are written, in order (a merged object's are its two files').
  var frameFiles: [Int] = []
  /// What could not be read, one line each.
  var notes: [String] = []
}

/// What a file gives `BreakpadObject.collect`: its symbol table entries (already relative to the load
/// address and filtered as symbolic filters them), its executable sections.
struct BreakpadObjectSource: Sendable {
  var symbols: [(name: String, address: UInt64, size: UInt64)]
  /// The load address DWARF addresses are relative to.
  var loadAddress: UInt64
  /// Executable ELF sections: name and link-time address (none for Mach-O).
  var executableSections: [(name: String, vmAddress: UInt64)]
  /// symbolic's `SymbolMap`: the first entry at each address.
  var firstSymbol: [UInt64: Int]

  init(symbols: [(name: String, address: UInt64, size: UInt64)], loadAddress: UInt64,
       executableSections: [(name: String, vmAddress: UInt64)]) {
    self.symbols = symbols
    self.loadAddress = loadAddress
    self.executableSections = executableSections
    var first: [UInt64: Int] = [:]
    for (index, symbol) in symbols.enumerated() where first[symbol.address] == nil { first[symbol.address] = index }
    firstSymbol = first
  }
}

extension BreakpadObject {
  /// Fills the records: the functions prepared from DWARF, in unit order (`collect_functions`), then
  /// package symbols (`collect_publics`), then a made-up public at each executable section's start
  /// (named after `sectionOwner`, the file the user named).
  mutating func collect(_ source: BreakpadObjectSource, units: [BreakpadPreparedUnit], names: BreakpadNames,
                        sectionOwner: String) {
    addFunctions(units, source: source, names: names)
    collectPublics(source.symbols, names: names)
    for section in source.executableSections {
      let address = section.vmAddress &- source.loadAddress
      guard symbols.index(at: address) == nil else { continue }
      symbols.insert(BreakpadSymbol(name: "<\(section.name) ELF section in \(sectionOwner)>", address: address, size: 0,
                                    isPublic: true, isSynthetic: true))
    }
  }

  /// `collect_publics`: each symbol not inside an earlier record; at an address already taken, a
  /// package with another name marks it multiple (`dump_syms` marks it for the same name too: a symbol
  /// in both `.symtab` and `.dynsym`).
  mutating func collectPublics(_ entries: [(name: String, address: UInt64, size: UInt64)], names: BreakpadNames) {
    var predecessors = BreakpadPredecessors(candidates: symbols.symbols.map(\.address) + entries.map(\.address))
    for symbol in symbols.symbols { predecessors.add(symbol.address, end: Self.end(symbol.address, symbol.size)) }
    var rawNames: [UInt64: String] = [:]
    for entry in entries {
      if predecessors.isInside(entry.address) { continue }
      if let index = symbols.index(at: entry.address) {
        if symbols[index].isPublic, rawNames[entry.address] != entry.name { symbols[index].isMultiple = true }
        continue
      }
      symbols.insert(BreakpadSymbol(name: names.publicName(entry.name), address: entry.address, size: entry.size,
                                    isPublic: true))
      rawNames[entry.address] = entry.name
      predecessors.add(entry.address, end: Self.end(entry.address, entry.size))
    }
  }

  static func end(_ address: UInt64, _ size: UInt64) -> UInt64 {
    let (sum, overflow) = address.addingReportingOverflow(size)
    return overflow ? .max : sum
  }

  /// `collect_functions` over the prepared units, in order: a range already seen (another entry for the
  /// same code) is left out, a function at 0 too; the first FUNC at an address wins, a later one marks
  /// it multiple. FILE and INLINE_ORIGIN numbers are given here, in the order `dump_syms` gives them.
  mutating func addFunctions(_ units: [BreakpadPreparedUnit], source: BreakpadObjectSource, names: BreakpadNames) {
    // The records' room at once (at most what was prepared: duplicates are left out below), not by
    // doubling: each regrowth copied the arrays into fresh pages the kernel had to clear.
    var lineCount = 0, inlineCount = 0, rangeCount = 0
    for unit in units {
      for function in unit.functions {
        for builder in function.builders {
          lineCount += builder.lines.lines.count
          inlineCount += builder.lines.sites.count
          for site in builder.lines.sites { rangeCount += site.ranges.count }
        }
      }
    }
    records.lines.reserveCapacity(records.lines.count + lineCount)
    records.inlines.reserveCapacity(records.inlines.count + inlineCount)
    records.inlineRanges.reserveCapacity(records.inlineRanges.count + rangeCount)
    var seenRanges = Set<PairKey>()
    for unit in units {
      notes += unit.notes
      var fileNumbers = [Int32](repeating: -1, count: unit.paths.count)
      var originNumbers = [Int32](repeating: -1, count: unit.origins.count)
      for function in unit.functions {
        var kept: [Int] = []
        for (index, range) in function.ranges.enumerated() where seenRanges.insert(PairKey(range.address, range.size)).inserted {
          kept.append(index)
        }
        guard let lowest = kept.map({ function.ranges[$0].address }).min() else { continue }
        var name = function.name
        if lowest != function.lowestAddress {
          // An earlier entry had the lowest range: the name is the symbol's at the lowest one kept.
          name = source.firstSymbol[lowest].map {
            names.functionName(source.symbols[$0].name, isMangled: true, language: function.language)
          } ?? function.declaredName
        }
        for index in kept {
          let builder = function.builders[index]
          guard builder.address != 0 else { continue }
          if let existing = symbols.index(at: builder.address) {
            if !symbols[existing].isPublic { symbols[existing].isMultiple = true }
            continue
          }
          for local in unit.requests[builder.fileRequests] where fileNumbers[Int(local)] < 0 {
            fileNumbers[Int(local)] = Int32(files.number(files.index(of: unit.paths[Int(local)])))
          }
          for local in unit.requests[builder.originRequests] where originNumbers[Int(local)] < 0 {
            let origin = unit.origins[Int(local)]
            originNumbers[Int(local)] = Int32(origins.number(origin.key, name: origin.name))
          }
          let (lineRange, inlineRange) = builder.lines.append(to: &records, files: fileNumbers, origins: originNumbers)
          symbols.insert(BreakpadSymbol(name: name, address: builder.address, size: builder.size, isPublic: false,
                                        lines: lineRange, inlines: inlineRange))
        }
      }
    }
  }
}

/// An (address, size) pair as a set member.
struct PairKey: Hashable {
  var first: UInt64
  var second: UInt64
  init(_ first: UInt64, _ second: UInt64) {
    self.first = first
    self.second = second
  }
}

extension Range where Bound == UInt64 {
  /// The number of addresses (`count` is an `Int`, which traps past `Int.max`).
  var count64: UInt64 { upperBound - lowerBound }
}
