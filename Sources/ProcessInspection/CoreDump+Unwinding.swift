import ImageReaders

/// A core's memory as the unwinder reads it: the core's segments, then the verified files (`read`).
extension CoreDump: MemoryReading {}

extension CoreDump {
  /// The unwinder's view of `images` (text ranges, load biases, `PT_GNU_EH_FRAME` found through this
  /// core's memory, which falls back to each verified file for the text the core left out).
  package func unwindImages(_ images: [Image]) -> [UnwindImage] {
    UnwindImage.locate(images, in: self)
  }

  /// `thread`'s backtrace, unwound from its `NT_PRSTATUS` registers in this core's memory; empty with a
  /// reason when the thread cannot be unwound (the core holds no registers for it).
  package func unwind(_ thread: ELFCore.Thread, images: [UnwindImage], maxFrames: Int = 256)
    -> (frames: [UnwoundFrame], problem: String?) {
    thread.unwind(in: self, images: images, maxFrames: maxFrames)
  }
}

extension ELFCore.Thread {
  /// The thread's backtrace, unwound from its `NT_PRSTATUS` registers in `memory` (a core's, or the
  /// dumping process's own while a core handler reads it); empty with a reason when the thread cannot
  /// be unwound (the core holds no registers for it).
  package func unwind(in memory: some MemoryReading, images: [UnwindImage], maxFrames: Int = 256)
    -> (frames: [UnwoundFrame], problem: String?) {
    guard let registers else { return ([], "the core holds no registers for this thread") }
    let frames = StackUnwinder(memory: memory, images: images).unwind(from: RegisterSet(registers), maxFrames: maxFrames)
    return (frames, frames.isEmpty ? "the registers hold no pc and stack pointer" : nil)
  }
}
