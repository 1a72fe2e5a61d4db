/// A thread's general registers: its architecture and the values in the kernel's order (the
/// `elf_gregset_t` of a core's `NT_PRSTATUS`, what `PTRACE_GETREGSET` gives, `struct user_regs_struct` /
/// `user_pt_regs` / arm's `pt_regs`), then the fault registers a signal's context adds (x86's `cr2`,
/// aarch64's `far` and `esr`). A register no source gave is `nil` (a report that lists two registers).
///
/// The kernel's order, not DWARF's, because it holds every general register a capture, a core or a
/// minidump's context carries (segment registers, `orig_rax`, `fs_base`, which DWARF numbers sparsely or
/// not at all), and a capture and a core give it as is. One table per architecture (`table`) names each
/// register as the kernel, Apple's crash reports and Breakpad's symbol files do and gives its DWARF number:
/// every lookup goes through it.
public struct Registers: Sendable, Equatable {
  /// The machines whose registers are held.
  public enum Architecture: Sendable, Equatable, CaseIterable {
    /// x86_64: `struct user_regs_struct` (27 registers, `r15` first), then `cr2`.
    case x86_64
    /// aarch64: `struct user_pt_regs` (`x0`..`x30`, `sp`, `pc`, `pstate`), then `far`, `esr`.
    case aarch64
    /// i386: `struct user_regs_struct` (17 registers, `ebx` first), then `cr2`.
    case i386
    /// arm: `struct pt_regs` (`uregs[18]`: `r0`..`r10`, `fp`, `ip`, `sp`, `lr`, `pc`, `cpsr`, `ORIG_r0`).
    case arm
  }

  /// One register of an architecture's table.
  package struct Register: Sendable, Equatable {
    /// The kernel's name (`sys/user.h`, `asm/ptrace.h`).
    package var name: String
    /// The name in Apple's `Thread State` rows (`rfl`, `cpsr`, `r11`), `nil` for one they do not list.
    package var appleName: String?
    /// The DWARF register number (the psABI's, as `.eh_frame` and the C unwinder number them), `nil` for none.
    package var dwarf: Int?
    /// Hex digits Apple's rows write the value with (16; 8 for 32-bit registers).
    package var digits: Int

    init(_ name: String, apple: String? = nil, dwarf: Int?, digits: Int = 16) {
      self.name = name
      appleName = apple
      self.dwarf = dwarf
      self.digits = digits
    }

    /// The name Breakpad's `STACK CFI` records give the register (`$rip`, `x29`, `r12`), from its DWARF number.
    package func breakpadName(_ architecture: Architecture) -> String? {
      guard let dwarf, let names = Registers.breakpadNames(architecture.breakpadName), dwarf < names.count,
            !names[dwarf].isEmpty else { return nil }
      return names[dwarf]
    }
  }

  /// The machine whose table applies.
  public let architecture: Architecture
  /// The values in the order of `table` (`nil`: not given).
  package private(set) var values: [UInt64?]

  /// Registers of `architecture` with `values` in the order of its table (the kernel's set, then the
  /// fault registers); missing ones are not given, extra ones are dropped. Set others by name.
  public init(_ architecture: Architecture, values: [UInt64?] = []) {
    self.architecture = architecture
    let count = Self.table(architecture).count
    self.values = Array((values + [UInt64?](repeating: nil, count: max(0, count - values.count))).prefix(count))
  }

  /// The table of `architecture`.
  package var table: [Register] { Self.table(architecture) }

  /// The register named `name` by the kernel, Apple's rows or Breakpad (`eflags`, `rfl` and `$rflags`
  /// are one register), `nil` when not given or not a name of the table. Setting a name not in the
  /// table is ignored.
  public subscript(name: String) -> UInt64? {
    get { Self.index(of: name, in: architecture).flatMap { values[$0] } }
    set { if let index = Self.index(of: name, in: architecture) { values[index] = newValue } }
  }

