import ImageLogTestSupport
import ImageReaders
@testable import Symbolication
import Testing

/// `STACK CFI` rules made DWARF from the record's bytes (`BreakpadCallFrameSection.encode`) against
/// the same made from Strings, as the encoder did before it read bytes (`StringEncoder`, kept here
/// as the reference): random rule texts over the tokens rules use, and some they should not hold
/// (numbers past 64 bits, unknown registers, non-ASCII, runs of spaces), give the same instructions
/// byte for byte and the same verdict on what was left out.
@Suite struct BreakpadRuleEncodingTests {
  static let tokens = [
    ".cfa:", ".ra:", "$rsp", "rsp", "$rbp:", "$rbx:", "$r12:", "$rbx", ".cfa", "8", "16", "-16", "+3", "0", "-0", "007",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809", "+", "-", "*", "/",
    "%", "^", "@", "=", ".undef", "$T0", ":", "$fs.base:", "$fs.base", "$unused1", "$xmm15:", "x29", "sp", "x30:", "fp",
    "lr:", "x19:", "sp:", "$esp", "$ebp:", "$ebx:", "$eip", "r7", "r4:", "\u{212A}", "K", "\u{FFFD}:", "+-1", "1-", "", " ",
  ]

  @Test(arguments: ["x86_64", "arm64", "x86", "arm"])
  func bytesEncodeAsStringsDid(architecture: String) throws {
    let numbers = try #require(BreakpadCallFrames.registerNumbers(architecture))
    let table = RegisterNumbers(numbers)
    var generator = SeededGenerator(seed: 0xC0DE)
    var compared = 0, complete = 0
    for _ in 0..<20_000 {
      let count = Int.random(in: 0...9, using: &generator)
      let text = (0..<count).map { _ in
        guard Bool.random(using: &generator), let name = numbers.keys.randomElement(using: &generator) else {
          return Self.tokens.randomElement(using: &generator) ?? ""
        }
        return Bool.random(using: &generator) ? name : name + ":"
      }.joined(separator: " ")
      var ours: [UInt8] = [], theirs: [UInt8] = []
      let oursComplete = Array(text.utf8).withUnsafeBytes { BreakpadCallFrameSection.encode($0, numbers: table, into: &ours) }
      let theirsComplete = StringEncoder.encode(text, numbers: numbers, into: &theirs)
      #expect(ours == theirs && oursComplete == theirsComplete, "\(architecture): '\(text)'")
      compared += 1
      if theirsComplete && !theirs.isEmpty { complete += 1 }
    }
    #expect(compared == 20_000 && complete > 500, "\(complete) rule texts said whole")
  }

  @Test func registerNumbersByBytes() throws {
    let numbers = try #require(BreakpadCallFrames.registerNumbers("x86_64"))
    let table = RegisterNumbers(numbers)
    for (name, number) in numbers {
      #expect(Array(name.utf8).withUnsafeBytes { table[$0] } == number, "\(name)")
    }
    for other in ["", "$", "$rsp ", "$RSP", "$fs.bas", "$fs.basex", "$xmm16", "\u{0}$rsp"] {
      #expect(Array(other.utf8).withUnsafeBytes { table[$0] } == nil, "\(other)")
    }
  }
}

/// The encoder as it was, over Strings: the reference.
enum StringEncoder {
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
      BreakpadCallFrameSection.appendULEB(UInt64(register), to: &body)
      BreakpadCallFrameSection.appendSLEB(offset, to: &body)
      return true
    }
    guard let expression = expression(tokens[...], numbers: numbers) else { return false }
    body.append(0x0F)  // DW_CFA_def_cfa_expression
    BreakpadCallFrameSection.appendULEB(UInt64(expression.count), to: &body)
    body += expression
    return true
  }

  /// A register's rule: `.cfa N + ^` (saved at), `.cfa N +` (is), `REG` (in), or an expression, which
  /// starts from the CFA as DWARF's register expressions do.
  static func encodeRule(_ register: UInt64, _ tokens: [String], numbers: [String: Int], into body: inout [UInt8]) -> Bool {
    if tokens.count == 1, let other = numbers[tokens[0]] {
      if UInt64(other) == register {
        body.append(0x08)  // DW_CFA_same_value
        BreakpadCallFrameSection.appendULEB(register, to: &body)
      } else {
        body.append(0x09)  // DW_CFA_register
        BreakpadCallFrameSection.appendULEB(register, to: &body)
        BreakpadCallFrameSection.appendULEB(UInt64(other), to: &body)
      }
      return true
    }
    if tokens == [".undef"] {
      body.append(0x07)  // DW_CFA_undefined
      BreakpadCallFrameSection.appendULEB(register, to: &body)
      return true
    }
    let dereferenced = tokens.last == "^"
    let value = dereferenced ? tokens.dropLast() : tokens[...]
    if value.first == ".cfa", let offset = offset(value.dropFirst()) {
      body.append(dereferenced ? 0x11 : 0x15)  // DW_CFA_offset_extended_sf, DW_CFA_val_offset_sf
      BreakpadCallFrameSection.appendULEB(register, to: &body)
      BreakpadCallFrameSection.appendSLEB(offset, to: &body)
      return true
    }
    // The CFA is on the stack when the expression starts: a leading `.cfa` is that.
    guard let expression = expression(value.first == ".cfa" ? value.dropFirst() : value, numbers: numbers) else { return false }
    body.append(dereferenced ? 0x10 : 0x16)  // DW_CFA_expression, DW_CFA_val_expression
    BreakpadCallFrameSection.appendULEB(register, to: &body)
    BreakpadCallFrameSection.appendULEB(UInt64(expression.count), to: &body)
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
            BreakpadCallFrameSection.appendULEB(UInt64(register), to: &operations)
          }
          BreakpadCallFrameSection.appendSLEB(0, to: &operations)
        } else if let value = Int64(token) {
          operations.append(0x11)  // DW_OP_consts
          BreakpadCallFrameSection.appendSLEB(value, to: &operations)
        } else {
          return nil
        }
      }
    }
    return operations
  }
}
