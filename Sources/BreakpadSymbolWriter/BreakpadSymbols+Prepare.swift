import ProcessInspection
import ImageReaders
import Synchronization

/// One function range made ready in a worker thread: its line and inline records with the chunk's own
/// file and origin numbers, and the order those numbers are first used in, so that the FILE and
/// INLINE_ORIGIN numbers can be given later, in `dump_syms`' order, without walking it again.
struct BreakpadPreparedBuilder: Sendable {
  var address: UInt64
  var size: UInt64
  var lines: BreakpadPreparedLines
  /// Chunk file numbers, in the order `dump_syms` would number them: a run of the chunk's `requests`.
  var fileRequests: Range<Int>
  /// Chunk origin numbers, likewise.
  var originRequests: Range<Int>
}

/// One subprogram made ready: a builder per code range, its name from its lowest range.
struct BreakpadPreparedFunction: Sendable {
  /// Every code range (relative to the load address), for `dump_syms`' duplicate check.
  var ranges: [(address: UInt64, size: UInt64)]
  var builders: [BreakpadPreparedBuilder]
  /// The FUNC name: the symbol table's at the lowest range, else DWARF's.
  var name: String
  var lowestAddress: UInt64
  /// The DWARF name, for when the lowest range turns out to be another entry's.
  var declaredName: String
  var language: BreakpadLanguage
}

/// A chunk of compilation units made ready, in order.
struct BreakpadPreparedUnit: Sendable {
  var functions: [BreakpadPreparedFunction] = []
  /// The chunk's file numbers' paths (canonical).
  var paths: [String] = []
  /// The chunk's origin numbers' names (keys and demangled text).
  var origins: [(key: BreakpadOriginTable.Key, name: String)] = []
  /// The builders' file and origin numbers in the order of first use, run after run.
  var requests: [Int32] = []
  var notes: [String] = []
}

/// Walks compilation units of one file's DWARF in one thread (a `DWARFReader` and a demangler are for
/// one thread): symbolic's functions, made into `dump_syms`' records (`BreakpadFunctionBuilder`,
/// then `collect_function_with_inlines_recursive`), with chunk-local file and origin numbers.
final class BreakpadUnitPreparer {
  let dwarf: DWARFReader
  /// Which unit each address belongs to, as symbolicate's DWARF reader and llvm-symbolizer decide it.
  let claims: DWARFUnitClaims?
  let names = BreakpadNames()
  let source: BreakpadObjectSource
  let inlines: Bool
  let isMachO: Bool
  let path: String
  private var canonicalPaths: [String: String] = [:]
  private var demangledOrigins: [BreakpadOriginTable.Key: String] = [:]

  // The chunk being made.
  private var unit = BreakpadPreparedUnit()
  private var pathNumbers: [String: Int32] = [:]
  private var originNumbers: [BreakpadOriginTable.Key: Int32] = [:]
  private var originKeys: [DWARFNameSource: Int32] = [:]

  init(dwarf: DWARFReader, claims: DWARFUnitClaims?, source: BreakpadObjectSource, inlines: Bool, isMachO: Bool,
       path: String) {
    self.dwarf = dwarf
    self.claims = claims
    self.source = source
    self.inlines = inlines
    self.isMachO = isMachO
    self.path = path
  }

  /// The functions of `units`, in unit order.
  func prepare(units: Range<Int>) -> BreakpadPreparedUnit {
    unit = BreakpadPreparedUnit()
    requests = Requests()
    pathNumbers = [:]
    originNumbers = [:]
    originKeys = [:]
    for index in units { prepare(unit: index) }
    return unit
  }

