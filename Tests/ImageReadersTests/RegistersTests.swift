#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Each architecture's table in `Registers` held to the references it copies: the kernel's order to
/// glibc's `struct user_regs_struct` (ELFCoreRegisterTests holds the aarch64 and i386 orders to
/// `eu-readelf -n` on real cores), the DWARF numbers to `readelf --debug-dump=frames`' register names,
/// and Breakpad's names to `dump_syms`' `STACK CFI` records of the same objects.
@Suite struct RegistersTests {
  /// The field names of each `struct user_regs_struct` in `sys/user.h`, in order (x86_64's, then i386's).
  static func userRegsStructs(_ header: String) -> [[String]] {
    var structs: [[String]] = []
    var fields: [String]?
    for line in header.split(separator: "\n") {
      let text = String(line.drop { $0 == " " || $0 == "\t" })
      if text == "struct user_regs_struct" { fields = []; continue }
      guard fields != nil else { continue }
      if text.hasPrefix("}") { structs.append(fields ?? []); fields = nil; continue }
      guard text.hasSuffix(";"), let name = text.dropLast().split(separator: " ").last else { continue }
      fields?.append(String(name))
    }
    return structs
  }

  @Test(.enabled(if: access("/usr/include/x86_64-linux-gnu/sys/user.h", R_OK) == 0, "needs glibc's x86_64 sys/user.h"))
  func kernelOrderIsUserRegsStruct() throws {
    let header = try #require(readFile("/usr/include/x86_64-linux-gnu/sys/user.h"))
    let structs = Self.userRegsStructs(header)
    try #require(structs.count == 2, "\(structs)")
    let x86_64 = Registers.table(.x86_64).prefix(Registers.kernelCount(.x86_64)).map(\.name)
    #expect(x86_64 == structs[0])
    // i386's segment registers are `xds`, `xcs`... in the header (the kernel's `pt_regs` spelling).
    let i386 = structs[1].map { $0.count == 3 && $0.hasPrefix("x") && $0.hasSuffix("s") ? String($0.dropFirst()) : $0 }
    #expect(Registers.table(.i386).prefix(Registers.kernelCount(.i386)).map(\.name) == i386)
    for architecture in Registers.Architecture.allCases {
      #expect(Registers(architecture).values.count == Registers.table(architecture).count)
      #expect(Set(Registers.table(architecture).map(\.name)).count == Registers.table(architecture).count)
    }
  }

  /// The return-address column, which `dump_syms` names `.ra`.
  static func returnAddress(_ architecture: Registers.Architecture) -> Int {
    switch architecture {
    case .x86_64: 16
    case .i386: 8
    case .aarch64: 30
    case .arm: 14
    }
  }

  /// An object of `architecture` whose one function's CFI saves each register of the table that has a
  /// DWARF number (Breakpad's name too) at its own offset: `-8 * (2 + number)`.
  static func object(_ architecture: Registers.Architecture, in directory: String) throws -> (path: String, numbers: [Int]) {
    let (triple, ret) = switch architecture {
    case .x86_64: ("x86_64-linux-gnu", "ret")
    case .i386: ("i386-linux-gnu", "ret")
    case .aarch64: ("aarch64-linux-gnu", "ret")
    case .arm: ("armv7-linux-gnueabihf", "bx lr")
    }
    let numbers = Registers.table(architecture).compactMap { register in
      register.breakpadName(architecture) == nil ? nil : register.dwarf
    }.filter { $0 != returnAddress(architecture) }
    var source = ".text\n.globl f\n.type f,%function\nf:\n.cfi_startproc\n"
    for number in numbers { source += ".cfi_offset \(number), \(-8 * (2 + number))\n" }
    source += "nop\n\(ret)\n.cfi_endproc\n.size f, .-f\n"
    let path = directory + "/\(triple).o"
    try writeFile(directory + "/\(triple).s", source)
    let made = try runTool(["llvm-mc-14", "--triple=\(triple)", "-filetype=obj", directory + "/\(triple).s", "-o", path])
    try #require(made.status == 0, "llvm-mc-14: \(made.error)")
    return (path, numbers)
  }

