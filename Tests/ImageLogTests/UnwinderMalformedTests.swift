import CImageLogUnwind
import Glibc
import ImageLog
import ImageLogTestSupport
import ImageReaders
import Testing

/// The unwinder's CFI engine and walk over bytes it must not trust: hand-made `.eh_frame` broken one way
/// each (no row, no crash), DWARF expressions as CFI uses them (glibc's PLT and signal-frame rules over
/// the real bytes), frame records and stack scanning over a hand-built stack, and mutations of real
/// `.eh_frame` / `.eh_frame_hdr` bytes under lookups and whole walks, which may only end the stack.
@Suite struct UnwinderMalformedTests {
  /// A CIE: version 1, "zR", code alignment 1, data alignment -8, return address column 16,
  /// FDE addresses pcrel|sdata4; initial rules CFA = rsp + 8, ra at CFA - 8.
  static let cieBody: [UInt8] = [1] + Array("zR".utf8) + [0, 1, 0x78, 16, 1, 0x1B, 0x0C, 7, 8, 0x90, 1]

  static func entry(id: UInt32, _ body: [UInt8]) -> [UInt8] { le32(UInt32(4 + body.count)) + le32(id) + body }

  static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
  static func le64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }

  /// A CIE and an FDE after it covering 0x1000..<0x1010 (the section at address `base`), with `instructions`.
  static func section(instructions: [UInt8], cie: [UInt8] = cieBody, base: Int = 0x100) -> [UInt8] {
    let cieBytes = entry(id: 0, cie)
    let fdeStart = cieBytes.count
    // pcrel: the initial location field is at base + fdeStart + 8; it must hold 0x1000 - (base + fdeStart + 8).
    let initial = UInt32(truncatingIfNeeded: 0x1000 - (base + fdeStart + 8))
    let body = le32(initial) + le32(0x10) + [0] + instructions
    return cieBytes + entry(id: UInt32(fdeStart + 4), body) + [0, 0, 0, 0]
  }

  /// The row at `pc` found by walking `bytes` as an `.eh_frame` at address 0x100 (no header; an address
  /// 0 means "unknown" to the unwinder).
  static func row(_ bytes: [UInt8], at pc: UInt64 = 0x100F) -> CallFrameRow? {
    UnwindImage(textRange: 0x1000..<0x1010, loadBias: 0, ehFrame: 0x100..<0x100 + UInt64(bytes.count))
      .row(at: pc, in: BufferMemory(bytes, at: 0x100))
  }

  @Test func handMadeSectionReadsBack() throws {
    // advance 4; def_cfa_offset 16; offset rbp at CFA-16; advance 4; remember; def_cfa_register rbp; restore_state
    let bytes = Self.section(instructions: [0x44, 0x0E, 16, 0x86, 2, 0x44, 0x0A, 0x0D, 6, 0x0B])
    let row = try #require(Self.row(bytes, at: 0x1009))
    #expect(row.location == 0x1008)
    #expect(row.end == 0x1010)
    #expect(row.cfa == .registerOffset(register: 7, offset: 16))
    #expect(row.rules[6] == .offset(-16))
    #expect(row.rules[16] == .offset(-8))
    #expect(Self.row(bytes, at: 0x1003)?.cfa == .registerOffset(register: 7, offset: 8))
    #expect(Self.row(bytes, at: 0x1003)?.end == 0x1004)
    #expect(Self.row(bytes, at: 0x1010) == nil)
    let table = CallFrameTable(memory: BufferMemory(bytes, at: 0x100), address: 0x100, size: UInt64(bytes.count), kind: .ehFrame)
    let (entries, complete) = table.entries()
    #expect(complete && entries.count == 1 && entries.first?.pcRange == 0x1000..<0x1010)
  }

  /// Each broken one way: the walk stops at the entry (or the row is refused), nothing traps.
  static let cases: [(String, [UInt8])] = [
    ("truncated length", [0x10, 0, 0]),
    ("length past the end", Array(entry(id: 0, cieBody).prefix(10))),
    ("reserved length", le32(0xFFFF_FFF0) + [0, 0, 0, 0]),
    ("CIE pointer before the section", entry(id: 0x100, [0, 0, 0, 0, 0, 0, 0, 0, 0])),
    ("CIE pointer to itself", entry(id: 4, [0, 0, 0, 0, 0, 0, 0, 0, 0])),
    ("CIE version 2", entry(id: 0, [2] + cieBody.dropFirst())),
    ("unknown augmentation", entry(id: 0, [1, UInt8(ascii: "x"), 0, 1, 0x78, 16])),
    ("endless LEB128", entry(id: 0, [1, 0] + [UInt8](repeating: 0x80, count: 12))),
    ("augmentation data past the CIE", entry(id: 0, [1] + Array("zR".utf8) + [0, 1, 0x78, 16, 0x40, 0x1B])),
  ]

  @Test(arguments: cases.indices)
  func malformedEntriesEndTheWalk(index: Int) {
    let (name, bytes) = Self.cases[index]
    let table = CallFrameTable(memory: BufferMemory(bytes), address: 0, size: UInt64(bytes.count), kind: .ehFrame)
    let (entries, complete) = table.entries()
    #expect(!complete && entries.isEmpty, "\(name)")
    #expect(Self.row(bytes) == nil, "\(name)")
  }

  /// Instructions broken one way each: no row for any pc of the FDE.
  static let instructionCases: [(String, [UInt8])] = [
    ("restore_state without remember", [0x0B]),
    ("remember_state deeper than IL_CFI_STATE_DEPTH", [UInt8](repeating: 0x0A, count: Int(IL_CFI_STATE_DEPTH) + 1)),
    ("unknown instruction", [0x3F]),
    ("offset change of an expression CFA", [0x0F, 1, 0x30, 0x0E, 8]),
    ("expression past the instructions", [0x0F, 9, 0x30]),
    ("factored offset overflow", [0x86, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]),
    ("set_loc backwards", [0x01] + le32(0xFFFF_FF00)),
  ]

  @Test(arguments: instructionCases.indices)
  func malformedInstructionsGiveNoRow(index: Int) {
    let (name, instructions) = Self.instructionCases[index]
    #expect(Self.row(Self.section(instructions: instructions)) == nil, "\(name)")
  }

  @Test func advanceInACIEIsRefused() {
    #expect(Self.row(Self.section(instructions: [], cie: Self.cieBody + [0x41])) == nil)
  }

  @Test func registerRulesPastTheColumnsAreIgnored() throws {
    var instructions: [UInt8] = []
    for register in 0..<600 { instructions += [0x07, UInt8(register & 0x7F | 0x80), UInt8(register >> 7)] }  // DW_CFA_undefined
    let row = try #require(Self.row(Self.section(instructions: instructions)))
    #expect(row.rules.count == Int(IL_CFI_COLUMNS))
  }

  @Test func lyingHeaderTableFallsBackToTheSection() throws {
    // version 1, eh_frame_ptr pcrel|sdata4 (to 0x100), count udata4, table datarel|sdata4; claims 1000 entries.
    let frame = Self.section(instructions: [0x44, 0x0E, 16], base: 0)
    let header: [UInt8] = [1, 0x1B, 0x03, 0x3B] + Self.le32(UInt32(truncatingIfNeeded: 0x100 - 0x804)) + Self.le32(1000) + [UInt8](repeating: 0, count: 16)
    var bytes = [UInt8](repeating: 0, count: 0x900)
    bytes.replaceSubrange(0x100..<0x100 + frame.count, with: frame)
    bytes.replaceSubrange(0x800..<0x800 + header.count, with: header)
    // The FDE in the section at 0x100 covers 0x1100..<0x1110 (pcrel from there).
    let image = UnwindImage(textRange: 0x1100..<0x1110, loadBias: 0, ehFrameHeader: 0x800, ehFrame: 0x100..<0x100 + UInt64(frame.count))
    let row = try #require(image.row(at: 0x1105, in: BufferMemory(bytes)))
    #expect(row.cfa == .registerOffset(register: 7, offset: 16))
  }

  // MARK: expressions

  static func evaluate(_ bytes: [UInt8], registers: [Int: UInt64] = [:], memory: [UInt64: UInt64] = [:],
                       initial: UInt64? = nil) -> UInt64? {
    var set = RegisterSet(architecture: .x86_64)
    for (register, value) in registers { set[dwarf: register] = value }
    struct WordMemory: MemoryReading {
      var words: [UInt64: UInt64]
      func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard buffer.count <= 8, let word = words[address] else { return false }
        withUnsafeBytes(of: word.littleEndian) { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<buffer.count])) }
        return true
      }
    }
    return evaluateExpression(bytes, registers: set, memory: WordMemory(words: memory), initial: initial)
  }

  @Test func operations() {
    #expect(Self.evaluate([0x77, 0x10], registers: [7: 100]) == 116)  // breg7 16
    #expect(Self.evaluate([0x92, 0x10, 0x7F], registers: [16: 100]) == 99)  // bregx 16, -1
    #expect(Self.evaluate([0x77, 0, 0x06], registers: [7: 0x500], memory: [0x500: 0xABCD]) == 0xABCD)  // deref
    #expect(Self.evaluate([0x77, 0, 0x94, 2], registers: [7: 0x500], memory: [0x500: 0xABCD]) == 0xABCD)  // deref_size 2
    #expect(Self.evaluate([0x23, 8], initial: 0x1000) == 0x1008)  // plus_uconst on the pushed CFA
    #expect(Self.evaluate([0x35, 0x33, 0x1C]) == 2)  // 5 - 3
    #expect(Self.evaluate([0x33, 0x35, 0x1C]) == UInt64(bitPattern: -2))
    #expect(Self.evaluate([0x11, 0x7F, 0x19]) == 1)  // abs(-1)
    #expect(Self.evaluate([0x11, 0x79, 0x32, 0x1B]) == UInt64(bitPattern: -3))  // -7 / 2 (signed, toward 0)
    #expect(Self.evaluate([0x37, 0x33, 0x1D]) == 1)  // 7 mod 3
    #expect(Self.evaluate([0x31, 0x38, 0x24]) == 256)  // 1 << 8
    #expect(Self.evaluate([0x11, 0x70, 0x32, 0x26]) == UInt64(bitPattern: -4))  // -16 >>a 2
    #expect(Self.evaluate([0x11, 0x70, 0x32, 0x25]) == UInt64(bitPattern: -16) >> 2)  // shr is logical
    #expect(Self.evaluate([0x11, 0x7F, 0x30, 0x2D]) == 1)  // -1 < 0: signed comparison
    #expect(Self.evaluate([0x31, 0x32, 0x16, 0x1C]) == 1)  // swap: 2 - 1
    #expect(Self.evaluate([0x31, 0x32, 0x33, 0x17]) == 2)  // rot: [1, 2, 3] becomes [3, 1, 2]
    #expect(Self.evaluate([0x31, 0x32, 0x33, 0x17, 0x13]) == 1)
    #expect(Self.evaluate([0x31, 0x32, 0x33, 0x17, 0x13, 0x13]) == 3)
    #expect(Self.evaluate([0x31, 0x32, 0x15, 1]) == 1)  // pick 1
    #expect(Self.evaluate([0x31, 0x32, 0x14]) == 1)  // over
    #expect(Self.evaluate([0x30, 0x28, 2, 0, 0x35, 0x96, 0x34]) == 4)  // bra not taken: lit5, nop, lit4
    #expect(Self.evaluate([0x31, 0x28, 1, 0, 0x35, 0x34]) == 4)  // bra taken over lit5
    #expect(Self.evaluate([0x2F, 1, 0, 0x35, 0x34]) == 4)  // skip over lit5
    #expect(Self.evaluate([0x0C, 0x78, 0x56, 0x34, 0x12]) == 0x1234_5678)  // const4u
    #expect(Self.evaluate([0x09, 0xFF]) == UInt64.max)  // const1s -1
    #expect(Self.evaluate([0x36, 0x1F, 0x20]) == 5)  // not(neg 6)
    #expect(Self.evaluate([0x3C, 0x3A, 0x1A, 0x33, 0x21, 0x3F, 0x27]) == (12 & 10 | 3) ^ 15)
  }

  @Test(arguments: [
    [0x77, 0],  // rsp unknown
    [0x30, 0x06],  // deref of unreadable memory
    [0x31, 0x30, 0x1B],  // division by zero
    [0x22],  // empty stack
    [0x93, 8],  // DW_OP_piece: not in CFI
    [0x2F, 0xFD, 0xFF],  // skip to itself: the step cap ends it
    [0x31, 0x12, 0x28, 0xFC, 0xFF],  // dup; bra back
    [0x2F, 0x10, 0x00],  // a branch outside the expression
    [UInt8](repeating: 0x30, count: 65),  // deeper than the stack
    [0x10, 0x80, 0x80],  // a LEB128 past the end
  ] as [[UInt8]])
  func expressionRejects(bytes: [UInt8]) {
    #expect(Self.evaluate(bytes) == nil)
  }

  /// glibc's PLT rule and its signal trampoline's (`__restore_rt`) from the real libc's `.eh_frame`,
  /// found by our engine and evaluated by it: CFA = rsp + 8, plus 8 from the 11th byte of each 16-byte
  /// PLT entry on; the trampoline's CFA read from the kernel's ucontext (`DW_OP_breg7 (rsp): 160;
  /// DW_OP_deref`) and r8 saved at rsp + 40 (uc_mcontext.gregs[REG_R8]).
  @Test func pltAndSignalFrameRulesFromTheRealLibc() throws {
    let path = "/lib/x86_64-linux-gnu/libc.so.6"
    let bytes = try #require(readFileBytes(path), "\(path) is not installed here")
    let file = try FileCallFrames(bytes)
    let frame = try #require(file.ehFrame)
    let table = CallFrameTable(memory: file.memory, address: frame.address, size: frame.size, kind: .ehFrame)
    let plt: [UInt8] = [0x77, 0x08, 0x80, 0x00, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22]
    let signal: [UInt8] = [0x77, 0xA0, 0x01, 0x06]
    var pltAddresses = 0, signalFrames = 0
    let rsp: UInt64 = 0x7FFC_1234_5670
    func expressionBytes(_ address: UInt64, _ length: Int) -> [UInt8] {
      var out = [UInt8](repeating: 0, count: length)
      _ = out.withUnsafeMutableBytes { file.memory.read(address, into: $0) }
      return out
    }
    for fde in table.entries().entries {
      for row in table.rows(of: fde) ?? [] {
        guard case let .expression(address, length) = row.cfa else { continue }
        let expression = expressionBytes(address, length)
        if expression == plt {
          for pc in row.location..<row.end {
            let cfa = Self.evaluate(expression, registers: [7: rsp, 16: pc])
            #expect(cfa == rsp + 8 + (pc & 15 >= 11 ? 8 : 0), "pc 0x\(String(pc, radix: 16))")
            pltAddresses += 1
          }
        } else if expression == signal {
          let saved: UInt64 = 0x7FFC_0000_8000
          let cfa = try #require(Self.evaluate(expression, registers: [7: rsp], memory: [rsp + 160: saved]))
          #expect(cfa == saved)
          guard case let .expression(r8, r8Length)? = row.rules[8] else { Issue.record("r8 has no expression rule"); continue }
          #expect(Self.evaluate(expressionBytes(r8, r8Length), registers: [7: rsp], initial: cfa) == rsp + 40)
          #expect(row.isSignalFrame)
          signalFrames += 1
        } else {
          Issue.record("an unexpected CFA expression \(expression) at 0x\(String(row.location, radix: 16))")
        }
      }
    }
    #expect(pltAddresses >= 6)
    #expect(signalFrames == 1)
  }

  // MARK: frame records and scanning

  /// A hand-built x86_64 process: "text" at 0x10000 where every 16th byte ends a `call rel32`
  /// (E8 + 4 bytes), a stack at 0x7000_0000, no CFI at all.
  struct HandBuiltProcess: MemoryReading {
    static let textStart: UInt64 = 0x10000, stackStart: UInt64 = 0x7000_0000
    var text = [UInt8](repeating: 0x90, count: 0x1000)
    var stack = [UInt8](repeating: 0, count: 0x1000)

    init() {
      for call in stride(from: 11, to: text.count - 5, by: 16) { text[call] = 0xE8 }  // return addresses at 16n
    }

    mutating func store(_ value: UInt64, at address: UInt64) {
      let offset = Int(address - Self.stackStart)
      stack.replaceSubrange(offset..<offset + 8, with: UnwinderMalformedTests.le64(value))
    }

    func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
      BufferMemory(text, at: Self.textStart).read(address, into: buffer)
        || BufferMemory(stack, at: Self.stackStart).read(address, into: buffer)
    }

    var images: [UnwindImage] { [UnwindImage(textRange: Self.textStart..<Self.textStart + UInt64(text.count), loadBias: 0)] }
  }

  @Test func frameRecordsThenScanning() {
    var process = HandBuiltProcess()
    let base = HandBuiltProcess.stackStart
    // Three frame records: fp0 -> fp1 -> fp2, each [saved fp, return address]; fp2's saved fp is 0
    // (the outermost record).
    process.store(base + 0x100, at: base + 0x40)
    process.store(0x10110, at: base + 0x48)
    process.store(base + 0x200, at: base + 0x100)
    process.store(0x10220, at: base + 0x108)
    process.store(0, at: base + 0x200)
    process.store(0x10330, at: base + 0x208)
    // Above the last record, a stale return address for the scan to find, and a word that is in the
    // text but not after a call (rejected).
    process.store(0x10337, at: base + 0x220)
    process.store(0x10440, at: base + 0x230)
    var registers = RegisterSet(architecture: .x86_64)
    registers.pc = 0x10005
    registers.sp = base + 0x10
    registers.fp = base + 0x40
    let frames = StackUnwinder(memory: process, images: process.images).unwind(from: registers)
    #expect(frames.map(\.pc) == [0x10005, 0x10110, 0x10220, 0x10330, 0x10440])
    #expect(frames.map(\.trust) == [.context, .framePointer, .framePointer, .framePointer, .stackScan])
    #expect(frames.map(\.lookupAddress) == [0x10005, 0x1010F, 0x1021F, 0x1032F, 0x1043F])
    let noScan = StackUnwinder(memory: process, images: process.images, scanBytes: 0).unwind(from: registers)
    #expect(noScan.map(\.pc) == [0x10005, 0x10110, 0x10220, 0x10330])
  }

  @Test func frameRecordsThatGoDownOrLoopEndTheWalk() {
    var process = HandBuiltProcess()
    let base = HandBuiltProcess.stackStart
    process.store(base + 0x40, at: base + 0x40)  // a record pointing at itself
    process.store(0x10110, at: base + 0x48)
    var registers = RegisterSet(architecture: .x86_64)
    registers.pc = 0x10005
    registers.sp = base + 0x10
    registers.fp = base + 0x40
    let frames = StackUnwinder(memory: process, images: process.images, scanBytes: 0).unwind(from: registers)
    #expect(frames.map(\.pc) == [0x10005, 0x10110])
    // A frame pointer below the stack pointer, or misaligned: not a record.
    registers.fp = base + 0x8
    #expect(StackUnwinder(memory: process, images: process.images, scanBytes: 0).unwind(from: registers).count == 1)
    registers.fp = base + 0x44
    #expect(StackUnwinder(memory: process, images: process.images, scanBytes: 0).unwind(from: registers).count == 1)
  }

  // MARK: mutations

  /// libz's `.eh_frame` and `.eh_frame_hdr` (zlib1g is essential on Debian), mutated: entries, rows, the
  /// header's lookups and whole walks over a stack of plausible return addresses may only end early.
  @Test func mutatedRealSectionsOnlyEndTheStack() throws {
    try Self.mutate("/lib/x86_64-linux-gnu/libz.so.1", architecture: .x86_64)
  }

  /// The same over a 32-bit library's sections (datarel `.eh_frame_hdr` table, 4-byte pointers), walked
  /// from i386 registers over a stack of 4-byte words.
  @Test(.enabled(if: access("/usr/lib32/libgcc_s.so.1", R_OK) == 0, "needs /usr/lib32/libgcc_s.so.1 (lib32gcc-s1, with gcc-12-multilib)"))
  func mutatedI386SectionsOnlyEndTheStack() throws {
    try Self.mutate("/usr/lib32/libgcc_s.so.1", architecture: .i386)
  }

  static func mutate(_ path: String, architecture: RegisterSet.Architecture) throws {
    let bytes = try #require(readFileBytes(path), "\(path) is not installed here")
    let original = try FileCallFrames(bytes)
    let wordSize = original.is64Bit ? 8 : 4
    try #require((architecture == .i386) == (wordSize == 4), "\(path) is not a \(architecture) library")
    let frame = try #require(original.ehFrame), header = try #require(original.ehFrameHeader)
    let originalFrames = original.memory  // segments: mutate the bytes of .eh_frame and .eh_frame_hdr in place
    let segment = try #require(originalFrames.segments.firstIndex {
      $0.address <= header && header < $0.address + UInt64($0.bytes.count)
    })
    let area = Int(min(header, frame.address) - originalFrames.segments[segment].address)
    let areaEnd = Int(max(header + 0x400, frame.address + frame.size) - originalFrames.segments[segment].address)
    var text: [UInt64] = []
    let table = CallFrameTable(memory: originalFrames, address: frame.address, size: frame.size, kind: .ehFrame,
                               addressSize: wordSize)
    for fde in table.entries().entries.prefix(64) { text.append(fde.pcRange.lowerBound + (fde.pcRange.upperBound - fde.pcRange.lowerBound) / 2) }
    try #require(text.count > 10)
    var rng = SeededGenerator(seed: 0xCF1_2026)
    var frameCounts = 0, changed = 0
    for round in 0..<300 {
      var memory = originalFrames
      var segmentBytes = memory.segments[segment].bytes
      let flips = 1 + round % 8
      for _ in 0..<flips {
        let index = Int.random(in: area..<min(areaEnd, segmentBytes.count), using: &rng)
        if round % 3 == 0 {
          segmentBytes[index] = [0, 0xFF, 0x7F, 0x80, UInt8.random(in: 0...255, using: &rng)].randomElement(using: &rng)!
        } else {
          segmentBytes[index] ^= 1 << UInt8.random(in: 0...7, using: &rng)
        }
      }
      memory.segments[segment].bytes = segmentBytes
      let image = UnwindImage(textRange: 0..<0x10_0000, loadBias: 0, ehFrameHeader: header,
                              ehFrame: frame.address..<frame.address + frame.size, addressSize: wordSize)
      let mutatedTable = CallFrameTable(memory: memory, address: frame.address, size: frame.size, kind: .ehFrame,
                                        addressSize: wordSize)
      let (entries, _) = mutatedTable.entries()
      for fde in entries.prefix(32) { _ = mutatedTable.rows(of: fde) }
      for pc in text where image.row(at: pc, in: memory) != original.image.row(at: pc, in: originalFrames) { changed += 1 }
      // A walk from each pc, over a stack whose every word is a pc in the text.
      struct Stack: MemoryReading {
        var base: MemoryReading
        var bytes: [UInt8]
        func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
          if address >= 0x7000_0000, address < 0x7000_0000 + UInt64(bytes.count) {
            return BufferMemory(bytes, at: 0x7000_0000).read(address, into: buffer)
          }
          return base.read(address, into: buffer)
        }
      }
      let words = (0..<64).map { text[$0 % text.count] }
      let stack = Stack(base: memory, bytes: words.flatMap {
        wordSize == 8 ? UnwinderMalformedTests.le64($0) : UnwinderMalformedTests.le32(UInt32(truncatingIfNeeded: $0))
      })
      var registers = RegisterSet(architecture: architecture)
      registers.pc = text[round % text.count]
      registers.sp = 0x7000_0000
      registers.fp = 0x7000_0100
      let walk = StackUnwinder(memory: stack, images: [image], scanBytes: 256).unwind(from: registers, maxFrames: 64)
      #expect(walk.count >= 1 && walk.count <= 64)
      frameCounts += walk.count
    }
    #expect(changed > 0, "mutations that change no lookup test nothing")
    print("UnwinderMalformedTests: 300 mutations of \(path)'s .eh_frame/.eh_frame_hdr: \(changed) lookups changed, \(frameCounts) frames walked, no trap")
  }
}
