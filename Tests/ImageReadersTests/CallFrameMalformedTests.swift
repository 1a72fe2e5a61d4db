import ImageLogTestSupport
@testable import ImageReaders
import Testing

/// Hand-made `.eh_frame` bytes broken one way each, with the exact error; DWARF expressions as CFI
/// uses them (glibc's PLT rule evaluated over real bytes, memory through the injected reader, loops
/// and overflows bounded); and mutations of a real `.eh_frame` / `.eh_frame_hdr` that may only throw.
@Suite struct CallFrameMalformedTests {
  /// A CIE: version 1, "zR", code alignment 1, data alignment -8, return address column 16,
  /// FDE addresses pcrel|sdata4; initial rules CFA = rsp + 8, ra at CFA - 8.
  static let cieBody: [UInt8] = [1] + Array("zR".utf8) + [0, 1, 0x78, 16, 1, 0x1B, 0x0C, 7, 8, 0x90, 1]

  static func entry(id: UInt32, _ body: [UInt8]) -> [UInt8] {
    let length = UInt32(4 + body.count)
    return le32(length) + le32(id) + body
  }

  static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }

  /// A CIE at 0 and an FDE after it covering 0x1000..<0x1010 (the section at address 0), with `instructions`.
  static func section(instructions: [UInt8], cie: [UInt8] = cieBody) -> [UInt8] {
    let cieBytes = entry(id: 0, cie)
    let fdeStart = cieBytes.count
    // pcrel: the initial location field is at fdeStart + 8; it must hold 0x1000 - (fdeStart + 8).
    let initial = UInt32(truncatingIfNeeded: 0x1000 - (fdeStart + 8))
    let body = le32(initial) + le32(0x10) + [0] + instructions
    return cieBytes + entry(id: UInt32(fdeStart + 4), body) + [0, 0, 0, 0]
  }

  static func rows(_ bytes: [UInt8], at pc: UInt64 = 0x100F) throws(FormatError) -> UnwindRow? {
    try bytes.withUnsafeBytes { raw -> Result<UnwindRow?, FormatError> in
      Result { () throws(FormatError) in
        let section = CallFrameSection(bytes: ByteReader(raw), kind: .ehFrame, bases: PointerBases(sectionVMAddress: 0),
                                       addressSize: 8)
        _ = try section.entries()
        return try CallFrameInfo(ehFrame: section, ehFrameHeader: nil, debugFrame: nil).row(at: pc)
      }
    }.get()
  }

  @Test func handMadeSectionReadsBack() throws {
    // advance 4; def_cfa_offset 16; offset rbp at CFA-16; advance 4; remember; def_cfa_register rbp; restore_state
    let bytes = Self.section(instructions: [0x44, 0x0E, 16, 0x86, 2, 0x44, 0x0A, 0x0D, 6, 0x0B])
    let row = try #require(try Self.rows(bytes, at: 0x1009))
    #expect(row.location == 0x1008)
    #expect(row.cfa == .registerOffset(register: 7, offset: 16))
    #expect(row[6] == .offset(-16))
    #expect(row[16] == .offset(-8))
    #expect(try Self.rows(bytes, at: 0x1003)?.cfa == .registerOffset(register: 7, offset: 8))
    #expect(try Self.rows(bytes, at: 0x1010) == nil)
  }

  static let cases: [(String, [UInt8], FormatError)] = [
    ("truncated length", [0x10, 0, 0], .truncated(at: 0, needed: 4, available: 3)),
    ("length past the end", entry(id: 0, cieBody).prefix(10) + [],
     .dwarf(section: ".eh_frame", offset: 0, "length 18 runs past the section end (6 bytes left)")),
    ("reserved length", le32(0xFFFF_FFF0) + [0, 0, 0, 0], .dwarf(section: ".eh_frame", offset: 0, "reserved initial length 0xfffffff0")),
    ("CIE pointer before the section", entry(id: 0x100, [0, 0, 0, 0, 0, 0, 0, 0, 0]),
     .dwarf(section: ".eh_frame", offset: 0, "CIE pointer 0x100 points before the section")),
    ("CIE pointer to itself", entry(id: 4, [0, 0, 0, 0, 0, 0, 0, 0, 0]),
     .dwarf(section: ".eh_frame", offset: 0, "CIE pointer leads to offset 0x0, which is not a CIE")),
    ("CIE version 2", entry(id: 0, [2] + cieBody.dropFirst()), .dwarf(section: ".eh_frame", offset: 0, "CIE version 2 (1, 3 or 4 expected)")),
    ("unknown augmentation", entry(id: 0, [1, UInt8(ascii: "x"), 0, 1, 0x78, 16]),
     .dwarf(section: ".eh_frame", offset: 0, "unknown augmentation \"x\"")),
    ("endless LEB128", entry(id: 0, [1, 0] + [UInt8](repeating: 0x80, count: 12)), .truncated(at: 10, needed: 13, available: 12)),
    ("augmentation data past the CIE", entry(id: 0, [1] + Array("zR".utf8) + [0, 1, 0x78, 16, 0x40, 0x1B]),
     .dwarf(section: ".eh_frame", offset: 0, "augmentation data length 64 runs past the CIE")),
    ("restore_state without remember", section(instructions: [0x0B]),
     .dwarf(section: ".eh_frame", offset: 39, "DW_CFA_restore_state without a remembered state")),
    ("remember_state 65 deep", section(instructions: [UInt8](repeating: 0x0A, count: 65)),
     .limitExceeded("DW_CFA_remember_state depth", value: 65, limit: 64)),
    ("unknown instruction", section(instructions: [0x3F]),
     .dwarf(section: ".eh_frame", offset: 39, "unknown call frame instruction 0x3f")),
    ("offset change of an expression CFA", section(instructions: [0x0F, 1, 0x30, 0x0E, 8]),
     .dwarf(section: ".eh_frame", offset: 42, "the CFA rule is an expression: no register or offset to change")),
    ("expression past the instructions", section(instructions: [0x0F, 9, 0x30]),
     .dwarf(section: ".eh_frame", offset: 39, "expression length 9 runs past the instructions")),
    ("advance in a CIE", section(instructions: [], cie: cieBody + [0x41]),
     .dwarf(section: ".eh_frame", offset: 22, "a CIE's initial instructions cannot advance the location")),
    ("factored offset overflow", section(instructions: [0x86, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]),
     .dwarf(section: ".eh_frame", offset: 39, "factored offset 9223372036854775807 x -8 overflows")),
  ]

  @Test(arguments: cases.indices)
  func rejects(index: Int) {
    let (name, bytes, expected) = Self.cases[index]
    #expect(throws: expected, "\(name)") { _ = try Self.rows(bytes) }
  }

  @Test func eightHundredRegistersAreRefused() {
    var instructions: [UInt8] = []
    for register in 0..<600 { instructions += [0x07, UInt8(register & 0x7F | 0x80), UInt8(register >> 7)] }  // DW_CFA_undefined
    #expect(throws: FormatError.limitExceeded("register rules in one row", value: 513, limit: 512)) {
      _ = try Self.rows(Self.section(instructions: instructions))
    }
  }

  @Test func lyingHeaderTableIsAnError() throws {
    // version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4; claims 1000 entries.
    let header: [UInt8] = [1, 0x1B, 0x03, 0x3B] + Self.le32(0) + Self.le32(1000) + [UInt8](repeating: 0, count: 16)
    #expect(throws: FormatError.dwarf(section: ".eh_frame_hdr", offset: 12,
                                      "1000 table entries of 8 bytes do not fit in the 16 left")) {
      try header.withUnsafeBytes { raw in
        Result { () throws(FormatError) in try EHFrameHeader(ByteReader(raw), vmAddress: 0, addressSize: 8) }
      }.get()
    }
  }

  // MARK: expressions

  static func evaluate(_ bytes: [UInt8], registers: [UInt64: UInt64] = [:], memory: [UInt64: UInt64] = [:],
                       initial: [UInt64] = []) throws(FormatError) -> UInt64 {
    try CallFrameExpression(bytes, addressSize: 8).evaluate(initial: initial, register: { registers[$0] },
                                                            readMemory: { address, _ in memory[address] })
  }

  /// The two CFA expressions in the real libc's `.eh_frame`, as `readelf --debug-dump=frames` decodes
  /// them: glibc's PLT rule, `DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and;
  /// DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus` (CFA = rsp + 8, plus 8 from the 11th
  /// byte of each 16-byte PLT entry on), evaluated at every address of its row; and the signal
  /// trampoline's (`__restore_rt`), `DW_OP_breg7 (rsp): 160; DW_OP_deref`, through the memory reader,
  /// with its registers saved at `DW_OP_breg7 (rsp): N` in the kernel's `ucontext`.
  @Test func pltAndSignalFrameRulesFromTheRealLibc() throws {
    let path = "/lib/x86_64-linux-gnu/libc.so.6"
    let bytes = try #require(readFileBytes(path), "\(path) is not installed here")
    let plt: [UInt8] = [0x77, 0x08, 0x80, 0x00, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22]
    let signal: [UInt8] = [0x77, 0xA0, 0x01, 0x06]
    var pltAddresses = 0, signalFrames = 0
    try bytes.withUnsafeBytes { raw in
      let file = ByteReader(raw)
      let info = try CallFrameInfo(elf: try ELFFile(file), file: file)
      let section = try #require(info.ehFrame)
      let rsp: UInt64 = 0x7FFC_1234_5670
      for entry in try section.entries() {
        guard case let .fde(fde, cie) = entry else { continue }
        for row in try section.rows(of: fde, cie) {
          guard case .expression(let expression) = row.cfa, row.location < fde.pcRange.upperBound else { continue }
          if expression == plt {
            for pc in row.location..<fde.pcRange.upperBound {
              let cfa = try CallFrameExpression(expression, addressSize: 8).evaluate(
                register: { [7: rsp, 16: pc][$0] }, readMemory: { _, _ in nil })
              #expect(cfa == rsp + 8 + (pc & 15 >= 11 ? 8 : 0), "pc 0x\(String(pc, radix: 16))")
              pltAddresses += 1
            }
          } else if expression == signal {
            let saved: UInt64 = 0x7FFC_0000_8000
            let cfa = try CallFrameExpression(expression, addressSize: 8).evaluate(
              register: { $0 == 7 ? rsp : nil }, readMemory: { address, size in address == rsp + 160 && size == 8 ? saved : nil })
            #expect(cfa == saved)
            // r8 is saved at rsp + 40 (uc_mcontext.gregs[REG_R8]), whatever the CFA.
            guard case .expression(let r8)? = row[8] else { Issue.record("r8 has no expression rule"); continue }
            #expect(try CallFrameExpression(r8, addressSize: 8).evaluate(initial: [cfa], register: { $0 == 7 ? rsp : nil },
                                                                        readMemory: { _, _ in nil }) == rsp + 40)
            #expect(cie.isSignalFrame)
            signalFrames += 1
          } else {
            Issue.record("an unexpected CFA expression \(expression) at 0x\(String(row.location, radix: 16))")
          }
        }
      }
    }
    #expect(pltAddresses >= 6)
    #expect(signalFrames == 1)
  }

  @Test func operations() throws {
    #expect(try Self.evaluate([0x77, 0x10], registers: [7: 100]) == 116)  // breg7 16
    #expect(try Self.evaluate([0x92, 0x10, 0x7F], registers: [16: 100]) == 99)  // bregx 16, -1
    #expect(try Self.evaluate([0x77, 0, 0x06], registers: [7: 0x500], memory: [0x500: 0xABCD]) == 0xABCD)  // deref
    #expect(try Self.evaluate([0x23, 8], initial: [0x1000]) == 0x1008)  // plus_uconst on the pushed CFA
    #expect(try Self.evaluate([0x35, 0x33, 0x1C]) == 2)  // 5 - 3
    #expect(try Self.evaluate([0x33, 0x35, 0x1C]) == UInt64(bitPattern: -2))
    #expect(try Self.evaluate([0x11, 0x7F, 0x19]) == 1)  // abs(-1)
    #expect(try Self.evaluate([0x11, 0x79, 0x32, 0x1B]) == UInt64(bitPattern: -3))  // -7 / 2 (signed, toward 0)
    #expect(try Self.evaluate([0x37, 0x33, 0x1D]) == 1)  // 7 mod 3
    #expect(try Self.evaluate([0x31, 0x38, 0x24]) == 256)  // 1 << 8
    #expect(try Self.evaluate([0x11, 0x70, 0x32, 0x26]) == UInt64(bitPattern: -4))  // -16 >>a 2
    #expect(try Self.evaluate([0x11, 0x7F, 0x30, 0x2D]) == 1)  // -1 < 0: signed comparison
    #expect(try Self.evaluate([0x31, 0x32, 0x16, 0x1C]) == 1)  // swap: 2 - 1
    // rot: [1, 2, 3] (3 on top) becomes [3, 1, 2]
    #expect(try Self.evaluate([0x31, 0x32, 0x33, 0x17]) == 2)
    #expect(try Self.evaluate([0x31, 0x32, 0x33, 0x17, 0x13]) == 1)
    #expect(try Self.evaluate([0x31, 0x32, 0x33, 0x17, 0x13, 0x13]) == 3)
    #expect(try Self.evaluate([0x31, 0x32, 0x15, 1]) == 1)  // pick 1
    #expect(try Self.evaluate([0x30, 0x28, 2, 0, 0x35, 0x96, 0x34]) == 4)  // bra not taken: lit5, nop, lit4
    #expect(try Self.evaluate([0x31, 0x28, 1, 0, 0x35, 0x34]) == 4)  // bra taken over lit5
    #expect(try Self.evaluate([0x2F, 1, 0, 0x35, 0x34]) == 4)  // skip over lit5
    #expect(try Self.evaluate([0x0C, 0x78, 0x56, 0x34, 0x12]) == 0x1234_5678)  // const4u
    #expect(try Self.evaluate([0x09, 0xFF]) == UInt64.max)  // const1s -1
  }

  @Test(arguments: [
    ([0x77, 0], FormatError.dwarf(section: "expression", offset: 0, "register 7 has no known value")),
    ([0x30, 0x06], FormatError.dwarf(section: "expression", offset: 1, "memory at 0x0 cannot be read")),
    ([0x31, 0x30, 0x1B], FormatError.dwarf(section: "expression", offset: 2, "DW_OP_div by zero")),
    ([0x22], FormatError.dwarf(section: "expression", offset: 0, "stack empty")),
    ([0x93, 8], FormatError.dwarf(section: "expression", offset: 0, "operation 0x93 is not supported in call frame expressions")),
    ([0x2F, 0xFD, 0xFF], FormatError.limitExceeded("expression steps", value: 10_001, limit: 10_000)),  // skip to itself
    ([0x31, 0x12, 0x28, 0xFC, 0xFF], FormatError.limitExceeded("expression steps", value: 10_001, limit: 10_000)),  // dup; bra back
    ([0x2F, 0x10, 0x00], FormatError.dwarf(section: "expression", offset: 0, "branch to 19 outside the expression")),
    ([UInt8](repeating: 0x30, count: 65), FormatError.dwarf(section: "expression", offset: 64, "stack deeper than 64")),
    ([0x10, 0x80, 0x80], FormatError.truncated(at: 1, needed: 3, available: 2)),
  ] as [([UInt8], FormatError)])
  func expressionRejects(bytes: [UInt8], expected: FormatError) {
    #expect(throws: expected) { _ = try Self.evaluate(bytes) }
  }

  // MARK: mutations

  /// libz's `.eh_frame` and `.eh_frame_hdr` (zlib1g is essential on Debian), mutated: every entry,
  /// every row of every FDE and lookups through the header may only throw.
  @Test func mutatedRealSectionsOnlyThrow() throws {
    let path = "/lib/x86_64-linux-gnu/libz.so.1"
    let bytes = try #require(readFileBytes(path), "\(path) is not installed here")
    var sections: [(ehFrame: [UInt8], header: [UInt8], frameAddress: UInt64, headerAddress: UInt64)] = []
    try bytes.withUnsafeBytes { raw in
      let file = ByteReader(raw)
      let elf = try ELFFile(file)
      let frame = try #require(elf.section(named: ".eh_frame")), header = try #require(elf.section(named: ".eh_frame_hdr"))
      sections.append((try elf.contents(of: frame, in: file).bytes(at: 0, length: Int(frame.size)),
                       try elf.contents(of: header, in: file).bytes(at: 0, length: Int(header.size)),
                       frame.vmAddress, header.vmAddress))
    }
    let original = try #require(sections.first)
    var rng = SplitMix64(seed: 0xCF1_2026)
    var survived = 0, threw = 0
    for round in 0..<400 {
      let kind = MutationTests.Mutation.allCases[round % MutationTests.Mutation.allCases.count]
      let mutateHeader = round % 4 == 3
      let frame = mutateHeader ? original.ehFrame : MutationTests.mutate(original.ehFrame, kind, &rng)
      let header = mutateHeader ? MutationTests.mutate(original.header, kind, &rng) : original.header
      let outcome = frame.withUnsafeBytes { frameRaw in
        header.withUnsafeBytes { headerRaw -> Result<Void, FormatError> in
          Result { () throws(FormatError) in
            let section = CallFrameSection(bytes: ByteReader(frameRaw), kind: .ehFrame,
                                           bases: PointerBases(sectionVMAddress: original.frameAddress), addressSize: 8)
            let info = CallFrameInfo(ehFrame: section, ehFrameHeader: ByteReader(headerRaw),
                                     ehFrameHeaderVMAddress: original.headerAddress, debugFrame: nil)
            var pcs: [UInt64] = []
            for entry in try section.entries() {
              guard case let .fde(fde, cie) = entry else { continue }
              _ = try section.rows(of: fde, cie)
              pcs.append(fde.initialLocation &+ fde.addressRange / 2)
            }
            for pc in pcs.prefix(64) { _ = try info.row(at: pc) }
          }
        }
      }
      if case .success = outcome { survived += 1 } else { threw += 1 }
    }
    #expect(survived + threw == 400)
    #expect(threw > 0, "mutations that break nothing test nothing")
  }
}
