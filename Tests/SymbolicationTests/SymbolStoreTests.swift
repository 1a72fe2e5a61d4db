import ImageLog
import ImageLogTestSupport
import ImageReaders
@testable import Symbolication
import Testing

/// The symbol store's pieces: Breakpad's names for a module's folder and file, debug ids read back
/// into UUIDs, and `STACK CFI` records made `.debug_frame` for the unwinder, read back by the CFI
/// engine to the rules the symbol file gives at every row (dump_syms' records of the system's libc,
/// and hand-made records with the expressions dump_syms does not write).
@Suite struct SymbolStoreTests {
  @Test func breakpadNamesOfModules() {
    #expect(SymbolStore.names(of: "/lib/x86_64-linux-gnu/libc.so.6") == ("libc.so.6", "libc.so.6.sym"))
    #expect(SymbolStore.names(of: "minidump-crashpad") == ("minidump-crashpad", "minidump-crashpad.sym"))
    #expect(SymbolStore.names(of: "C:\\build\\app.PDB") == ("app.PDB", "app.sym"))
    #expect(SymbolStore.names(of: "/srv/bin/server (deleted)") == ("server", "server.sym"))
  }

  @Test func debugIDsReadBack() {
    let buildID = BuildID((0..<20).map { UInt8($0 * 7 + 1) })
    #expect(SymbolStore.uuid(ofDebugID: buildID.breakpadDebugID()) == Array(buildID.bytes.prefix(16)))
    #expect(SymbolStore.uuid(ofDebugID: buildID.breakpadDebugID(age: 0x1F)) == Array(buildID.bytes.prefix(16)))
    for bad in ["", "0123", String(repeating: "G", count: 33), String(repeating: "0", count: 33),
                buildID.breakpadDebugID() + String(repeating: "0", count: 8)] {
      #expect(SymbolStore.uuid(ofDebugID: bad) == nil, "\(bad)")
    }
  }

