import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// The `.sym` reader over the hand-written fixtures of Scripts/make-breakpad-fixtures (every lookup
/// checked against the records by eye), a table of malformed records with their exact errors, the
/// order and placement it tolerates, and seeded mutations that may only throw `FormatError`. The
/// reader is also run over every file dump_syms and imagelog write in BreakpadSymbolsTests.
@Suite struct BreakpadSymbolFileTests {
  static func read(_ text: String) throws(FormatError) -> BreakpadSymbolFile {
    try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
  }

  static func fixture(_ name: String) throws -> BreakpadSymbolFile {
    let bytes = try Fixtures.bytes("breakpad/" + name)
    return try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
  }

  @Test(arguments: ["sample.sym", "sample-crlf.sym"])
  func readsEveryRecordKind(_ name: String) throws {
    let file = try Self.fixture(name)
    #expect(file.module == .init(operatingSystem: "Linux", architecture: "x86_64", id: "DD994A3E3DA41093E55ED148582AA35A0",
                                 name: "sample"))
    #expect(file.codeID == "3E4A99DDA43D9310E55ED148582AA35A110B1CEB")
    #expect(file.files == [0: "/src/vector.h", 1: "/src/main.c", 2: "/src/shapes.h"])
    #expect(file.inlineOrigins[2] == "shapes::area(long) const")
    #expect(file.functions.map(\.name) == ["main", "shapes::total(int)"])
    #expect(file.functions.map(\.isMultiple) == [false, true])
    #expect(file.functions[0].lines.count == 7 && file.functions[0].inlines.count == 2)
    #expect(file.inlineRanges[file.inlines[0].ranges] == [0x1070..<0x1080, 0x1090..<0x1098])
    #expect(file.publics.map(\.name) == ["_init", "helper_without_lines", "_fini"])
    #expect(file.frameEntries.count == 2 && file.frameDeltas.count == 3 && file.skippedWindowsFrames == 1)
    #expect(file.notes.isEmpty, "\(file.notes)")
  }

  @Test func sourceFramesOfAnAddress() throws {
    let file = try Self.fixture("sample.sym")
    typealias Frame = BreakpadSymbolFile.SourceFrame
    // Two inlined levels: vec2_dot (vector.h:3) inlined at vector.h:9 into vec2_length_squared,
    // inlined at main.c:18 into main.
    #expect(file.frames(at: 0x1076) == [
      Frame(function: "vec2_dot", file: "/src/vector.h", line: 3, isInlined: true, functionAddress: 0x1060),
      Frame(function: "vec2_length_squared", file: "/src/vector.h", line: 9, isInlined: true, functionAddress: 0x1060),
      Frame(function: "main", file: "/src/main.c", line: 18, isInlined: false, functionAddress: 0x1060),
    ])
    // The second range of the depth-0 call.
    #expect(file.frames(at: 0x1092).map(\.function) == ["vec2_length_squared", "main"])
    #expect(file.frames(at: 0x1092).map(\.line) == [9, 18])
    #expect(file.frames(at: 0x1065) == [Frame(function: "main", file: "/src/main.c", line: 14, isInlined: false,
                                              functionAddress: 0x1060)])
    #expect(file.frames(at: 0x10c9).map { "\($0.function) \($0.file ?? "-"):\($0.line ?? 0)" }
            == ["shapes::area(long) const /src/shapes.h:40", "shapes::total(int) /src/shapes.h:30"])
    // PUBLIC records: the nearest at or below when no FUNC holds the address.
    #expect(file.frames(at: 0x10a4) == [Frame(function: "helper_without_lines", file: nil, line: nil, isInlined: false,
                                              functionAddress: 0x10a0)])
    #expect(file.frames(at: 0x1004).map(\.function) == ["_init"])
    #expect(file.frames(at: 0x1234).map(\.function) == ["_fini"])
    #expect(file.frames(at: 0xfff).isEmpty)
    #expect(file.publicSymbol(at: 0x1070) == nil, "a FUNC holds it")
  }

  @Test func frameRulesAtAnAddress() throws {
    let file = try Self.fixture("sample.sym")
    func rules(_ address: UInt64) -> [String]? { file.frameRules(at: address)?.map { "\($0.register): \($0.expression)" } }
    #expect(rules(0x1060) == [".cfa: $rsp 8 +", ".ra: .cfa -8 + ^"])
    #expect(rules(0x1061) == [".cfa: $rsp 16 +", ".ra: .cfa -8 + ^", "$rbx: .cfa -16 + ^"])
    #expect(rules(0x1075) == [".cfa: $rsp 48 +", ".ra: .cfa -8 + ^", "$rbx: .cfa -16 + ^"])
    #expect(rules(0x109f) == [".cfa: $rsp 8 +", ".ra: .cfa -8 + ^", "$rbx: .cfa -16 + ^"])
    #expect(rules(0x10a0) == nil, "past the INIT record's range")
    #expect(rules(0x10c0) == [".cfa: $rsp 8 +", ".ra: .cfa -8 + ^"])
    #expect(rules(0x1000) == nil)
  }

  /// Out of order and misplaced records are read with a note naming their line.
  @Test func toleratesOrderAndPlacement() throws {
    let file = try Self.fixture("unordered.sym")
    #expect(file.module.name == "unordered name with spaces" && file.module.operatingSystem == "mac")
    #expect(file.functions.map(\.name) == ["early", "outer", "overlapping"])
    #expect(file.lines[file.functions[0].lines].map(\.address) == [0x1000, 0x1008], "sorted by address")
    #expect(file.files == [0: "/src/b.c"])
    #expect(file.publics.map(\.name) == ["first", "late"])
    #expect(file.function(containing: 0x2045)?.name == "overlapping")
    #expect(file.function(containing: 0x2060)?.name == "outer", "past the nearest start's end: the enclosing FUNC")
    #expect(file.frameEntries.map(\.address) == [0x1000, 0x2000])
    #expect(file.frameRules(at: 0x2015)?.map(\.expression) == ["sp 32 +", ".cfa -8 + ^", ".cfa -16 + ^"])
    #expect(file.frameRules(at: 0x2025)?.first?.expression == "sp 48 +")
    let notes = file.notes.joined(separator: "\n")
    for expected in ["line 2: a line record before any FUNC is ignored", "line 4: FILE 0 again",
                     "line 15: 'RECORD-KIND-FROM-THE-FUTURE' is not a record kind", "line 19: STACK CFI at 2200 is outside",
                     "out of order: sorted", "1 FUNC records overlap"] {
      #expect(notes.contains(expected), "no note \(expected) in:\n\(notes)")
    }
  }

  @Test(arguments: [
    ("", FormatError.breakpad(line: 1, "no MODULE record: not a Breakpad symbol file")),
    ("\n\n", .breakpad(line: 1, "no MODULE record: not a Breakpad symbol file")),
    ("FUNC 10 2 0 f\n", .breakpad(line: 1, "the first record is 'FUNC', not MODULE: not a Breakpad symbol file")),
    ("\u{7f}ELF\u{2}\u{1}\u{1}\n", .breakpad(line: 1, "the first record is '\u{7f}ELF\u{2}\u{1}\u{1}', not MODULE: not a Breakpad symbol file")),
    ("MODULE Linux x86_64\n", .breakpad(line: 1, "MODULE needs an operating system, an architecture, an id and a name")),
    ("MODULE L x 0 n\nFUNC zz 2 0 f\n", .breakpad(line: 2, "FUNC address 'zz' is not hex")),
    ("MODULE L x 0 n\r\nFUNC 10 2\r\n", .breakpad(line: 2, "FUNC has no parameter size")),
    ("MODULE L x 0 n\nFUNC 10000000000000000 2 0 f\n",
     .breakpad(line: 2, "FUNC address '10000000000000000' has more than 16 hex digits")),
    ("MODULE L x 0 n\nFILE 4294967296 a\n", .breakpad(line: 2, "FILE number '4294967296' does not fit in 32 bits")),
    ("MODULE L x 0 n\nFILE -1 a\n", .breakpad(line: 2, "FILE number '-1' is not a decimal number")),
    ("MODULE L x 0 n\nFUNC 10 2 0 f\nINLINE 0 1 0 0 10\n", .breakpad(line: 3, "INLINE range at 10 has no size")),
    ("MODULE L x 0 n\nFUNC 10 2 0 f\nINLINE 0 1 0 0\n", .breakpad(line: 3, "INLINE without an address range")),
    ("MODULE L x 0 n\nFUNC 10 2 0 f\n10 2 3\n", .breakpad(line: 3, "line record has no file number")),
    ("MODULE L x 0 n\nFUNC 10 2 0 f\n10 2 x 1\n", .breakpad(line: 3, "line record line 'x' is not a decimal number")),
    ("MODULE L x 0 n\nSTACK\n", .breakpad(line: 2, "STACK without CFI or WIN")),
    ("MODULE L x 0 n\nSTACK CFI INIT 10\n", .breakpad(line: 2, "STACK CFI INIT has no size")),
    ("MODULE L x 0 n\nINFO CODE_ID\n", .breakpad(line: 2, "INFO CODE_ID without a value")),
  ])
  func rejects(_ text: String, _ expected: FormatError) {
    #expect(throws: expected) { try Self.read(text) }
  }

  /// Numbers the file states are never sizes the reader allocates: huge FILE numbers, a FUNC covering
  /// the whole address space, INLINE ranges to the top. Lookups still answer.
  @Test func hugeClaimsCostNothing() throws {
    let text = """
      MODULE Linux x86_64 0 huge
      FILE 4294967295 /far.c
      INLINE_ORIGIN 4294967295 far
      FUNC 0 ffffffffffffffff ffffffffffffffff everything
      INLINE 4294967295 4294967295 4294967295 4294967295 fffffffffffffff0 ffffffffffffffff
      fffffffffffffff0 ffffffffffffffff 4294967295 4294967295
      STACK CFI INIT fffffffffffffff0 ffffffffffffffff .cfa: $rsp 8 +
      STACK CFI ffffffffffffffff .cfa: $rsp 16 +
      """
    let file = try Self.read(text)
    #expect(file.files.count == 1 && file.functions.count == 1 && file.inlineRanges == [0xffff_ffff_ffff_fff0..<UInt64.max])
    #expect(file.frames(at: 0xffff_ffff_ffff_fff8).map(\.function) == ["far", "everything"])
    #expect(file.frames(at: 0xffff_ffff_ffff_fff8).first?.file == "/far.c")
    #expect(file.frameRules(at: .max)?.first?.expression == "$rsp 16 +")
  }

  /// Read on demand (as symbol stores read files), every lookup answers as reading everything does:
  /// at each record's edges and every line record's address, in the hand-written fixtures (the
  /// unordered one: lines, rows, FUNCs, FILE numbers out of order and misplaced) and in the .sym
  /// files of the field dumps (Breakpad's and rust-minidump's, dump_syms' order).
  @Test func onDemandAnswersAsEverything() throws {
    let names = Fixtures.all(in: "breakpad") + Fixtures.all(in: "minidump-field").filter { $0.hasSuffix(".sym") }
    try #require(names.count >= 8, "\(names)")
    var probed = 0
    for name in names {
      let bytes = try Fixtures.bytes(name)
      let whole = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
      let lazy = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader, reading: .onDemand) }
      // As a store reads it: the bytes kept (a mapped file's), not a copy.
      let pinned = try BreakpadSymbolFile(bytes.withUnsafeBytes { CopiedBytes($0) }, reading: .onDemand)
      #expect(lazy.module == whole.module && lazy.codeID == whole.codeID, "\(name)")
      #expect(lazy.functions.map(\.address) == whole.functions.map(\.address), "\(name)")
      #expect(lazy.frameEntries.map(\.address) == whole.frameEntries.map(\.address), "\(name)")
      #expect(lazy.lines.isEmpty && lazy.frameDeltas.isEmpty, "\(name): line records and rows wait for a lookup")
      var probes: [UInt64] = [0, .max]
      for function in whole.functions {
        probes += [function.address, function.address &+ 1, function.address &+ function.size / 2,
                   function.address &+ function.size &- 1, function.address &+ function.size]
        // Some line records of each function (each lookup on demand reads its function's records).
        let lines = whole.lines[function.lines]
        for index in stride(from: lines.startIndex, to: lines.endIndex, by: max(1, lines.count / 6)) {
          probes += [lines[index].address, lines[index].address &+ lines[index].size &- 1]
        }
      }
      probes += whole.publics.flatMap { [$0.address, $0.address &+ 1] }
      for entry in whole.frameEntries {
        probes += [entry.address, entry.address &+ entry.size &- 1] + whole.frameDeltas[entry.deltas].map(\.address)
      }
      for address in probes {
        guard whole.frames(at: address) == lazy.frames(at: address), whole.frames(at: address) == pinned.frames(at: address) else {
          Issue.record("\(name) at \(String(address, radix: 16)): \(lazy.frames(at: address)), reading everything \(whole.frames(at: address))")
          break
        }
        let (a, b) = (whole.frameRules(at: address), lazy.frameRules(at: address))
        let c = pinned.frameRules(at: address)
        guard a?.map({ "\($0.register)=\($0.expression)" }) == b?.map({ "\($0.register)=\($0.expression)" }),
              a?.map({ "\($0.register)=\($0.expression)" }) == c?.map({ "\($0.register)=\($0.expression)" }) else {
          Issue.record("\(name) at \(String(address, radix: 16)): rules \(String(describing: b)), reading everything \(String(describing: a))")
          break
        }
      }
      probed += probes.count
    }
    #expect(probed > 5_000, "\(probed) probes")
  }

  /// On demand, what is not read is not checked: a malformed line record reads as none (its FUNC
  /// still names the address), a malformed row as the rows before it; the records read at once
  /// (MODULE, FUNC, STACK CFI INIT) still fail the file with the error naming their line.
  @Test func onDemandChecksWhatItReads() throws {
    func lazy(_ text: String) throws(FormatError) -> BreakpadSymbolFile {
      try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader, reading: .onDemand) }
    }
    let text = """
      MODULE Linux x86_64 0 m
      FUNC 10 8 0 f
      10 2 x 1
      STACK CFI INIT 10 8 .cfa: $rsp 8 +
      STACK CFI 12 .cfa: $rsp 16 +
      STACK CFI zz .cfa: $rsp 24 +
      """
    #expect(throws: FormatError.breakpad(line: 3, "line record line 'x' is not a decimal number")) { try Self.read(text) }
    let file = try lazy(text)
    #expect(file.frames(at: 0x10) == [.init(function: "f", file: nil, line: nil, isInlined: false, functionAddress: 0x10)])
    #expect(file.frameRules(at: 0x17)?.first?.expression == "$rsp 16 +")
    #expect(throws: FormatError.breakpad(line: 2, "FUNC address 'zz' is not hex")) { try lazy("MODULE L x 0 n\nFUNC zz 2 0 f\n") }
    #expect(throws: FormatError.breakpad(line: 2, "STACK CFI INIT has no size")) { try lazy("MODULE L x 0 n\nSTACK CFI INIT 10\n") }
    #expect(throws: FormatError.breakpad(line: 1, "no MODULE record: not a Breakpad symbol file")) { try lazy("") }
  }

  /// Seeded truncations, bit flips and overwrites of each fixture: the reader returns or throws
  /// `FormatError`, and every lookup on what it returns answers without trapping.
  @Test func mutationsOnlyThrow() throws {
    let names = Fixtures.all(in: "breakpad")
    try #require(names.count >= 3)
    var rng = SeededGenerator(seed: 0x5B_2026)
    var read = 0, rejected = 0
    for name in names {
      let original = try Fixtures.bytes(name)
      for round in 0..<MutationTests.perFixture {
        let bytes = MutationTests.mutate(original, MutationTests.Mutation.allCases[round % MutationTests.Mutation.allCases.count], &rng)
        do {
          func probe(_ file: BreakpadSymbolFile) {
            var probes: [UInt64] = [0, .max]
            probes += file.functions.flatMap { [$0.address, $0.address &+ 1, $0.address &+ $0.size] }
            probes += file.publics.map(\.address) + file.frameEntries.map { $0.address &+ 1 }
            for address in probes {
              _ = file.frames(at: address)
              _ = file.frameRules(at: address)
            }
          }
          // On demand, the records read later are read by the lookups (malformed ones among them).
          if let lazy = try? ByteReader.reading(bytes, { reader throws(FormatError) in try BreakpadSymbolFile(reader, reading: .onDemand) }) {
            probe(lazy)
          }
          let file = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
          probe(file)
          read += 1
        } catch {
          rejected += 1
        }
      }
    }
    #expect(read + rejected == names.count * MutationTests.perFixture)
    #expect(read > 0 && rejected > 0, "mutations should both break and spare files (\(read) read, \(rejected) rejected)")
  }

  /// Records out of order are sorted stably (equal addresses keep the file's order) whether they come
  /// in a few sorted parts (merged) or in many (sorted whole): as the standard library's sort of
  /// (address, position) pairs orders them.
  @Test func outOfOrderRecordsSortStably() {
    var rng = SeededGenerator(seed: 0x50A7)
    for round in 0..<400 {
      let runs = round < 200 ? Int.random(in: 1...BreakpadSymbolFile.mergedRuns, using: &rng) : Int.random(in: 9...40, using: &rng)
      var items: [(key: UInt64, position: Int)] = []
      for _ in 0..<runs {
        var key = UInt64.random(in: 0...50, using: &rng)
        for _ in 0..<Int.random(in: 0...30, using: &rng) {
          items.append((key, items.count))
          key += UInt64.random(in: 0...3, using: &rng)  // equal keys too
        }
      }
      let ours = BreakpadSymbolFile.stableSorted(items, by: { $0.key }).map(\.position)
      let reference = items.sorted { ($0.key, $0.position) < ($1.key, $1.position) }.map(\.position)
      #expect(ours == reference, "round \(round)")
    }
  }
}
