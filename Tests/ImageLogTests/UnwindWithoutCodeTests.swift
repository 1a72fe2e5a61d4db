import ImageLog
import Testing

/// The unwinder over a hand-built x86_64 stack whose modules' code is not in memory (a minidump without
/// the binaries), with `withoutCode` (minidump-stackwalk's rules, rust-minidump's amd64.rs): frame
/// records checked against the stack, scanning for words inside a module within Breakpad's window (40
/// words, 160 from frame 0 or a CFI frame), the scanned caller's frame pointer recovered; and where the
/// code is readable, today's call check still decides.
/// Stack words of `Word`'s size at addresses, and code bytes where given; anything else is unreadable
/// (a minidump's memory without the modules' code).
struct StackWords<Word: FixedWidthInteger>: MemoryReading {
  var words: [UInt64: Word] = [:]
  var code: [UInt64: UInt8] = [:]
  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    if buffer.count == MemoryLayout<Word>.size, let word = words[address] {
      withUnsafeBytes(of: word.littleEndian) { buffer.copyMemory(from: $0) }
      return true
    }
    for index in 0..<buffer.count {
      guard let byte = code[address + UInt64(index)] else { return false }
      buffer[index] = byte
    }
    return !buffer.isEmpty
  }
}

@Suite struct UnwindWithoutCodeTests {
  typealias WordMemory = StackWords<UInt64>

  /// Two modules without code: A at 0x10000..<0x20000, B at 0x40000..<0x50000.
  static let images = [UnwindImage(textRange: 0x10000..<0x20000, loadBias: 0x10000),
                       UnwindImage(textRange: 0x40000..<0x50000, loadBias: 0x40000)]
  static let stackTop: UInt64 = 0x7000_0000

  static func registers(pc: UInt64, sp: UInt64, fp: UInt64?) -> RegisterSet {
    var set = RegisterSet(architecture: .x86_64)
    set[dwarf: 16] = pc
    set[dwarf: 7] = sp
    if let fp { set[dwarf: 6] = fp }
    return set
  }

  /// A stack of `count` words from `base`, zero unless given.
  static func stack(_ base: UInt64, count: Int, _ given: [Int: UInt64]) -> [UInt64: UInt64] {
    var words: [UInt64: UInt64] = [:]
    for index in 0..<count { words[base + UInt64(index) * 8] = given[index] ?? 0 }
    return words
  }

  static func walk(_ memory: WordMemory, _ start: RegisterSet, withoutCode: Bool = true) -> [(UInt64, FrameTrust)] {
    StackUnwinder(memory: memory, images: images, withoutCode: withoutCode).unwind(from: start).map { ($0.pc, $0.trust) }
  }

