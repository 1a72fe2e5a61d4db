internal import CImageLogUnwind

/// Evaluates a DWARF expression as the unwinder does for CFI (`DW_CFA_def_cfa_expression`,
/// `DW_CFA_expression`, `DW_CFA_val_expression`): over `registers`, reading `memory` for `DW_OP_deref`,
/// with `initial` (the CFA, for register rules) pushed first. `nil` when the expression is malformed,
/// needs a register not known or memory that cannot be read, or runs past the unwinder's step cap.
package func evaluateExpression(_ expression: [UInt8], registers: RegisterSet, memory: some MemoryReading,
                               initial: UInt64? = nil) -> UInt64? {
  guard let length = UInt32(exactly: expression.count) else { return nil }
  var set = registers.cValue
  return withCMemory(BufferMemory(expression)) { code in
    withCMemory(memory) { cMemory in
      var result: UInt64 = 0
      guard il_cfi_evaluate(code, cMemory, 0, length, &set, initial == nil ? 0 : 1, initial ?? 0, &result) != 0 else { return nil }
      return result
    }
  }
}
