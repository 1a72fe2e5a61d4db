import ProcessInspection
import ImageReaders

/// A symbol file's `STACK CFI` records as DWARF call frame information: a `.debug_frame` section (one
/// CIE, one FDE per `STACK CFI INIT`, a row per `STACK CFI`) that the one unwinder reads as it reads a
/// file's, so a dump's module with only its `.sym` is unwound by CFI (trust "cfi").
///
/// Breakpad's rules are postfix expressions over registers and `.cfa`; the ones `dump_syms` writes
/// (`$rsp 8 +`, `.cfa -16 + ^`, `$rbp`) become the DWARF rules they came from (`def_cfa_sf`,
/// `offset_extended_sf`, `val_offset_sf`, `register`, `same_value`); any other expression becomes a
/// DWARF expression (`def_cfa_expression`, `expression` when it ends in `^`, else `val_expression`)
/// with the same operators. A rule naming an unknown register or using `.cfa` inside an expression
/// is left out and counted.
struct BreakpadCallFrameSection {
  /// The `.debug_frame` bytes; FDE addresses are the symbol file's (offsets from the module's base).
  var bytes: [UInt8]
  /// The size of an address in the FDEs: 8, or 4 for a 32-bit architecture.
  var addressSize: Int
  /// `STACK CFI INIT` records with a rule that could not be said in DWARF (left out).
  var skippedRules: Int

  /// The return-address column and pointer size of a `MODULE` architecture, `nil` for one the unwinder
  /// has no registers for.
  static func layout(_ architecture: String) -> (returnAddress: Int, addressSize: Int)? {
    switch architecture {
    case "x86_64", "x86_64h": (16, 8)
    case "x86": (8, 4)
    case "arm64", "arm64e": (30, 8)
    case "arm": (14, 4)  // `.ra` is lr's column, as DWARF's CIEs for arm have it
    default: nil
    }
  }

  /// The section for `file`'s `STACK CFI` records; `nil` when it has none or its architecture is not
  /// one the unwinder walks.
  init?(_ file: BreakpadSymbolFile) {
    guard let encoder = BreakpadCallFrames(file) else { return nil }
    addressSize = encoder.addressSize
    var output = encoder.commonEntry
    var skipped = 0
    for index in file.frameEntries.indices where !encoder.appendEntry(index, to: &output) { skipped += 1 }
    bytes = output
    skippedRules = skipped
  }

  /// Appends the DWARF instructions for one record's rules; false when one was left out.
  static func encode(_ text: String, numbers: [String: Int], into body: inout [UInt8]) -> Bool {
    var complete = true
    for (register, expression) in BreakpadSymbolFile.rules(text) {
      let tokens = expression.spaceSeparatedWords.map(String.init)
      if register == ".cfa" {
        if !encodeCFA(tokens, numbers: numbers, into: &body) { complete = false }
      } else if let number = numbers[register] {
        if !encodeRule(UInt64(number), tokens, numbers: numbers, into: &body) { complete = false }
      } else {
        complete = false
      }
    }
    return complete
  }

  /// `.cfa: REG`, `REG N +`, `REG N -`, or an expression.
  static func encodeCFA(_ tokens: [String], numbers: [String: Int], into body: inout [UInt8]) -> Bool {
    if let register = tokens.first.flatMap({ numbers[$0] }), let offset = offset(tokens.dropFirst()) {
      body.append(0x12)  // DW_CFA_def_cfa_sf
      appendULEB(UInt64(register), to: &body)
      appendSLEB(offset, to: &body)
      return true
    }
    guard let expression = expression(tokens[...], numbers: numbers) else { return false }
    body.append(0x0F)  // DW_CFA_def_cfa_expression
    appendULEB(UInt64(expression.count), to: &body)
    body += expression
    return true
  }