  /// The register DWARF numbers `number`, when the table has it and it is given.
  package subscript(dwarf number: Int) -> UInt64? {
    table.firstIndex { $0.dwarf == number }.flatMap { values[$0] }
  }

  /// The program counter (`rip`, `pc`, `eip`).
  public var pc: UInt64? { self[Self.roles(architecture).pc] }
  /// The stack pointer (`rsp`, `sp`, `esp`).
  public var sp: UInt64? { self[Self.roles(architecture).sp] }
  /// The frame pointer (`rbp`, `x29`, `ebp`, `r11`).
  public var fp: UInt64? { self[Self.roles(architecture).fp] }

  /// The kernel's names of the program counter, the stack pointer and the frame pointer.
  static func roles(_ architecture: Architecture) -> (pc: String, sp: String, fp: String) {
    switch architecture {
    case .x86_64: ("rip", "rsp", "rbp")
    case .aarch64: ("pc", "sp", "fp")
    case .i386: ("eip", "esp", "ebp")
    case .arm: ("pc", "sp", "fp")
    }
  }

  /// The number of registers the kernel's set has (the table's first entries; the fault registers follow).
  package static func kernelCount(_ architecture: Architecture) -> Int {
    switch architecture {
    case .x86_64: 27
    case .aarch64: 34
    case .i386: 17
    case .arm: 18
    }
  }

  static func index(of name: String, in architecture: Architecture) -> Int? {
    let table = table(architecture)
    return table.firstIndex { $0.name == name || $0.appleName == name }
      ?? table.firstIndex { register in
        register.breakpadName(architecture).map { $0 == name || $0 == "$" + name } ?? false
      }
  }

  /// The table of `architecture`: the kernel's set in its order, then the fault registers.
  package static func table(_ architecture: Architecture) -> [Register] {
    switch architecture {
    case .x86_64: x86_64Table
    case .aarch64: aarch64Table
    case .i386: i386Table
    case .arm: armTable
    }
  }

  // The x86_64 psABI's numbers (rax 0, rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6, rsp 7, r8-r15 8-15, the
  // return address 16, rFLAGS 49, es cs ss ds fs gs 50-55, fs.base 58, gs.base 59).
  static let x86_64Table: [Register] = [
    Register("r15", apple: "r15", dwarf: 15), Register("r14", apple: "r14", dwarf: 14),
    Register("r13", apple: "r13", dwarf: 13), Register("r12", apple: "r12", dwarf: 12),
    Register("rbp", apple: "rbp", dwarf: 6), Register("rbx", apple: "rbx", dwarf: 3),
    Register("r11", apple: "r11", dwarf: 11), Register("r10", apple: "r10", dwarf: 10),
    Register("r9", apple: "r9", dwarf: 9), Register("r8", apple: "r8", dwarf: 8),
    Register("rax", apple: "rax", dwarf: 0), Register("rcx", apple: "rcx", dwarf: 2),
    Register("rdx", apple: "rdx", dwarf: 1), Register("rsi", apple: "rsi", dwarf: 4),
    Register("rdi", apple: "rdi", dwarf: 5), Register("orig_rax", dwarf: nil),
    Register("rip", apple: "rip", dwarf: 16), Register("cs", dwarf: 51), Register("eflags", apple: "rfl", dwarf: 49),
    Register("rsp", apple: "rsp", dwarf: 7), Register("ss", dwarf: 52), Register("fs_base", dwarf: 58),
    Register("gs_base", dwarf: 59), Register("ds", dwarf: 53), Register("es", dwarf: 50), Register("fs", dwarf: 54),
    Register("gs", dwarf: 55),
    Register("cr2", apple: "cr2", dwarf: nil),
  ]

