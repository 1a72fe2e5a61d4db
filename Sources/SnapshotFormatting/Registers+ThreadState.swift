import Snapshot
import ImageReaders

extension Registers {
  /// One cell of Apple's `Thread State` rows: the register's name there, its value and how many hex
  /// digits it is written with.
  struct ThreadStateCell {
    var name: String
    var value: UInt64
    var digits: Int
  }

  /// The registers in Apple's `Thread State` rows, those given only (x86_64: `rax rbx rcx rdx`, `rdi rsi
  /// rbp rsp`, `r8`…`r15`, `rip rfl cr2`; i386: `eax ebx ecx edx`, `edi esi ebp esp`, `ss efl eip cs`,
  /// `ds es fs gs`, `cr2`; aarch64: `x0`…`x27` four a row, `x28 fp lr`, `sp pc cpsr`, `far esr`; arm:
  /// `r0`…`r11` four a row, `ip sp lr pc`, `cpsr`), each value cut to its digits.
  var threadStateRows: [[ThreadStateCell]] {
    let names: [[String]]
    switch architecture {
    case .x86_64:
      names = [["rax", "rbx", "rcx", "rdx"], ["rdi", "rsi", "rbp", "rsp"], ["r8", "r9", "r10", "r11"],
               ["r12", "r13", "r14", "r15"], ["rip", "rfl", "cr2"]]
    case .i386:
      names = [["eax", "ebx", "ecx", "edx"], ["edi", "esi", "ebp", "esp"], ["ss", "efl", "eip", "cs"],
               ["ds", "es", "fs", "gs"], ["cr2"]]
    case .aarch64:
      names = stride(from: 0, to: 28, by: 4).map { first in (first..<first + 4).map { "x\($0)" } }
        + [["x28", "fp", "lr"], ["sp", "pc", "cpsr"], ["far", "esr"]]
    case .arm:
      names = stride(from: 0, to: 12, by: 4).map { first in (first..<first + 4).map { "r\($0)" } }
        + [["ip", "sp", "lr", "pc"], ["cpsr"]]
    }
    let table = self.table
    return names.compactMap { row in
      let cells = row.compactMap { name -> ThreadStateCell? in
        guard let index = table.firstIndex(where: { $0.appleName == name }), let value = values[index] else { return nil }
        let digits = table[index].digits
        return ThreadStateCell(name: name, value: digits < 16 ? value & (1 << (4 * UInt64(digits)) - 1) : value,
                               digits: digits)
      }
      return cells.isEmpty ? nil : cells
    }
  }

  /// The section's lines after its heading, each ending in a newline: two spaces, then each cell as its
  /// name right-aligned (in 3 columns for x86, 4 for ARM), `: 0x` and the digits; cells joined by two
  /// spaces (x86) or one (ARM), as Apple's reports have them.
  func threadStateText() -> String {
    let isARM = architecture == .aarch64 || architecture == .arm
    let width = isARM ? 4 : 3
    var out = ""
    for row in threadStateRows {
      out += "  " + row.map { cell in
        String(repeating: " ", count: max(0, width - cell.name.count)) + cell.name + ": 0x"
          + hexDigits(cell.value, width: cell.digits)
      }.joined(separator: isARM ? " " : "  ") + "\n"
    }
    return out
  }
}

extension ProcessSnapshot.Thread {
  /// The registers the writers show: the crashed or dump-requesting thread's (a capture, a core and a
  /// minidump give every thread's; the others are what a minidump written from the snapshot holds).
  var shownRegisters: Registers? { crashed || requestedDump ? registers : nil }
}