  private func prepare(unit index: Int) {
    // Each unit is walked once: its line table's memory goes to the next unit's.
    defer { dwarf.forgetLineTable(inUnit: index) }
    let found: DWARFUnitFunctions
    do {
      guard let functions = try dwarf.functions(inUnit: index), !functions.functions.isEmpty else { return }
      found = functions
    } catch {
      unit.notes.append("\(path): DWARF unit \(index) left out: \(error)")
      return
    }
    let language = BreakpadLanguage(dwarf: found.language)
    let rows: DWARFLineRows?
    do { rows = try dwarf.lineRows(inUnit: index) } catch {
      unit.notes.append("\(path): line table of DWARF unit \(index) left out: \(error)")
      rows = nil
    }
    let offset = source.loadAddress
    // The chunk's numbers of the line table's files: an array for the usual small indices (asked once
    // per row), a dictionary past it.
    var smallFiles: [Int32] = []
    var otherFiles: [UInt64: Int32] = [:]
    func fileNumber(_ file: UInt64?) -> Int32 {
      if let file, file < 4096 {
        let slot = Int(file)  // < 4096
        if slot < smallFiles.count, smallFiles[slot] >= 0 { return smallFiles[slot] }
        while smallFiles.count <= slot { smallFiles.append(-1) }
        let number = chunkFileNumber(file, unit: index, compilationDirectory: found.compilationDirectory)
        smallFiles[slot] = number
        return number
      }
      let key = file ?? UInt64.max
      if let known = otherFiles[key] { return known }
      let number = chunkFileNumber(file, unit: index, compilationDirectory: found.compilationDirectory)
      otherFiles[key] = number
      return number
    }
    // Other units' line rows, for ranges they claim (rare: read when first needed).
    var foreignRows: [Int: (rows: DWARFLineRows?, directory: String?)] = [:]
    for function in found.functions {
      let ranges = function.ranges.map { (address: $0.lowerBound &- offset, size: $0.upperBound - $0.lowerBound) }
      guard let lowest = ranges.map(\.address).min() else { continue }
      var declaredName = ""
      let name: String
      if let symbol = source.firstSymbol[lowest] {
        name = names.functionName(source.symbols[symbol].name, isMangled: true, language: language)
      } else {
        declaredName = self.declaredName(function.nameSource, language: language)
        name = declaredName
      }
      var builders = ranges.map { BreakpadFunctionBuilder(address: $0.address, size: $0.size) }
      // A range another unit claims (a comdat copy or thunk several units describe, the linker keeping
      // one): its code is that unit's copy, so its lines are that unit's rows and this unit's inlined
      // calls (of its own, discarded copy) are left out, as symbolicate and llvm-symbolizer answer.
      // Empty (no allocation) unless a range is another unit's, which is rare.
      var owners: [Int?] = []
      if let claims {
        for (position, range) in function.ranges.enumerated() {
          guard let claimant = claims.unit(at: range.lowerBound), claimant != index else { continue }
          if owners.isEmpty { owners = [Int?](repeating: nil, count: function.ranges.count) }
          owners[position] = claimant
        }
      }
      var sequence = 0
      for call in function.inlinedCalls {
        let origin = originNumber(call.nameSource, language: language)
        let callFile = fileNumber(call.callFile)
        let callLine = UInt32(truncatingIfNeeded: call.callLine)
        for range in call.ranges {
          let start = range.lowerBound &- offset
          guard let owner = ranges.firstIndex(where: { start >= $0.address && start - $0.address < $0.size }),
                owners.isEmpty || owners[owner] == nil else { continue }
          builders[owner].addCall(.init(depth: call.depth, address: start, size: range.upperBound - range.lowerBound,
                                        name: Int(origin), callFile: Int(callFile), callLine: callLine,
                                        sequence: sequence))
          sequence += 1
        }
      }
      for (position, owner) in owners.enumerated() {
        guard let owner else { continue }
        let other = foreignRows[owner] ?? ((try? dwarf.lineRows(inUnit: owner)) ?? nil,
                                           dwarf.compilationDirectory(inUnit: owner))
        foreignRows[owner] = other
        for row in other.rows?.rows(covering: function.ranges[position]) ?? [] {
          builders[position].addLine(.init(address: row.address &- offset, size: row.size,
                                           file: Int(chunkFileNumber(row.file, unit: owner, compilationDirectory: other.directory)),
                                           line: UInt32(truncatingIfNeeded: row.line)))
        }
      }
      if let rows {
        for (position, range) in function.ranges.enumerated() where owners.isEmpty || owners[position] == nil {
          let covering = rows.rows(covering: range)
          builders[position].reserveLines(covering.count)
          for row in covering {
            builders[position].addLine(.init(address: row.address &- offset, size: row.size, file: Int(fileNumber(row.file)),
                                             line: UInt32(truncatingIfNeeded: row.line)))
          }
        }
      }
      let prepared = builders.map { builder in
        var result = BreakpadPreparedBuilder(address: builder.address, size: builder.size, lines: BreakpadPreparedLines(),
                                             fileRequests: 0..<0, originRequests: 0..<0)
        guard builder.address != 0 else { return result }
        let tree = builder.finish(name: -1)
        requests.start()
        var lines = BreakpadFunctionLines()
        lines.lines.reserveCapacity(tree.nodes[0].lines.count)
        if inlines {
          collectWithInlines(tree, node: 0, depth: 0, into: &lines, requests: &requests)
        } else {
          var previous: (line: UInt32, file: Int)?
          for line in tree.nodes[0].lines where line.line != 0 {
            if let previous, previous.line == line.line, previous.file == line.file { continue }
            lines.addLine(line.address, line.line, requests.file(line.file))
            previous = (line.line, line.file)
          }
        }
        result.lines = lines.prepared(functionAddress: builder.address, functionSize: builder.size)
        let filesStart = unit.requests.count
        unit.requests += requests.files
        let originsStart = unit.requests.count
        unit.requests += requests.origins
        result.fileRequests = filesStart..<originsStart
        result.originRequests = originsStart..<unit.requests.count
        return result
      }
      unit.functions.append(BreakpadPreparedFunction(ranges: ranges, builders: prepared, name: name, lowestAddress: lowest,
                                                     declaredName: declaredName, language: language))
    }
  }

