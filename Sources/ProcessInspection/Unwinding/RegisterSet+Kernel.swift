import ImageReaders

extension RegisterSet {
  /// The unwinder's registers from the kernel's whole set (a core's `NT_PRSTATUS`, a live thread's, a
  /// minidump's context), in DWARF numbering (x86_64: rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6,
  /// rsp 7, r8-r15 8-15, rip 16; aarch64: x0-x30 0-30, sp 31, pc 32; i386: eax 0, ecx 1, edx 2, ebx 3,
  /// esp 4, ebp 5, esi 6, edi 7, eip 8; arm: r0-r10 0-10, fp 11, ip 12, sp 13, lr 14, pc 15).
  package init(_ registers: KernelRegisters) {
    switch registers.layout {
    case .x86_64:
      var set = RegisterSet(architecture: .x86_64)
      let names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
                   "r14", "r15", "rip"]
      for (number, name) in names.enumerated() { set[dwarf: number] = registers[name] }
      self = set
    case .aarch64:
      var set = RegisterSet(architecture: .aarch64)
      for number in 0...28 { set[dwarf: number] = registers["x\(number)"] }
      set[dwarf: 29] = registers["fp"]
      set[dwarf: 30] = registers["lr"]
      set[dwarf: 31] = registers["sp"]
      set[dwarf: 32] = registers["pc"]
      self = set
    case .i386:
      var set = RegisterSet(architecture: .i386)
      let names = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip"]
      // pr_reg's 32-bit longs: the upper half is zero, as a 32-bit process's pointers are.
      for (number, name) in names.enumerated() { set[dwarf: number] = registers[name].map { $0 & 0xFFFF_FFFF } }
      self = set
    case .arm:
      var set = RegisterSet(architecture: .arm)
      let names = (0...10).map { "r\($0)" } + ["fp", "ip", "sp", "lr", "pc"]
      for (number, name) in names.enumerated() { set[dwarf: number] = registers[name].map { $0 & 0xFFFF_FFFF } }
      self = set
    }
  }
}
