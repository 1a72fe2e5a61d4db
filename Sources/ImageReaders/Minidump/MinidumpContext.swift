/// A thread's registers from a minidump's CPU context, in one of the layouts Linux writers use, decoded
/// field by field into named 64-bit values (`rip`, `rsp`, `x0`, `pc`, ...: the names `minidump-stackwalk`
/// prints). The floating-point and vector state is not decoded; `MinidumpFile.Thread.contextLocation`
/// still says where it is.
///
/// Which layout a context has comes from the dump's `SystemInfo` architecture, checked against the
/// CPU bits of the context's own flags (as rust-minidump and Breakpad's processor decide); a dump
/// without `SystemInfo` is decoded by the flags alone. MIPS, PowerPC, SPARC and RISC-V contexts are
/// refused by name.
package struct MinidumpContext: Sendable, Equatable {
  /// The context layouts this reader decodes.
  package enum Layout: Sendable, Equatable, CaseIterable {
    /// `CONTEXT_AMD64` (1232 bytes, flags `0x00100000`): Breakpad's, Crashpad's and Windows' x86_64.
    case amd64
    /// `CONTEXT_ARM64` (912 bytes, flags `0x00400000`): Crashpad's and Windows' aarch64.
    case arm64
    /// Breakpad's `MDRawContextARM64_Old` (796 bytes, 64-bit flags `0x80000000`), which Breakpad's Linux
    /// writer still writes for aarch64 (with `PROCESSOR_ARCHITECTURE` `0x8003`).
    case arm64Old
    /// `CONTEXT_X86` (716 bytes, flags `0x00010000`): i386.
    case x86
    /// Breakpad's `MDRawContextARM` (368 bytes, flags `0x40000000`): 32-bit ARM.
    case arm
  }

  /// The layout the values were decoded from.
  package var layout: Layout
  /// `context_flags` as written (a 64-bit field in `arm64Old`): the CPU bits and which groups are valid.
  package var flags: UInt64
  /// The registers, in the order of `names`.
  package var values: [UInt64]

  /// A context of `layout` with `values` in the order of `names(layout)` (missing ones read as 0).
  package init(layout: Layout, flags: UInt64? = nil, values: [UInt64]) {
    self.layout = layout
    self.flags = flags ?? Self.defaultFlags(layout)
    let count = Self.names(layout).count
    self.values = Array((values + [UInt64](repeating: 0, count: max(0, count - values.count))).prefix(count))
  }

  /// A context of `layout` from named registers; names the layout does not have are ignored, and
  /// registers not given are 0.
  package init(layout: Layout, flags: UInt64? = nil, registers: [String: UInt64]) {
    self.init(layout: layout, flags: flags, values: Self.names(layout).map { registers[$0] ?? 0 })
  }

  /// The register names of `values`.
  package var names: [String] { Self.names(layout) }

  /// The register `name` (one of `names`), or `nil`.
  package subscript(name: String) -> UInt64? {
    guard let index = names.firstIndex(of: name) else { return nil }
    return values[index]
  }

  /// The program counter (`rip`, `pc`, `eip`).
  package var pc: UInt64 { self[Self.pcName(layout)] ?? 0 }
  /// The stack pointer (`rsp`, `sp`, `esp`).
  package var sp: UInt64 { self[Self.spName(layout)] ?? 0 }

  /// The size of the layout's structure in bytes (a context may be longer: XSAVE state follows).
  package static func size(_ layout: Layout) -> Int {
    switch layout {
    case .amd64: 1232
    case .arm64: 912
    case .arm64Old: 796
    case .x86: 716
    case .arm: 368
    }
  }

  /// The CPU bits of the layout's flags (`MD_CONTEXT_AMD64`, ...).
  static func cpuFlag(_ layout: Layout) -> UInt64 {
    switch layout {
    case .amd64: 0x0010_0000
    case .arm64: 0x0040_0000
    case .arm64Old: 0x8000_0000
    case .x86: 0x0001_0000
    case .arm: 0x4000_0000
    }
  }

  /// The flags a writer sets for the registers this type holds: the CPU bits with the control and
  /// integer groups (and segments on x86).
  static func defaultFlags(_ layout: Layout) -> UInt64 {
    switch layout {
    case .amd64, .x86: cpuFlag(layout) | 0x7  // CONTROL | INTEGER | SEGMENTS
    case .arm64, .arm: cpuFlag(layout) | 0x3  // CONTROL | INTEGER
    case .arm64Old: cpuFlag(layout) | 0x2     // INTEGER (Breakpad's old layout has no CONTROL group)
    }
  }

  /// The register names of `layout`, in the order `values` holds them.
  package static func names(_ layout: Layout) -> [String] {
    switch layout {
    case .amd64: amd64Names
    case .arm64, .arm64Old: arm64Names
    case .x86: x86Names
    case .arm: armNames
    }
  }

  static func pcName(_ layout: Layout) -> String {
    switch layout {
    case .amd64: "rip"
    case .arm64, .arm64Old, .arm: "pc"
    case .x86: "eip"
    }
  }

  static func spName(_ layout: Layout) -> String {
    switch layout {
    case .amd64: "rsp"
    case .arm64, .arm64Old, .arm: "sp"
    case .x86: "esp"
    }
  }

  static let amd64Names = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
                           "r13", "r14", "r15", "rip", "eflags", "cs", "ds", "es", "fs", "gs", "ss", "mxcsr"]
  static let arm64Names = (0...28).map { "x\($0)" } + ["fp", "lr", "sp", "pc", "cpsr", "fpsr", "fpcr"]
  static let x86Names = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags", "cs", "ds", "es",
                         "fs", "gs", "ss"]
  // r11 is the frame pointer in the ARM procedure call standard's Linux use; rust-minidump names it so.
  static let armNames = (0...10).map { "r\($0)" } + ["fp", "r12", "sp", "lr", "pc", "cpsr"]

  /// Where each named register of `layout` lies in the structure: (byte offset, width in bytes), in
  /// the order of `names(layout)`. One table for the reader and the writer.
  static func fields(_ layout: Layout) -> [(offset: Int, width: Int)] {
    switch layout {
    case .amd64:
      // rax..r15 and rip are 8 bytes each from 0x78 in the structure's order rax, rcx, rdx, rbx, rsp,
      // rbp, rsi, rdi, r8-r15, rip; eflags at 0x44, the segment selectors from 0x38, mxcsr at 0x34.
      return (0..<17).map { (0x78 + 8 * $0, 8) }
        + [(0x44, 4), (0x38, 2), (0x3A, 2), (0x3C, 2), (0x3E, 2), (0x40, 2), (0x42, 2), (0x34, 4)]
    case .arm64:
      // flags@0, cpsr@4, x0..x30@8, sp@256, pc@264, 32 16-byte vector registers, fpcr@784, fpsr@788.
      return (0..<31).map { (8 + 8 * $0, 8) } + [(256, 8), (264, 8), (4, 4), (788, 4), (784, 4)]
    case .arm64Old:
      // 64-bit flags@0, x0..x30@8, sp@256, pc@264, cpsr@272, fpsr@276, fpcr@280 (packed to 4 bytes).
      return (0..<31).map { (8 + 8 * $0, 8) } + [(256, 8), (264, 8), (272, 4), (276, 4), (280, 4)]
    case .x86:
      // After flags, six debug registers and the 112-byte FLOATING_SAVE_AREA: gs@0x8C, fs, es, ds,
      // edi@0x9C, esi, ebx, edx, ecx, eax@0xB0, ebp@0xB4, eip@0xB8, cs, eflags@0xC0, esp@0xC4, ss@0xC8.
      return [(0xB0, 4), (0xAC, 4), (0xA8, 4), (0xA4, 4), (0xC4, 4), (0xB4, 4), (0xA0, 4), (0x9C, 4), (0xB8, 4),
              (0xC0, 4), (0xBC, 4), (0x98, 4), (0x94, 4), (0x90, 4), (0x8C, 4), (0xC8, 4)]
    case .arm:
      // flags@0, r0..r15@4, cpsr@68.
      return (0..<16).map { (4 + 4 * $0, 4) } + [(68, 4)]
    }
  }
}

