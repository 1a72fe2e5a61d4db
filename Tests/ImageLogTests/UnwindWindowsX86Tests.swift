import ImageLog
import Testing

/// A 32-bit x86 thread walked without its modules' code (a Windows x86 minidump), as rust-minidump's
/// x86.rs walks it: a module's `STACK WIN` records first (through `WindowsFrameSource`, with the
/// grand-callee's parameter size), then CFI, the ebp frame record taken as it is, a scan with the
/// caller's ebp recovered; a pc in the first page or an esp that does not move up ends the walk.
@Suite struct UnwindWindowsX86Tests {
  /// 4-byte words at addresses; anything else is unreadable (no code anywhere).
  typealias WordMemory = StackWords<UInt32>

  /// A made-up `STACK WIN` walk for module A: the caller's pc is the callee's plus 0x100, plus the
  /// grand-callee's parameter size, plus 0x1000 when there is a grand-callee; esp moves up by 16 (or
  /// not at all past 0x12800); none past 0x13000. Every function has 8 bytes of parameters.
  struct MadeUpFrames: WindowsFrameSource {
    func caller(of callee: RegisterSet, at address: UInt64, grandCalleeParameterSize: UInt32, hasGrandCallee: Bool,
                memory: any MemoryReading) -> RegisterSet? {
      guard let pc = callee.pc, pc < 0x13000, let sp = callee.sp else { return nil }
      var caller = RegisterSet(architecture: .i386)
      caller.pc = pc + 0x100 + UInt64(grandCalleeParameterSize) + (hasGrandCallee ? 0x1000 : 0)
      caller.sp = pc > 0x12800 ? sp : sp + 16
      return caller
    }
    func parameterSize(at address: UInt64) -> UInt32? { 8 }
  }

  /// A at 0x10000..<0x20000, B at 0x40000..<0x50000.
  static func images(windows: Bool = false) -> [UnwindImage] {
    var a = UnwindImage(textRange: 0x10000..<0x20000, loadBias: 0x10000, addressSize: 4)
    if windows { a.windowsFrames = MadeUpFrames() }
    return [a, UnwindImage(textRange: 0x40000..<0x50000, loadBias: 0x40000, addressSize: 4)]
  }
  static let top: UInt64 = 0x0012_0000

  static func registers(pc: UInt64, sp: UInt64, fp: UInt64?) -> RegisterSet {
    var set = RegisterSet(architecture: .i386)
    set.pc = pc
    set.sp = sp
    set.fp = fp
    return set
  }

  /// `count` zero words from `base`, with `given` by word index.
  static func stack(_ base: UInt64, count: Int, _ given: [Int: UInt32]) -> WordMemory {
    var memory = WordMemory()
    for index in 0..<count { memory.words[base + UInt64(index) * 4] = given[index] ?? 0 }
    return memory
  }

  static func walk(_ memory: WordMemory, _ start: RegisterSet, windows: Bool = false) -> [(UInt64, FrameTrust)] {
    StackUnwinder(memory: memory, images: images(windows: windows), withoutCode: true).unwind(from: start).map { ($0.pc, $0.trust) }
  }

  /// The frame record is taken as it is: a return address outside every module is a frame (Windows
  /// system code walked through by ebp); a pc in the first page then ends the walk.
  @Test func theFrameRecordIsTakenAsItIs() {
    let sp = Self.top
    let memory = Self.stack(sp, count: 64, [4: UInt32(sp) + 64, 5: 0x30000])
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 16))
    #expect(frames.map(\.0) == [0x11000, 0x30000], "\(frames)")
    #expect(frames.map(\.1) == [.context, .framePointer])
  }

  /// Where the code before a frame record's return address can be read and is no call, the record is
  /// not taken (a scan follows), as the unwinder holds readable code everywhere.
  @Test func readableCodeStillHoldsTheFrameRecord() {
    let sp = Self.top
    var memory = Self.stack(sp, count: 64, [4: UInt32(sp) + 64, 5: 0x12000, 8: 0x41000])
    for offset in 0..<8 { memory.code[0x12000 - 8 + UInt64(offset)] = 0x90 }
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp + 16))
    #expect(frames.prefix(2).map(\.0) == [0x11000, 0x41000], "\(frames)")
    #expect(frames.prefix(2).map(\.1) == [.context, .stackScan])
  }

  /// A frame record that does not move esp up ends the walk: no scan is tried after it.
  @Test func noProgressEndsTheWalk() {
    let sp = Self.top
    let memory = Self.stack(sp - 64, count: 64, [12: 0, 13: 0x12000, 18: 0x41000])
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: sp - 16))
    #expect(frames.map(\.0) == [0x11000], "\(frames)")
  }

  /// A scan takes the first word in a module; the word below it is the caller's ebp when it points
  /// above, within 128 KiB and readable, and the walk goes on by that frame record.
  @Test func aScanRecoversEbp() {
    let sp = Self.top
    let memory = Self.stack(sp, count: 64, [1: UInt32(sp) + 40, 2: 0x41000, 10: 0, 11: 0x12000])
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil))
    #expect(frames.map(\.0) == [0x11000, 0x41000, 0x12000], "\(frames)")
    #expect(frames.map(\.1) == [.context, .stackScan, .framePointer])
  }

  /// A module's STACK WIN walk comes first, given the parameter size of the frame below the callee;
  /// where it gives no caller the other methods follow, and where its caller's esp does not move up,
  /// the walk ends.
  @Test func stackWinFirstWithTheGrandCalleesParameters() {
    let sp = Self.top
    let memory = Self.stack(sp, count: 256, [:])
    let frames = Self.walk(memory, Self.registers(pc: 0x11000, sp: sp, fp: nil), windows: true)
    // 0x11000 + 0x100; then + 0x100 + 8 + 0x1000 twice; 0x13310 is past the made-up records' end, and
    // nothing on the stack is in a module.
    #expect(frames.map(\.0) == [0x11000, 0x11100, 0x12208, 0x13310], "\(frames)")
    #expect(frames.map(\.1) == [.context, .callFrameInfo, .callFrameInfo, .callFrameInfo])
    // From 0x12900 the made-up caller keeps esp: the end, though a frame record is there.
    let stuck = Self.stack(sp, count: 64, [4: UInt32(sp) + 64, 5: 0x41000])
    #expect(Self.walk(stuck, Self.registers(pc: 0x12900, sp: sp, fp: sp + 16), windows: true).map(\.0) == [0x12900])
  }
}
