internal import CImageLogUnwind

/// How to recover one register of the caller in one row (DWARF 5 section 6.4.1), as the C engine
/// decoded it. Expressions stay where they are: their address (in the table's memory) and length.
package enum CallFrameRule: Sendable, Equatable {
  /// `DW_CFA_undefined`: not recoverable (the return address column here ends the stack).
  case undefined
  /// `DW_CFA_same_value`: unchanged from this frame.
  case sameValue
  /// `DW_CFA_offset*`: saved at `CFA + offset`.
  case offset(Int64)
  /// `DW_CFA_val_offset*`: the value is `CFA + offset`.
  case valueOffset(Int64)
  /// `DW_CFA_register`: in another register of this frame.
  case register(Int)
  /// `DW_CFA_expression`: saved at the address the expression computes (CFA pushed first).
  case expression(address: UInt64, length: Int)
  /// `DW_CFA_val_expression`: the value the expression computes (CFA pushed first).
  case valueExpression(address: UInt64, length: Int)
}

/// One row of an FDE's unwind table: from `location` up to `end`, the CFA rule and every register
/// rule set (registers 0 to 96; a register without a rule is absent).
package struct CallFrameRow: Sendable, Equatable {
  /// How to find the Canonical Frame Address.
  package enum CFA: Sendable, Equatable {
    /// `register + offset` (`DW_CFA_def_cfa` and friends).
    case registerOffset(register: Int, offset: Int64)
    /// `DW_CFA_def_cfa_expression`: its address and length.
    case expression(address: UInt64, length: Int)
  }

  /// The first address the row applies to.
  package var location: UInt64
  /// The first address past it (the next row's location, or the FDE's end).
  package var end: UInt64
  /// The CFA rule.
  package var cfa: CFA
  /// The register rules by DWARF register number.
  package var rules: [Int: CallFrameRule]
  /// The column of the return address (the CIE's).
  package var returnAddressRegister: Int
  /// True for a signal frame (CIE augmentation `S`).
  package var isSignalFrame: Bool

  init?(_ row: il_cfi_row) {
    location = row.location
    end = row.end
    guard let cfa = CFA(row) else { return nil }
    self.cfa = cfa
    returnAddressRegister = Int(truncatingIfNeeded: row.return_address_register)
    isSignalFrame = row.signal_frame != 0
    var rules: [Int: CallFrameRule] = [:]
    withUnsafeBytes(of: row.rules) { raw in
      let stride = MemoryLayout<il_cfi_rule>.stride
      for column in 0..<Int(IL_CFI_COLUMNS) {
        // A C array of IL_CFI_COLUMNS il_cfi_rule: every offset below is inside it.
        if let rule = CallFrameRule(raw.load(fromByteOffset: column * stride, as: il_cfi_rule.self)) { rules[column] = rule }
      }
    }
    self.rules = rules
  }
}

extension CallFrameRow.CFA {
  /// The row's CFA rule; `nil` for a kind the engine never gives.
  init?(_ row: il_cfi_row) {
    switch Int32(row.cfa.kind) {
    case Int32(IL_RULE_REGISTER.rawValue): self = .registerOffset(register: Int(row.cfa.value), offset: row.cfa_offset)
    case Int32(IL_RULE_VAL_EXPRESSION.rawValue):
      self = .expression(address: UInt64(bitPattern: row.cfa.value), length: Int(row.cfa.length))
    default: return nil
    }
  }
}