  /// The symbol file `text` (its MODULE line added).
  static func symbols(_ text: String) throws -> BreakpadSymbolFile {
    let whole = "MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 test\n" + text
    return try ByteReader.reading(Array(whole.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
  }

  /// Every row of `section` as the CFI engine reads it, in Breakpad's words, against the symbol file's
  /// rules at the row's address. Returns the rows compared.
  @discardableResult
  static func expectSameRules(_ file: BreakpadSymbolFile, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    let section = try #require(BreakpadCallFrameSection(file), sourceLocation: sourceLocation)
    let names = try #require(Registers.breakpadNames(file.module.architecture))
    let table = CallFrameTable(memory: BufferMemory(section.bytes), address: 0, size: UInt64(section.bytes.count),
                               kind: .debugFrame, addressSize: section.addressSize)
    let (entries, complete) = table.entries()
    #expect(complete && entries.count == file.frameEntries.count, sourceLocation: sourceLocation)
    var compared = 0
    for (entry, record) in zip(entries, file.frameEntries) {
      #expect(entry.pcRange == record.address..<record.address + record.size, sourceLocation: sourceLocation)
      let rows = try #require(table.ruleRows(of: entry), sourceLocation: sourceLocation)
      for row in rows {
        var ours: [String: String] = [:]
        if case .registerOffset(let register, let offset) = row.cfa { ours[".cfa"] = "\(names[register]) \(offset) +" }
        for (register, rule) in row.rules {
          let name = register == row.returnAddressRegister ? ".ra" : names[register]
          switch rule {
          case .offset(let offset): ours[name] = ".cfa \(offset) + ^"
          case .valueOffset(let offset): ours[name] = ".cfa \(offset) +"
          case .register(let other): ours[name] = names[other]
          case .sameValue: ours[name] = names[register]
          default: ours[name] = "?"
          }
        }
        var theirs: [String: String] = [:]
        for (register, expression) in file.frameRules(at: row.location) ?? [] { theirs[register] = Self.plusForm(expression) }
        #expect(ours == theirs, "at 0x\(hexDigits(row.location))", sourceLocation: sourceLocation)
        compared += 1
      }
    }
    return compared
  }

  /// `X N -` (and `X N - ^`) as `X -N +`: the form the CFI engine's rows are written back in.
  static func plusForm(_ expression: String) -> String {
    var tokens = expression.split(separator: " ").map(String.init)
    let end = tokens.last == "^" ? tokens.count - 1 : tokens.count
    if end >= 3, tokens[end - 1] == "-", let value = Int64(tokens[end - 2]) {
      tokens[end - 2] = String(-value)
      tokens[end - 1] = "+"
    }
    return tokens.joined(separator: " ")
  }

  @Test func rulesOfHandMadeRecords() throws {
    let file = try Self.symbols("""
      STACK CFI INIT 1000 40 .cfa: $rsp 8 + .ra: .cfa -8 + ^
      STACK CFI 1001 .cfa: $rsp 16 + $rbp: .cfa -16 + ^
      STACK CFI 1004 .cfa: $rbp 16 +
      STACK CFI 1010 $rbx: $r12 $r13: $r13 $r14: .cfa -24 +
      STACK CFI INIT 2000 10 .cfa: $rsp 8 - .ra: .cfa 8 - ^

      """)
    #expect(try Self.expectSameRules(file) == 5)
  }

  /// The walk's entries made one at a time are the whole section's: for an address in each record,
  /// the CIE and that record's FDE, byte for byte, with the record's range; none outside every record.
  @Test func entriesMadeOnDemandAreTheWholeSections() throws {
    let file = try Self.symbols("""
      STACK CFI INIT 1000 40 .cfa: $rsp 8 + .ra: .cfa -8 + ^
      STACK CFI 1001 .cfa: $rsp 16 + $rbp: .cfa -16 + ^
      STACK CFI 1004 .cfa: $rbp 16 +
      STACK CFI INIT 2000 10 .cfa: $rsp 16 @ 8 + .ra: .cfa 8 - ^ $rbx: .cfa 4 * ^
      STACK CFI INIT 3000 8 .cfa: $rsp 8 + .ra: .cfa -8 + ^

      """)
    let whole = try #require(BreakpadCallFrameSection(file))
    let frames = try #require(BreakpadCallFrames(file))
    let table = CallFrameTable(memory: BufferMemory(whole.bytes), address: 0, size: UInt64(whole.bytes.count),
                               kind: .debugFrame, addressSize: 8)
    let entries = table.entries().entries
    try #require(entries.count == 3)
    let cie = frames.commonEntry
    #expect(Array(whole.bytes.prefix(cie.count)) == cie)
    for (index, address) in [UInt64(0x1005), 0x2000, 0x3007].enumerated() {
      let made = try #require(frames.section(covering: address))
      let start = Int(entries[index].offset), end = index + 1 < entries.count ? Int(entries[index + 1].offset) : whole.bytes.count
      #expect(made.bytes == cie + whole.bytes[start..<end], "entry \(index)")
      #expect(made.range == entries[index].pcRange)
    }
    #expect(frames.section(covering: 0x1040) == nil && frames.section(covering: 0xFFF) == nil)
  }

  @Test func expressionsBecomeDWARFExpressions() throws {
    let file = try Self.symbols("""
      STACK CFI INIT 1000 10 .cfa: $rsp 16 @ 8 + .ra: .cfa 8 - ^ $rbx: .cfa 4 * ^ $r12: $r12 2 /
      STACK CFI INIT 2000 10 .cfa: $rsp 8 + .ra: .cfa -8 + ^ $rbx: $T0 ^ $r13: 1 .cfa +

      """)
    let section = try #require(BreakpadCallFrameSection(file))
    let table = CallFrameTable(memory: BufferMemory(section.bytes), address: 0, size: UInt64(section.bytes.count),
                               kind: .debugFrame, addressSize: 8)
    let entries = table.entries().entries
    try #require(entries.count == 2)
    let row = try #require(table.ruleRows(of: entries[0])?.first)
    func bytes(_ address: UInt64, _ length: Int) -> [UInt8] { Array(section.bytes[Int(address)..<Int(address) + length]) }
    // $rsp 16 @ 8 +: breg7 0, consts 16, neg, and, consts 8, plus.
    guard case .expression(let address, let length) = row.cfa else { Issue.record("\(row.cfa)"); return }
    #expect(bytes(address, length) == [0x77, 0, 0x11, 16, 0x1F, 0x1A, 0x11, 8, 0x22])
    let rules = Dictionary(uniqueKeysWithValues: row.rules.map { ($0.register, $0.rule) })
    #expect(rules[16] == .offset(-8))
    // .cfa 4 * ^: the CFA is pushed first, then consts 4, mul; the address the register is saved at.
    guard case .expression(let saved, let savedLength)? = rules[3] else { Issue.record("\(String(describing: rules[3]))"); return }
    #expect(bytes(saved, savedLength) == [0x11, 4, 0x1E])
    // $r12 2 /: the value itself: breg12 0, consts 2, div.
    guard case .valueExpression(let value, let valueLength)? = rules[12] else { Issue.record("\(String(describing: rules[12]))"); return }
    #expect(bytes(value, valueLength) == [0x7C, 0, 0x11, 2, 0x1B])
    // A variable and .cfa past the start cannot be said: left out, the rest kept, the entry counted.
    let second = try #require(table.ruleRows(of: entries[1])?.first)
    #expect(second.cfa == .registerOffset(register: 7, offset: 8))
    #expect(second.rules.map(\.register) == [16])
    #expect(section.skippedRules == 1)
  }

  /// Records mutated at random (bytes flipped, lines cut) that still read become call frame
  /// information the CFI engine walks without trapping: whatever the rules say, the section is only
  /// ever what the records give, and the engine's bounds hold.
  @Test func mutatedRecordsOnlyGiveRulesOrNothing() throws {
    let original = Array("""
      MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 test
      STACK CFI INIT 1000 40 .cfa: $rsp 8 + .ra: .cfa -8 + ^
      STACK CFI 1001 .cfa: $rsp 16 + $rbp: .cfa -16 + ^
      STACK CFI 1004 .cfa: $rbp 16 + $rbx: $r12 $r12: .cfa 8 * ^ $r13: $r13 2 /
      STACK CFI 1010 .cfa: $rsp 16 @ 8 + $r14: .cfa -24 +
      STACK CFI INIT 2000 ffffffffffffffff .cfa: $rsp 8 - .ra: .cfa 8 - ^

      """.utf8)
    var generator = SeededGenerator(seed: 0x5EB0)
    var read = 0
    for _ in 0..<3_000 {
      var bytes = Array(original.prefix(Int.random(in: 60...original.count, using: &generator)))
      for _ in 0..<Int.random(in: 1...3, using: &generator) {
        let index = Int.random(in: 0..<bytes.count, using: &generator)
        bytes[index] = Bool.random(using: &generator) ? bytes[index] ^ (1 << UInt8.random(in: 0...7, using: &generator))
          : Array("0123456789abcdef$.+-*/%@^: \n".utf8).randomElement(using: &generator) ?? 0x20
      }
      guard let file = try? ByteReader.reading(bytes, { reader throws(FormatError) in try BreakpadSymbolFile(reader) }),
            let section = BreakpadCallFrameSection(file) else { continue }
      let table = CallFrameTable(memory: BufferMemory(section.bytes), address: 0, size: UInt64(section.bytes.count),
                                 kind: .debugFrame, addressSize: section.addressSize)
      for entry in table.entries().entries { _ = table.ruleRows(of: entry) }
      read += 1
    }
    #expect(read > 500, "only \(read) mutations read")
  }

  @Test(.enabled(if: pipelineTool("dump_syms") != nil && readFileBytes("/lib/x86_64-linux-gnu/libc.so.6") != nil,
                 "needs dump_syms (Scripts/install-test-tools) and an x86_64 libc"))
  func rulesOfDumpSymsRecordsForLibc() throws {
    let run = try runChild([try #require(pipelineTool("dump_syms")), "/lib/x86_64-linux-gnu/libc.so.6"])
    try #require(run.exitCode == 0, "dump_syms: \(run.error)")
    let file = try ByteReader.reading(Array(run.output.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    #expect(file.frameEntries.count > 1000)
    let compared = try Self.expectSameRules(file)
    #expect(compared >= file.frameEntries.count + file.frameDeltas.count / 2, "\(compared) rows")
  }
}
