import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// `STACK WIN` records: read and kept as rust-minidump's breakpad-symbols keeps them (its own counts
/// for Breakpad's `test_app.sym`), and the caller's registers their programs and FPO rule give, each
/// case worked by hand from the rules in rust-minidump's `sym_file/walker.rs` (the frame data example
/// there among them). Hostile programs give no caller; they never trap or run long.
@Suite struct BreakpadWindowsFramesTests {
  typealias Registers = BreakpadWindowsFrames.Registers
  typealias Record = BreakpadWindowsFrames.Record

  static func read(_ text: String) throws(FormatError) -> BreakpadWindowsFrames {
    try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadWindowsFrames(reader) }
  }

  /// Stack words by address; any other address is unreadable.
  static func memory(_ words: [UInt64: UInt32]) -> (UInt64) -> UInt32? { { words[$0] } }

  static func run(_ program: String, _ callee: Registers, _ words: [UInt64: UInt32] = [:], locals: UInt32 = 0,
                  savedRegisters: UInt32 = 0, parameters: UInt32 = 0, grandCallee: UInt32 = 0) -> Registers? {
    let record = Record(address: 0x1000, size: 0x10, parameterSize: parameters, savedRegisterSize: savedRegisters,
                        localSize: locals, program: program)
    return BreakpadWindowsFrames.caller(of: callee, by: record, grandCalleeParameterSize: grandCallee, hasGrandCallee: true,
                                        read: memory(words))
  }

  /// walker.rs's worked example: ebp 16, esp 1600 give ebp *16, esp 24, eip *20.
  @Test func theStandardPrologueProgram() {
    let callee = Registers(eip: 0x40_1000, esp: 1600, ebp: 16)
    let words: [UInt64: UInt32] = [16: 0xAAAA, 20: 0x40_2000]
    let expected = Registers(eip: 0x40_2000, esp: 24, ebp: 0xAAAA)
    #expect(Self.run("$T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =", callee, words) == expected)
    // test_app.sym's form of it, with locals and parameters as variables that are not registers.
    #expect(Self.run("$T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + = $L $T0 .cbSavedRegs - = $P $T0 8 + .cbParams + =",
                     callee, words, savedRegisters: 4, parameters: 8) == expected)
    // `=NAME` as some toolchains write `= NAME`.
    #expect(Self.run("$T0 $ebp = $eip $T0 4 + ^ =$ebp $T0 ^ = $esp $T0 8 + =", callee, words) == expected)
  }

  /// `.raSearchStart` is esp plus locals, saved registers and the grand-callee's parameters; ebx is
  /// kept when the callee's is known (it starts as a variable), esi and edi are not.
  @Test func theReturnAddressSearchStart() {
    let callee = Registers(eip: 0x40_1000, esp: 0x1000, ebp: 0x5000, ebx: 7, esi: 8, edi: 9)
    let caller = Self.run("$T2 $esp .cbLocals + .cbSavedRegs + = $T0 .raSearchStart = $eip $T0 ^ = $esp $T0 4 + =",
                          callee, [0x1018: 0x40_3000], locals: 4, savedRegisters: 8, grandCallee: 0xC)
    #expect(caller == Registers(eip: 0x40_3000, esp: 0x101C, ebp: 0x5000, ebx: 7))
  }

  /// A program that aligns the stack (`@`) takes the return address from ebp + 4, not esp.
  @Test func anAligningProgramSearchesFromEbp() {
    let callee = Registers(eip: 0x40_1000, esp: 0x1000, ebp: 0x2004)
    let caller = Self.run("$T0 .raSearch = $eip $T0 ^ = $esp $T0 4 + = $ebx $esp 16 @ =", callee, [0x2008: 0x40_4000],
                          locals: 0x100)
    #expect(caller == Registers(eip: 0x40_4000, esp: 0x200C, ebp: 0x2004, ebx: 0x2000))
  }

  @Test func undefMakesARegisterUnknown() {
    let caller = Self.run("$eip $esp ^ = $esp $esp 4 + = $ebp .undef =", Registers(eip: 1, esp: 0x100, ebp: 0x200),
                          [0x100: 0x40_0000])
    #expect(caller == Registers(eip: 0x40_0000, esp: 0x104))
  }

  @Test(arguments: [
    "$eip foo =",                 // a token that is neither operator, variable nor number
    "$eip 1 0 / =", "$eip 1 0 % =",
    "+",                          // too few operands
    "$eip $T9 =",                 // a variable never set
    "5 3 =",                      // assigning to a number
    "$eip $esp 12 @ =",           // alignment by a non-power of two
    "$eip $esp 0 @ =",
    "$eip 64 ^ =",                // unreadable memory
    "$eip 99999999999 =",         // a number past 32 bits
    "$eip .undef ^ =",
  ])
  func aFailingProgramGivesNoCaller(_ program: String) {
    #expect(Self.run(program, Registers(eip: 1, esp: 0x100, ebp: 0x200)) == nil)
  }

  @Test func aProgramPastTheTokenCapIsNotRun() {
    let long = Array(repeating: "1", count: BreakpadWindowsFrames.maximumTokens + 1).joined(separator: " ")
    #expect(Self.run(long, Registers(eip: 1, esp: 0x100, ebp: 0x200)) == nil)
    #expect(Self.run("$eip 1 =", Registers(eip: 1, esp: 0x100)) == nil)  // ebp is needed
  }

  /// FPO: the return address above locals, saved registers and the grand-callee's parameters; ebp
  /// from below the saved registers when the function took it, else kept with ebx.
  @Test func fpoRecords() {
    let callee = Registers(eip: 0x40_1000, esp: 0x1000, ebp: 0x3000, ebx: 5, esi: 6)
    var record = Record(address: 0, size: 0x20, savedRegisterSize: 4, localSize: 8)
    let words: [UInt64: UInt32] = [0x1018: 0x40_5000, 0x1008: 0x4444, 0x101C: 0x40_6000, 0x100C: 0x40_1000]
    func caller(grandCallee: UInt32 = 0xC, hasGrandCallee: Bool = true, _ words: [UInt64: UInt32]) -> Registers? {
      BreakpadWindowsFrames.caller(of: callee, by: record, grandCalleeParameterSize: grandCallee,
                                   hasGrandCallee: hasGrandCallee, read: Self.memory(words))
    }
    #expect(caller(words) == Registers(eip: 0x40_5000, esp: 0x101C, ebp: 0x3000, ebx: 5))
    record.allocatesBasePointer = true
    #expect(caller(words) == Registers(eip: 0x40_5000, esp: 0x101C, ebp: 0x4444))
    record.allocatesBasePointer = false
    // Frame 0 with its own pc left on the stack by a system call: the next word is the caller.
    var leftover = words
    leftover[0x100C] = 0x40_1000
    leftover[0x1010] = 0x40_7000
    #expect(caller(grandCallee: 0, hasGrandCallee: false, leftover) == Registers(eip: 0x40_7000, esp: 0x1014, ebp: 0x3000, ebx: 5))
    #expect(caller(grandCallee: 0, hasGrandCallee: true, leftover) == Registers(eip: 0x40_1000, esp: 0x1010, ebp: 0x3000, ebx: 5))
    #expect(caller([:]) == nil)
  }

  /// Records kept as rust-minidump keeps them: a later start shortens the record before it, a record
  /// inside a kept one is left out, a type that disagrees with has_program_string and a zero size are
  /// left out; frame data is found before FPO.
  @Test func recordsKeptAsRustMinidumpKeepsThem() throws {
    let frames = try Self.read("""
      MODULE windows x86 5A9832E5287241C1838ED98914E9B7FF1 test.pdb
      STACK WIN 4 1000 30 0 0 0 0 0 0 1 $eip $esp ^ = $esp $esp 4 + =
      STACK WIN 4 1010 20 0 0 0 0 0 0 1 $eip $esp 4 + ^ = $esp $esp 8 + =
      STACK WIN 4 1005 4 0 0 0 0 0 0 1 $eip 0 =
      STACK WIN 0 1000 8 0 0 0 0 0 0 0 0
      STACK WIN 0 2000 10 0 0 c 4 8 0 0 1
      STACK WIN 4 3000 10 0 0 0 0 0 0 0 1
      STACK WIN 5 4000 10 0 0 0 0 0 0 0 0
      STACK WIN 4 5000 0 0 0 0 0 0 0 1 $eip 0 =
      FUNC 1000 30 0 f

      """)
    #expect(frames.record(covering: 0x1004)?.program == "$eip $esp ^ = $esp $esp 4 + =")
    #expect(frames.record(covering: 0x100F)?.size == 0x10)
    #expect(frames.record(covering: 0x1010)?.program == "$eip $esp 4 + ^ = $esp $esp 8 + =")
    #expect(frames.record(covering: 0x102F)?.address == 0x1010)
    #expect(frames.record(covering: 0x1030) == nil)
    #expect(frames.record(covering: 0x2008) == Record(address: 0x2000, size: 0x10, parameterSize: 0xC, savedRegisterSize: 4,
                                                      localSize: 8, allocatesBasePointer: true))
    #expect(frames.record(covering: 0x3000) == nil && frames.record(covering: 0x4000) == nil && frames.record(covering: 0x5000) == nil)
    #expect(frames.records.count == 4)
    #expect(frames.notes.count == 3, "\(frames.notes)")
  }

  /// Random record lists, in order and not, overlapping, adjacent and repeated, keep the entries the
  /// sort-then-keep of before kept (the reference below): the in-order shortcut changes nothing.
  @Test func keptEntriesAsBefore() {
    func reference(_ list: [Record]) -> [(UInt64, UInt64, Record)] {
      let sorted = list.compactMap { record in record.lastAddress.map { (record.address, $0, record) } }
        .enumerated().sorted { ($0.element.0, $0.element.1, $0.offset) < ($1.element.0, $1.element.1, $1.offset) }
      var entries: [(UInt64, UInt64, Record)] = []
      for (_, entry) in sorted {
        if let previous = entries.last {
          if entry.0 <= previous.1, entry.2 != previous.2 { continue }
          let (next, overflow) = previous.1.addingReportingOverflow(1)
          if entry.0 <= (overflow ? previous.1 : next), entry.2 == previous.2 {
            entries[entries.count - 1].1 = max(previous.1, entry.1)
            continue
          }
        }
        entries.append(entry)
      }
      return entries
    }
    var rng = SeededGenerator(seed: 0x4B3E)
    for round in 0..<2_000 {
      var list: [Record] = []
      var address = UInt64.random(in: 0...0x40, using: &rng)
      for _ in 0..<Int.random(in: 0...12, using: &rng) {
        let record = Record(address: address, size: UInt64.random(in: 0...0x20, using: &rng),
                            parameterSize: UInt32.random(in: 0...1, using: &rng))
        list.append(record)
        if Int.random(in: 0..<5, using: &rng) == 0 { list.append(record) }
        address = round % 2 == 0 ? address + UInt64.random(in: 0...0x20, using: &rng) : UInt64.random(in: 0...0x80, using: &rng)
      }
      if round % 7 == 0 { list.append(Record(address: .max - 3, size: 8)) }
      let ours = BreakpadWindowsFrames.kept(list).map { "\($0.first) \($0.last) \($0.record)" }
      #expect(ours == reference(list).map { "\($0.0) \($0.1) \($0.2)" }, "round \(round)")
    }
  }

  @Test(arguments: [
    ("STACK WIN 4 1000", FormatError.breakpad(line: 2, "STACK WIN has no code size")),
    ("STACK WIN 4 zz 10 0 0 0 0 0 0 1 x", .breakpad(line: 2, "STACK WIN address \"zz\" is not hex")),
    ("STACK WIN 4 10 123456789 0 0 0 0 0 0 1 x", .breakpad(line: 2, "STACK WIN code size \"123456789\" has more than 8 hex digits")),
    ("STACK WIN 4 10 1 0 0 0 0 0 0 y x", .breakpad(line: 2, "STACK WIN has_program_string \"y\" is not a digit")),
    ("STACK WIN 4 10 1 0 0 0 0 0 0", .breakpad(line: 2, "STACK WIN has no has_program_string")),
  ])
  func malformedRecords(_ line: String, _ expected: FormatError) {
    #expect(throws: expected) { try Self.read("MODULE windows x86 0 t\n\(line)\n") }
  }

  /// Breakpad's `test_app.sym` (1556 frame data and 259 FPO records, overlapping in the ways PDBs
  /// overlap them): rust-minidump's own test expects 1556 and 259 ranges kept, the first at 0x41b0.
  @Test func breakpadsTestApp() throws {
    let path = "minidump-field/breakpad/symbols/test_app.pdb/5A9832E5287241C1838ED98914E9B7FF1/test_app.sym"
    let frames = try ByteReader.reading(try Fixtures.bytes(path)) { reader throws(FormatError) in try BreakpadWindowsFrames(reader) }
    #expect(frames.records.filter { $0.program != nil }.count == 1556)
    #expect(frames.records.filter { $0.program == nil }.count == 259)
    #expect(frames.record(covering: 0x41B0)?.address == 0x41B0)
    // Every record's walk from any registers only gives a caller or none.
    var rng = SeededGenerator(seed: 0x57AC)
    for record in frames.records {
      let callee = Registers(eip: UInt32.random(in: 0...UInt32.max, using: &rng), esp: UInt32.random(in: 0...UInt32.max, using: &rng),
                             ebp: UInt32.random(in: 0...UInt32.max, using: &rng), ebx: nil)
      for grandCallee in [0, UInt32.max] {
        _ = BreakpadWindowsFrames.caller(of: callee, by: record, grandCalleeParameterSize: grandCallee, hasGrandCallee: false,
                                         read: { UInt32(truncatingIfNeeded: $0 &* 0x9E37_79B9) })
      }
    }
  }

  /// Read from the bytes a symbol file read on demand keeps, over only the lines its reader saw `STACK
  /// WIN` on: the same records, notes and errors (with the same line numbers) as a pass over the whole
  /// file; a file read whole keeps no bytes (nil: the caller reads the file), one without records gives
  /// none.
  @Test func fromTheSymbolFilesOwnBytes() throws {
    let path = "minidump-field/breakpad/symbols/test_app.pdb/5A9832E5287241C1838ED98914E9B7FF1/test_app.sym"
    let bytes = try Fixtures.bytes(path)
    let whole = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadWindowsFrames(reader) }
    let onDemand = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader, reading: .onDemand) }
    let fromSymbols = try #require(try BreakpadWindowsFrames(in: onDemand))
    #expect(fromSymbols.records == whole.records && fromSymbols.notes == whole.notes)
    #expect(fromSymbols.records.count == 1556 + 259)
    let everything = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    #expect(try BreakpadWindowsFrames(in: everything) == nil)
    let none = try ByteReader.reading(Array("MODULE windows x86 0 t\nPUBLIC 10 0 f\n".utf8)) { reader throws(FormatError) in
      try BreakpadSymbolFile(reader, reading: .onDemand)
    }
    #expect(try BreakpadWindowsFrames(in: none)?.records.isEmpty == true)
    // Records apart, with other lines between and after them; the bad one named by its line in the file.
    let text = "MODULE windows x86 0 t\nSTACK WIN 4 10 8 0 0 0 0 0 0 0\nPUBLIC 10 0 f\nFUNC 20 4 0 g\n"
      + "STACK WIN 4 zz 10 0 0 0 0 0 0 1 x\nPUBLIC 40 0 h\n"
    let damaged = try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in
      try BreakpadSymbolFile(reader, reading: .onDemand)
    }
    #expect(throws: FormatError.breakpad(line: 5, "STACK WIN address \"zz\" is not hex")) { try BreakpadWindowsFrames(in: damaged) }
  }

  /// Programs cut and bit-flipped from test_app.sym's give a caller or none, never a trap.
  @Test func mutatedProgramsOnlyFail() throws {
    var rng = SeededGenerator(seed: 0x3A1)
    let program = Array("$T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + = $L $T0 .cbSavedRegs - = $P $T0 8 + .cbParams + =".utf8)
    let callee = Registers(eip: 0x40_1000, esp: 0xFFFF_FFF0, ebp: 0xFFFF_FFFC, ebx: 0)
    for _ in 0..<2_000 {
      var bytes = Array(program.prefix(Int.random(in: 0...program.count, using: &rng)))
      if let index = bytes.indices.randomElement(using: &rng) { bytes[index] ^= 1 << UInt8.random(in: 0...7, using: &rng) }
      _ = Self.run(String(decoding: bytes, as: UTF8.self), callee, locals: .max, savedRegisters: .max, grandCallee: .max)
    }
  }
}