extension MinidumpContext {
  /// The machine whose registers `layout` holds.
  package static func architecture(_ layout: Layout) -> Registers.Architecture {
    switch layout {
    case .amd64: .x86_64
    case .arm64, .arm64Old: .aarch64
    case .x86: .i386
    case .arm: .arm
    }
  }

  /// The context's registers as the model holds them, each found by its name in `Registers`' table (the
  /// context's `cpsr` is aarch64's `pstate`, its `r12` arm's `ip`); `mxcsr`, `fpsr` and `fpcr` are no
  /// general registers and are left out.
  package var registers: Registers {
    var registers = Registers(Self.architecture(layout))
    for (name, value) in zip(names, values) { registers[name] = value }
    return registers
  }

  /// A context of `layout` holding `registers` (0 for those not given, or all without any).
  package init(layout: Layout, holding registers: Registers?) {
    self.init(layout: layout, values: Self.names(layout).map { registers?[$0] ?? 0 })
  }

  /// The layout a dump's `PROCESSOR_ARCHITECTURE` value names, `nil` for none this reader decodes.
  static func layout(architecture: UInt16) -> Layout? {
    switch architecture {
    case 9: .amd64
    case 12: .arm64
    case 0x8003: .arm64Old
    case 0, 10: .x86  // INTEL and IA32_ON_WIN64
    case 5: .arm
    default: nil
    }
  }