  // AADWARF64: x0-x30 0-30 (x29 the frame pointer, x30 the link register), sp 31; the C unwinder numbers
  // the pc 32, as Breakpad's table leaves it unnamed.
  static let aarch64Table: [Register] = (0...28).map { (number: Int) in Register("x\(number)", apple: "x\(number)", dwarf: number) } + [
    Register("fp", apple: "fp", dwarf: 29), Register("lr", apple: "lr", dwarf: 30), Register("sp", apple: "sp", dwarf: 31),
    Register("pc", apple: "pc", dwarf: 32), Register("pstate", apple: "cpsr", dwarf: nil, digits: 8),
    Register("far", apple: "far", dwarf: nil), Register("esr", apple: "esr", dwarf: nil, digits: 8),
  ]

  // The i386 psABI's numbers (eax 0, ecx 1, edx 2, ebx 3, esp 4, ebp 5, esi 6, edi 7, eip 8, eflags 9,
  // es cs ss ds fs gs 40-45).
  static let i386Table: [Register] = [
    Register("ebx", apple: "ebx", dwarf: 3, digits: 8), Register("ecx", apple: "ecx", dwarf: 1, digits: 8),
    Register("edx", apple: "edx", dwarf: 2, digits: 8), Register("esi", apple: "esi", dwarf: 6, digits: 8),
    Register("edi", apple: "edi", dwarf: 7, digits: 8), Register("ebp", apple: "ebp", dwarf: 5, digits: 8),
    Register("eax", apple: "eax", dwarf: 0, digits: 8), Register("ds", apple: "ds", dwarf: 43, digits: 8),
    Register("es", apple: "es", dwarf: 40, digits: 8), Register("fs", apple: "fs", dwarf: 44, digits: 8),
    Register("gs", apple: "gs", dwarf: 45, digits: 8), Register("orig_eax", dwarf: nil, digits: 8),
    Register("eip", apple: "eip", dwarf: 8, digits: 8), Register("cs", apple: "cs", dwarf: 41, digits: 8),
    Register("eflags", apple: "efl", dwarf: 9, digits: 8), Register("esp", apple: "esp", dwarf: 4, digits: 8),
    Register("ss", apple: "ss", dwarf: 42, digits: 8),
    Register("cr2", apple: "cr2", dwarf: nil, digits: 8),
  ]

  // AADWARF: r0-r15 0-15 (r11 the frame pointer, r12 ip, r13 sp, r14 lr, r15 pc).
  static let armTable: [Register] = (0...10).map { (number: Int) in Register("r\(number)", apple: "r\(number)", dwarf: number, digits: 8) } + [
    Register("fp", apple: "r11", dwarf: 11, digits: 8), Register("ip", apple: "ip", dwarf: 12, digits: 8),
    Register("sp", apple: "sp", dwarf: 13, digits: 8), Register("lr", apple: "lr", dwarf: 14, digits: 8),
    Register("pc", apple: "pc", dwarf: 15, digits: 8), Register("cpsr", apple: "cpsr", dwarf: nil, digits: 8),
    Register("orig_r0", dwarf: nil, digits: 8),
  ]
}

extension Registers.Architecture {
  /// The name of the architecture's register section in Apple's crash reports (`Thread 0 crashed with
  /// X86 Thread State (64-bit):`).
  package var appleThreadState: String {
    switch self {
    case .x86_64: "X86 Thread State (64-bit)"
    case .aarch64: "ARM Thread State (64-bit)"
    case .i386: "X86 Thread State (32-bit)"
    case .arm: "ARM Thread State (32-bit)"
    }
  }

  /// The architecture whose registers Apple's section `title` lists, `nil` for another (PowerPC's).
  package init?(appleThreadState title: String) {
    guard let architecture = Self.allCases.first(where: { $0.appleThreadState == title }) else { return nil }
    self = architecture
  }

  /// The architecture as Breakpad's `MODULE` line names it (`x86_64`, `arm64`, `x86`, `arm`).
  package var breakpadName: String {
    switch self {
    case .x86_64: "x86_64"
    case .aarch64: "arm64"
    case .i386: "x86"
    case .arm: "arm"
    }
  }
}

