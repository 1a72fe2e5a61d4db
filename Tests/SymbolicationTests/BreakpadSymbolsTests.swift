import Glibc
import Symbolication
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog symbols` against Mozilla's `dump_syms` 2.3.5 (`dump_syms --inlines` and without), record
/// by record: MODULE and INFO CODE_ID lines, FILE names, FUNC address/size/name with their line
/// records (address, size, line, file name) and INLINE records (depth, call line, call file, origin
/// name, ranges), PUBLIC records, STACK CFI INIT ranges and every row's rules (as a set per row: both
/// tools list a row's registers in an order of their own). Each difference must be one a documented
/// rule explains, checked against its own evidence (readelf, c++filt, swift-demangle, the file before
/// dwz); any other fails the test.
@Suite(.enabled(if: BreakpadOracle.dumpSyms != nil, "needs dump_syms (Scripts/install-test-tools)"))
struct BreakpadSymbolsTests {
  static let matrix = ((try? runChild(["ls", BreakpadOracle.dwarfFixtures]).output) ?? "").split(separator: "\n")
    .map(String.init).filter { $0.hasPrefix("gcc-") || $0.hasPrefix("clang-") }

  /// gcc and clang, C and C++, -O0 and -O2, DWARF 4 and 5, zlib and zstd: the same records, with and
  /// without inlines.
  @Test(arguments: matrix)
  func compilerMatrix(_ name: String) throws {
    let path = BreakpadOracle.dwarfFixtures + "/" + name
    for inlines in [false, true] {
      let theirs = try SymRecords(BreakpadOracle.dumpSyms([path], inlines: inlines))
      let ours = try SymRecords(BreakpadOracle.ours(path, inlines: inlines).text)
      let differences = compareSymbols(theirs, ours)
      #expect(differences.isEmpty, "\(name) inlines \(inlines):\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
      #expect(ours.symbols.contains { $0.kind == "FUNC" && !$0.lines.isEmpty }, "\(name): no FUNC with lines")
      if inlines && name.contains("-O2") {
        #expect(ours.symbols.contains { !$0.inlines.isEmpty }, "\(name): no INLINE records at -O2")
      }
      #expect(!ours.frames.isEmpty, "\(name): no STACK CFI")
    }
  }

  /// Swift programs: the same records; names differ where the two demanglers differ. dump_syms has
  /// a Swift 5.3 demangler of its own (symbolic's) that writes argument types (`weigh([Int])`) and
  /// leaves newer manglings as they are; imagelog writes what Swift's own backtracer writes, which is
  /// what `swift demangle --simplified` prints for the same mangled name (`weigh(_:)`).
  @Test(arguments: ["swift-O", "swift-Onone"])
  func swiftProgram(_ name: String) throws {
    let path = BreakpadOracle.dwarfFixtures + "/" + name
    let demangled = try NameOracle.swiftSimplified(NameOracle.mangledNames(path, prefixes: ["$s", "_$s"]))
    try #require(demangled.count > 20)
    for inlines in [false, true] {
      let theirs = try SymRecords(BreakpadOracle.dumpSyms([path], inlines: inlines))
      let ours = try SymRecords(BreakpadOracle.ours(path, inlines: inlines).text)
      var explained = 0
      let differences = compareSymbols(theirs, ours, names: { _, mine in
        guard demangled.contains(mine) else { return false }
        explained += 1
        return true
      })
      #expect(differences.isEmpty, "\(name):\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
      #expect(explained > 5, "\(name): expected Swift names to differ")
    }
  }

  /// dwz: names dwz moved into the supplementary file. dump_syms cannot follow `DW_FORM_GNU_ref_alt`
  /// and writes `<name omitted>` for those inline origins; imagelog follows it (the locator finds
  /// `dwz-common.debug` through `.gnu_debugaltlink`) and writes what dump_syms writes for the same
  /// program linked before dwz ran (`dwz-a.orig`: same code, DWARF whole).
  @Test(arguments: ["dwz-a", "dwz-b"])
  func dwzSupplementaryFile(_ name: String) throws {
    let path = BreakpadOracle.dwarfFixtures + "/" + name
    let ours = try SymRecords(BreakpadOracle.ours(path, inlines: true, searchPaths: [BreakpadOracle.dwarfFixtures]).text)
    var before = try SymRecords(BreakpadOracle.dumpSyms([path + ".orig"], inlines: true))
    #expect(before.module.name == name + ".orig")
    before.module.name = name
    let differences = compareSymbols(before, ours, names: { theirs, mine in
      theirs.replacing(name + ".orig>", with: name + ">") == mine
    })
    #expect(differences.isEmpty, "\(name):\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    let theirs = try SymRecords(BreakpadOracle.dumpSyms([path], inlines: true))
    #expect(theirs.origins.contains("<name omitted>"), "dump_syms now names dwz's functions: drop this rule")
    #expect(!ours.origins.contains("<name omitted>") && !ours.origins.isEmpty)
  }

  /// A stripped program and its `.gnu_debuglink` debug file (found by the locator beside it), against
  /// `dump_syms PROGRAM DEBUGFILE`. dump_syms' output for these two files changes from run to run:
  /// two outputs over a dozen runs of the same command, as if its merge kept whichever file it
  /// finished reading first (the section publics name that file). Program first: it marks every FUNC `m` whose address the program's own symbol table also
  /// names (its merge flags any FUNC that lands on another file's record), where the symbol table
  /// holds that one name only (readelf). Debug file first: it marks no FUNC `m`, not even where the
  /// symbol table holds two names for one address (readelf), and names the made-up section publics
  /// after the debug file. imagelog writes the same output every time: `m` where the symbol table
  /// holds several names, section publics named after the program.
  @Test func separateDebugFile() throws {
    let program = BreakpadOracle.dwarfFixtures + "/split-gcc-cxx-O2"
    let theirs = try SymRecords(BreakpadOracle.dumpSyms([program, program + ".debug"], inlines: true))
    let ours = try SymRecords(BreakpadOracle.ours(program, inlines: true).text)
    let aliases = try NameOracle.functionSymbols(program)
    let debugFileFirst = theirs.symbols.contains { $0.kind == "PUBLIC" && $0.name.hasSuffix(" ELF section in split-gcc-cxx-O2.debug>") }
    var merged = 0
    let differences = compareSymbols(theirs, ours, names: NameOracle.sectionPublicRenamed(to: "split-gcc-cxx-O2"),
                                     multiple: { a, b in
      if a.isMultiple == b.isMultiple { return true }
      guard a.kind == "FUNC" else { return false }
      let names = aliases[a.address]?.count ?? 0
      let explained = debugFileFirst ? (!a.isMultiple && b.isMultiple && names > 1) : (a.isMultiple && !b.isMultiple && names <= 1)
      if explained { merged += 1 }
      return explained
    })
    #expect(differences.isEmpty, "\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    #expect(merged > 0 && ours.symbols.contains { $0.kind == "FUNC" && !$0.lines.isEmpty })
  }

  /// A Mach-O program and its dSYM (found beside it), against `dump_syms PROGRAM PROGRAM.dSYM`: the
  /// module's system is `mac` as the format says (dump_syms writes `Mac`), and the merge's `m` as above
  /// (in either of dump_syms' two outputs: imagelog writes no `m` here).
  @Test(arguments: ["macho-c-O2", "macho-cxx-O2"])
  func machOWithDSYM(_ name: String) throws {
    let program = BreakpadOracle.dwarfFixtures + "/" + name
    var theirs = try SymRecords(BreakpadOracle.dumpSyms([program, program + ".dSYM"], inlines: true))
    let ours = try SymRecords(BreakpadOracle.ours(program, inlines: true).text)
    #expect(theirs.module.operatingSystem == "Mac" && ours.module.operatingSystem == "mac")
    theirs.module.operatingSystem = "mac"
    let differences = compareSymbols(theirs, ours, multiple: { a, b in
      a.isMultiple == b.isMultiple || (a.kind == "FUNC" && a.isMultiple && !b.isMultiple)
    })
    #expect(differences.isEmpty, "\(name):\n\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    #expect(ours.symbols.contains { !$0.inlines.isEmpty })
    // The slice named explicitly reads the same.
    let sliced = try SymRecords(BreakpadOracle.ours(program, inlines: true, architecture: "arm64").text)
    #expect(compareSymbols(ours, sliced).isEmpty)
  }

  /// A stripped system library with no debug file here: its `.dynsym` publics and `.eh_frame` CFI.
  @Test(.enabled(if: FileSystemProbe.exists("/usr/lib/x86_64-linux-gnu/libz.so.1"), "needs zlib1g's libz.so.1"))
  func strippedSystemLibrary() throws {
    let path = "/usr/lib/x86_64-linux-gnu/libz.so.1"
    let theirs = try SymRecords(BreakpadOracle.dumpSyms([path], inlines: true))
    let ours = try SymRecords(BreakpadOracle.ours(path, inlines: true).text)
    let differences = compareSymbols(theirs, ours)
    #expect(differences.isEmpty, "\(differences.prefix(10).map(\.description).joined(separator: "\n"))")
    #expect(!ours.symbols.contains { $0.kind == "FUNC" } && ours.symbols.count > 50 && ours.frames.count > 50)
  }
}

/// Whether a path exists (for `.enabled(if:)`).
enum FileSystemProbe {
  static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

/// The oracles names are checked with.
enum NameOracle {
  /// Every string starting with one of `prefixes` among the file's symbol names (`nm`) and DWARF
  /// strings (`readelf -p .debug_str`, decompressed), with compiler suffixes (`.cold`, `.part.0`) cut.
  static func mangledNames(_ path: String, prefixes: [String]) throws -> Set<String> {
    var names = Set<String>()
    let symbols = try runChild(["nm", "--defined-only", path])
    for line in symbols.output.split(separator: "\n") {
      if let name = line.split(separator: " ").last { names.insert(String(name)) }
    }
    let strings = try runChild(["readelf", "-z", "-W", "-p", ".debug_str", path])
    for line in strings.output.split(separator: "\n") {
      guard let close = line.firstIndex(of: "]") else { continue }
      names.insert(String(line[line.index(after: close)...].drop { $0 == " " }))
    }
    return Set(names.filter { name in prefixes.contains { name.hasPrefix($0) } }.map { name in
      name.hasPrefix("_Z") ? String(name.prefix { $0 != "." }) : name
    })
  }

  /// `swift demangle --simplified` of each name.
  static func swiftSimplified(_ names: Set<String>) throws -> Set<String> {
    Set(try filter([which("swift-demangle") ?? "swift-demangle", "--simplified"], names))
  }

  /// `c++filt -i` (libstdc++'s `__cxa_demangle` style: `std::string` for `Ss`) of each name.
  static func cxxfilt(_ names: Set<String>) throws -> [String] {
    try filter(["c++filt", "-i"], names)
  }

  /// The lines `command` prints for `names`, one per line on its standard input (read from a file: a
  /// pipe the test writes would fill up with answers before the questions are all written).
  static func filter(_ command: [String], _ names: Set<String>) throws -> [String] {
    let folder = try makeTemporaryDirectory("name-oracle")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/names", names.joined(separator: "\n") + "\n")
    let result = try runChild(["sh", "-c", "exec \"$@\" < \"$0\"", folder + "/names"] + command)
    guard result.exitCode == 0 else { throw TestSupportError("\(command): \(result.error)") }
    return result.output.split(separator: "\n").map(String.init)
  }

  /// The STT_FUNC names (version suffix cut) at each address of the file's `.symtab` and `.dynsym`.
  static func functionSymbols(_ path: String) throws -> [UInt64: Set<String>] {
    var result: [UInt64: Set<String>] = [:]
    for line in try runChild(["readelf", "-sW", path]).output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count >= 8, fields[0].hasSuffix(":"), fields[3] == "FUNC", fields[6] != "UND",
            let address = UInt64(fields[1], radix: 16) else { continue }
      result[address, default: []].insert(String(fields[7].prefix { $0 != "@" }))
    }
    return result
  }

  /// Names equal, or dump_syms' made-up section public named after the debug file where ours names
  /// the program `program`.
  static func sectionPublicRenamed(to program: String) -> (String, String) -> Bool {
    { theirs, ours in
      guard theirs.hasPrefix("<"), theirs.hasSuffix(">"), let range = theirs.firstRange(of: " ELF section in ") else { return false }
      return ours == theirs[..<range.upperBound] + program + ">"
    }
  }

  /// A C++ name check: `ours` is the `c++filt -i` text of one of `demangled`, whole or with the return
  /// type before it left out (`void f<int>(int)` -> `f<int>(int)`; `R (*f<T>())(A)` -> `f<T>()`).
  struct CxxNames {
    private var whole: Set<String>
    private var bySuffix: [Substring: [String]] = [:]
    private var withPointerReturn: [String] = []

    init(_ demangled: [String]) {
      whole = Set(demangled)
      for name in demangled {
        bySuffix[name.suffix(16), default: []].append(name)
        if name.hasSuffix(")") && name.contains("))(") { withPointerReturn.append(name) }
      }
    }

    func explains(_ ours: String) -> Bool {
      if whole.contains(ours) { return true }
      for name in bySuffix[ours.suffix(16)] ?? [] where name.hasSuffix(ours) {
        let before = name.dropLast(ours.count).last
        if before == " " || before == "*" || before == "&" { return true }
      }
      for name in withPointerReturn {
        guard let range = name.firstRange(of: ours) else { continue }
        let before = name[..<range.lowerBound].last
        if (before == " " || before == "*" || before == "&") && name[range.upperBound...].hasPrefix(")") { return true }
      }
      return false
    }
  }
}
