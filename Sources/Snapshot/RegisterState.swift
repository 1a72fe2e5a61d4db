import ImageReaders

/// A thread's registers as a crash report lists them, in Apple's `Thread State` layout: rows of
/// `name: 0x…` cells (`Thread 2 crashed with X86 Thread State (64-bit):`).
public struct RegisterState: Sendable, Equatable {
  /// One register: its name as the report writes it, its value, and how many hex digits it is written with.
  public struct Register: Sendable, Equatable {
    /// The name as the report writes it (`rax`, `x0`, `cpsr`).
    public var name: String
    /// The register's value.
    public var value: UInt64
    /// Hex digits after `0x` (16, or 8 for `cpsr`).
    public var digits: Int
    /// A register written with `digits` hex digits.
    public init(name: String, value: UInt64, digits: Int = 16) {
      self.name = name
      self.value = value
      self.digits = digits
    }
  }

  /// The heading's words after `crashed with ` (`X86 Thread State (64-bit)`, `ARM Thread State (64-bit)`).
  public var title: String
  /// The registers, one array per line, as the report lays them out.
  public var rows: [[Register]]

  /// Registers under `title`, laid out in `rows`.
  public init(title: String, rows: [[Register]]) {
    self.title = title
    self.rows = rows
  }

  /// The value of the register named `name`, when listed.
  public subscript(name: String) -> UInt64? {
    for row in rows { for register in row where register.name == name { return register.value } }
    return nil
  }

  /// x86_64's registers in Apple's rows (`rax rbx rcx rdx`, `rdi rsi rbp rsp`, `r8`…`r15`, `rip rfl cr2`);
  /// `value` gives each by that name (`rfl` the flags, `cr2` the fault address: 0 when none).
  package static func x86_64(_ value: (String) -> UInt64) -> RegisterState {
    let names = [["rax", "rbx", "rcx", "rdx"], ["rdi", "rsi", "rbp", "rsp"], ["r8", "r9", "r10", "r11"],
                 ["r12", "r13", "r14", "r15"], ["rip", "rfl", "cr2"]]
    return RegisterState(title: "X86 Thread State (64-bit)",
                         rows: names.map { row in row.map { Register(name: $0, value: value($0)) } })
  }

  /// i386's registers in Apple's rows (`eax ebx ecx edx`, `edi esi ebp esp`, `ss efl eip cs`,
  /// `ds es fs gs`, `cr2`), 8 digits each, as Apple's 32-bit x86 reports have them; `value` gives each by
  /// that name (`efl` the flags, `cr2` the fault address: 0 when none).
  package static func i386(_ value: (String) -> UInt64) -> RegisterState {
    let names = [["eax", "ebx", "ecx", "edx"], ["edi", "esi", "ebp", "esp"], ["ss", "efl", "eip", "cs"],
                 ["ds", "es", "fs", "gs"], ["cr2"]]
    return RegisterState(title: "X86 Thread State (32-bit)",
                         rows: names.map { row in row.map { Register(name: $0, value: value($0) & 0xFFFF_FFFF, digits: 8) } })
  }

  /// aarch64's registers in Apple's rows (`x0`…`x27` four a row, `x28 fp lr`, `sp pc cpsr`); `value`
  /// gives each by that name (`fp` is x29, `lr` x30, `cpsr` the PSTATE bits, written with 8 digits).
  package static func aarch64(_ value: (String) -> UInt64) -> RegisterState {
    var rows = stride(from: 0, to: 28, by: 4).map { first in
      (first..<first + 4).map { Register(name: "x\($0)", value: value("x\($0)")) }
    }
    rows.append(["x28", "fp", "lr"].map { Register(name: $0, value: value($0)) })
    rows.append([Register(name: "sp", value: value("sp")), Register(name: "pc", value: value("pc")),
                 Register(name: "cpsr", value: value("cpsr") & 0xFFFF_FFFF, digits: 8)])
    return RegisterState(title: "ARM Thread State (64-bit)", rows: rows)
  }

  /// 32-bit ARM's registers in Apple's rows (`r0`…`r11` four a row, `ip sp lr pc`, `cpsr`), 8 digits
  /// each, as Apple's 32-bit ARM reports have them; `value` gives each by that name (`r11` is the frame
  /// pointer, `ip` is r12).
  package static func arm(_ value: (String) -> UInt64) -> RegisterState {
    var rows = stride(from: 0, to: 12, by: 4).map { first in
      (first..<first + 4).map { Register(name: "r\($0)", value: value("r\($0)") & 0xFFFF_FFFF, digits: 8) }
    }
    rows.append(["ip", "sp", "lr", "pc"].map { Register(name: $0, value: value($0) & 0xFFFF_FFFF, digits: 8) })
    rows.append([Register(name: "cpsr", value: value("cpsr") & 0xFFFF_FFFF, digits: 8)])
    return RegisterState(title: "ARM Thread State (32-bit)", rows: rows)
  }

  /// The section's lines after its heading, each ending in a newline: two spaces, then each cell as its
  /// name right-aligned (in 3 columns for x86, 4 for ARM), `: 0x` and the digits; cells joined by two
  /// spaces (x86) or one (ARM), as Apple's reports have them.
  package func text() -> String {
    let isARM = title.hasPrefix("ARM")
    let width = isARM ? 4 : 3
    var out = ""
    for row in rows {
      out += "  " + row.map { register in
        String(repeating: " ", count: max(0, width - register.name.count)) + register.name + ": 0x"
          + hexDigits(register.value, width: register.digits)
      }.joined(separator: isARM ? " " : "  ") + "\n"
    }
    return out
  }
}
