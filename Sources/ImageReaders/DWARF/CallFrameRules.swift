/// How to find the Canonical Frame Address (the caller's stack pointer at the call) in one row.
public enum CFARule: Sendable, Equatable {
  /// `register + offset` (`DW_CFA_def_cfa` and friends).
  case registerOffset(register: UInt64, offset: Int64)
  /// The value of a DWARF expression (`DW_CFA_def_cfa_expression`), evaluated with an empty stack.
  case expression([UInt8])
}

/// How to recover one register of the caller (DWARF 5 section 6.4.1).
public enum RegisterRule: Sendable, Equatable {
  /// `DW_CFA_undefined`: not recoverable (the return address column here ends the stack).
  case undefined
  /// `DW_CFA_same_value`: unchanged from this frame.
  case sameValue
  /// `DW_CFA_offset*`: saved at `CFA + offset`.
  case offset(Int64)
  /// `DW_CFA_val_offset*`: the value is `CFA + offset`.
  case valueOffset(Int64)
  /// `DW_CFA_register`: in another register of this frame.
  case register(UInt64)
  /// `DW_CFA_expression`: saved at the address the expression computes (CFA pushed first).
  case expression([UInt8])
  /// `DW_CFA_val_expression`: the value the expression computes (CFA pushed first).
  case valueExpression([UInt8])
}

/// One row of the unwind table: from `location` up to the next row, the CFA rule and every register
/// rule that the CIE and FDE set. A register without a rule is not listed (the ABI decides; most say
/// "same value" for callee-saved registers).
public struct UnwindRow: Sendable, Equatable {
  /// The first address the row applies to.
  public var location: UInt64
  /// The CFA rule.
  public var cfa: CFARule
  /// The register rules, sorted by register number.
  public private(set) var registers: [(register: UInt64, rule: RegisterRule)]
  /// The column of the return address (the CIE's).
  public var returnAddressRegister: UInt64
  /// True for a signal frame (CIE augmentation `S`).
  public var isSignalFrame: Bool

  /// The rule for `register`, `nil` when none was set.
  public subscript(register: UInt64) -> RegisterRule? {
    registers.first { $0.register == register }?.rule
  }

  mutating func set(_ register: UInt64, _ rule: RegisterRule?) throws(FormatError) {
    if let index = registers.firstIndex(where: { $0.register >= register }), registers[index].register == register {
      if let rule { registers[index].rule = rule } else { registers.remove(at: index) }
      return
    }
    guard let rule else { return }
    guard registers.count < UnwindRow.maximumRegisters else {
      throw .limitExceeded("register rules in one row", value: UInt64(registers.count + 1), limit: UInt64(UnwindRow.maximumRegisters))
    }
    let index = registers.firstIndex { $0.register > register } ?? registers.endIndex
    registers.insert((register, rule), at: index)
  }

  /// More distinct registers than any ABI has columns (aarch64 with SVE has under 130): a bound on
  /// the memory a hostile program can make a row (and `DW_CFA_remember_state`'s copies) take.
  public static let maximumRegisters = 512

  public static func == (a: UnwindRow, b: UnwindRow) -> Bool {
    a.location == b.location && a.cfa == b.cfa && a.returnAddressRegister == b.returnAddressRegister
      && a.isSignalFrame == b.isSignalFrame && a.registers.count == b.registers.count
      && zip(a.registers, b.registers).allSatisfy { $0.register == $1.register && $0.rule == $1.rule }
  }
}

/// `DW_CFA_*` opcodes (DWARF 5 table 7.29, and GNU's).
enum CallFrameOpcode {
  static let advanceLoc: UInt8 = 0x40, offset: UInt8 = 0x80, restore: UInt8 = 0xC0
  static let nop: UInt8 = 0x00, setLoc: UInt8 = 0x01, advanceLoc1: UInt8 = 0x02, advanceLoc2: UInt8 = 0x03
  static let advanceLoc4: UInt8 = 0x04, offsetExtended: UInt8 = 0x05, restoreExtended: UInt8 = 0x06
  static let undefined: UInt8 = 0x07, sameValue: UInt8 = 0x08, register: UInt8 = 0x09
  static let rememberState: UInt8 = 0x0A, restoreState: UInt8 = 0x0B, defCFA: UInt8 = 0x0C
  static let defCFARegister: UInt8 = 0x0D, defCFAOffset: UInt8 = 0x0E, defCFAExpression: UInt8 = 0x0F
  static let expression: UInt8 = 0x10, offsetExtendedSF: UInt8 = 0x11, defCFASF: UInt8 = 0x12
  static let defCFAOffsetSF: UInt8 = 0x13, valOffset: UInt8 = 0x14, valOffsetSF: UInt8 = 0x15
  static let valExpression: UInt8 = 0x16, gnuWindowSave: UInt8 = 0x2D, gnuArgsSize: UInt8 = 0x2E
  static let gnuNegativeOffsetExtended: UInt8 = 0x2F
}