  /// A register's rule: `.cfa N + ^` (saved at), `.cfa N +` (is), `REG` (in), or an expression, which
  /// starts from the CFA as DWARF's register expressions do.
  static func encodeRule(_ register: UInt64, _ tokens: [String], numbers: [String: Int], into body: inout [UInt8]) -> Bool {
    if tokens.count == 1, let other = numbers[tokens[0]] {
      if UInt64(other) == register {
        body.append(0x08)  // DW_CFA_same_value
        appendULEB(register, to: &body)
      } else {
        body.append(0x09)  // DW_CFA_register
        appendULEB(register, to: &body)
        appendULEB(UInt64(other), to: &body)
      }
      return true
    }
    if tokens == [".undef"] {
      body.append(0x07)  // DW_CFA_undefined
      appendULEB(register, to: &body)
      return true
    }
    let dereferenced = tokens.last == "^"
    let value = dereferenced ? tokens.dropLast() : tokens[...]
    if value.first == ".cfa", let offset = offset(value.dropFirst()) {
      body.append(dereferenced ? 0x11 : 0x15)  // DW_CFA_offset_extended_sf, DW_CFA_val_offset_sf
      appendULEB(register, to: &body)
      appendSLEB(offset, to: &body)
      return true
    }
    // The CFA is on the stack when the expression starts: a leading `.cfa` is that.
    guard let expression = expression(value.first == ".cfa" ? value.dropFirst() : value, numbers: numbers) else { return false }
    body.append(dereferenced ? 0x10 : 0x16)  // DW_CFA_expression, DW_CFA_val_expression
    appendULEB(register, to: &body)
    appendULEB(UInt64(expression.count), to: &body)
    body += expression
    return true
  }

  /// The offset of `N +`, `N -` or nothing (0); `nil` for anything else.
  static func offset(_ tokens: ArraySlice<String>) -> Int64? {
    if tokens.isEmpty { return 0 }
    guard tokens.count == 2, let value = Int64(tokens[tokens.startIndex]) else { return nil }
    switch tokens.last {
    case "+": return value
    case "-": return value == .min ? nil : -value
    default: return nil
    }
  }

  /// A postfix expression as DWARF stack operations, `nil` when a token has no counterpart (a
  /// variable, `.cfa` past the start, `=`).
  static func expression(_ tokens: ArraySlice<String>, numbers: [String: Int]) -> [UInt8]? {
    guard !tokens.isEmpty else { return nil }
    var operations: [UInt8] = []
    for token in tokens {
      switch token {
      case "+": operations.append(0x22)  // DW_OP_plus
      case "-": operations.append(0x1C)  // DW_OP_minus
      case "*": operations.append(0x1E)  // DW_OP_mul
      case "/": operations.append(0x1B)  // DW_OP_div
      case "%": operations.append(0x1D)  // DW_OP_mod
      case "^": operations.append(0x06)  // DW_OP_deref
      case "@": operations += [0x1F, 0x1A]  // a b @: a aligned down to b, a & -b: DW_OP_neg, DW_OP_and
      default:
        if let register = numbers[token] {
          if register < 32 {
            operations.append(0x70 + UInt8(register))  // DW_OP_breg0 + n
          } else {
            operations.append(0x92)  // DW_OP_bregx
            appendULEB(UInt64(register), to: &operations)
          }
          appendSLEB(0, to: &operations)
        } else if let value = Int64(token) {
          operations.append(0x11)  // DW_OP_consts
          appendSLEB(value, to: &operations)
        } else {
          return nil
        }
      }
    }
    return operations
  }

  /// Appends a 32-bit DWARF entry: its length, then `body`.
  static func appendEntry(_ body: [UInt8], to output: inout [UInt8]) {
    // A record's body is a few bytes per character of its line: far below 4 GiB for any file mapped here.
    let length = UInt32(truncatingIfNeeded: body.count)
    withUnsafeBytes(of: length.littleEndian) { output.append(contentsOf: $0) }
    output += body
  }

  static func appendAddress(_ value: UInt64, size: Int, to output: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { output.append(contentsOf: $0.prefix(size)) }
  }

  static func appendULEB(_ value: UInt64, to output: inout [UInt8]) {
    var value = value
    repeat {
      let byte = UInt8(value & 0x7F)
      value >>= 7
      output.append(value == 0 ? byte : byte | 0x80)
    } while value != 0
  }