extension Registers {
  /// The names Breakpad's `STACK CFI` records give DWARF registers 0, 1, ... of `architecture` (as a
  /// `MODULE` line names it), `nil` for one with no table: the symbol-file reader and writer name
  /// registers from these (symbolic's tables, Breakpad's names).
  package static func breakpadNames(_ architecture: String) -> [String]? {
    switch architecture {
    case "x86_64", "x86_64h": breakpadX86_64
    case "x86": breakpadI386
    case "arm64", "arm64e": breakpadARM64
    case "arm": breakpadARM
    case "mips", "mips64": breakpadMIPS
    default: nil
    }
  }

  static let breakpadX86_64 = [
    "$rax", "$rdx", "$rcx", "$rbx", "$rsi", "$rdi", "$rbp", "$rsp", "$r8", "$r9", "$r10", "$r11", "$r12", "$r13",
    "$r14", "$r15", "$rip", "$xmm0", "$xmm1", "$xmm2", "$xmm3", "$xmm4", "$xmm5", "$xmm6", "$xmm7", "$xmm8",
    "$xmm9", "$xmm10", "$xmm11", "$xmm12", "$xmm13", "$xmm14", "$xmm15", "$st0", "$st1", "$st2", "$st3", "$st4",
    "$st5", "$st6", "$st7", "$mm0", "$mm1", "$mm2", "$mm3", "$mm4", "$mm5", "$mm6", "$mm7", "$rflags", "$es",
    "$cs", "$ss", "$ds", "$fs", "$gs", "$unused1", "$unused2", "$fs.base", "$gs.base", "$unused3", "$unused4",
    "$tr", "$ldtr", "$mxcsr", "$fcw", "$fsw",
  ]

  static let breakpadI386 = [
    "$eax", "$ecx", "$edx", "$ebx", "$esp", "$ebp", "$esi", "$edi", "$eip", "$eflags", "$unused1", "$st0",
    "$st1", "$st2", "$st3", "$st4", "$st5", "$st6", "$st7", "$unused2", "$unused3", "$xmm0", "$xmm1", "$xmm2",
    "$xmm3", "$xmm4", "$xmm5", "$xmm6", "$xmm7", "$mm0", "$mm1", "$mm2", "$mm3", "$mm4", "$mm5", "$mm6", "$mm7",
    "$fcw", "$fsw", "$mxcsr", "$es", "$cs", "$ss", "$ds", "$fs", "$gs", "$unused4", "$unused5", "$tr", "$ldtr",
  ]

  static let breakpadARM64: [String] = (0...30).map { "x\($0)" } + ["sp"] + [String](repeating: "", count: 32)
    + (0...31).map { "v\($0)" }

  static let breakpadARM: [String] = (0...12).map { "r\($0)" } + ["sp", "lr", "pc"] + (0...7).map { "f\($0)" }
    + ["fps", "cpsr"] + [String](repeating: "", count: 38) + (0...31).map { "s\($0)" } + (0...7).map { "f\($0)" }

  static let breakpadMIPS = [
    "$zero", "$at", "$v0", "$v1", "$a0", "$a1", "$a2", "$a3", "$t0", "$t1", "$t2", "$t3", "$t4", "$t5", "$t6",
    "$t7", "$s0", "$s1", "$s2", "$s3", "$s4", "$s5", "$s6", "$s7", "$t8", "$t9", "$k0", "$k1", "$gp", "$sp",
    "$fp", "$ra", "$lo", "$hi", "$pc", "$f0", "$f2", "$f3", "$f4", "$f5", "$f6", "$f7", "$f8", "$f9", "$f10",
    "$f11", "$f12", "$f13", "$f14", "$f15", "$f16", "$f17", "$f18", "$f19", "$f20", "$f21", "$f22", "$f23",
    "$f24", "$f25", "$f26", "$f27", "$f28", "$f29", "$f30", "$f31", "$fcsr", "$fir",
  ]
}
