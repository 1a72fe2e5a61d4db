/// The DWARF register names Breakpad's `STACK CFI` records use, by architecture: the symbol-file reader
/// (SymbolStore+CFI) and the writer (BreakpadSymbolWriter) name registers from the same tables.
package enum BreakpadRegisterNames {
  /// The DWARF register names of `architecture` (symbolic's tables, Breakpad's names), `nil` for one
  /// with no table.
  package static func of(_ architecture: String) -> [String]? {
    switch architecture {
    case "x86_64", "x86_64h": x86_64
    case "x86": i386
    case "arm64", "arm64e": arm64
    case "arm": arm
    case "mips", "mips64": mips
    default: nil
    }
  }

  static let x86_64 = [
    "$rax", "$rdx", "$rcx", "$rbx", "$rsi", "$rdi", "$rbp", "$rsp", "$r8", "$r9", "$r10", "$r11", "$r12", "$r13",
    "$r14", "$r15", "$rip", "$xmm0", "$xmm1", "$xmm2", "$xmm3", "$xmm4", "$xmm5", "$xmm6", "$xmm7", "$xmm8",
    "$xmm9", "$xmm10", "$xmm11", "$xmm12", "$xmm13", "$xmm14", "$xmm15", "$st0", "$st1", "$st2", "$st3", "$st4",
    "$st5", "$st6", "$st7", "$mm0", "$mm1", "$mm2", "$mm3", "$mm4", "$mm5", "$mm6", "$mm7", "$rflags", "$es",
    "$cs", "$ss", "$ds", "$fs", "$gs", "$unused1", "$unused2", "$fs.base", "$gs.base", "$unused3", "$unused4",
    "$tr", "$ldtr", "$mxcsr", "$fcw", "$fsw",
  ]

  static let i386 = [
    "$eax", "$ecx", "$edx", "$ebx", "$esp", "$ebp", "$esi", "$edi", "$eip", "$eflags", "$unused1", "$st0",
    "$st1", "$st2", "$st3", "$st4", "$st5", "$st6", "$st7", "$unused2", "$unused3", "$xmm0", "$xmm1", "$xmm2",
    "$xmm3", "$xmm4", "$xmm5", "$xmm6", "$xmm7", "$mm0", "$mm1", "$mm2", "$mm3", "$mm4", "$mm5", "$mm6", "$mm7",
    "$fcw", "$fsw", "$mxcsr", "$es", "$cs", "$ss", "$ds", "$fs", "$gs", "$unused4", "$unused5", "$tr", "$ldtr",
  ]

  static let arm64: [String] = (0...30).map { "x\($0)" } + ["sp"] + [String](repeating: "", count: 32)
    + (0...31).map { "v\($0)" }

  static let arm: [String] = (0...12).map { "r\($0)" } + ["sp", "lr", "pc"] + (0...7).map { "f\($0)" } + ["fps", "cpsr"]
    + [String](repeating: "", count: 38) + (0...31).map { "s\($0)" } + (0...7).map { "f\($0)" }

  static let mips = [
    "$zero", "$at", "$v0", "$v1", "$a0", "$a1", "$a2", "$a3", "$t0", "$t1", "$t2", "$t3", "$t4", "$t5", "$t6",
    "$t7", "$s0", "$s1", "$s2", "$s3", "$s4", "$s5", "$s6", "$s7", "$t8", "$t9", "$k0", "$k1", "$gp", "$sp",
    "$fp", "$ra", "$lo", "$hi", "$pc", "$f0", "$f2", "$f3", "$f4", "$f5", "$f6", "$f7", "$f8", "$f9", "$f10",
    "$f11", "$f12", "$f13", "$f14", "$f15", "$f16", "$f17", "$f18", "$f19", "$f20", "$f21", "$f22", "$f23",
    "$f24", "$f25", "$f26", "$f27", "$f28", "$f29", "$f30", "$f31", "$fcsr", "$fir",
  ]
}
