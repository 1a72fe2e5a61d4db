/// A thread's general registers as the kernel's `elf_gregset_t` holds them: a core's `NT_PRSTATUS`, and
/// what `PTRACE_GETREGSET` gives for a live thread (`ProcessThreads`).
package struct KernelRegisters: Sendable, Equatable {
  /// Which `elf_gregset_t` layout `values` follow.
  package enum Layout: Sendable, Equatable {
    /// `struct user_regs_struct` (27 64-bit registers, `r15` first).
    case x86_64
    /// `struct user_pt_regs` (`x0`..`x30`, `sp`, `pc`, `pstate`).
    case aarch64
    /// i386 `struct user_regs_struct` (17 32-bit registers, `ebx` first).
    case i386
    /// arm `struct pt_regs` (`uregs[18]`: `r0`..`r10`, `fp`, `ip`, `sp`, `lr`, `pc`, `cpsr`, `ORIG_r0`).
    case arm
  }

  /// The layout of `values`.
  package var layout: Layout
  /// The registers in the kernel's order (`names[i]` names `values[i]`).
  package var values: [UInt64]

  /// Registers of `layout` in the kernel's order.
  package init(layout: Layout, values: [UInt64]) {
    self.layout = layout
    self.values = values
  }

  /// The names of `values`, in the kernel's order, as crash reports write them.
  package var names: [String] { Self.names(layout) }

  /// The register `name` (one of `names`), or `nil`.
  package subscript(name: String) -> UInt64? {
    guard let index = names.firstIndex(of: name), index < values.count else { return nil }
    return values[index]
  }

  /// The program counter (`rip`, `pc`, `eip`).
  package var pc: UInt64? {
    switch layout {
    case .x86_64: self["rip"]
    case .aarch64: self["pc"]
    case .i386: self["eip"]
    case .arm: self["pc"]
    }
  }

  /// The stack pointer (`rsp`, `sp`, `esp`).
  package var sp: UInt64? {
    switch layout {
    case .x86_64: self["rsp"]
    case .aarch64: self["sp"]
    case .i386: self["esp"]
    case .arm: self["sp"]
    }
  }

  /// The register names of `layout`, in the kernel's order.
  package static func names(_ layout: Layout) -> [String] {
    switch layout {
    case .x86_64: x86_64Names
    case .aarch64: aarch64Names
    case .i386: i386Names
    case .arm: armNames
    }
  }

  static let x86_64Names = ["r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx",
                            "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base",
                            "gs_base", "ds", "es", "fs", "gs"]
  static let aarch64Names = (0...28).map { "x\($0)" } + ["fp", "lr", "sp", "pc", "pstate"]
  static let armNames = (0...10).map { "r\($0)" } + ["fp", "ip", "sp", "lr", "pc", "cpsr", "orig_r0"]
  static let i386Names = ["ebx", "ecx", "edx", "esi", "edi", "ebp", "eax", "ds", "es", "fs", "gs", "orig_eax",
                          "eip", "cs", "eflags", "esp", "ss"]
}
