internal import CImageLogProcess
internal import Glibc
import ImageReaders

extension ProcessThreads {
  /// Gives thread `tid` the registers its crash handler recorded (DWARF-numbered `values`, and the flags
  /// register: x86_64's `eflags`, aarch64's `pstate`) in place of those ptrace read where the handler
  /// waits, and copies its stack again from the recorded stack pointer: the crashed frames lie above it,
  /// as they were, while the handler waits on its alternate stack or below them. The kernel-order
  /// registers keep what the handler cannot change (segment registers, `fs_base`). Only while the crashed
  /// process still waits: its stack is read live.
  package mutating func replaceRegisters(ofThread tid: Int32, dwarf values: [UInt64?], flags: UInt64) {
    guard let index = threads.firstIndex(where: { $0.tid == tid }), values.contains(where: { $0 != nil }) else { return }
    threads[index].registerValues = values
    threads[index].problem = nil
    threads[index].exited = false
    #if arch(x86_64)
    let architecture = Registers.Architecture.x86_64, stackPointer = 7, redZone: UInt64 = 128
    #else
    let architecture = Registers.Architecture.aarch64, stackPointer = 31, redZone: UInt64 = 0
    #endif
    var registers = threads[index].registers.flatMap { $0.architecture == architecture ? $0 : nil }
      ?? Registers(architecture, values: [UInt64?](repeating: 0, count: Registers.kernelCount(architecture)))
    for (number, value) in values.enumerated() {
      guard let value, let place = registers.table.firstIndex(where: { $0.dwarf == number }) else { continue }
      registers[registers.table[place].name] = value
    }
    registers[architecture == .x86_64 ? "eflags" : "pstate"] = flags
    threads[index].registers = registers
    threads[index].stack = nil
    guard values.indices.contains(stackPointer), let sp = values[stackPointer], sp >= redZone,
          let mapping = (try? ProcessImages.readMappings(of: pid))?.first(where: { $0.start <= sp && sp < $0.end }) else { return }
    let start = max(sp - redZone, mapping.start)
    let length = Int(min(mapping.end - start, Self.maxStackBytes))  // at most maxStackBytes: fits an Int
    var bytes = [UInt8](repeating: 0, count: length)
    let read = bytes.withUnsafeMutableBytes { il_read_process_memory(pid, start, $0.baseAddress, $0.count) }
    guard read > 0 else { return }
    threads[index].stack = StackCopy(address: start, bytes: Array(bytes.prefix(read)))
  }
}
