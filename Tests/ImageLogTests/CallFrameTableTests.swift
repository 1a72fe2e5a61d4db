import ImageLog
import ImageLogTestSupport
import ImageReaders
import Testing

/// The unwinder's CFI engine (C, CImageLogUnwind) against `readelf --debug-dump=frames-interp`: for every
/// FDE of real libraries (libc, libstdc++, libz; aarch64's libc from the cross toolchain), of the DWARF
/// fixtures and of an assembled file using every CFI directive GAS has, our rows equal readelf's
/// interpreted table, CFA and every register column; and the unwinder's own lookup (`.eh_frame_hdr`'s
/// binary search, then the FDE) gives the same row at the first and last address of every row.
@Suite struct CallFrameTableTests {
  /// readelf's register names (binutils dwarf.c `dwarf_regnames_*`), for the machines tested.
  static func registerName(_ number: Int, machine: UInt16) -> String {
    switch machine {
    case 62:  // EM_X86_64
      let names = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
                   "r14", "r15", "rip"]
      if number < names.count { return names[number] }
      if (17...32).contains(number) { return "xmm\(number - 17)" }
    case 3:  // EM_386
      let names = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags"]
      if number < names.count { return names[number] }
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
    var offset: UInt64
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
      if words.count >= 6, words[3] == "FDE", let offset = UInt64(words[0], radix: 16),
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
  static func cells(_ row: CallFrameRow, columns: [String], machine: UInt16) -> [String] {
    var byName: [String: String] = [:]
    for (register, rule) in row.rules {
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
    let file = try FileCallFrames(bytes)
    let addressSize = file.is64Bit ? 8 : 4
    var tally = Tally()
    var sections: [(String, CallFrameTable)] = []
    if let frame = file.ehFrame {
      sections.append((".eh_frame", CallFrameTable(memory: file.memory, address: frame.address, size: frame.size, kind: .ehFrame,
                                                   addressSize: addressSize)))
    }
    if let debug = file.debugFrame {
      sections.append((".debug_frame", CallFrameTable(memory: BufferMemory(debug), address: 0, size: UInt64(debug.count),
                                                      kind: .debugFrame, addressSize: addressSize)))
    }
    let image = file.image
    for (name, table) in sections {
      let expected = try readelfTables(path, section: name)
      let (fdes, complete) = table.entries()
      #expect(complete, "\(path) \(name): the walk ended at a malformed entry")
      #expect(fdes.map(\.offset) == expected.map(\.offset), "\(path) \(name): FDE offsets")
      #expect(fdes.map(\.pcRange) == expected.map(\.pcRange), "\(path) \(name): FDE ranges")
      for (fde, theirTable) in zip(fdes, expected) where fde.offset == theirTable.offset {
        tally.fdes += 1
        let columns = ["CFA"] + theirTable.columns.dropFirst()
        guard let ours = table.rows(of: fde) else {
          Issue.record("\(path) \(name) FDE 0x\(String(fde.offset, radix: 16)): our engine found its instructions malformed")
          continue
        }
        if theirTable.rows.isEmpty {
          // readelf prints no table for an FDE whose instructions are all DW_CFA_nop: then ours is the
          // CIE's initial row alone.
          #expect(ours.count <= 1, "\(path) \(name) FDE 0x\(String(fde.offset, radix: 16))")
          tally.emptyFDEs += 1
          continue
        }
        // readelf prints a row at every advance, also by 0 (the last one at a location is the one in
        // force), and rows past the FDE's end (which never apply: ours stop at the end).
        var theirs: [(UInt64, [String])] = []
        for row in theirTable.rows where row.location < fde.pcRange.upperBound || theirs.isEmpty {
          if theirs.last?.0 == row.location { theirs[theirs.count - 1] = row } else { theirs.append(row) }
        }
        // Ours: one row per distinct rule set as the engine answers by pc; consecutive rows can be
        // identical where readelf prints an advance that changed nothing.
        var ourCells: [(UInt64, [String])] = []
        for row in ours {
          let cells = cells(row, columns: columns, machine: file.machine)
          ourCells.append((row.location, cells))
        }
        let same = ourCells.count == theirs.count && zip(ourCells, theirs).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        #expect(same, "\(path) \(name) FDE 0x\(String(fde.offset, radix: 16)):\nours   \(ourCells)\nreadelf \(theirs)")
        guard same else { continue }
        tally.rows += ours.count
        // The unwinder's lookup: the first and last address of each row.
        for row in ours {
          for pc in Set([row.location, row.end - 1]) {
            let found = name == ".eh_frame" ? image.row(at: pc, in: file.memory) : table.row(of: fde, at: pc)
            let expectedCells = cells(row, columns: columns, machine: file.machine)
            let foundCells = found.map { cells($0, columns: columns, machine: file.machine) }
            #expect(foundCells == expectedCells, "\(path) pc 0x\(String(pc, radix: 16))")
            tally.lookups += 1
          }
        }
      }
    }
    return tally
  }

  static let systemLibraries = [
    "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libz.so.1",
    "/usr/aarch64-linux-gnu/lib/libc.so.6",
    // i386 (libc6-i386, with gcc-12-multilib): 4-byte pointers, the lookups through its datarel .eh_frame_hdr.
    "/usr/lib32/libc.so.6",
  ]

  @Test(.enabled(if: haveTool("readelf"), "needs readelf"), arguments: systemLibraries)
  func systemLibraryMatchesReadelf(path: String) throws {
    try #require(readFileBytes(path) != nil, "\(path) is not installed here")
    let tally = try Self.compare(path)
    #expect(tally.fdes > 100, "\(path): \(tally.fdes) FDEs compared")
    print("CallFrameTableTests: \(path): \(tally.fdes) FDEs (\(tally.emptyFDEs) without instructions), \(tally.rows) rows, \(tally.lookups) lookups agree with readelf")
  }

  /// The DWARF fixtures' ELF files (gcc and clang, C, C++ and Swift, -O0 and -O2; made by
  /// Scripts/make-dwarf-fixtures): every FDE of each, `.debug_frame` included.
  @Test(.enabled(if: haveTool("readelf"), "needs readelf"))
  func dwarfFixturesMatchReadelf() throws {
    let directory = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf"
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
    print("CallFrameTableTests: DWARF fixtures: \(total.fdes) FDEs, \(total.rows) rows, \(total.lookups) lookups agree with readelf")
  }

  /// Every CFI directive GAS has, in `.eh_frame` and `.debug_frame` (Tests/Programs/cfi-directives.s).
  /// And a 32-bit one (Tests/Programs/cfi-directives-i386.s: 4-byte addresses, data alignment -4).
  @Test(.enabled(if: haveTool("readelf") && haveTool("cc"), "needs readelf and cc"),
        arguments: [("cfi-directives.s", [String](), 12), ("cfi-directives-i386.s", ["-m32"], 2)])
  func everyDirectiveMatchesReadelf(source: String, flags: [String], fdes: Int) throws {
    let directory = try makeTemporaryDirectory("imagelog-cfi")
    let object = directory + "/cfi.so"
    let build = try runChild(["cc"] + flags + ["-shared", "-nostdlib", "-Wl,--eh-frame-hdr", packageRoot + "/Tests/Programs/" + source,
                              "-o", object])
    try #require(build.exitCode == 0, "cc: \(build.error)")
    let tally = try Self.compare(object)
    #expect(tally.fdes == fdes, "\(tally.fdes) FDEs")
    print("CallFrameTableTests: \(source): \(tally.fdes) FDEs (\(tally.emptyFDEs) without instructions), \(tally.rows) rows, \(tally.lookups) lookups agree with readelf")
  }
}
