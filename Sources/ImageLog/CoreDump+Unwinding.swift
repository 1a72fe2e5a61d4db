public import ImageReaders

/// A core's memory as the unwinder reads it: the core's segments, then the verified files (`read`).
extension CoreDump: MemoryReading {}

extension CoreDump {
  /// The unwinder's view of `images` (text ranges, load biases, `PT_GNU_EH_FRAME` found through this
  /// core's memory, which falls back to each verified file for the text the core left out).
  public func unwindImages(_ images: [Image]) -> [UnwindImage] {
    UnwindImage.locate(images, in: self)
  }

  /// `thread`'s backtrace, unwound from its `NT_PRSTATUS` registers in this core's memory; empty with a
  /// reason when the thread cannot be unwound (no registers, a machine the unwinder does not know).
  public func unwind(_ thread: ELFCore.Thread, images: [UnwindImage], maxFrames: Int = 256)
    -> (frames: [UnwoundFrame], problem: String?) {
    thread.unwind(in: self, images: images, maxFrames: maxFrames)
  }

  /// `registers` in DWARF numbering (x86_64: rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6, rsp 7,
  /// r8-r15 8-15, rip 16; aarch64: x0-x30 0-30, sp 31, pc 32; i386: eax 0, ecx 1, edx 2, ebx 3, esp 4,
  /// ebp 5, esi 6, edi 7, eip 8); `nil` for a layout the unwinder does not know.
  static func registerSet(_ registers: ELFCore.Registers) -> RegisterSet? {
    switch registers.layout {
    case .x86_64:
      var set = RegisterSet(architecture: .x86_64)
      let names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
                   "r14", "r15", "rip"]
      for (number, name) in names.enumerated() { set[dwarf: number] = registers[name] }
      return set
    case .aarch64:
      var set = RegisterSet(architecture: .aarch64)
      for number in 0...28 { set[dwarf: number] = registers["x\(number)"] }
      set[dwarf: 29] = registers["fp"]
      set[dwarf: 30] = registers["lr"]
      set[dwarf: 31] = registers["sp"]
      set[dwarf: 32] = registers["pc"]
      return set
    case .i386:
      var set = RegisterSet(architecture: .i386)
      let names = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip"]
      // pr_reg's 32-bit longs: the upper half is zero, as a 32-bit process's pointers are.
      for (number, name) in names.enumerated() { set[dwarf: number] = registers[name].map { $0 & 0xFFFF_FFFF } }
      return set
    }
  }
}

extension ELFCore.Thread {
  /// The thread's backtrace, unwound from its `NT_PRSTATUS` registers in `memory` (a core's, or the
  /// dumping process's own while a core handler reads it); empty with a reason when the thread cannot
  /// be unwound (no registers, a machine the unwinder does not know).
  public func unwind(in memory: some MemoryReading, images: [UnwindImage], maxFrames: Int = 256)
    -> (frames: [UnwoundFrame], problem: String?) {
    guard let registers else { return ([], "the core holds no registers for this thread") }
    guard let set = CoreDump.registerSet(registers) else {
      // A register layout the unwinder has no numbering for: frame 0 is still the thread's pc, and the
      // report says why there is no more.
      return (registers.pc.map { [UnwoundFrame(pc: $0, trust: .context, pcIsExact: true)] } ?? [],
              "frame 0 only: the unwinder does not walk \(registers.layout) stacks")
    }
    let frames = StackUnwinder(memory: memory, images: images).unwind(from: set, maxFrames: maxFrames)
    return (frames, frames.isEmpty ? "the registers hold no pc and stack pointer" : nil)
  }
}
