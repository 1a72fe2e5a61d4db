import Glibc
@testable import ImageLog
import ImageLogTestSupport
import Testing

/// Garbage on the stacks of a real i386 core, as a torn or hostile core holds it: every thread of a
/// gcore of Tests/Programs/coredump-threads.c (gcc -m32 -O2 -fomit-frame-pointer) walked from its
/// NT_PRSTATUS registers while seeded bytes of its stack read as something else. A walk may end early
/// or take other frames; it stays within its frame limit and never traps or loops.
@Suite struct CoreUnwindingMalformedTests {
  /// The core's memory with one byte in `density` of `stacks` replaced, chosen and valued by a hash of
  /// the address and `seed` (the same byte reads the same every time, as memory does).
  struct GarbledStacks: MemoryReading {
    let core: CoreDump
    let stacks: [Range<UInt64>]
    let seed: UInt64
    let density: UInt64

    func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
      guard core.read(address, into: buffer) else { return false }
      for index in 0..<buffer.count {
        let at = address &+ UInt64(index)
        guard stacks.contains(where: { $0.contains(at) }) else { continue }
        var mixed = (at ^ seed) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= mixed >> 29
        if mixed % density == 0 { buffer[index] = UInt8(truncatingIfNeeded: mixed >> 8) }
      }
      return true
    }
  }

  @Test(.enabled(if: haveTool("gcore") && canRun32BitLibcPrograms,
                 "needs gcore (gdb) and gcc -m32 with a 32-bit libc (gcc-12-multilib)"))
  func garbledI386StacksOnlyChangeTheWalk() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-garbled")
    let program = directory + "/coredump-threads32"
    let build = try runTool(["gcc", "-m32", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                             packageRoot + "/Tests/Programs/coredump-threads.c", "-o", program])
    try #require(build.status == 0, "gcc -m32: \(build.error)")
    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    _ = try runTool(["gcore", "-o", directory + "/core", String(child.pid)])
    child.stop()
    let dump = try CoreDump(path: directory + "/core.\(child.pid)")
    let images = dump.unwindImages(dump.images().images)
    let registers = try dump.core.threads.map { thread in
      try #require(thread.registers.map(RegisterSet.init), "tid \(thread.tid) has no i386 registers")
    }
    try #require(registers.count == 4 && registers.allSatisfy { $0.architecture == .i386 })
    let stacks = registers.compactMap { set in set.sp.map { $0..<$0 + 0x4000 } }
    let originals = registers.map { StackUnwinder(memory: dump, images: images).unwind(from: $0, maxFrames: 64) }
    #expect(originals.allSatisfy { $0.count >= 5 }, "\(originals.map(\.count)) frames")
    var changed = 0, frames = 0
    for seed in 0..<100 as Range<UInt64> {
      let memory = GarbledStacks(core: dump, stacks: stacks, seed: seed, density: [4, 16, 64, 256][Int(seed % 4)])
      for (set, original) in zip(registers, originals) {
        let walk = StackUnwinder(memory: memory, images: images).unwind(from: set, maxFrames: 64)
        #expect(walk.count >= 1 && walk.count <= 64)
        #expect(walk.first == original.first, "frame 0 is the registers' pc whatever the stack holds")
        if walk != original { changed += 1 }
        frames += walk.count
      }
    }
    #expect(changed > 0, "garbage that changes no walk tests nothing")
    print("CoreUnwindingMalformedTests: 400 walks over garbled i386 stacks: \(changed) changed, \(frames) frames, no trap")
  }
}
