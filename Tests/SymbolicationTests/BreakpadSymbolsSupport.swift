import Glibc
import Symbolication
import BreakpadSymbolWriter
import ImageLogTestSupport
import ImageReaders
import Testing

/// A `.sym` file's records with every number replaced by what it names (FILE and INLINE_ORIGIN
/// numbers by their names, CFI rules by register), so two files that number their files differently
/// can be compared record by record.
struct SymRecords {
  struct Function: Equatable {
    var kind: String  // FUNC or PUBLIC
    var address: UInt64
    var size: UInt64
    var name: String
    var isMultiple: Bool
    var lines: [Line]
    var inlines: [Inline]
  }

  struct Line: Equatable, CustomStringConvertible {
    var address: UInt64, size: UInt64, line: UInt32, file: String
    var description: String { "\(String(address, radix: 16)) \(String(size, radix: 16)) \(line) \(file)" }
  }

  struct Inline: Equatable, CustomStringConvertible {
    var depth: UInt32, callLine: UInt32, callFile: String, origin: String, ranges: [Range<UInt64>]
    var description: String { "INLINE \(depth) \(callLine) \(callFile) \(origin) \(ranges)" }
  }

  struct FrameRow: Equatable {
    var address: UInt64
    var rules: [String: String]
  }

  struct FrameEntry: Equatable {
    var address: UInt64
    var size: UInt64
    var rows: [FrameRow]
  }

  var module: BreakpadSymbolFile.Module
  var codeID: String?
  var files: [String]
  var origins: [String]
  var symbols: [Function]
  var frames: [FrameEntry]

  init(_ text: String) throws {
    let file = try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    module = file.module
    codeID = file.codeID
    files = file.files.sorted { $0.key < $1.key }.map(\.value)
    origins = file.inlineOrigins.sorted { $0.key < $1.key }.map(\.value)
    var symbols: [Function] = file.functions.map { function in
      Function(kind: "FUNC", address: function.address, size: function.size, name: function.name,
               isMultiple: function.isMultiple,
               lines: file.lines[function.lines].map {
                 Line(address: $0.address, size: $0.size, line: $0.line, file: file.files[$0.file] ?? "?\($0.file)")
               },
               inlines: file.inlines[function.inlines].map {
                 Inline(depth: $0.depth, callLine: $0.callLine, callFile: file.files[$0.callFile] ?? "?\($0.callFile)",
                        origin: file.inlineOrigins[$0.origin] ?? "?\($0.origin)",
                        ranges: Array(file.inlineRanges[$0.ranges]))
               })
    }
    symbols += file.publics.map {
      Function(kind: "PUBLIC", address: $0.address, size: 0, name: $0.name, isMultiple: $0.isMultiple, lines: [], inlines: [])
    }
    self.symbols = symbols.sorted { ($0.address, $0.kind) < ($1.address, $1.kind) }
    frames = file.frameEntries.map { entry in
      var rows = [FrameRow(address: entry.address, rules: Self.dictionary(file.ruleText(entry.rules)))]
      rows += file.frameDeltas[entry.deltas].map { FrameRow(address: $0.address, rules: Self.dictionary(file.ruleText($0.rules))) }
      return FrameEntry(address: entry.address, size: entry.size, rows: rows)
    }
  }

  static func dictionary(_ rules: String) -> [String: String] {
    Dictionary(BreakpadSymbolFile.rules(rules).map { ($0.register, $0.expression) }, uniquingKeysWith: { $1 })
  }
}

/// Runs Mozilla's dump_syms (`pipelineTool("dump_syms")`) and imagelog's writer over the same files.
enum BreakpadOracle {
  static let dumpSyms = pipelineTool("dump_syms")
  static let dwarfFixtures = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf"

  /// `dump_syms [--inlines] FILES`, run in an empty folder: it canonicalizes relative source paths
  /// against its working folder.
  static func dumpSyms(_ files: [String], inlines: Bool) throws -> String {
    let tool = try #require(dumpSyms)
    let folder = try makeTemporaryDirectory("dump-syms-cwd")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let result = try runChild(["sh", "-c", "cd \"$0\" && exec \"$@\"", folder, tool] + (inlines ? ["--inlines"] : []) + files)
    guard result.exitCode == 0 else { throw TestSupportError("dump_syms \(files): \(result.error)") }
    return result.output
  }