  /// The chunk's numbers a function uses, each once, in the order of first use. A number is marked
  /// with the function's stamp when used (no set per function).
  private struct Requests {
    var files: [Int32] = []
    var origins: [Int32] = []
    var stamp: Int32 = 0
    var fileStamps: [Int32] = []
    var originStamps: [Int32] = []

    mutating func start() {
      files.removeAll(keepingCapacity: true)
      origins.removeAll(keepingCapacity: true)
      stamp &+= 1
    }

    mutating func file(_ number: Int) -> UInt32 { Self.use(number, stamp: stamp, stamps: &fileStamps, used: &files) }

    mutating func origin(_ number: Int) -> UInt32 { Self.use(number, stamp: stamp, stamps: &originStamps, used: &origins) }

    private static func use(_ number: Int, stamp: Int32, stamps: inout [Int32], used: inout [Int32]) -> UInt32 {
      while stamps.count <= number { stamps.append(0) }
      if stamps[number] != stamp {
        stamps[number] = stamp
        used.append(Int32(truncatingIfNeeded: number))
      }
      return UInt32(truncatingIfNeeded: number)
    }
  }

  private var requests = Requests()

  /// `collect_function_with_inlines_recursive`: the calls first (depth-first), then the function's own
  /// lines, each either a line of its own where no call covers it or a call site where one does.
  private func collectWithInlines(_ tree: BreakpadFunctionBuilder.Tree, node index: Int, depth: UInt32,
                                  into lines: inout BreakpadFunctionLines, requests: inout Requests) {
    let node = tree.nodes[index]
    var callRanges: [(start: UInt64, end: UInt64, origin: UInt32)] = []
    for childIndex in node.children where !tree.nodes[childIndex].lines.isEmpty {
      let child = tree.nodes[childIndex]
      let origin = requests.origin(child.name)
      for line in child.lines {
        callRanges.append((line.address, line.address &+ (line.size ?? 1), origin))
      }
      collectWithInlines(tree, node: childIndex, depth: depth + 1, into: &lines, requests: &requests)
    }
    callRanges.sort { $0.start < $1.start }
    var nextCall = 0
    var lineIndex = 0
    var previous: (line: UInt32, file: UInt32)?
    // Each round moves to the next line row (or past rows a call covered): bounded by the rows.
    while lineIndex < node.lines.count {
      let line = node.lines[lineIndex]
      lineIndex += 1
      let start = line.address, end = line.address &+ (line.size ?? 1)
      let file = requests.file(line.file)
      var current = start
      while current < end {
        if nextCall >= callRanges.count || callRanges[nextCall].start > current {
          if previous.map({ $0.line != line.line || $0.file != file }) ?? true {
            lines.addLine(current, line.line, file)
            previous = (line.line, file)
          }
        }
        if nextCall < callRanges.count, callRanges[nextCall].start < end {
          let call = callRanges[nextCall]
          lines.addInline(.init(origin: call.origin, depth: depth, callLine: line.line, callFile: file),
                          (call.start, call.end &- call.start))
          current = call.end
          previous = nil
          nextCall += 1
        } else {
          current = end
        }
      }
      while lineIndex < node.lines.count, node.lines[lineIndex].address < current { lineIndex += 1 }
    }
  }

