import ImageLogTestSupport
@testable import ImageReaders
import Testing

/// Call frame information against `readelf --debug-dump=frames-interp`: for every FDE of real
/// libraries (libc, libstdc++, libz; aarch64's libc from the cross toolchain) and of an assembled
/// file using every CFI directive GAS has, our rows equal readelf's interpreted table, CFA and every
/// register column; and `CallFrameInfo.row(at:)` (through `.eh_frame_hdr`'s binary search) gives the
/// same row at the first and last address of every row.
@Suite struct CallFrameTests {
  /// readelf's register names (binutils dwarf.c `dwarf_regnames_*`), for the machines tested.
  static func registerName(_ number: UInt64, machine: UInt16) -> String {
    switch machine {
    case 62:  // EM_X86_64
      let names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
                   "r14", "r15", "rip"]
      if number < names.count { return names[Int(number)] }
      if (17...32).contains(number) { return "xmm\(number - 17)" }
    case 3:  // EM_386
      let names = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags"]
      if number < names.count { return names[Int(number)] }
    case 183:  // EM_AARCH64
      if number <= 30 { return "x\(number)" }
      if number == 31 { return "sp" }
      if (64...95).contains(number) { return "v\(number - 64)" }
    default: break
    }
    return "r\(number)"
  }

  /// One FDE's table as readelf prints it: the column names, then each row's LOC and cells.
  struct ReadelfTable {
    var offset: Int
    var pcRange: Range<UInt64>
    var columns: [String] = []
    var rows: [(location: UInt64, cells: [String])] = []
  }

  /// The FDE tables of one section in `readelf --debug-dump=frames-interp -W` output.
  static func readelfTables(_ path: String, section: String) throws -> [ReadelfTable] {
    let output = try runChild(["readelf", "--debug-dump=frames-interp", "-W", path]).output
    var tables: [ReadelfTable] = []
    var inSection = false
    var current: ReadelfTable?
    for line in output.split(separator: "\n", omittingEmptySubsequences: false) {
      if line.hasPrefix("Contents of the ") {
        if let table = current { tables.append(table); current = nil }
        inSection = line.hasPrefix("Contents of the \(section) section")
        continue
      }
      guard inSection else { continue }
      let words = line.split(separator: " ")
      if words.count == 3, words[1] == "ZERO", words[2] == "terminator" {
        if let table = current { tables.append(table); current = nil }
        continue
      }
      if words.count >= 6, words[3] == "FDE", let offset = Int(words[0], radix: 16),
         let pc = words.first(where: { $0.hasPrefix("pc=") }) {
        if let table = current { tables.append(table) }
        let bounds = pc.dropFirst(3).split(separator: ".", omittingEmptySubsequences: true)
        guard bounds.count == 2, let low = UInt64(bounds[0], radix: 16), let high = UInt64(bounds[1], radix: 16) else {
          throw TestSupportError("readelf FDE line: \(line)")
        }
        current = ReadelfTable(offset: offset, pcRange: low..<high)
      } else if words.count >= 3, words[3 < words.count ? 3 : 0] == "CIE" {
        if let table = current { tables.append(table) }
        current = nil
      } else if current != nil, words.first == "LOC" {
        current?.columns = words.dropFirst().map(String.init)
      } else if current != nil, let first = words.first, first.count >= 8, let location = UInt64(first, radix: 16) {
        // A register rule prints as "r13 (r13)": one cell in two words.
        var cells: [String] = []
        for word in words.dropFirst() {
          if word.hasPrefix("("), !cells.isEmpty { cells[cells.count - 1] += " " + word } else { cells.append(String(word)) }
        }
        current?.rows.append((location, cells))
      }
    }
    if let table = current { tables.append(table) }
    return tables
  }

  /// Our row in readelf's notation, in the order of `columns` (`CFA`, register names, `ra`).
  static func cells(_ row: UnwindRow, columns: [String], machine: UInt16) -> [String] {
    var byName: [String: String] = [:]
    for (register, rule) in row.registers {
      let name = register == row.returnAddressRegister ? "ra" : registerName(register, machine: machine)
      byName[name] = switch rule {
      case .undefined: "u"
      case .sameValue: "s"
      case .offset(let offset): "c" + (offset >= 0 ? "+" : "") + "\(offset)"
      case .valueOffset(let offset): "v" + (offset >= 0 ? "+" : "") + "\(offset)"
      case .register(let other): "r\(other) (\(registerName(other, machine: machine)))"  // readelf's regname(n, 0)
      case .expression: "exp"
      case .valueExpression: "vexp"
      }
    }
    return columns.map { column in
      if column == "CFA" {
        switch row.cfa {
        case let .registerOffset(register, offset):
          // readelf prints the offset as an int (%+d).
          return registerName(register, machine: machine) + (Int32(truncatingIfNeeded: offset) >= 0 ? "+" : "")
            + "\(Int32(truncatingIfNeeded: offset))"
        case .expression: return "exp"
        }
      }
      return byName[column] ?? "u"
    }
  }

  struct Tally { var fdes = 0, emptyFDEs = 0, rows = 0, lookups = 0 }

  /// Compares every FDE of `path`'s `.eh_frame` (and `.debug_frame` when present) with readelf.
  static func compare(_ path: String) throws -> Tally {
    guard let bytes = readFileBytes(path) else { throw TestSupportError("cannot read \(path)") }
    var tally = Tally()
    try bytes.withUnsafeBytes { raw in
      let file = ByteReader(raw)
      let elf = try ELFFile(file)
      let info = try CallFrameInfo(elf: elf, file: file)
      let machine = elf.header.machine
      for (name, section) in [(".eh_frame", info.ehFrame), (".debug_frame", info.debugFrame)] {
        guard let section else { continue }
        let expected = try readelfTables(path, section: name)
        var fdes: [(FrameDescriptionEntry, CommonInformationEntry)] = []
        for entry in try section.entries() { if case let .fde(fde, cie) = entry { fdes.append((fde, cie)) } }
        #expect(fdes.map(\.0.offset) == expected.map(\.offset), "\(path) \(name): FDE offsets")
        #expect(fdes.map(\.0.pcRange) == expected.map(\.pcRange), "\(path) \(name): FDE ranges")
        for ((fde, cie), table) in zip(fdes, expected) where fde.offset == table.offset {
          tally.fdes += 1
          let ours = try section.rows(of: fde, cie)
          if table.rows.isEmpty {
            // readelf prints no table for an FDE whose instructions are all DW_CFA_nop: then ours is the
            // CIE's initial row alone.
            let instructions = try section.bytes.bytes(at: fde.instructions.lowerBound, length: fde.instructions.count)
            #expect(instructions.allSatisfy { $0 == 0 } && ours.count == 1, "\(path) \(name) FDE 0x\(String(fde.offset, radix: 16))")
            tally.emptyFDEs += 1
            continue
          }
          // readelf prints a row at every advance, also by 0: the last one at a location is the one in force.
          var theirs: [(UInt64, [String])] = []
          for row in table.rows {
            if theirs.last?.0 == row.location { theirs[theirs.count - 1] = row } else { theirs.append(row) }
          }
          let ourCells = ours.map { ($0.location, cells($0, columns: ["CFA"] + table.columns.dropFirst(), machine: machine)) }
          let same = ourCells.count == theirs.count && zip(ourCells, theirs).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
          #expect(same, "\(path) \(name) FDE 0x\(String(fde.offset, radix: 16)):\nours   \(ourCells)\nreadelf \(theirs)")
          guard same else { continue }
          tally.rows += ours.count
          // The lookup API: the first and last address of each row (rows past the FDE's end never apply).
          for (index, row) in ours.enumerated() where row.location < fde.pcRange.upperBound {
            let next = index + 1 < ours.count ? min(ours[index + 1].location, fde.pcRange.upperBound) : fde.pcRange.upperBound
            guard next > row.location else { continue }
            for pc in Set([row.location, next - 1]) {
              let found = name == ".eh_frame" ? try info.row(at: pc) : try section.row(of: fde, cie, at: pc)
              let expectedCells = cells(row, columns: ["CFA"] + table.columns.dropFirst(), machine: machine)
              let foundCells = found.map { cells($0, columns: ["CFA"] + table.columns.dropFirst(), machine: machine) }
              #expect(foundCells == expectedCells, "\(path) pc 0x\(String(pc, radix: 16))")
              tally.lookups += 1
            }
          }
        }
      }
    }
    return tally
  }

  static let systemLibraries = [
    "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libz.so.1",
    "/usr/aarch64-linux-gnu/lib/libc.so.6",
  ]

  @Test(.enabled(if: haveTool("readelf"), "needs readelf"), arguments: systemLibraries)
  func systemLibraryMatchesReadelf(path: String) throws {
    try #require(readFileBytes(path) != nil, "\(path) is not installed here")
    let tally = try Self.compare(path)
    #expect(tally.fdes > 100, "\(path): \(tally.fdes) FDEs compared")
    print("CallFrameTests: \(path): \(tally.fdes) FDEs (\(tally.emptyFDEs) without instructions), \(tally.rows) rows, \(tally.lookups) lookups agree with readelf")
  }

  /// The DWARF fixtures' ELF files (gcc and clang, C, C++ and Swift, -O0 and -O2; made by
  /// Scripts/make-dwarf-fixtures): every FDE of each.
  @Test(.enabled(if: haveTool("readelf"), "needs readelf"))
  func dwarfFixturesMatchReadelf() throws {
    let directory = packageRoot + "/Tests/ImageLogSymbolicationTests/Fixtures/dwarf"
    let names = ["clang-c-O0-dwarf5", "clang-c-O2-dwarf4", "clang-cxx-O0-dwarf4", "clang-cxx-O2-dwarf5", "gcc-c-O0-dwarf5",
                 "gcc-c-O2-dwarf4", "gcc-cxx-O0-dwarf4", "gcc-cxx-O2-dwarf5", "dwz-a", "split-gcc-cxx-O2", "swift-O", "swift-Onone"]
    var total = Tally()
    for name in names {
      try #require(readFileBytes(directory + "/" + name) != nil, "fixture \(name) is missing")
      let tally = try Self.compare(directory + "/" + name)
      #expect(tally.fdes > 0, "\(name)")
      total.fdes += tally.fdes
      total.rows += tally.rows
      total.lookups += tally.lookups
    }
    print("CallFrameTests: DWARF fixtures: \(total.fdes) FDEs, \(total.rows) rows, \(total.lookups) lookups agree with readelf")
  }

  /// Every CFI directive GAS has, in `.eh_frame` and `.debug_frame` (Tests/Programs/cfi-directives.s).
  /// And a 32-bit one (Tests/Programs/cfi-directives-i386.s: 4-byte addresses, data alignment -4).
  @Test(.enabled(if: haveTool("readelf") && haveTool("cc"), "needs readelf and cc"),
        arguments: [("cfi-directives.s", [String](), 12), ("cfi-directives-i386.s", ["-m32"], 2)])
  func everyDirectiveMatchesReadelf(source: String, flags: [String], fdes: Int) throws {
    let directory = try makeTemporaryDirectory()
    let object = directory + "/cfi.so"
    let build = try runChild(["cc"] + flags + ["-shared", "-nostdlib", "-Wl,--eh-frame-hdr", packageRoot + "/Tests/Programs/" + source,
                              "-o", object])
    try #require(build.exitCode == 0, "cc: \(build.error)")
    let tally = try Self.compare(object)
    #expect(tally.fdes == fdes, "\(tally.fdes) FDEs")
    print("CallFrameTests: \(source): \(tally.fdes) FDEs (\(tally.emptyFDEs) without instructions), \(tally.rows) rows, \(tally.lookups) lookups agree with readelf")
  }
}