  /// imagelog's `.sym` of `path` (its debug file found under `searchPaths` only: no system folders).
  static func ours(_ path: String, inlines: Bool, searchPaths: [String] = [], systemDirectories: Bool = false,
                   architecture: String? = nil, unitStride: Int = 1) throws -> (text: String, symbols: BreakpadSymbols) {
    let locator = DebugFileLocator(searchPaths: searchPaths, systemDirectories: systemDirectories)
    var options = BreakpadSymbols.Options(inlines: inlines, architecture: architecture)
    options.unitStride = unitStride
    let symbols = try BreakpadSymbols(path: path, options: options, locator: locator)
    let folder = try makeTemporaryDirectory("imagelog-symbols")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let output = folder + "/out.sym"
    let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    try #require(descriptor >= 0)
    #expect(symbols.write(to: descriptor))
    close(descriptor)
    return (try #require(readFile(output)), symbols)
  }
}

/// One difference between dump_syms' records and ours, and whether a documented rule explains it.
struct SymDifference: CustomStringConvertible {
  var what: String
  var theirs: String
  var ours: String
  var description: String { "\(what):\n  dump_syms: \(theirs)\n  imagelog:  \(ours)" }
}

/// Compares two files record by record. `names` decides whether two differing names are explained
/// (true when they are); `files` maps a dump_syms FILE name to the one imagelog should write; the
/// `multiple` rule decides a differing `m`; `lines` may explain a FUNC's differing line or INLINE
/// records. Returns every difference no rule explains.
///
/// `sampled`: ours was made from every few units only (`unitStride`): its FILE names are some of
/// theirs, a FUNC of theirs it lacks was in a unit left out, and a PUBLIC of ours inside such a FUNC
/// is the symbol dump_syms dropped for lying inside it.
func compareSymbols(_ theirs: SymRecords, _ ours: SymRecords, sampled: Bool = false,
                    names: (String, String) -> Bool = { $0 == $1 },
                    files: (String) -> String = { $0 },
                    multiple: (SymRecords.Function, SymRecords.Function) -> Bool = { $0.isMultiple == $1.isMultiple },
                    symbol: (SymRecords.Function?, SymRecords.Function?) -> Bool = { _, _ in false },
                    lines: (_ what: String, SymRecords.Function, SymRecords.Function) -> Bool = { _, _, _ in false })
  -> [SymDifference] {
  var differences: [SymDifference] = []
  func differ(_ what: String, _ a: Any, _ b: Any) { differences.append(SymDifference(what: what, theirs: "\(a)", ours: "\(b)")) }
  if theirs.module != ours.module { differ("MODULE", theirs.module, ours.module) }
  if theirs.codeID != ours.codeID { differ("INFO CODE_ID", theirs.codeID ?? "none", ours.codeID ?? "none") }
  let theirFiles = Set(theirs.files.map(files)), ourFiles = Set(ours.files)
  if sampled ? !ourFiles.isSubset(of: theirFiles) : theirFiles != ourFiles {
    differ("FILE names", theirFiles.subtracting(ourFiles).sorted(), ourFiles.subtracting(theirFiles).sorted())
  }
  let ourFunctions = Set(ours.symbols.filter { $0.kind == "FUNC" }.map(\.address))
  let missedFunctions = theirs.symbols.filter { $0.kind == "FUNC" && !ourFunctions.contains($0.address) }
  func insideMissedFunction(_ address: UInt64) -> Bool {
    var low = 0, high = missedFunctions.count
    while low < high {
      let middle = (low + high) / 2
      if missedFunctions[middle].address <= address { low = middle + 1 } else { high = middle }
    }
    return low > 0 && address - missedFunctions[low - 1].address < max(missedFunctions[low - 1].size, 1)
  }
  var index = 0, other = 0
  while index < theirs.symbols.count || other < ours.symbols.count {
    let a = index < theirs.symbols.count ? theirs.symbols[index] : nil
    let b = other < ours.symbols.count ? ours.symbols[other] : nil
    if let a, let b, a.address == b.address, a.kind == b.kind {
      index += 1
      other += 1
      let what = "\(a.kind) \(String(a.address, radix: 16))"
      if a.size != b.size { differ(what + " size", a.size, b.size) }
      if a.name != b.name && !names(a.name, b.name) { differ(what + " name", a.name, b.name) }
      if !multiple(a, b) { differ(what + " m", a.isMultiple, b.isMultiple) }
      let theirLines = a.lines.map { SymRecords.Line(address: $0.address, size: $0.size, line: $0.line, file: files($0.file)) }
      if theirLines != b.lines && !lines("line records", a, b) { differ(what + " line records", theirLines, b.lines) }
      let theirInlines = a.inlines.map {
        SymRecords.Inline(depth: $0.depth, callLine: $0.callLine, callFile: files($0.callFile), origin: $0.origin, ranges: $0.ranges)
      }
      let sameInlines = theirInlines.count == b.inlines.count && zip(theirInlines, b.inlines).allSatisfy { x, y in
        x.depth == y.depth && x.callLine == y.callLine && x.callFile == y.callFile && x.ranges == y.ranges
          && (x.origin == y.origin || names(x.origin, y.origin))
      }
      if !sameInlines && !lines("INLINE records", a, b) { differ(what + " INLINE records", theirInlines, b.inlines) }
      continue
    }
    // A record on one side only.
    let takeTheirs = b == nil || (a != nil && (a!.address, a!.kind) < (b!.address, b!.kind))
    if takeTheirs {
      if sampled, let a, a.kind == "FUNC" {
        index += 1
        continue
      }
      if !symbol(a, nil) { differ("record only dump_syms writes", "\(a!.kind) \(String(a!.address, radix: 16)) \(a!.name)", "-") }
      index += 1
    } else {
      if sampled, let b, b.kind == "PUBLIC", insideMissedFunction(b.address) {
        other += 1
        continue
      }
      if !symbol(nil, b) { differ("record only imagelog writes", "-", "\(b!.kind) \(String(b!.address, radix: 16)) \(b!.name)") }
      other += 1
    }
  }
  if theirs.frames != ours.frames {
    let theirEntries = Dictionary(theirs.frames.map { ($0.address, $0) }, uniquingKeysWith: { a, _ in a })
    for entry in ours.frames where theirEntries[entry.address] != entry {
      differ("STACK CFI INIT \(String(entry.address, radix: 16))", theirEntries[entry.address].map { "\($0)" } ?? "none", entry)
    }
    if theirs.frames.count != ours.frames.count { differ("STACK CFI INIT count", theirs.frames.count, ours.frames.count) }
  }
  return differences
}