  /// The chunk's number for a line table file of unit `index` (symbolic's empty file for an index the
  /// table does not have: the compilation directory).
  private func chunkFileNumber(_ file: UInt64?, unit index: Int, compilationDirectory: String?) -> Int32 {
    var path: String
    if let file, let joined = try? dwarf.filePath(inUnit: index, file: file) {
      path = joined
    } else {
      path = (compilationDirectory ?? "") + "/"
    }
    if let known = canonicalPaths[path] {
      path = known
    } else {
      let raw = path
      path = BreakpadNames.printable(path)
      // dump_syms canonicalizes paths only for the system it runs on (Linux here), not for Mach-O.
      if !isMachO { path = BreakpadFileTable.canonical(path, resolvingLinks: true) }
      canonicalPaths[raw] = path
    }
    if let known = pathNumbers[path] { return known }
    let number = Int32(truncatingIfNeeded: unit.paths.count)
    pathNumbers[path] = number
    unit.paths.append(path)
    return number
  }

  /// The chunk's origin number of a name source: one per distinct name (text, mangled or not, language).
  private func originNumber(_ nameSource: DWARFNameSource, language: BreakpadLanguage) -> Int32 {
    if case .origin = nameSource, let known = originKeys[nameSource] { return known }
    let declared = (try? dwarf.declaredName(of: nameSource)) ?? nil
    let key = BreakpadOriginTable.Key(text: declared?.text ?? "", isMangled: declared?.isMangled ?? false, language: language)
    let number: Int32
    if let known = originNumbers[key] {
      number = known
    } else {
      number = Int32(truncatingIfNeeded: unit.origins.count)
      originNumbers[key] = number
      let name = demangledOrigins[key] ?? names.functionName(key.text, isMangled: key.isMangled, language: language)
      demangledOrigins[key] = name
      unit.origins.append((key, name))
    }
    if case .origin = nameSource { originKeys[nameSource] = number }
    return number
  }

  private func declaredName(_ nameSource: DWARFNameSource, language: BreakpadLanguage) -> String {
    let declared = (try? dwarf.declaredName(of: nameSource)) ?? nil
    return names.functionName(declared?.text ?? "", isMangled: declared?.isMangled ?? false, language: language)
  }
}

/// Jobs run by helper threads, each thread with state of its own, that the starting thread can join
/// in later (`finish`): work started before other work of the caller and collected after it.
final class BreakpadJobs<Output: Sendable>: @unchecked Sendable {
  private let count: Int
  private let work: @Sendable (inout Any?, Int) -> Output
  private let results: Mutex<[Output?]>
  private let next = Atomic<Int>(0)
  // Written only by the starting thread, before `finish` joins them.
  private var helpers: [WorkerThread] = []

  /// `work(state, index)` for each of `0..<count`; `state` starts `nil` on each thread.
  init(count: Int, work: @escaping @Sendable (inout Any?, Int) -> Output) {
    self.count = count
    self.work = work
    results = Mutex([Output?](repeating: nil, count: count))
  }

  /// Starts up to `threads` helper threads on the jobs.
  func start(threads: Int) {
    for _ in 0..<max(0, min(threads, count)) {
      if let helper = WorkerThread.start({ [self] in self.runJobs() }) { helpers.append(helper) }
    }
  }

  private func runJobs() {
    var state: Any? = nil
    while true {
      let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
      guard index < count else { return }
      let output = work(&state, index)
      results.withLock { $0[index] = output }
    }
  }

  /// Runs what is left on the calling thread, waits for the helpers, and returns every job's output in
  /// job order. Call once.
  func finish() -> [Output] {
    runJobs()
    for helper in helpers { helper.join() }
    helpers = []
    return results.withLock { $0.compactMap { $0 } }
  }

  deinit {
    for helper in helpers { helper.join() }
  }
}

/// Values the workers only read (opened files, readers' sections, FDE lists): shared as they are, never
/// written while the workers run.
final class BreakpadShared<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}