extension CallFrameSection {
  /// The deepest `DW_CFA_remember_state` nesting accepted (compilers use one or two levels).
  static let maximumStateDepth = 64

  /// Runs the CIE's initial instructions and then the FDE's, and returns the row that holds `pc`
  /// (`nil` when `pc` is outside the FDE), or with `pc == nil` every row in order. Each instruction
  /// takes at least one byte, so the walk ends within the program's length.
  func rows(_ fde: FrameDescriptionEntry, _ cie: CommonInformationEntry, upTo pc: UInt64?) throws(FormatError) -> [UnwindRow] {
    if let pc, !fde.pcRange.contains(pc) { return [] }
    var row = UnwindRow(location: fde.initialLocation, cfa: .registerOffset(register: 0, offset: 0), registers: [],
                        returnAddressRegister: cie.returnAddressRegister, isSignalFrame: cie.isSignalFrame)
    var stack: [UnwindRow] = []
    var rows: [UnwindRow] = []
    _ = try run(cie.instructions, cie: cie, fde: fde, row: &row, initial: nil, stack: &stack, rows: &rows, upTo: nil)
    let initial = row
    stack.removeAll()
    let stopped = try run(fde.instructions, cie: cie, fde: fde, row: &row, initial: initial, stack: &stack, rows: &rows, upTo: pc)
    if pc != nil { return [row] }
    if !stopped { rows.append(row) }
    return rows
  }