  /// readelf names each DWARF number of the table as one of the table's names for that register
  /// (`r49 (rflags)`: x86_64's `eflags`, Breakpad's `$rflags`). readelf has no names for arm's.
  @Test(.enabled(if: haveTool("llvm-mc-14") && haveTool("readelf"), "needs llvm-mc-14 and readelf"),
        arguments: [Registers.Architecture.x86_64, .i386, .aarch64])
  func dwarfNumbersAreReadelfs(architecture: Registers.Architecture) throws {
    let directory = try makeTemporaryDirectory("imagelog-registers-dwarf")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (path, numbers) = try Self.object(architecture, in: directory)
    let frames = try runTool(["readelf", "--debug-dump=frames", path])
    try #require(frames.status == 0, "readelf: \(frames.error)")
    var named: [Int: String] = [:]
    for line in frames.output.split(separator: "\n") where line.contains("DW_CFA_offset") {
      // `  DW_CFA_offset: r49 (rflags) at cfa-408`
      let words = line.split(separator: " ")
      guard words.count >= 3, words[1].hasPrefix("r"), let number = Int(words[1].dropFirst()),
            words[2].hasPrefix("("), words[2].hasSuffix(")") else { continue }
      named[number] = String(words[2].dropFirst().dropLast())
    }
    named[Self.returnAddress(architecture)] = nil  // the CIE's rule for the return address
    #expect(Set(named.keys) == Set(numbers), "\(frames.output)")
    for register in Registers.table(architecture) {
      guard let number = register.dwarf, let theirs = named[number] else { continue }
      let ours = [register.name, register.appleName, register.breakpadName(architecture).map { String($0.drop { $0 == "$" }) }]
      #expect(ours.contains(theirs), "\(architecture) DWARF \(number): readelf \(theirs), ours \(ours)")
    }
  }

  /// dump_syms writes each saved register under the name the table gives it for Breakpad (`$rflags`,
  /// `x29`, `r12`), found by its offset.
  @Test(.enabled(if: haveTool("llvm-mc-14") && pipelineTool("dump_syms") != nil, "needs llvm-mc-14 and dump_syms"),
        arguments: Registers.Architecture.allCases)
  func breakpadNamesAreDumpSyms(architecture: Registers.Architecture) throws {
    let directory = try makeTemporaryDirectory("imagelog-registers-breakpad")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (path, numbers) = try Self.object(architecture, in: directory)
    let symbols = try runTool([try #require(pipelineTool("dump_syms")), path])
    try #require(symbols.status == 0, "dump_syms: \(symbols.error)")
    let record = try #require(symbols.output.split(separator: "\n").first { $0.hasPrefix("STACK CFI INIT") })
    // `... $rflags: .cfa -408 + ^ ...`: a name, then `.cfa OFFSET + ^`.
    let words = record.split(separator: " ").map(String.init)
    var named: [Int: String] = [:]
    for index in words.indices.dropLast(2) where words[index].hasSuffix(":") && words[index + 1] == ".cfa" {
      guard let offset = Int(words[index + 2]), offset % 8 == 0 else { continue }
      named[-offset / 8 - 2] = String(words[index].dropLast())
    }
    named[-1] = nil  // .ra, .cfa
    named = named.filter { !$0.value.hasPrefix(".") }
    #expect(Set(named.keys) == Set(numbers), "\(record)")
    for register in Registers.table(architecture) {
      guard let number = register.dwarf, let theirs = named[number] else { continue }
      #expect(register.breakpadName(architecture) == theirs, "\(architecture) DWARF \(number)")
    }
  }

  /// One register answers to each of its names; a name of no register is neither read nor written.
  @Test func everyNameFindsTheOneRegister() {
    var registers = Registers(.x86_64)
    registers["eflags"] = 0x246
    #expect(registers["rfl"] == 0x246 && registers["rflags"] == 0x246 && registers["$rflags"] == 0x246)
    #expect(registers[dwarf: 49] == 0x246 && registers["rax"] == nil)
    registers["xmm0"] = 1
    #expect(registers.values.allSatisfy { $0 == nil || $0 == 0x246 })
    var arm = Registers(.arm)
    arm["r12"] = 12
    arm["r11"] = 11
    #expect(arm["ip"] == 12 && arm["fp"] == 11 && arm.fp == 11)
    var aarch64 = Registers(.aarch64)
    aarch64["cpsr"] = 0x6000_0000
    aarch64["x29"] = 0x7000
    #expect(aarch64["pstate"] == 0x6000_0000 && aarch64.fp == 0x7000 && aarch64["fp"] == 0x7000)
  }
}
