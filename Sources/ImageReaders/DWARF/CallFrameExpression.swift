/// A DWARF expression evaluator for what call frame information needs: `DW_CFA_def_cfa_expression`,
/// `DW_CFA_expression` and `DW_CFA_val_expression` (signal trampolines, glibc's PLT entries). The
/// stack machine of DWARF 5 section 2.5.1: literals, register-based addresses, arithmetic, logic,
/// comparisons, branches and memory reads through a function the caller gives (its own memory at
/// crash time, another process, a core file).
///
/// Bounded whatever the bytes say: a fixed stack depth, a step limit (branches can loop), no
/// allocation beyond the stack's.
public struct CallFrameExpression {
  /// The most values the stack holds (compilers' CFI expressions use a handful).
  public static let maximumStackDepth = 64
  /// The most operations one evaluation executes (`DW_OP_skip`/`DW_OP_bra` can loop).
  public static let maximumSteps = 10_000

  /// The expression's bytes.
  public var bytes: [UInt8]
  /// The target's address size in bytes (4 or 8): `DW_OP_addr`, `DW_OP_deref`'s size, and where
  /// arithmetic wraps.
  public var addressSize: Int

  /// An expression over `bytes` for a target whose addresses are `addressSize` (4 or 8) bytes.
  public init(_ bytes: [UInt8], addressSize: Int) {
    self.bytes = bytes
    self.addressSize = addressSize
  }