  /// Runs the instructions in `range`; true when it stopped because the next row starts past `pc`.
  private func run(_ range: Range<Int>, cie: CommonInformationEntry, fde: FrameDescriptionEntry, row: inout UnwindRow,
                   initial: UnwindRow?, stack: inout [UnwindRow], rows: inout [UnwindRow], upTo pc: UInt64?) throws(FormatError) -> Bool {
    var reader = try bytes.slice(at: 0, length: range.upperBound)
    try reader.seek(to: range.lowerBound)
    var start = reader.offset  // the current instruction's offset, which errors name
    func fail(_ what: String) -> FormatError { error(start, what) }
    func factored(_ value: UInt64) throws(FormatError) -> Int64 {
      try factored(Int64(bitPattern: value))  // unsigned factored offsets: the product's sign comes from the factor
    }
    func factored(_ value: Int64) throws(FormatError) -> Int64 {
      let (product, overflow) = value.multipliedReportingOverflow(by: cie.dataAlignmentFactor)
      guard !overflow else { throw fail("factored offset \(value) x \(cie.dataAlignmentFactor) overflows") }
      return product
    }
    func advance(to location: UInt64) throws(FormatError) -> Bool {
      guard initial != nil else { throw fail("a CIE's initial instructions cannot advance the location") }
      if let pc, location > pc { return true }
      if pc == nil, location != row.location { rows.append(row) }
      row.location = location
      return false
    }
    func advance(by delta: UInt64) throws(FormatError) -> Bool {
      let (scaled, overflow1) = delta.multipliedReportingOverflow(by: cie.codeAlignmentFactor)
      let (location, overflow2) = row.location.addingReportingOverflow(scaled)
      guard !overflow1, !overflow2 else { throw fail("advance by \(delta) overflows the address") }
      return try advance(to: location)
    }
    func initialRule(_ register: UInt64) throws(FormatError) -> RegisterRule? {
      guard let initial else { throw fail("DW_CFA_restore in a CIE's initial instructions") }
      return initial[register]
    }
    func expressionBytes() throws(FormatError) -> [UInt8] {
      let length = try reader.readULEB128()
      guard let size = Int(exactly: length), size <= reader.remaining else {
        throw fail("expression length \(length) runs past the instructions")
      }
      return try reader.readBytes(size)
    }
    func cfaRegisterOffset() throws(FormatError) -> (UInt64, Int64) {
      guard case let .registerOffset(register, offset) = row.cfa else {
        throw fail("the CFA rule is an expression: no register or offset to change")
      }
      return (register, offset)
    }

    while reader.remaining > 0 {
      start = reader.offset
      let opcode = try reader.read(UInt8.self)
      switch opcode & 0xC0 {
      case CallFrameOpcode.advanceLoc:
        if try advance(by: UInt64(opcode & 0x3F)) { return true }
        continue
      case CallFrameOpcode.offset:
        try row.set(UInt64(opcode & 0x3F), .offset(try factored(try reader.readULEB128())))
        continue
      case CallFrameOpcode.restore:
        let register = UInt64(opcode & 0x3F)
        try row.set(register, try initialRule(register))
        continue
      default: break
      }
      switch opcode {
      case CallFrameOpcode.nop: continue
      case CallFrameOpcode.setLoc:
        let location: UInt64
        if kind == .ehFrame {
          location = try readPointer(&reader, encoding: cie.addressEncoding, addressSize: cie.addressSize,
                                     functionStart: fde.initialLocation)
        } else {
          location = try reader.readWord(is64Bit: cie.addressSize == 8)
        }
        guard location >= row.location else { throw fail("DW_CFA_set_loc 0x\(hexDigits(location)) goes backwards") }
        if try advance(to: location) { return true }
      case CallFrameOpcode.advanceLoc1: if try advance(by: UInt64(try reader.read(UInt8.self))) { return true }
      case CallFrameOpcode.advanceLoc2: if try advance(by: UInt64(try reader.read(UInt16.self))) { return true }
      case CallFrameOpcode.advanceLoc4: if try advance(by: UInt64(try reader.read(UInt32.self))) { return true }
      case CallFrameOpcode.offsetExtended:
        let register = try reader.readULEB128()
        try row.set(register, .offset(try factored(try reader.readULEB128())))
      case CallFrameOpcode.restoreExtended:
        let register = try reader.readULEB128()
        try row.set(register, try initialRule(register))
      case CallFrameOpcode.undefined: try row.set(try reader.readULEB128(), .undefined)
      case CallFrameOpcode.sameValue: try row.set(try reader.readULEB128(), .sameValue)
      case CallFrameOpcode.register:
        let register = try reader.readULEB128()
        try row.set(register, .register(try reader.readULEB128()))
      case CallFrameOpcode.rememberState:
        guard stack.count < Self.maximumStateDepth else {
          throw .limitExceeded("DW_CFA_remember_state depth", value: UInt64(stack.count + 1), limit: UInt64(Self.maximumStateDepth))
        }
        stack.append(row)
      case CallFrameOpcode.restoreState:
        guard let saved = stack.popLast() else { throw fail("DW_CFA_restore_state without a remembered state") }
        // The location stays: only the rules come back (DWARF 5 section 6.4.2.4).
        let location = row.location
        row = saved
        row.location = location
      case CallFrameOpcode.defCFA:
        let register = try reader.readULEB128()
        let offset = try reader.readULEB128()
        row.cfa = .registerOffset(register: register, offset: Int64(bitPattern: offset))
      case CallFrameOpcode.defCFASF:
        let register = try reader.readULEB128()
        row.cfa = .registerOffset(register: register, offset: try factored(try reader.readSLEB128()))
      case CallFrameOpcode.defCFARegister:
        let register = try reader.readULEB128()
        let (_, offset) = try cfaRegisterOffset()
        row.cfa = .registerOffset(register: register, offset: offset)
      case CallFrameOpcode.defCFAOffset:
        let offset = try reader.readULEB128()
        let (register, _) = try cfaRegisterOffset()
        row.cfa = .registerOffset(register: register, offset: Int64(bitPattern: offset))
      case CallFrameOpcode.defCFAOffsetSF:
        let offset = try factored(try reader.readSLEB128())
        let (register, _) = try cfaRegisterOffset()
        row.cfa = .registerOffset(register: register, offset: offset)
      case CallFrameOpcode.defCFAExpression: row.cfa = .expression(try expressionBytes())
      case CallFrameOpcode.expression:
        let register = try reader.readULEB128()
        try row.set(register, .expression(try expressionBytes()))
      case CallFrameOpcode.valExpression:
        let register = try reader.readULEB128()
        try row.set(register, .valueExpression(try expressionBytes()))
      case CallFrameOpcode.offsetExtendedSF:
        let register = try reader.readULEB128()
        try row.set(register, .offset(try factored(try reader.readSLEB128())))
      case CallFrameOpcode.valOffset:
        let register = try reader.readULEB128()
        try row.set(register, .valueOffset(try factored(try reader.readULEB128())))
      case CallFrameOpcode.valOffsetSF:
        let register = try reader.readULEB128()
        try row.set(register, .valueOffset(try factored(try reader.readSLEB128())))
      case CallFrameOpcode.gnuArgsSize:
        _ = try reader.readULEB128()  // the outgoing arguments' size: for landing pads, not for rules
      case CallFrameOpcode.gnuNegativeOffsetExtended:
        let register = try reader.readULEB128()
        let offset = try factored(try reader.readULEB128())
        guard offset != Int64.min else { throw fail("DW_CFA_GNU_negative_offset_extended overflows") }
        try row.set(register, .offset(-offset))
      case CallFrameOpcode.gnuWindowSave:
        // SPARC's register window save; on aarch64 the same opcode is DW_CFA_AARCH64_negate_ra_state
        // (pointer authentication), which changes no rule either.
        continue
      default:
        throw fail("unknown call frame instruction 0x\(hexDigits(UInt64(opcode), width: 2))")
      }
    }
    return false
  }
}
