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

  /// Appends the DWARF instructions for one record's rules (`REG: EXPR REG: EXPR ...`, the text's
  /// bytes: a token ending with `:` names a register, the tokens up to the next one are its postfix
  /// expression, tokens before the first are ignored, as `BreakpadSymbolFile.rules` reads them); false
  /// when one was left out.
  static func encode(_ text: UnsafeRawBufferPointer, numbers: RegisterNumbers, into body: inout [UInt8]) -> Bool {
    let rule = RuleText(text)
    var complete = true
    var index = rule.tokens.startIndex
    while index < rule.tokens.endIndex, !rule.namesRegister(rule.tokens[index]) { index += 1 }
    // Each round moves past one register and its expression: bounded by the tokens.
    while index < rule.tokens.endIndex {
      let name = rule.tokens[index].dropLast()
      var end = index + 1
      while end < rule.tokens.endIndex, !rule.namesRegister(rule.tokens[end]) { end += 1 }
      let expression = rule.tokens[(index + 1)..<end]
      if rule.is(name, ".cfa") {
        if !encodeCFA(rule, expression, numbers: numbers, into: &body) { complete = false }
      } else if let number = numbers[rule.bytes(name)] {
        if !encodeRule(UInt64(number), rule, expression, numbers: numbers, into: &body) { complete = false }
      } else {
        complete = false
      }
      index = end
    }
    return complete
  }

  /// One record's rules split at spaces: each token a range of `text`.
  struct RuleText {
    let text: UnsafeRawBufferPointer
    var tokens: [Range<Int>] = []

    init(_ text: UnsafeRawBufferPointer) {
      self.text = text
      var start = 0
      // Each round moves past at least one byte: bounded by the text's size.
      while start < text.count {
        var end = start
        while end < text.count, text[end] != 0x20 { end += 1 }
        if end > start { tokens.append(start..<end) }
        start = end + 1
      }
    }

    func bytes(_ token: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: text[token]) }

    /// True for `REG:`.
    func namesRegister(_ token: Range<Int>) -> Bool { text[token.upperBound - 1] == UInt8(ascii: ":") }

    /// True when `token` is `word`.
    func `is`(_ token: Range<Int>, _ word: StaticString) -> Bool {
      guard token.count == word.utf8CodeUnitCount else { return false }
      return word.withUTF8Buffer { expected in
        zip(expected, bytes(token)).allSatisfy { $0 == $1 }
      }
    }

    /// The token as a decimal integer (`Int64`'s own reading: an optional sign, then digits), `nil`
    /// when it is not one or does not fit.
    func integer(_ token: Range<Int>) -> Int64? {
      var index = token.lowerBound
      let negative = text[index] == UInt8(ascii: "-")
      if negative || text[index] == UInt8(ascii: "+") { index += 1 }
      guard index < token.upperBound else { return nil }
      var value: Int64 = 0
      while index < token.upperBound {
        let digit = text[index] &- 0x30
        guard digit < 10 else { return nil }
        // Counted down for a negative number, so that Int64.min reads.
        let (shifted, over) = value.multipliedReportingOverflow(by: 10)
        let (next, carry) = negative ? shifted.subtractingReportingOverflow(Int64(digit)) : shifted.addingReportingOverflow(Int64(digit))
        guard !over, !carry else { return nil }
        value = next
        index += 1
      }
      return value
    }
  }

  /// `.cfa: REG`, `REG N +`, `REG N -`, or an expression.
  static func encodeCFA(_ rule: RuleText, _ tokens: ArraySlice<Range<Int>>, numbers: RegisterNumbers,
                        into body: inout [UInt8]) -> Bool {
    if let register = tokens.first.flatMap({ numbers[rule.bytes($0)] }), let offset = offset(rule, tokens.dropFirst()) {
      body.append(0x12)  // DW_CFA_def_cfa_sf
      appendULEB(UInt64(register), to: &body)
      appendSLEB(offset, to: &body)
      return true
    }
    guard let expression = expression(rule, tokens, numbers: numbers) else { return false }
    body.append(0x0F)  // DW_CFA_def_cfa_expression
    appendULEB(UInt64(expression.count), to: &body)
    body += expression
    return true
  }

  /// A register's rule: `.cfa N + ^` (saved at), `.cfa N +` (is), `REG` (in), or an expression, which
  /// starts from the CFA as DWARF's register expressions do.
  static func encodeRule(_ register: UInt64, _ rule: RuleText, _ tokens: ArraySlice<Range<Int>>, numbers: RegisterNumbers,
                         into body: inout [UInt8]) -> Bool {
    if tokens.count == 1, let other = numbers[rule.bytes(tokens[tokens.startIndex])] {
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
    if tokens.count == 1, rule.is(tokens[tokens.startIndex], ".undef") {
      body.append(0x07)  // DW_CFA_undefined
      appendULEB(register, to: &body)
      return true
    }
    let dereferenced = tokens.last.map { rule.is($0, "^") } ?? false
    let value = dereferenced ? tokens.dropLast() : tokens
    let startsAtCFA = value.first.map { rule.is($0, ".cfa") } ?? false
    if startsAtCFA, let offset = offset(rule, value.dropFirst()) {
      body.append(dereferenced ? 0x11 : 0x15)  // DW_CFA_offset_extended_sf, DW_CFA_val_offset_sf
      appendULEB(register, to: &body)
      appendSLEB(offset, to: &body)
      return true
    }
    // The CFA is on the stack when the expression starts: a leading `.cfa` is that.
    guard let expression = expression(rule, startsAtCFA ? value.dropFirst() : value, numbers: numbers) else { return false }
    body.append(dereferenced ? 0x10 : 0x16)  // DW_CFA_expression, DW_CFA_val_expression
    appendULEB(register, to: &body)
    appendULEB(UInt64(expression.count), to: &body)
    body += expression
    return true
  }

  /// The offset of `N +`, `N -` or nothing (0); `nil` for anything else.
  static func offset(_ rule: RuleText, _ tokens: ArraySlice<Range<Int>>) -> Int64? {
    if tokens.isEmpty { return 0 }
    guard tokens.count == 2, let value = rule.integer(tokens[tokens.startIndex]), let last = tokens.last else { return nil }
    if rule.is(last, "+") { return value }
    if rule.is(last, "-") { return value == .min ? nil : -value }
    return nil
  }

  /// A postfix expression as DWARF stack operations, `nil` when a token has no counterpart (a
  /// variable, `.cfa` past the start, `=`).
  static func expression(_ rule: RuleText, _ tokens: ArraySlice<Range<Int>>, numbers: RegisterNumbers) -> [UInt8]? {
    guard !tokens.isEmpty else { return nil }
    var operations: [UInt8] = []
    for token in tokens {
      if token.count == 1 {
        switch rule.text[token.lowerBound] {
        case UInt8(ascii: "+"): operations.append(0x22); continue  // DW_OP_plus
        case UInt8(ascii: "-"): operations.append(0x1C); continue  // DW_OP_minus
        case UInt8(ascii: "*"): operations.append(0x1E); continue  // DW_OP_mul
        case UInt8(ascii: "/"): operations.append(0x1B); continue  // DW_OP_div
        case UInt8(ascii: "%"): operations.append(0x1D); continue  // DW_OP_mod
        case UInt8(ascii: "^"): operations.append(0x06); continue  // DW_OP_deref
        case UInt8(ascii: "@"): operations += [0x1F, 0x1A]; continue  // a b @: a aligned down to b, a & -b: DW_OP_neg, DW_OP_and
        default: break
        }
      }
      if let register = numbers[rule.bytes(token)] {
        if register < 32 {
          operations.append(0x70 + UInt8(register))  // DW_OP_breg0 + n
        } else {
          operations.append(0x92)  // DW_OP_bregx
          appendULEB(UInt64(register), to: &operations)
        }
        appendSLEB(0, to: &operations)
      } else if let value = rule.integer(token) {
        operations.append(0x11)  // DW_OP_consts
        appendSLEB(value, to: &operations)
      } else {
        return nil
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
  let numbers: RegisterNumbers
  let addressSize: Int
  /// The CIE every entry refers to (at offset 0): version 3, no augmentation, both alignment factors 1
  /// (offsets in instructions are bytes, as in the symbol file), no initial rules.
  let commonEntry: [UInt8]

  /// `nil` when `file` has no `STACK CFI` or its architecture is not one the unwinder walks.
  init?(_ file: BreakpadSymbolFile) {
    guard !file.frameEntries.isEmpty, let layout = BreakpadCallFrameSection.layout(file.module.architecture),
          let numbers = Self.registerNumbers(file.module.architecture) else { return nil }
    self.file = file
    self.numbers = RegisterNumbers(numbers)
    addressSize = layout.addressSize
    var cie: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 3, 0]
    BreakpadCallFrameSection.appendULEB(1, to: &cie)
    BreakpadCallFrameSection.appendSLEB(1, to: &cie)
    BreakpadCallFrameSection.appendULEB(UInt64(layout.returnAddress), to: &cie)
    var output: [UInt8] = []
    BreakpadCallFrameSection.appendEntry(cie, to: &output)
    commonEntry = output
  }

  /// The DWARF numbers of an architecture's registers by the names rules give them (`$rsp`, `rsp`,
  /// `.ra`), `nil` for one the unwinder has no registers for.
  static func registerNumbers(_ architecture: String) -> [String: Int]? {
    guard let layout = BreakpadCallFrameSection.layout(architecture), let names = Registers.breakpadNames(architecture) else {
      return nil
    }
    var numbers: [String: Int] = [".ra": layout.returnAddress]
    for (number, name) in names.enumerated() where !name.isEmpty && numbers[name] == nil {
      numbers[name] = number
      if name.hasPrefix("$") { numbers[String(name.dropFirst())] = number }  // `rsp` as well as `$rsp`
    }
    if layout.returnAddress == 30 { numbers["fp"] = 29; numbers["lr"] = 30 }
    return numbers
  }

  /// Appends the FDE of `STACK CFI INIT` record `index` (its rows after it); false when a rule was left out.
  func appendEntry(_ index: Int, to output: inout [UInt8]) -> Bool {
    let entry = file.frameEntries[index]
    var body: [UInt8] = [0, 0, 0, 0]  // the CIE at offset 0
    BreakpadCallFrameSection.appendAddress(entry.address, size: addressSize, to: &body)
    BreakpadCallFrameSection.appendAddress(entry.size, size: addressSize, to: &body)
    var location = entry.address
    var complete = file.withRuleBytes(entry.rules) { BreakpadCallFrameSection.encode($0, numbers: numbers, into: &body) }
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
      if !file.withRuleBytes(delta.rules, { BreakpadCallFrameSection.encode($0, numbers: numbers, into: &body) }) {
        complete = false
      }
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

/// Register numbers by name, looked up by a name's bytes without making a String: names of up to 7
/// bytes (all but a few) are keys of 8 bytes, the length in the top one.
struct RegisterNumbers: Sendable {
  private var short: [UInt64: Int] = [:]
  private var long: [String: Int] = [:]

  init(_ numbers: [String: Int]) {
    for (name, number) in numbers {
      if let key = name.utf8.withContiguousStorageIfAvailable({ Self.key(UnsafeRawBufferPointer($0)) }) ?? Self.key(Array(name.utf8)) {
        short[key] = number
      } else {
        long[name] = number
      }
    }
  }

  private static func key(_ bytes: some Collection<UInt8>) -> UInt64? {
    guard bytes.count < 8 else { return nil }
    var key = UInt64(bytes.count) << 56
    for (index, byte) in bytes.enumerated() { key |= UInt64(byte) << (8 * index) }  // index < 7: inside 56 bits
    return key
  }

  subscript(name: UnsafeRawBufferPointer) -> Int? {
    if let key = Self.key(name) { return short[key] }
    return long[String(decoding: name, as: UTF8.self)]
  }
}