  /// Evaluates the expression with `initial` pushed first (the CFA for `DW_CFA_expression` and
  /// `DW_CFA_val_expression`, nothing for `DW_CFA_def_cfa_expression`), and returns the top of the
  /// stack. `register(n)` gives a register's value (`nil`: unknown, an error); `readMemory(address,
  /// size)` reads `size` (1...8) bytes, `nil` when they cannot be read (an error).
  public func evaluate(initial: [UInt64] = [], register: (UInt64) -> UInt64?,
                       readMemory: (UInt64, Int) -> UInt64?) throws(FormatError) -> UInt64 {
    let mask: UInt64 = addressSize == 4 ? 0xFFFF_FFFF : UInt64.max
    var stack: [UInt64] = []
    stack.reserveCapacity(Self.maximumStackDepth)
    for value in initial.prefix(Self.maximumStackDepth) { stack.append(value & mask) }
    // Array.withUnsafeBytes rethrows untyped: the typed error travels in a Result.
    let outcome = bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Void, FormatError> in
      Result { () throws(FormatError) in
        var reader = ByteReader(raw, endian: .little)
        var start = 0  // the current operation's offset, which errors name
        func fail(_ what: String) -> FormatError { .dwarf(section: "expression", offset: start, what) }
        func push(_ value: UInt64) throws(FormatError) {
          guard stack.count < Self.maximumStackDepth else { throw fail("stack deeper than \(Self.maximumStackDepth)") }
          stack.append(value & mask)
        }
        func pop() throws(FormatError) -> UInt64 {
          guard let value = stack.popLast() else { throw fail("stack empty") }
          return value
        }
        func signed(_ value: UInt64) -> Int64 {
          addressSize == 4 ? Int64(Int32(truncatingIfNeeded: value)) : Int64(bitPattern: value)
        }
        func registerValue(_ number: UInt64) throws(FormatError) -> UInt64 {
          guard let value = register(number) else { throw fail("register \(number) has no known value") }
          return value
        }
        func branch(_ delta: Int16) throws(FormatError) {
          // The target must be an operation boundary inside the expression, or its end.
          let (target, overflow) = reader.offset.addingReportingOverflow(Int(delta))
          guard !overflow, target >= 0, target <= reader.count else { throw fail("branch to \(target) outside the expression") }
          try reader.seek(to: target)
        }
        var steps = 0
        while reader.remaining > 0 {
          steps += 1
          guard steps <= Self.maximumSteps else {
            throw .limitExceeded("expression steps", value: UInt64(steps), limit: UInt64(Self.maximumSteps))
          }
          start = reader.offset
          let op = try reader.read(UInt8.self)
          switch op {
          case 0x30...0x4F: try push(UInt64(op - 0x30))  // DW_OP_lit0...31
          case 0x70...0x8F:  // DW_OP_breg0...31
            let offset = UInt64(bitPattern: try reader.readSLEB128())
            try push(try registerValue(UInt64(op - 0x70)) &+ offset)
          case 0x92:  // DW_OP_bregx
            let number = try reader.readULEB128()
            let offset = UInt64(bitPattern: try reader.readSLEB128())
            try push(try registerValue(number) &+ offset)
          case 0x03: try push(try reader.readWord(is64Bit: addressSize == 8))  // DW_OP_addr
          case 0x08: try push(UInt64(try reader.read(UInt8.self)))  // DW_OP_const1u
          case 0x09: try push(UInt64(bitPattern: Int64(try reader.read(Int8.self))))  // DW_OP_const1s
          case 0x0A: try push(UInt64(try reader.read(UInt16.self)))  // DW_OP_const2u
          case 0x0B: try push(UInt64(bitPattern: Int64(try reader.read(Int16.self))))  // DW_OP_const2s
          case 0x0C: try push(UInt64(try reader.read(UInt32.self)))  // DW_OP_const4u
          case 0x0D: try push(UInt64(bitPattern: Int64(try reader.read(Int32.self))))  // DW_OP_const4s
          case 0x0E, 0x0F: try push(try reader.read(UInt64.self))  // DW_OP_const8u, DW_OP_const8s
          case 0x10: try push(try reader.readULEB128())  // DW_OP_constu
          case 0x11: try push(UInt64(bitPattern: try reader.readSLEB128()))  // DW_OP_consts
          case 0x12:  // DW_OP_dup
            guard let top = stack.last else { throw fail("stack empty") }
            try push(top)
          case 0x13: _ = try pop()  // DW_OP_drop
          case 0x14:  // DW_OP_over
            guard stack.count >= 2 else { throw fail("DW_OP_over needs two values") }
            try push(stack[stack.count - 2])
          case 0x15:  // DW_OP_pick
            let index = Int(try reader.read(UInt8.self))
            guard index < stack.count else { throw fail("DW_OP_pick \(index) with \(stack.count) values") }
            try push(stack[stack.count - 1 - index])
          case 0x16:  // DW_OP_swap
            guard stack.count >= 2 else { throw fail("DW_OP_swap needs two values") }
            stack.swapAt(stack.count - 1, stack.count - 2)
          case 0x17:  // DW_OP_rot
            guard stack.count >= 3 else { throw fail("DW_OP_rot needs three values") }
            let top = stack[stack.count - 1]
            stack[stack.count - 1] = stack[stack.count - 2]
            stack[stack.count - 2] = stack[stack.count - 3]
            stack[stack.count - 3] = top
          case 0x06, 0x94:  // DW_OP_deref, DW_OP_deref_size
            let size = op == 0x06 ? addressSize : Int(try reader.read(UInt8.self))
            guard size >= 1, size <= addressSize else { throw fail("DW_OP_deref_size \(size)") }
            let address = try pop()
            guard let value = readMemory(address, size) else {
              throw fail("memory at 0x\(hexDigits(address)) cannot be read")
            }
            try push(size == 8 ? value : value & ((1 << UInt64(size * 8)) - 1))
          case 0x19:  // DW_OP_abs; the most negative value stays itself, as in two's complement hardware
            let value = signed(try pop())
            try push(UInt64(bitPattern: value == Int64.min ? value : abs(value)))
          case 0x1A: let b = try pop(), a = try pop(); try push(a & b)  // DW_OP_and
          case 0x1B:  // DW_OP_div (signed)
            let b = signed(try pop()), a = signed(try pop())
            guard b != 0 else { throw fail("DW_OP_div by zero") }
            try push(UInt64(bitPattern: a.dividedReportingOverflow(by: b).partialValue))
          case 0x1C: let b = try pop(), a = try pop(); try push(a &- b)  // DW_OP_minus
          case 0x1D:  // DW_OP_mod (unsigned)
            let b = try pop(), a = try pop()
            guard b != 0 else { throw fail("DW_OP_mod by zero") }
            try push(a % b)
          case 0x1E: let b = try pop(), a = try pop(); try push(a &* b)  // DW_OP_mul
          case 0x1F: try push(0 &- (try pop()))  // DW_OP_neg
          case 0x20: try push(~(try pop()))  // DW_OP_not
          case 0x21: let b = try pop(), a = try pop(); try push(a | b)  // DW_OP_or
          case 0x22: let b = try pop(), a = try pop(); try push(a &+ b)  // DW_OP_plus
          case 0x23: try push((try pop()) &+ (try reader.readULEB128()))  // DW_OP_plus_uconst
          case 0x24:  // DW_OP_shl
            let b = try pop(), a = try pop()
            try push(b >= 64 ? 0 : a << b)
          case 0x25:  // DW_OP_shr
            let b = try pop(), a = try pop()
            try push(b >= 64 ? 0 : (a & mask) >> b)
          case 0x26:  // DW_OP_shra
            let b = try pop(), a = signed(try pop())
            try push(UInt64(bitPattern: a >> Int64(min(b, 63))))
          case 0x27: let b = try pop(), a = try pop(); try push(a ^ b)  // DW_OP_xor
          case 0x29...0x2E:  // DW_OP_eq, ge, gt, le, lt, ne: signed comparisons
            let b = signed(try pop()), a = signed(try pop())
            let result = switch op {
            case 0x29: a == b
            case 0x2A: a >= b
            case 0x2B: a > b
            case 0x2C: a <= b
            case 0x2D: a < b
            default: a != b
            }
            try push(result ? 1 : 0)
          case 0x2F: try branch(try reader.read(Int16.self))  // DW_OP_skip
          case 0x28:  // DW_OP_bra
            let delta = try reader.read(Int16.self)
            if try pop() != 0 { try branch(delta) }
          case 0x96: continue  // DW_OP_nop
          default:
            throw fail("operation 0x\(hexDigits(UInt64(op), width: 2)) is not supported in call frame expressions")
          }
        }
      }
    }
    try outcome.get()
    guard let result = stack.last else {
      throw .dwarf(section: "expression", offset: bytes.count, "stack empty at the end")
    }
    return result
  }
}