/// A row as `CallFrameTable.ruleRows(of:)` gives it: `CallFrameRow`'s fields, the rules as a list.
package struct CallFrameRuleRow: Sendable, Equatable {
  /// The first address the row applies to.
  package var location: UInt64
  /// The first address past it.
  package var end: UInt64
  /// The CFA rule.
  package var cfa: CallFrameRow.CFA
  /// The register rules set, by DWARF register number, in increasing order.
  package var rules: [(register: Int, rule: CallFrameRule)]
  /// The column of the return address (the CIE's).
  package var returnAddressRegister: Int

  init?(_ row: il_cfi_row) {
    location = row.location
    end = row.end
    guard let cfa = CallFrameRow.CFA(row) else { return nil }
    self.cfa = cfa
    returnAddressRegister = Int(truncatingIfNeeded: row.return_address_register)
    var rules: [(register: Int, rule: CallFrameRule)] = []
    rules.reserveCapacity(8)  // a frame saves a handful of registers: one allocation, not several
    withUnsafeBytes(of: row.rules) { raw in
      let stride = MemoryLayout<il_cfi_rule>.stride
      for column in 0..<Int(IL_CFI_COLUMNS) {
        // A C array of IL_CFI_COLUMNS il_cfi_rule: every offset below is inside it.
        let rule = raw.load(fromByteOffset: column * stride, as: il_cfi_rule.self)
        if rule.kind != 0, let decoded = CallFrameRule(rule) { rules.append((column, decoded)) }
      }
    }
    self.rules = rules
  }

  package static func == (a: CallFrameRuleRow, b: CallFrameRuleRow) -> Bool {
    a.location == b.location && a.end == b.end && a.cfa == b.cfa && a.returnAddressRegister == b.returnAddressRegister
      && a.rules.elementsEqual(b.rules) { $0.register == $1.register && $0.rule == $1.rule }
  }
}

extension CallFrameRule {
  init?(_ rule: il_cfi_rule) {
    let value = rule.value
    switch UInt32(rule.kind) {
    case IL_RULE_UNDEFINED.rawValue: self = .undefined
    case IL_RULE_SAME_VALUE.rawValue: self = .sameValue
    case IL_RULE_OFFSET.rawValue: self = .offset(value)
    case IL_RULE_VAL_OFFSET.rawValue: self = .valueOffset(value)
    case IL_RULE_REGISTER.rawValue: self = .register(Int(value))
    case IL_RULE_EXPRESSION.rawValue: self = .expression(address: UInt64(bitPattern: value), length: Int(rule.length))
    case IL_RULE_VAL_EXPRESSION.rawValue: self = .valueExpression(address: UInt64(bitPattern: value), length: Int(rule.length))
    default: return nil
    }
  }
}

