internal import Glibc
import ImageReaders
import ProcessInspection

/// A line record as the reader holds it: `address size line filenum`.
typealias BreakpadLineRecord = BreakpadSymbolFile.Line

/// An `INLINE depth callline callfile origin` record as the reader holds it; its address ranges are in
/// `BreakpadRecords.inlineRanges`.
typealias BreakpadInlineRecord = BreakpadSymbolFile.Inline

/// The line and inline records of every function, in flat arrays that each FUNC points into.
struct BreakpadRecords {
  var lines: [BreakpadLineRecord] = []
  var inlines: [BreakpadInlineRecord] = []
  var inlineRanges: [(address: UInt64, size: UInt64)] = []
}

/// Source file names and their `FILE` numbers, given as `dump_syms` gives them: a number for each
/// path the first time a line record or an inline call site uses it.
struct BreakpadFileTable {
  /// Every path met, used or not.
  private(set) var paths: [String] = []
  private var byPath: [String: Int] = [:]
  /// For each path met, its FILE number once used.
  private var numbers: [Int32] = []
  /// The FILE records' names, by number.
  private(set) var names: [String] = []

  /// The path's index among those met (not yet a FILE number).
  mutating func index(of path: String) -> Int {
    if let known = byPath[path] { return known }
    byPath[path] = paths.count
    paths.append(path)
    numbers.append(-1)
    return paths.count - 1
  }

  /// The FILE number of the path at `index`, given now if it has none.
  mutating func number(_ index: Int) -> UInt32 {
    if numbers[index] >= 0 { return UInt32(numbers[index]) }
    numbers[index] = Int32(truncatingIfNeeded: names.count)
    names.append(paths[index])
    return UInt32(names.count - 1)
  }

  /// Adds `other`'s FILE names (a merged file's), returning each of its numbers' number here.
  mutating func merge(_ other: BreakpadFileTable) -> [UInt32] {
    other.names.map { name in number(index(of: name)) }
  }

  /// A path as `dump_syms` writes it on Linux, where it canonicalizes paths: an absolute path that
  /// exists here with its symbolic links resolved (`realpath`), any other with `.` and `..` components
  /// folded and no doubled or trailing `/` (a `..` at the start of a relative path goes).
  static func canonical(_ path: String, resolvingLinks: Bool) -> String {
    if resolvingLinks, path.hasPrefix("/") {
      if let resolved = FileSystem.realPath(path) { return resolved }
    }
    var parts: [Substring] = []
    for part in path.split(separator: "/", omittingEmptySubsequences: true) {
      switch part {
      case ".": continue
      case "..": if !parts.isEmpty { parts.removeLast() }
      default: parts.append(part)
      }
    }
    let joined = parts.joined(separator: "/")
    return path.hasPrefix("/") ? "/" + joined : joined
  }
}

/// The inline origins: one number per distinct name (mangled or not, and language), given the first
/// time a call to it is written, as `dump_syms`' `InlineOrigins` gives them.
struct BreakpadOriginTable {
  struct Key: Hashable {
    var text: String
    var isMangled: Bool
    var language: BreakpadLanguage
  }

  private var numbers: [Key: UInt32] = [:]
  /// The INLINE_ORIGIN records' names, by number.
  private(set) var names: [String] = []

  /// The origin's number, given now (with `name`, its demangled text) if it has none.
  mutating func number(_ key: Key, name: String) -> UInt32 {
    if let known = numbers[key] { return known }
    let number = UInt32(truncatingIfNeeded: names.count)
    numbers[key] = number
    names.append(name)
    return number
  }

  /// Adds `other`'s names after these (as `dump_syms` merges them: appended, not shared), returning
  /// the new number of each of its numbers.
  mutating func merge(_ other: BreakpadOriginTable) -> [UInt32] {
    let offset = UInt32(truncatingIfNeeded: names.count)
    names += other.names
    return (0..<UInt32(truncatingIfNeeded: other.names.count)).map { $0 + offset }
  }
}

/// One function range made into line and inline records: symbolic's `FunctionBuilder` (inlined calls
/// nested properly, line rows split where calls start and end, each row given to the innermost
/// function at its address) followed by `dump_syms`' `collect_function_with_inlines_recursive` (a
/// line belongs to a function only where no call covers it; covered stretches become its calls' call
/// sites) or, without inlines, `collect_function_without_inlines`.
struct BreakpadFunctionBuilder {
  /// A row given to the function: a `FunctionBuilder` line (`file` is a `BreakpadFileTable` index).
  struct Line {
    var address: UInt64
    var size: UInt64?
    var file: Int
    var line: UInt32
  }

