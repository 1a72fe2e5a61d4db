internal import CImageLogUnwind
public import ImageReaders

/// One frame's registers, numbered as DWARF numbers them (as the C unwinder): x86_64 0 rax, 1 rdx,
/// 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip; aarch64 0-30 x0-x30 (29 fp, 30 lr),
/// 31 sp, 32 pc; i386 0 eax, 1 ecx, 2 edx, 3 ebx, 4 esp, 5 ebp, 6 esi, 7 edi, 8 eip (32-bit values);
/// arm 0-15 r0-r15 (11 fp, 13 sp, 14 lr, 15 pc; 32-bit values). A register not known is `nil`.
public struct RegisterSet: Sendable, Equatable {
  /// The machine whose numbering applies (the model's `Registers.Architecture`).
  public typealias Architecture = Registers.Architecture

  /// The machine whose numbering applies.
  public var architecture: Architecture
  var values: [UInt64?]

  /// The number of registers a set holds (`IL_REGISTER_COUNT`).
  package static let count = 33

  /// A set with no register known.
  public init(architecture: Architecture) {
    self.architecture = architecture
    values = Array(repeating: nil, count: Self.count)
  }

  /// DWARF register `register`; `nil` when unknown or outside the set (setting one outside is ignored).
  public subscript(dwarf register: Int) -> UInt64? {
    get { values.indices.contains(register) ? values[register] : nil }
    set { if values.indices.contains(register) { values[register] = newValue } }
  }

  /// The program counter (rip, pc, eip).
  public var pc: UInt64? {
    get { self[dwarf: numbers.pc] }
    set { self[dwarf: numbers.pc] = newValue }
  }

  /// The stack pointer (rsp, sp, esp).
  public var sp: UInt64? {
    get { self[dwarf: numbers.sp] }
    set { self[dwarf: numbers.sp] = newValue }
  }

  /// The frame pointer (rbp, x29, ebp).
  public var fp: UInt64? {
    get { self[dwarf: numbers.fp] }
    set { self[dwarf: numbers.fp] = newValue }
  }

  /// The DWARF numbers of the pc, the stack pointer and the frame pointer.
  var numbers: (pc: Int, sp: Int, fp: Int) {
    switch architecture {
    case .x86_64: (16, 7, 6)
    case .aarch64: (32, 31, 29)
    case .i386: (8, 4, 5)
    case .arm: (15, 13, 11)
    }
  }

  var cValue: il_register_set {
    var set = il_register_set()
    set.arch = switch architecture {
    case .x86_64: IL_ARCH_X86_64
    case .aarch64: IL_ARCH_AARCH64
    case .i386: IL_ARCH_I386
    case .arm: IL_ARCH_ARM
    }
    withUnsafeMutableBytes(of: &set.value) { raw in
      for (index, value) in values.enumerated() {
        guard let value else { continue }
        raw.storeBytes(of: value, toByteOffset: index * 8, as: UInt64.self)  // index < 33 = the tuple's count
        set.known |= 1 << UInt64(index)
      }
    }
    return set
  }

  init(_ set: il_register_set) {
    self.init(architecture: set.arch == IL_ARCH_AARCH64 ? .aarch64 : set.arch == IL_ARCH_I386 ? .i386
                : set.arch == IL_ARCH_ARM ? .arm : .x86_64)
    withUnsafeBytes(of: set.value) { raw in
      for index in 0..<Self.count where set.known & (1 << UInt64(index)) != 0 {
        values[index] = raw.load(fromByteOffset: index * 8, as: UInt64.self)  // a C array of 33 UInt64
      }
    }
  }
}