/// A call frame section (`.eh_frame` or `.debug_frame`) in some memory, read by the unwinder's own
/// CFI engine: its FDEs and their rows, for tools and tests (`readelf --debug-dump=frames-interp`).
package struct CallFrameTable {
  /// `.eh_frame` (CIE id 0, `DW_EH_PE_*` pointers) or `.debug_frame` (CIE id all ones, plain addresses).
  package enum Kind: Sendable { case ehFrame, debugFrame }

  /// One FDE.
  package struct Entry: Sendable, Equatable {
    /// Its offset in the section.
    package var offset: UInt64
    /// The addresses it covers (run-time for `.eh_frame`, link-time plus `loadBias` for `.debug_frame`).
    package var pcRange: Range<UInt64>
    /// Where its instructions are, in the table's memory.
    package var instructions: Range<UInt64>
    var cie: UInt64
  }

  let memory: any MemoryReading
  let section: il_cfi_section

  /// The section of `size` bytes at `address` in `memory`. `.debug_frame` FDE addresses get `loadBias`
  /// added; `addressSize` is the target's (8, or 4 for 32-bit code).
  package init(memory: some MemoryReading, address: UInt64, size: UInt64, kind: Kind, loadBias: UInt64 = 0,
              addressSize: Int = 8) {
    self.memory = memory
    var section = il_cfi_section()
    section.address = address
    section.size = size
    section.debug_frame = kind == .debugFrame ? 1 : 0
    section.load_bias = loadBias
    section.address_size = addressSize == 4 ? 4 : 8
    self.section = section
  }

  /// Every FDE in section order, at most `limit`; `complete` is false when a malformed entry ended the walk.
  package func entries(limit: Int = 1 << 22) -> (entries: [Entry], complete: Bool) {
    withCMemory(memory) { cMemory in
      var section = self.section
      section.memory = cMemory
      var offset: UInt64 = 0
      var entries: [Entry] = []
      while entries.count < limit {
        var fde = il_cfi_fde()
        let kind = il_cfi_next_entry(&section, &offset, &fde)
        if kind == 0 { return (entries, true) }
        if kind < 0 { return (entries, false) }
        if kind == 1 {
          entries.append(Entry(offset: fde.offset, pcRange: fde.pc_start..<max(fde.pc_start, fde.pc_end),
                               instructions: fde.instructions..<max(fde.instructions, fde.instructions_end), cie: fde.cie))
        }
      }
      return (entries, false)
    }
  }

  /// The row of `entry` holding `pc`, `nil` outside it or when its instructions are malformed.
  package func row(of entry: Entry, at pc: UInt64) -> CallFrameRow? {
    withCMemory(memory) { cMemory in
      var section = self.section
      section.memory = cMemory
      var fde = cFDE(entry)
      var row = il_cfi_row()
      guard il_cfi_fde_row(&section, &fde, pc, &row) != 0 else { return nil }
      return CallFrameRow(row)
    }
  }

  /// Every row of `entry` in order (`nil` when its instructions are malformed).
  package func rows(of entry: Entry) -> [CallFrameRow]? {
    collectRows(of: entry) { CallFrameRow($0) }
  }

  /// Every row of `entry` in order, as `rows(of:)` gives them, each with its rules in column order
  /// (`nil` when its instructions are malformed): one walk for tools that convert whole sections (a
  /// Breakpad symbol file's STACK CFI records), without a dictionary per row.
  package func ruleRows(of entry: Entry) -> [CallFrameRuleRow]? {
    collectRows(of: entry) { CallFrameRuleRow($0) }
  }

  /// The rows of `entry` in order, each decoded by `decode` (`nil` when the instructions are malformed
  /// or a row cannot be decoded), from one run of its instructions (`il_cfi_fde_rows`). Each row ends
  /// past its start: at most one row per address of the FDE, and at most one per instruction byte.
  private func collectRows<Row>(of entry: Entry, _ decode: (il_cfi_row) -> Row?) -> [Row]? {
    guard !entry.pcRange.isEmpty else { return [] }
    var rows: [Row] = []
    var decoded = true
    let complete = withCMemory(memory) { cMemory in
      var section = self.section
      section.memory = cMemory
      var fde = cFDE(entry)
      var row = il_cfi_row()
      return withoutActuallyEscaping({ (row: UnsafePointer<il_cfi_row>) -> Bool in
        guard rows.count <= entry.instructions.count else { return false }
        guard let value = decode(row.pointee) else { decoded = false; return false }
        rows.append(value)
        return true
      }) { each in
        var visitor = each
        return withUnsafeMutablePointer(to: &visitor) { context in
          il_cfi_fde_rows(&section, &fde, &row, { row, context in
            guard let row, let context else { return 0 }
            return context.assumingMemoryBound(to: ((UnsafePointer<il_cfi_row>) -> Bool).self).pointee(row) ? 1 : 0
          }, context) != 0
        }
      }
    }
    return complete && decoded ? rows : nil
  }

  func cFDE(_ entry: Entry) -> il_cfi_fde {
    var fde = il_cfi_fde()
    fde.offset = entry.offset
    fde.pc_start = entry.pcRange.lowerBound
    fde.pc_end = entry.pcRange.upperBound
    fde.instructions = entry.instructions.lowerBound
    fde.instructions_end = entry.instructions.upperBound
    fde.cie = entry.cie
    return fde
  }
}

extension UnwindImage {
  /// The row for `pc`, found as the unwinder finds it (`.eh_frame_hdr`'s binary search, else a walk of
  /// `.eh_frame`, then `.debug_frame`); `nil` when no FDE covers it.
  package func row(at pc: UInt64, in memory: some MemoryReading) -> CallFrameRow? {
    let lookup = ImageLookup([self])
    return withExtendedLifetime(lookup) {
      withCMemory(memory) { cMemory in
        var image = il_unwind_image()
        lookup.fill(0, &image)
        var row = il_cfi_row()
        guard il_cfi_find_row(cMemory, &image, pc, &row) != 0 else { return nil }
        return CallFrameRow(row)
      }
    }
  }
}
