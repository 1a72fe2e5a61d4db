import ProcessInspection
import ImageReaders

/// Bytes of a mapped file seen at a link-time address, for the CFI engine (no copy).
struct MappedSectionMemory: MemoryReading {
  let bytes: UnsafeRawBufferPointer
  let address: UInt64

  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    let (offset, below) = address.subtractingReportingOverflow(self.address)
    guard !below, offset <= UInt64(bytes.count), UInt64(buffer.count) <= UInt64(bytes.count) - offset else { return false }
    let start = Int(offset)  // offset <= bytes.count
    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<start + buffer.count]))
    return true
  }
}

/// STACK CFI records from `.debug_frame` and `.eh_frame`, as symbolic's `AsciiCfiWriter` writes them for
/// `dump_syms`: per FDE a `STACK CFI INIT` row with its whole range, then a `STACK CFI` row wherever
/// the CFA rule or a register's rule changes, mentioning only what changed. Register names are
/// Breakpad's for the architecture (`$rsp`, `$rbx`; `x29`, `sp`); the return address column is `.ra`.
///
/// Rules Breakpad's postfix language cannot say are left out, as both Mozilla's and Google's
/// `dump_syms` leave them out: a CFA or register given by a DWARF expression (a PLT's CFA), and
/// `DW_CFA_undefined` (the symbol file format documents `.undef`, but neither dumper writes it, and a
/// stack walker then stops at a missing `.ra` as it would at `.undef`). A row left with nothing to
/// say is not written.
enum BreakpadFrameRules {
  /// The DWARF register names of `architecture` (symbolic's tables, Breakpad's names), `nil` for one
  /// with no table.
  static func registerNames(_ architecture: String) -> [String]? {
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

  /// The CFI engine's view of `section`.
  static func table(_ section: BreakpadFrameSection) -> CallFrameTable {
    CallFrameTable(memory: MappedSectionMemory(bytes: section.bytes, address: section.vmAddress),
                   address: section.vmAddress, size: UInt64(section.bytes.count),
                   kind: section.isEHFrame ? .ehFrame : .debugFrame, addressSize: section.addressSize)
  }

  /// The FDEs of `section` in section order, with a note when a malformed entry ends them early.
  static func entries(_ section: BreakpadFrameSection) -> (entries: [CallFrameTable.Entry], notes: [String]) {
    let (entries, complete) = table(section).entries()
    guard !complete else { return (entries, []) }
    let name = section.isEHFrame ? ".eh_frame" : ".debug_frame"
    return (entries, ["\(section.path): \(name): a malformed entry ends the call frame entries after \(entries.count)"])
  }

  /// Writes the records of `entries` (FDEs of `section`) to `output` (draining it to `sink` as it
  /// grows); returns notes for FDEs left out.
  static func write(_ entries: ArraySlice<CallFrameTable.Entry>, of section: BreakpadFrameSection, architecture: String,
                    into output: inout UTF8Output, sink: (UnsafeRawBufferPointer) -> Void) -> [String] {
    let names = registerNames(architecture) ?? []
    func name(_ register: Int) -> String? {
      register >= 0 && register < names.count && !names[register].isEmpty ? names[register] : nil
    }
    let table = table(section)
    var notes: [String] = []
    var ruleCache: [CallFrameRule?] = []
    var present: [CallFrameRule?] = []
    var order: [Int] = []  // registers in the order they first got a rule (gimli keeps them so)
    var ordered: [Bool] = []
    for entry in entries {
      guard entry.pcRange.lowerBound != .max, entry.pcRange.lowerBound >= section.loadAddress else { continue }
      guard let rows = table.ruleRows(of: entry), let first = rows.first, let last = rows.last else {
        if !entry.pcRange.isEmpty {
          notes.append("\(section.path): the call frame entry at offset 0x\(hexDigits(entry.offset)) has malformed instructions")
        }
        continue
      }
      let start = first.location
      var cfaCache: CallFrameRow.CFA?
      ruleCache.removeAll(keepingCapacity: true)
      order.removeAll(keepingCapacity: true)
      ordered.removeAll(keepingCapacity: true)
      for row in rows {
        let rowStart = output.count
        var written = false
        if row.location == start {
          output.append("STACK CFI INIT ")
          output.appendHex(start &- section.loadAddress)
          output.append(byte: UInt8(ascii: " "))
          output.appendHex(last.end &- start)
        } else {
          output.append("STACK CFI ")
          output.appendHex(row.location &- section.loadAddress)
        }
        if cfaCache != row.cfa {
          cfaCache = row.cfa
          if case .registerOffset(let register, let offset) = row.cfa, let registerName = name(register) {
            output.append(" .cfa: ")
            output.append(registerName)
            output.append(byte: UInt8(ascii: " "))
            output.appendDecimal(Int(offset))
            output.append(" +")
            written = true
          }
        }
        // The rules in force (an undefined register has none, as in gimli); a register getting its
        // first rule joins the order (the return address first: the CIE gives it before the FDE).
        present.removeAll(keepingCapacity: true)
        var newcomers = 0
        for (register, rule) in row.rules {
          if case .undefined = rule { continue }
          while present.count <= register { present.append(nil) }
          present[register] = rule
          while ruleCache.count <= register { ruleCache.append(nil) }
          while ordered.count <= register { ordered.append(false) }
          if !ordered[register] {
            ordered[register] = true
            if register == row.returnAddressRegister { order.insert(register, at: order.count - newcomers) } else { order.append(register) }
            newcomers += 1
          }
        }
        for register in order {
          guard register < present.count, let rule = present[register], ruleCache[register] != rule else { continue }
          ruleCache[register] = rule
          switch rule {
          case .offset, .valueOffset: break
          case .sameValue: guard name(register) != nil else { continue }
          case .register(let other): guard name(other) != nil else { continue }
          default: continue
          }
          if register == row.returnAddressRegister {
            output.append(" .ra: ")
          } else {
            guard let own = name(register) else { continue }
            output.append(byte: UInt8(ascii: " "))
            output.append(own)
            output.append(": ")
          }
          switch rule {
          case .sameValue: output.append(name(register) ?? "")
          case .offset(let offset):
            output.append(".cfa ")
            output.appendDecimal(Int(offset))
            output.append(" + ^")
          case .valueOffset(let offset):
            output.append(".cfa ")
            output.appendDecimal(Int(offset))
            output.append(" +")
          case .register(let other): output.append(name(other) ?? "")
          default: break
          }
          written = true
        }
        guard written else {
          output.truncate(to: rowStart)
          continue
        }
        output.append(byte: UInt8(ascii: "\n"))
        output.drain(over: 1 << 16, to: sink)
      }
    }
    return notes
  }

}