  /// The layout whose CPU bits `bytes`' flags carry (each layout keeps its flags in a different place),
  /// for a dump without `SystemInfo`.
  static func layout(guessedFrom bytes: ByteReader) -> Layout? {
    for layout in Layout.allCases where bytes.count >= size(layout) {
      if let flags = try? flagsField(bytes, layout), flags & 0xFFFF_FF00 == cpuFlag(layout) { return layout }
    }
    return nil
  }

  static func flagsField(_ bytes: ByteReader, _ layout: Layout) throws(FormatError) -> UInt64 {
    switch layout {
    case .amd64: UInt64(try bytes.peek(UInt32.self, at: 0x30))
    case .arm64Old: try bytes.peek(UInt64.self, at: 0)
    case .arm64, .x86, .arm: UInt64(try bytes.peek(UInt32.self, at: 0))
    }
  }

  /// Decodes a context of the dump's `architecture` (`SystemInfo.processorArchitecture`, or `nil`
  /// without one). Throws `.minidump` when the bytes are shorter than the layout, when their flags name
  /// another CPU, or when the architecture is one this reader does not decode; `what` names the context.
  static func decode(_ bytes: ByteReader, architecture: UInt16?, _ what: String) throws(FormatError) -> MinidumpContext {
    var chosen: Layout
    if let architecture {
      guard let layout = layout(architecture: architecture) else {
        throw .minidump("\(what): \(MinidumpFile.architectureName(architecture)) contexts are not decoded")
      }
      chosen = layout
      // Breakpad's old arm64 layout is sometimes paired with the new architecture number, and the
      // reverse: the flags decide between the two.
      if chosen == .arm64 || chosen == .arm64Old, let other = [Layout.arm64, .arm64Old].first(where: { $0 != chosen }),
         bytes.count >= size(other), let flags = try? flagsField(bytes, other), flags & 0xFFFF_FF00 == cpuFlag(other),
         (try? flagsField(bytes, chosen)).map({ $0 & 0xFFFF_FF00 != cpuFlag(chosen) }) ?? true {
        chosen = other
      }
    } else {
      guard let layout = layout(guessedFrom: bytes) else {
        throw .minidump("\(what): \(bytes.count) bytes whose flags name no CPU this reader decodes (no SystemInfo stream)")
      }
      chosen = layout
    }
    let needed = size(chosen)
    guard bytes.count >= needed else {
      throw .minidump("\(what): \(bytes.count) bytes, too short for \(layoutName(chosen)) (\(needed))")
    }
    let flags = try flagsField(bytes, chosen)
    guard flags & 0xFFFF_FF00 == cpuFlag(chosen) else {
      throw .minidump("\(what): context flags 0x\(hexDigits(flags)) are not \(layoutName(chosen))'s (0x\(hexDigits(cpuFlag(chosen))))")
    }
    var values: [UInt64] = []
    let table = fields(chosen)
    values.reserveCapacity(table.count)
    // Every field lies inside size(chosen) bytes, which bytes.count >= needed guarantees.
    for (offset, width) in table {
      switch width {
      case 2: values.append(UInt64(bytes.field(UInt16.self, littleEndianAt: offset)))
      case 4: values.append(UInt64(bytes.field(UInt32.self, littleEndianAt: offset)))
      default: values.append(bytes.field(UInt64.self, littleEndianAt: offset))
      }
    }
    return MinidumpContext(layout: chosen, flags: flags, values: values)
  }

  /// The C name of `layout`'s structure, for messages.
  static func layoutName(_ layout: Layout) -> String {
    switch layout {
    case .amd64: "CONTEXT_AMD64"
    case .arm64: "CONTEXT_ARM64"
    case .arm64Old: "Breakpad's old CONTEXT_ARM64"
    case .x86: "CONTEXT_X86"
    case .arm: "CONTEXT_ARM"
    }
  }

  /// The context's bytes in its layout, little-endian, `size(layout)` long: what a writer puts in a
  /// dump. Floating-point and vector state is zero.
  package func encoded() -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: Self.size(layout))
    func put(_ value: UInt64, at offset: Int, width: Int) {
      for index in 0..<width { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
    }
    switch layout {
    case .amd64: put(flags, at: 0x30, width: 4)
    case .arm64Old: put(flags, at: 0, width: 8)
    case .arm64, .x86, .arm: put(flags, at: 0, width: 4)
    }
    for ((offset, width), value) in zip(Self.fields(layout), values) { put(value, at: offset, width: width) }
    return bytes
  }
}