  /// An inlined call within the range (`name` is an origin key's index in the caller's list).
  struct Call {
    var depth: Int
    var address: UInt64
    var size: UInt64
    var name: Int
    var callFile: Int
    var callLine: UInt32
    /// Order of arrival: ties of address and depth are broken by it.
    var sequence: Int
  }

  /// A node of the finished tree: symbolic's `Function`.
  struct Node {
    let address: UInt64
    let size: UInt64
    let name: Int
    var lines: [Line] = []
    /// Its calls' nodes (indices in the tree's `nodes`).
    var children: [Int] = []

    init(address: UInt64, size: UInt64, name: Int) {
      self.address = address
      self.size = size
      self.name = name
    }

    var end: UInt64 { address.addingReportingOverflow(size).overflow ? .max : address + size }
  }

  /// The finished tree, its nodes in one array (no object per call): `nodes[0]` is the function.
  struct Tree {
    var nodes: [Node]
  }

  let address: UInt64
  let size: UInt64
  private var calls: [Call] = []
  private var lines: [Line] = []

  init(address: UInt64, size: UInt64) {
    self.address = address
    self.size = size
  }

  /// `add_inlinee`: a call starting before the function is dropped.
  mutating func addCall(_ call: Call) {
    guard call.address >= address else { return }
    calls.append(call)
  }

  /// Room for `count` more lines (the rows of the function's range).
  mutating func reserveLines(_ count: Int) {
    lines.reserveCapacity(lines.count + count)
  }

  /// `add_leaf_line`, except for a row that starts before the function and runs into it: symbolic
  /// (and so `dump_syms`) drops it, leaving the function's first addresses, or a whole short function,
  /// without a line; here its part inside the function is kept, which is the line llvm-symbolizer
  /// gives those addresses (the row covers them). A row that ends at or before the start is dropped.
  mutating func addLine(_ line: Line) {
    guard line.address < address else {
      lines.append(line)
      return
    }
    // A row without a size is a sequence's last: it covers its own address only, which is below ours.
    guard let size = line.size else { return }
    let (end, overflow) = line.address.addingReportingOverflow(size)
    guard overflow || end > address else { return }
    var clipped = line
    clipped.address = address
    clipped.size = overflow ? UInt64.max - address : end - address
    lines.append(clipped)
  }

  /// `FunctionBuilder::finish`: the tree of this function and its inlined calls, each with its lines.
  func finish(name: Int) -> Tree {
    let nested = calls.isEmpty ? calls : Self.properlyNested(calls)
    // symbolic sorts by address with a stable sort (the rows of one range come sorted).
    let sorted = zip(lines, lines.dropFirst()).allSatisfy({ $0.address <= $1.address }) ? lines
      : lines.enumerated().sorted { ($0.element.address, $0.offset) < ($1.element.address, $1.offset) }.map(\.element)
    var nodes = [Node(address: address, size: size, name: name)]
    nodes.reserveCapacity(nested.count + 1)
    let outerEnd = nodes[0].end
    var stack: [Int] = [0]
    func flush(address: UInt64) {
      while stack.count > 1, let last = stack.last, nodes[last].end <= address { pop() }
    }
    func flush(depth: Int) {
      while stack.count > depth + 1 { pop() }
    }
    func pop() {
      let node = stack.removeLast()
      nodes[stack[stack.count - 1]].children.append(node)
    }
    var nextCall = 0, nextLine = 0
    var pending: Line? = sorted.first
    if pending != nil { nextLine = 1 }
    // Each round consumes a call or a line, or splits a line at a point inside it (the split part
    // starts later): bounded by the calls, lines and call boundaries.
    while true {
      if nextCall < nested.count, pending == nil || nested[nextCall].address <= pending!.address {
        let call = nested[nextCall]
        flush(address: call.address)
        flush(depth: call.depth)
        if call.address >= outerEnd { break }
        nodes[stack[stack.count - 1]].lines.append(Line(address: call.address, size: call.size, file: call.callFile,
                                                        line: call.callLine))
        stack.append(nodes.count)
        nodes.append(Node(address: call.address, size: call.size, name: call.name))
        nextCall += 1
        continue
      }
      guard var line = pending else { break }
      flush(address: line.address)
      if line.address >= outerEnd { break }
      if let size = line.size {
        let (sum, overflow) = line.address.addingReportingOverflow(size)
        let lineEnd = overflow ? UInt64.max : sum
        let innermostEnd = nodes[stack[stack.count - 1]].end
        let split = nextCall < nested.count ? min(nested[nextCall].address, innermostEnd) : innermostEnd
        if split < lineEnd {
          var rest = line
          rest.address = split
          rest.size = lineEnd - split
          line.size = split - line.address
          nodes[stack[stack.count - 1]].lines.append(line)
          pending = rest
          continue
        }
      }
      nodes[stack[stack.count - 1]].lines.append(line)
      pending = nextLine < sorted.count ? sorted[nextLine] : nil
      nextLine += 1
    }
    while stack.count > 1 { pop() }
    return Tree(nodes: nodes)
  }

