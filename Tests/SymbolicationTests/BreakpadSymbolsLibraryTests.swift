import Glibc
import Symbolication
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog symbols --inlines` against `dump_syms --inlines` on large real builds: libstdc++'s debug
/// build (libstdc++6-12-dbg), libc with its libc6-dbg debug file, python3.11 with python3.11-dbg's.
/// Every PUBLIC and STACK CFI record is compared, and the FUNC records of every fourth compilation unit
/// with their line and INLINE records (all of them would take this suite's time budget in a debug
/// build); each difference must be one of the documented rules, checked against readelf, c++filt and
/// the DWARF itself.
@Suite(.enabled(if: BreakpadOracle.dumpSyms != nil && haveTool("readelf") && haveTool("c++filt"),
                "needs dump_syms, readelf and c++filt"), .serialized)
struct BreakpadSymbolsLibraryTests {
  static let libstdcxx = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
  static let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
  static let python = "/usr/bin/python3.11"
  /// The FUNC records of one compilation unit in this many are compared.
  static let stride = 4

  /// The debug file `/usr/lib/debug/.build-id` holds for `path`, when installed.
  static func debugFile(_ path: String) -> String? {
    guard let notes = try? runChild(["readelf", "-n", path]).output,
          let line = notes.split(separator: "\n").first(where: { $0.contains("Build ID:") }),
          let id = line.split(separator: " ").last, id.count > 2 else { return nil }
    let candidate = "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
    return access(candidate, R_OK) == 0 ? candidate : nil
  }

  /// The rules shared by the three: C++ names demangled by libstdc++'s demangler (`c++filt -i`) with
  /// a template's return type left out, where dump_syms has cpp_demangle's text; `PUBLIC m` where
  /// dump_syms marks an address `.symtab` and `.dynsym` both name with the same name (readelf shows
  /// one name there); `FUNC m` where the merge of a binary and its debug file lands a FUNC on the
  /// binary's own symbol of the same name. (dump_syms' output for a binary and its debug file can
  /// change from run to run, see `separateDebugFile`; for these three it was the same in every run
  /// seen, the one checked here.)
  struct Rules {
    var names: NameOracle.CxxNames
    var aliases: [UInt64: Set<String>]
    var loadAddress: UInt64 = 0
    var counts: [String: Int] = [:]

    init(_ files: [String]) throws {
      var mangled = Set<String>()
      for file in files { mangled.formUnion(try NameOracle.mangledNames(file, prefixes: ["_Z"])) }
      names = NameOracle.CxxNames(try NameOracle.cxxfilt(mangled))
      aliases = [:]
      for file in files {
        for (address, set) in try NameOracle.functionSymbols(file) { aliases[address, default: []].formUnion(set) }
      }
    }

    mutating func name(_ theirs: String, _ ours: String) -> Bool {
      if names.explains(ours) { counts["C++ name", default: 0] += 1; return true }
      return false
    }

    mutating func multiple(_ a: SymRecords.Function, _ b: SymRecords.Function, merged: Bool) -> Bool {
      if a.isMultiple == b.isMultiple { return true }
      guard a.isMultiple, !b.isMultiple, (aliases[a.address + loadAddress]?.count ?? 0) <= 1 else { return false }
      if a.kind == "PUBLIC" || merged { counts["\(a.kind) m", default: 0] += 1; return true }
      return false
    }
  }

  @Test(.enabled(if: access(libstdcxx, R_OK) == 0, "needs libstdc++6-12-dbg"))
  func libstdcxxDebugBuild() throws {
    let theirs = try SymRecords(BreakpadOracle.dumpSyms([Self.libstdcxx], inlines: true))
    let ours = try SymRecords(BreakpadOracle.ours(Self.libstdcxx, inlines: true, unitStride: Self.stride).text)
    var rules = try Rules([Self.libstdcxx])
    let differences = compareSymbols(theirs, ours, sampled: true, names: { rules.name($0, $1) },
                                     multiple: { rules.multiple($0, $1, merged: false) })
    #expect(differences.isEmpty, "\(differences.count) differences:\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    #expect(ours.symbols.count > 3000 && ours.frames.count > 4000, "\(ours.symbols.count) records, \(ours.frames.count) CFI")
    #expect((rules.counts["C++ name"] ?? 0) > 100, "\(rules.counts)")
  }

  /// libc with its debug file (found by build-id under /usr/lib/debug). One more rule: glibc's DWARF 5
  /// units have a relative compilation directory (`./csu`) that is also line-table directory 0;
  /// dump_syms joins the two (`csu/csu/init-first.c`), though DWARF 5 says directory 0 is the
  /// compilation directory (gdb and llvm-symbolizer write `csu/init-first.c`, as imagelog does).
  @Test(.enabled(if: debugFile(libc) != nil, "needs libc6-dbg"))
  func libcWithDebugFile() throws {
    var (debug, theirs, ours, rules) = try Self.withDebugFile(Self.libc)
    let compilationDirectories = try Self.relativeCompilationDirectories(debug)
    try #require(!compilationDirectories.isEmpty, "libc's DWARF no longer has relative DW_AT_comp_dir: drop this rule")
    var doubled = 0
    let differences = compareSymbols(theirs, ours, sampled: true, names: { theirs, ours in
      rules.name(theirs, ours) || NameOracle.sectionPublicRenamed(to: "libc.so.6")(theirs, ours)
    }, files: { path in
      for directory in compilationDirectories where path.hasPrefix(directory + "/" + directory + "/") {
        doubled += 1
        return String(path.dropFirst(directory.count + 1))
      }
      return path
    }, multiple: { rules.multiple($0, $1, merged: true) })
    #expect(differences.isEmpty, "\(differences.count) differences:\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    #expect(doubled > 100 && ours.symbols.count > 3000 && ours.frames.count > 3000)
  }

  /// python3.11 (a position-dependent executable at 0x400000) with its python3.11-dbg debug file. Two
  /// more rules: dump_syms writes the made-up section publics at their link-time addresses
  /// (`<.init ELF section>` at 41f000) while every other record is relative to the load address
  /// (readelf's first PT_LOAD): imagelog writes them relative too, where no other record is. And
  /// where a line-table row starts before a function (its `.cold` part, mostly) and runs into it,
  /// dump_syms drops the row and imagelog keeps its part inside: each address where the two files'
  /// line records then answer differently gets imagelog's line from llvm-symbolizer (`coveredStarts`).
  @Test(.enabled(if: debugFile(python) != nil, "needs python3.11-dbg (Scripts/install-test-tools)"))
  func python311WithDebugFile() throws {
    var (debug, theirs, ours, rules) = try Self.withDebugFile(Self.python)
    let headers = try runChild(["readelf", "-lW", Self.python]).output.split(separator: "\n")
    let load = try #require(headers.first { $0.drop { $0 == " " }.hasPrefix("LOAD") }?.split(separator: " ")[2])
    let loadAddress = try #require(UInt64(load.dropFirst(2), radix: 16))
    #expect(loadAddress == 0x400000)
    rules.loadAddress = loadAddress
    var moved = 0
    var covered: [(what: String, theirs: SymRecords.Function, ours: SymRecords.Function)] = []
    let sectionStarts = try Self.executableSectionStarts(Self.python)
    let differences = compareSymbols(theirs, ours, sampled: true, names: { rules.name($0, $1) },
                                     multiple: { rules.multiple($0, $1, merged: true) }, symbol: { a, b in
      if let a, a.name.hasSuffix(" ELF section in \(String(debug.split(separator: "/").last ?? ""))>"),
         sectionStarts.contains(a.address) { moved += 1; return true }
      if let b, b.name.hasPrefix("<"), b.name.hasSuffix(" ELF section in python3.11>"),
         sectionStarts.contains(b.address + loadAddress) { return true }
      return false
    }, lines: { what, a, b in
      covered.append((what, a, b))
      return true
    })
    #expect(differences.isEmpty, "\(differences.count) differences:\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    #expect(moved > 0 && ours.symbols.count > 5000)
    let unexplained = try Self.coveredStarts(covered, debug: debug, loadAddress: loadAddress)
    let listed = unexplained.prefix(10).joined(separator: "\n")
    #expect(unexplained.isEmpty, "\(unexplained.count) line differences llvm-symbolizer does not side with imagelog on:\n\(listed)")
  }

  /// The FUNCs whose line (or INLINE) records differ from dump_syms': at every address where the two
  /// sets of line records answer differently, llvm-symbolizer's innermost line must be imagelog's, and
  /// the function's start must be one of them (the row covering the start is what dump_syms drops).
  /// INLINE records may differ only in a function whose line records differ so. Returns what is not so.
  static func coveredStarts(_ covered: [(what: String, theirs: SymRecords.Function, ours: SymRecords.Function)],
                            debug: String, loadAddress: UInt64) throws -> [String] {
    func answer(_ records: [SymRecords.Line], _ address: UInt64) -> UInt32? {
      records.last { $0.address <= address && address - $0.address < $0.size }?.line
    }
    var problems: [String] = []
    var questions: [(function: UInt64, address: UInt64, ours: UInt32?)] = []
    var startsDiffer = Set<UInt64>()
    for (what, theirs, ours) in covered where what == "line records" {
      let starts = Set(theirs.lines.map(\.address) + ours.lines.map(\.address) + [ours.address]).sorted()
      let differing = starts.filter { answer(theirs.lines, $0) != answer(ours.lines, $0) }
      if differing.first == ours.address { startsDiffer.insert(ours.address) } else {
        problems.append("FUNC \(String(ours.address, radix: 16)) \(ours.name): the records agree at its start")
      }
      questions += differing.map { (ours.address, $0, answer(ours.lines, $0)) }
    }
    for (what, _, ours) in covered where what == "INLINE records" && !startsDiffer.contains(ours.address) {
      problems.append("FUNC \(String(ours.address, radix: 16)) \(ours.name): INLINE records differ, line records at its start do not")
    }
    #expect(questions.count > 10 && questions.count < 20_000, "\(questions.count) addresses to ask")
    let oracle = try DWARFOracle.symbolize(debug, questions.map { $0.address + loadAddress })
    for (question, frames) in zip(questions, oracle) where frames.first.map({ UInt32($0.line) }) != question.ours {
      problems.append("\(String(question.address, radix: 16)) in FUNC \(String(question.function, radix: 16)): imagelog "
                      + "\(question.ours.map(String.init) ?? "none"), llvm-symbolizer \(frames.first.map { "\($0)" } ?? "none")")
    }
    return problems
  }

  /// `program` and its debug file: the debug file's path, dump_syms' records given both, imagelog's
  /// given the program (finding the debug file itself), and the rules over both files.
  static func withDebugFile(_ program: String) throws -> (debug: String, theirs: SymRecords, ours: SymRecords, rules: Rules) {
    let debug = try #require(debugFile(program))
    let theirs = try SymRecords(BreakpadOracle.dumpSyms([program, debug], inlines: true))
    let ours = try SymRecords(BreakpadOracle.ours(program, inlines: true, systemDirectories: true, unitStride: stride).text)
    return (debug, theirs, ours, try Rules([program, debug]))
  }

  /// The `DW_AT_comp_dir` values of the file's units that are relative, normalized (`./csu` -> `csu`).
  static func relativeCompilationDirectories(_ path: String) throws -> Set<String> {
    var result = Set<String>()
    let dump = try runChild(["readelf", "--debug-dump=info", "--dwarf-depth=1", path])
    for line in dump.output.split(separator: "\n") where line.contains("DW_AT_comp_dir") {
      guard let value = line.split(separator: ":").last?.trimmingPrefix(" ") else { continue }
      let parts = value.split(separator: "/").filter { $0 != "." }
      if !value.hasPrefix("/"), !parts.isEmpty { result.insert(parts.joined(separator: "/")) }
    }
    return result
  }

  /// The link-time addresses of the file's executable sections (readelf -SW, flag X).
  static func executableSectionStarts(_ path: String) throws -> Set<UInt64> {
    var result = Set<UInt64>()
    for line in try runChild(["readelf", "-SW", path]).output.split(separator: "\n") {
      guard let close = line.firstIndex(of: "]") else { continue }
      let fields = line[line.index(after: close)...].split(separator: " ")
      guard fields.count >= 7, fields[6].contains("X"), let address = UInt64(fields[2], radix: 16) else { continue }
      result.insert(address)
    }
    return result
  }
}
