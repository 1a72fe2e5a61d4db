import ImageReaders

extension RegisterSet {
  /// The unwinder's registers from a thread's (a core's `NT_PRSTATUS`, a live thread's, a minidump's
  /// context): each general register up to the pc placed at its DWARF number in `Registers`' table.
  package init(_ registers: Registers) {
    let architecture = registers.architecture
    self.init(architecture: architecture)
    // A 32-bit process's registers in 64-bit words (pr_reg's longs, ptrace's): the upper half is zero.
    let mask: UInt64 = architecture == .i386 || architecture == .arm ? 0xFFFF_FFFF : .max
    for (register, value) in zip(registers.table, registers.values) {
      guard let number = register.dwarf, number <= numbers.pc, let value else { continue }
      self[dwarf: number] = value & mask
    }
  }
}