  /// symbolic's `ensure_proper_nesting`: calls in (address, depth) order, a call overlapping its
  /// previous sibling starting after it, one running past its caller split at the caller's end, and
  /// calls without a caller at their address dropped.
  static func properlyNested(_ calls: [Call]) -> [Call] {
    var heap = CallHeap(calls)
    var result: [Call] = []
    result.reserveCapacity(calls.count)
    var ends: [UInt64] = []  // ends[d]: the end of the latest call kept at depth d
    var sequence = calls.count
    // Each round drops a call, keeps it, or pushes back one that starts later (at most one more per
    // split or shift, each at a caller's or sibling's end): bounded.
    while var call = heap.pop() {
      let depth = call.depth
      let (sum, overflow) = call.address.addingReportingOverflow(call.size)
      guard !overflow else { continue }
      var end = sum
      if ends.count < depth { continue }  // no caller
      if depth < ends.count {
        let siblingEnd = ends[depth]
        if end <= siblingEnd { continue }
        if call.address < siblingEnd {
          call.address = siblingEnd
          call.size = end - siblingEnd
          call.sequence = sequence
          sequence += 1
          heap.push(call)
          continue
        }
      }
      ends.removeSubrange(depth...)
      if let callerEnd = ends.last {
        if call.address >= callerEnd { continue }
        if end > callerEnd {
          var rest = call
          rest.address = callerEnd
          rest.size = end - callerEnd
          rest.sequence = sequence
          sequence += 1
          heap.push(rest)
          call.size = callerEnd - call.address
          end = callerEnd
        }
      }
      result.append(call)
      ends.append(end)
    }
    return result
  }

  /// A min-heap of calls by (address, depth, arrival).
  struct CallHeap {
    private var items: [Call]

    init(_ calls: [Call]) {
      items = calls
      if items.count > 1 {
        for index in stride(from: items.count / 2 - 1, through: 0, by: -1) { down(index) }
      }
    }

    private static func before(_ a: Call, _ b: Call) -> Bool {
      (a.address, a.depth, a.sequence) < (b.address, b.depth, b.sequence)
    }

    mutating func push(_ call: Call) {
      items.append(call)
      var child = items.count - 1
      while child > 0 {
        let parent = (child - 1) / 2
        guard Self.before(items[child], items[parent]) else { break }
        items.swapAt(child, parent)
        child = parent
      }
    }

    mutating func pop() -> Call? {
      guard let first = items.first else { return nil }
      let last = items.removeLast()
      if !items.isEmpty {
        items[0] = last
        down(0)
      }
      return first
    }

    private mutating func down(_ start: Int) {
      var parent = start
      while true {
        let left = 2 * parent + 1, right = left + 1
        var best = parent
        if left < items.count, Self.before(items[left], items[best]) { best = left }
        if right < items.count, Self.before(items[right], items[best]) { best = right }
        if best == parent { return }
        items.swapAt(parent, best)
        parent = best
      }
    }
  }
}

/// `dump_syms`' `Lines` for one function: line records and inline sites gathered, then sorted and
/// sized, and appended to the flat `BreakpadRecords`.
struct BreakpadFunctionLines {
  struct Site: Hashable, Comparable {
    var origin: UInt32
    var depth: UInt32
    var callLine: UInt32
    var callFile: UInt32

    static func < (a: Site, b: Site) -> Bool {
      (a.origin, a.depth, a.callLine, a.callFile) < (b.origin, b.depth, b.callLine, b.callFile)
    }
  }

  var lines: [(address: UInt64, line: UInt32, file: UInt32)] = []
  var sites: [Site: Int] = [:]
  var siteRanges: [[(address: UInt64, size: UInt64)]] = []