  @Test func frameRecordsWithoutCode() {
    // sp at word 0; frame records at words 4 and 10, the outer one's saved fp 0 (the end of the chain).
    let sp = Self.stackTop
    let memory = WordMemory(words: Self.stack(sp, count: 64, [4: sp + 10 * 8, 5: 0x12345, 10: sp + 20 * 8, 11: 0x41000]))
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 4 * 8))
    #expect(frames.prefix(3).map(\.0) == [0x11000, 0x12345, 0x41000])
    #expect(frames.prefix(3).map(\.1) == [.context, .framePointer, .framePointer])
    // Without the rules, code that cannot be read gives no caller at all (the crash handler's walk).
    #expect(Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 4 * 8), withoutCode: false).count == 1)
  }

  @Test func aFrameRecordIsCheckedAgainstTheStack() {
    let sp = Self.stackTop
    // The saved fp lies below the caller's sp (word 6): not a frame record. Scanning then finds the
    // return address as minidump-stackwalk does (the same word), marked scan.
    var memory = WordMemory(words: Self.stack(sp, count: 64, [4: sp + 8, 5: 0x12345]))
    var frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 4 * 8))
    #expect(frames.count >= 2 && frames[1] == (0x12345, .stackScan), "\(frames)")
    // The saved fp is above, but not readable.
    memory = WordMemory(words: Self.stack(sp, count: 64, [4: sp + 0x100_0000, 5: 0x12345]))
    frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 4 * 8))
    #expect(frames.count >= 2 && frames[1] == (0x12345, .stackScan), "\(frames)")
    // A return address outside every module is none.
    memory = WordMemory(words: Self.stack(sp, count: 64, [4: sp + 10 * 8, 5: 0x30000]))
    frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 4 * 8))
    #expect(frames.count == 1, "\(frames)")
  }

  @Test func breakpadScanWindow() {
    let sp = Self.stackTop
    // From frame 0 the window is 160 words: a word at 150 is found, one at 170 is not.
    var memory = WordMemory(words: Self.stack(sp, count: 400, [150: 0x41000]))
    var frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.count >= 2 && frames[1] == (0x41000, .stackScan), "\(frames)")
    memory = WordMemory(words: Self.stack(sp, count: 400, [170: 0x41000]))
    #expect(Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil)).count == 1)
    // From a scanned frame it is 40 words: the caller's return address 39 words above is found,
    // 41 words above is not.
    memory = WordMemory(words: Self.stack(sp, count: 400, [2: 0x41000, 3 + 39: 0x12000]))
    frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.map(\.0).prefix(3) == [0x11000, 0x41000, 0x12000], "\(frames)")
    memory = WordMemory(words: Self.stack(sp, count: 400, [2: 0x41000, 3 + 41: 0x12000]))
    frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.map(\.0) == [0x11000, 0x41000], "\(frames)")
  }

  @Test func aScannedFrameKeepsTheFramePointerItDidNotUse() {
    let sp = Self.stackTop
    // Frame 0's fp points at a record whose saved fp (0) is below its sp: no frame record, so the scan
    // finds word 8; fp (at or above the caller's sp) is kept for the caller, as amd64.rs keeps it, and
    // the caller's own step reads the same record again: no frame pointer there either.
    let memory = WordMemory(words: Self.stack(sp, count: 64, [8: 0x41000, 30: 0, 31: 0x14000, 40: 0x13000]))
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 30 * 8))
    #expect(frames.prefix(4).map(\.0) == [0x11000, 0x41000, 0x14000, 0x13000], "\(frames)")
    #expect(frames.prefix(4).map(\.1) == [.context, .stackScan, .stackScan, .stackScan], "\(frames)")
  }

  @Test func aRepeatedWordWithoutCodeIsTakenAsMinidumpStackwalkTakesIt() {
    let sp = Self.stackTop
    // Words 2 and 5 hold the same address. Without the code, minidump-stackwalk (amd64.rs
    // get_caller_by_scan) takes the first word in the window that lies in a module, the same address
    // again included (Breakpad's linux_overflow.dmp and linux-mini.dmp repeat a frame so, and
    // write_av_non_canonical.dmp thread 1 frames 25-26): so does the walk.
    var memory = WordMemory(words: Self.stack(sp, count: 64, [2: 0x41000, 5: 0x41000, 9: 0x12000]))
    var frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.map(\.0).prefix(4) == [0x11000, 0x41000, 0x41000, 0x12000], "\(frames)")
    // With the code read (each word after a call), the second copy of a scanned frame's own pc is a
    // stale one: skipped.
    for address: UInt64 in [0x41000, 0x12000] {
      for (offset, byte) in [UInt8](arrayLiteral: 0x90, 0x90, 0x90, 0xE8, 0, 0, 0, 0).enumerated() {
        memory.code[address - 8 + UInt64(offset)] = byte
      }
    }
    frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.map(\.0).prefix(3) == [0x11000, 0x41000, 0x12000], "\(frames)")
  }

  @Test func aModuleWithSymbolsNeedsAFunctionThere() {
    let sp = Self.stackTop
    // Module B's symbols name 0x41000..<0x41100 only: a word at 0x42000 is passed over, 0x12000 (A has
    // no symbols) is taken.
    var images = Self.images
    images[1].namesAddress = { (0x41000..<0x41100).contains($0) }
    let memory = WordMemory(words: Self.stack(sp, count: 64, [2: 0x42000, 4: 0x12000, 9: 0x41050]))
    let frames = StackUnwinder(memory: memory, images: images, withoutCode: true)
      .unwind(from: Self.registers(pc: 0x11000, sp: sp, fp: nil)).map(\.pc)
    #expect(frames.prefix(3) == [0x11000, 0x12000, 0x41050], "\(frames)")
  }

  @Test func readableCodeIsStillHeldToTheCallCheck() {
    let sp = Self.stackTop
    // 0x41000's code is readable and the bytes before it are no call: not a return address, whatever
    // the rules; 0x12000 follows a call (E8 rel32).
    var memory = WordMemory(words: Self.stack(sp, count: 64, [2: 0x41000, 4: 0x12000]))
    for offset in 0..<8 { memory.code[0x41000 - 8 + UInt64(offset)] = 0x90 }
    for (offset, byte) in [UInt8](arrayLiteral: 0x90, 0x90, 0x90, 0xE8, 0, 0, 0, 0).enumerated() {
      memory.code[0x12000 - 8 + UInt64(offset)] = byte
    }
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.map(\.0).prefix(2) == [0x11000, 0x12000], "\(frames)")
  }
}