  static func appendSLEB(_ value: Int64, to output: inout [UInt8]) {
    var value = value
    while true {
      let byte = UInt8(truncatingIfNeeded: value & 0x7F)
      value >>= 7
      if (value == 0 && byte & 0x40 == 0) || (value == -1 && byte & 0x40 != 0) {
        output.append(byte)
        return
      }
      output.append(byte | 0x80)
    }
  }
}

/// A symbol file's `STACK CFI` records said in DWARF one entry at a time: the unwinder asks for the
/// entry that covers a pc (`section(covering:)`), so a walk translates the few entries its frames are
/// in, not every record of a large `.sym` (`BreakpadCallFrameSection` translates them all).
struct BreakpadCallFrames: CallFrameSource {
  let file: BreakpadSymbolFile
  /// Register names (`$rsp`, `rsp`, `.ra`) by DWARF number.
  let numbers: [String: Int]
  let addressSize: Int
  /// The CIE every entry refers to (at offset 0): version 3, no augmentation, both alignment factors 1
  /// (offsets in instructions are bytes, as in the symbol file), no initial rules.
  let commonEntry: [UInt8]

  /// `nil` when `file` has no `STACK CFI` or its architecture is not one the unwinder walks.
  init?(_ file: BreakpadSymbolFile) {
    guard !file.frameEntries.isEmpty, let layout = BreakpadCallFrameSection.layout(file.module.architecture),
          let names = Registers.breakpadNames(file.module.architecture) else { return nil }
    var numbers: [String: Int] = [".ra": layout.returnAddress]
    for (number, name) in names.enumerated() where !name.isEmpty && numbers[name] == nil {
      numbers[name] = number
      if name.hasPrefix("$") { numbers[String(name.dropFirst())] = number }  // `rsp` as well as `$rsp`
    }
    if layout.returnAddress == 30 { numbers["fp"] = 29; numbers["lr"] = 30 }
    self.file = file
    self.numbers = numbers
    addressSize = layout.addressSize
    var cie: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 3, 0]
    BreakpadCallFrameSection.appendULEB(1, to: &cie)
    BreakpadCallFrameSection.appendSLEB(1, to: &cie)
    BreakpadCallFrameSection.appendULEB(UInt64(layout.returnAddress), to: &cie)
    var output: [UInt8] = []
    BreakpadCallFrameSection.appendEntry(cie, to: &output)
    commonEntry = output
  }

  /// Appends the FDE of `STACK CFI INIT` record `index` (its rows after it); false when a rule was left out.
  func appendEntry(_ index: Int, to output: inout [UInt8]) -> Bool {
    let entry = file.frameEntries[index]
    var body: [UInt8] = [0, 0, 0, 0]  // the CIE at offset 0
    BreakpadCallFrameSection.appendAddress(entry.address, size: addressSize, to: &body)
    BreakpadCallFrameSection.appendAddress(entry.size, size: addressSize, to: &body)
    var location = entry.address
    var complete = BreakpadCallFrameSection.encode(file.ruleText(entry.rules), numbers: numbers, into: &body)
    for delta in file.deltas(of: entry) {
      // Rows are sorted and inside the entry (the reader saw to it): the advance fits 32 bits
      // unless the entry is larger, and then the rest is left out.
      guard delta.address >= location, let advance = UInt32(exactly: delta.address - location) else {
        complete = false
        break
      }
      body.append(0x04)  // DW_CFA_advance_loc4
      withUnsafeBytes(of: advance.littleEndian) { body.append(contentsOf: $0) }
      location = delta.address
      if !BreakpadCallFrameSection.encode(file.ruleText(delta.rules), numbers: numbers, into: &body) { complete = false }
    }
    BreakpadCallFrameSection.appendEntry(body, to: &output)
    return complete
  }

  /// The CIE and the FDE of the `STACK CFI INIT` record covering `address` (an offset from the module's
  /// base), with the record's range; `nil` when none covers it.
  func section(covering address: UInt64) -> (range: Range<UInt64>, bytes: [UInt8])? {
    guard let index = file.frameEntryIndex(containing: address) else { return nil }
    let entry = file.frameEntries[index]
    var output = commonEntry
    _ = appendEntry(index, to: &output)
    let (end, overflow) = entry.address.addingReportingOverflow(entry.size)
    return (entry.address..<(overflow ? .max : end), output)
  }
}
