import ImageLog
import ImageLogTestSupport
import ImageReaders
@testable import Symbolication
import Testing

/// A Windows x86 module's `.sym` as the unwinder's `WindowsFrameSource`: the parameter size a frame
/// leaves for the walk above it is rust-minidump's (`fill_symbol`): the `STACK WIN` record's where a
/// `FUNC` holds the address, else the `FUNC`'s, else the `PUBLIC`'s; and the caller by a record, in
/// the unwinder's register numbering (i386 DWARF), through the walk's memory.
@Suite struct BreakpadWindowsFrameSourceTests {
  static let text = """
    MODULE windows x86 5A9832E5287241C1838ED98914E9B7FF1 test.pdb
    FUNC 1000 20 8 withRecord
    FUNC 1100 20 4 withoutRecord
    PUBLIC 1200 10 publicOnly
    STACK WIN 4 1000 20 0 0 c 0 0 0 1 $T0 $ebp = $eip $T0 4 + ^ = $ebp $T0 ^ = $esp $T0 8 + =

    """

  static func source() throws -> BreakpadWindowsFrameSource {
    let bytes = Array(text.utf8)
    let symbols = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    let frames = try ByteReader.reading(bytes) { reader throws(FormatError) in try BreakpadWindowsFrames(reader) }
    return BreakpadWindowsFrameSource(frames: frames, symbols: symbols)
  }

  @Test func parameterSizes() throws {
    let source = try Self.source()
    #expect(source.parameterSize(at: 0x1010) == 0xC)
    #expect(source.parameterSize(at: 0x1110) == 4)
    #expect(source.parameterSize(at: 0x1204) == 0x10)
    #expect(source.parameterSize(at: 0x0800) == nil)
  }

  @Test func callerInTheUnwindersNumbering() throws {
    let source = try Self.source()
    var callee = RegisterSet(architecture: .i386)
    callee.pc = 0x40_1010
    callee.sp = 0x12_0000
    callee.fp = 0x12_0040
    var memory: [UInt64: UInt8] = [:]
    for (address, word) in [(UInt64(0x12_0040), UInt32(0x12_0080)), (0x12_0044, 0x40_2000)] {
      for index in 0..<4 { memory[address + UInt64(index)] = UInt8(truncatingIfNeeded: word >> (8 * index)) }
    }
    let caller = source.caller(of: callee, at: 0x1010, grandCalleeParameterSize: 0, hasGrandCallee: false,
                               memory: ByteMemory(bytes: memory))
    #expect(caller?.pc == 0x40_2000 && caller?.sp == 0x12_0048 && caller?.fp == 0x12_0080, "\(String(describing: caller))")
    #expect(caller?[dwarf: 3] == nil && caller?[dwarf: 0] == nil)
    #expect(source.caller(of: callee, at: 0x1110, grandCalleeParameterSize: 0, hasGrandCallee: false,
                          memory: ByteMemory(bytes: memory)) == nil)
  }

  /// Bytes at addresses; anything else is unreadable.
  struct ByteMemory: MemoryReading {
    var bytes: [UInt64: UInt8]
    func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
      for index in 0..<buffer.count {
        guard let byte = bytes[address + UInt64(index)] else { return false }
        buffer[index] = byte
      }
      return true
    }
  }
}