  mutating func addLine(_ address: UInt64, _ line: UInt32, _ file: UInt32) {
    lines.append((address, line, file))
  }

  mutating func addInline(_ site: Site, _ range: (address: UInt64, size: UInt64)) {
    if let index = sites[site] {
      siteRanges[index].append(range)
    } else {
      sites[site] = siteRanges.count
      siteRanges.append([range])
    }
  }

  /// `finalize`, the part that does not depend on FILE and INLINE_ORIGIN numbers: lines sorted by
  /// address (stable) and sized up to the next one, the last up to the function's end; each site's
  /// ranges sorted and joined where they touch.
  func prepared(functionAddress: UInt64, functionSize: UInt64) -> BreakpadPreparedLines {
    var result = BreakpadPreparedLines()
    var sorted = lines
    if zip(lines, lines.dropFirst()).contains(where: { $0.address > $1.address }) {
      sorted = lines.enumerated().sorted { ($0.element.address, $0.offset) < ($1.element.address, $1.offset) }.map(\.element)
    }
    let (functionEnd, overflow) = functionAddress.addingReportingOverflow(functionSize)
    result.lines.reserveCapacity(sorted.count)
    for (index, line) in sorted.enumerated() {
      var size: UInt64 = 0
      if index + 1 < sorted.count {
        size = sorted[index + 1].address - line.address  // sorted: no underflow
      } else if !overflow, line.address < functionEnd {
        size = functionEnd - line.address
      }
      result.lines.append(BreakpadLineRecord(address: line.address, size: size, line: line.line, file: line.file))
    }
    result.sites.reserveCapacity(sites.count)
    for (site, index) in sites {
      var ranges = siteRanges[index]
      if ranges.count > 1 {
        ranges = ranges.enumerated().sorted { ($0.element.address, $0.offset) < ($1.element.address, $1.offset) }.map(\.element)
        var merged: [(address: UInt64, size: UInt64)] = []
        for range in ranges {
          if let last = merged.last, last.address.addingReportingOverflow(last.size) == (range.address, false) {
            merged[merged.count - 1].size &+= range.size
          } else {
            merged.append(range)
          }
        }
        ranges = merged
      }
      result.sites.append((site, ranges))
    }
    return result
  }
}

/// A function's line records and inline sites, sorted and sized, still with a chunk's own file and
/// origin numbers (`BreakpadFunctionLines.prepared`).
struct BreakpadPreparedLines: Sendable {
  var lines: [BreakpadLineRecord] = []
  var sites: [(site: BreakpadFunctionLines.Site, ranges: [(address: UInt64, size: UInt64)])] = []

  /// The records with their final numbers (`files` and `origins` map the chunk's), appended in the
  /// order `dump_syms` writes them: sites by their first range, then depth (ties in the sites' own
  /// order, which is their numbers'), then the lines.
  func append(to records: inout BreakpadRecords, files: [Int32], origins: [Int32]) -> (lines: Range<Int>, inlines: Range<Int>) {
    let inlineStart = records.inlines.count
    if !sites.isEmpty {
      var renumbered = sites.map { entry in
        (site: BreakpadFunctionLines.Site(origin: UInt32(truncatingIfNeeded: origins[Int(entry.site.origin)]),
                                          depth: entry.site.depth, callLine: entry.site.callLine,
                                          callFile: UInt32(truncatingIfNeeded: files[Int(entry.site.callFile)])),
         ranges: entry.ranges)
      }
      renumbered.sort { $0.site < $1.site }
      let written = renumbered.enumerated().sorted {
        ($0.element.ranges[0].address, $0.element.site.depth, $0.offset) < ($1.element.ranges[0].address, $1.element.site.depth, $1.offset)
      }
      for (_, entry) in written {
        let first = records.inlineRanges.count
        records.inlineRanges += entry.ranges
        records.inlines.append(BreakpadInlineRecord(depth: entry.site.depth, callLine: entry.site.callLine,
                                                    callFile: entry.site.callFile, origin: entry.site.origin,
                                                    ranges: first..<records.inlineRanges.count))
      }
    }
    let lineStart = records.lines.count
    for line in lines {
      var record = line
      record.file = UInt32(truncatingIfNeeded: files[Int(line.file)])
      records.lines.append(record)
    }
    return (lineStart..<records.lines.count, inlineStart..<records.inlines.count)
  }
}
