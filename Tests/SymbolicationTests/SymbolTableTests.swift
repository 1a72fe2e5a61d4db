import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders
import Glibc

/// Symbol tables of every ELF and Mach-O fixture (all classes, both byte orders, universal slices)
/// against `llvm-nm` and `llvm-symbolizer`, and mutated fixtures that may only throw.
@Suite struct SymbolTableTests {
  static let fixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures"

  /// The fixtures in `folder` (empty when it cannot be listed: callers check the count).
  static func files(_ folder: String) -> [String] {
    (try? runChild(["sh", "-c", "ls \(fixtures)/\(folder)"]).output.split(separator: "\n").map { "\(fixtures)/\(folder)/\($0)" }) ?? []
  }

  /// Each function symbol `llvm-nm` lists resolves to a symbol starting there, named as
  /// `llvm-symbolizer` names that address (it picks among aliases the same way).
  @Test(.enabled(if: haveTool("llvm-nm-14") && haveTool("llvm-symbolizer"), "needs llvm-nm-14 and llvm-symbolizer"))
  func functionsAgreeWithLLVM() throws {
    var checked = 0
    for path in Self.files("elf") + Self.files("macho") where !path.hasSuffix(".o") && !path.hasSuffix(".dSYM") {
      guard let slices = try? SymbolFile.load(path: path) else { continue }
      for slice in slices {
        let arch = slice.isUniversalSlice ? ["-arch", slice.architecture] : []
        let nm = try runChild(["llvm-nm-14", "--defined-only"] + arch + [path]).output
        let addresses = Set(nm.split(separator: "\n").compactMap { line -> UInt64? in
          let words = line.split(separator: " ")
          guard words.count == 3, words[1] == "T" || words[1] == "t", !words[2].hasPrefix("$"),
                words[2] != "__mh_execute_header" else { return nil }
          return UInt64(words[0], radix: 16)
        }).sorted()
        guard !addresses.isEmpty else { continue }
        let object = slice.isUniversalSlice ? "\(path):\(slice.architecture)" : path
        let output = try runChild(["llvm-symbolizer", "--no-demangle", "--no-inlines", "--obj=" + object]
                                    + addresses.map { "0x" + String($0, radix: 16) }).output
        let names = output.split(separator: "\n").enumerated().filter { $0.offset % 2 == 0 }.map { String($0.element) }
        for (address, name) in zip(addresses, names) {
          let symbol = slice.symbols.symbol(containing: address)
          #expect(symbol?.address == address, "\(object) 0x\(String(address, radix: 16))")
          #expect(symbol?.name == name, "\(object) 0x\(String(address, radix: 16))")
          checked += 1
        }
      }
    }
    #expect(checked > 50)
  }

  /// Truncated and bit-flipped fixtures: symbol reading throws or returns, never traps.
  @Test func mutatedFixturesOnlyThrow() throws {
    var rng = SeededGenerator(seed: 0x5_1AB)
    let paths = (Self.files("elf") + Self.files("macho")).filter { !$0.hasSuffix(".dSYM") }
    try #require(paths.count >= 40, "ELF and Mach-O fixtures under \(Self.fixtures): found \(paths.count)")
    var mutated = 0, loaded = 0
    for path in paths {
      let original = try SymbolFileBytes.read(path)
      try #require(original.count > 64, "\(path) is a fixture of \(original.count) bytes")
      for round in 0..<150 {
        var bytes = round % 3 == 0 ? Array(original.prefix(Int.random(in: 0...original.count, using: &rng))) : original
        if round % 3 != 0 {
          for _ in 0..<Int.random(in: 1...6, using: &rng) where !bytes.isEmpty {
            bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
          }
        }
        let result: Result<[SymbolFile], FormatError> = bytes.withUnsafeBytes { raw in
          Result { () throws(FormatError) -> [SymbolFile] in
            // The one-report path too: whether there are symbols, and a table cut down to two addresses.
            if let file = try? ELFFile(ByteReader(raw)) {
              _ = try? SymbolTable.elfHasCodeSymbols(file, bytes: ByteReader(raw))
              _ = try? SymbolTable.elf(file, bytes: ByteReader(raw), for: [0x100, UInt64.max])
            }
            return try SymbolFile.load(ByteReader(raw), path: path, reading: .table)
          }
        }
        if case .success(let slices) = result {
          for slice in slices { _ = slice.symbols.symbol(containing: slice.imageBaseVMAddress &+ 0x100) }
          loaded += 1
        }
        mutated += 1
      }
    }
    #expect(mutated == paths.count * 150)
    #expect(loaded > 0 && loaded < mutated, "mutations should both break and spare files (\(loaded) of \(mutated) loaded)")
  }

  /// A table cut down to some addresses (what one report reads) answers each of them as the whole
  /// table does: every symbol's start, the bytes around it and its end, and addresses between, in the
  /// ELF fixtures, this machine's libc and libm, and their .debug files when installed.
  @Test func tablesForAddressesAnswerAsTheWholeTable() throws {
    var paths = Self.files("elf").filter { !$0.hasSuffix(".o") }
    for library in ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
                    "/lib/aarch64-linux-gnu/libc.so.6"] where access(library, R_OK) == 0 {
      paths.append(library)
      if let id = try? SymbolFile.load(path: library, withSymbols: false).first?.buildID?.hex {
        let debug = "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
        if access(debug, R_OK) == 0 { paths.append(debug) }
      }
    }
    var rng = SeededGenerator(seed: 0xAD_D2E5)
    var compared = 0
    for path in paths {
      let bytes = try SymbolFileBytes.read(path)
      try bytes.withUnsafeBytes { raw in
        let reader = ByteReader(raw)
        guard let file = try? ELFFile(reader) else { return }
        let whole = try SymbolTable.elf(file, bytes: reader)
        #expect(try SymbolTable.elfHasCodeSymbols(file, bytes: reader) == (whole.count > 0), "\(path)")
        var addresses: [UInt64] = [0]
        for symbol in whole.symbols {
          addresses += [symbol.address &- 1, symbol.address, symbol.address &+ 1, symbol.address &+ symbol.size,
                        symbol.address &+ symbol.size &- 1]
        }
        let last = whole.symbols.last.map { $0.address &+ $0.size &+ 64 } ?? 0x1000
        for _ in 0..<200 { addresses.append(UInt64.random(in: 0...last, using: &rng)) }
        // The whole list at once, and a few addresses at a time as a backtrace asks.
        var batches = [addresses]
        addresses.shuffle(using: &rng)
        for start in stride(from: 0, to: min(addresses.count, 400), by: 8) {
          batches.append(Array(addresses[start..<min(start + 8, addresses.count)]))
        }
        for batch in batches {
          let cut = try SymbolTable.elf(file, bytes: reader, for: batch)
          #expect(cut.count <= Set(batch).count)
          for address in batch where whole.symbol(containing: address) != cut.symbol(containing: address) {
            Issue.record("\(path) 0x\(String(address, radix: 16)): whole table \(String(describing: whole.symbol(containing: address))), cut \(String(describing: cut.symbol(containing: address)))")
          }
          compared += batch.count
        }
      }
    }
    #expect(paths.count >= 20 && compared > 10_000, "\(paths.count) files, \(compared) addresses")
  }

  /// A file loaded for one report (`.presence`) reads its table for the addresses asked; asked again
  /// for addresses the table was not made for, it reads again, so each answer is the whole table's.
  @Test func symbolsReadForSomeAddressesAreReadAgainForOthers() throws {
    let path = Self.files("elf").first { $0.hasSuffix("/libfixture-x86_64.so") } ?? ""
    let whole = try #require(try SymbolFile.load(path: path).first, "fixture \(path)")
    try #require(whole.symbols.count >= 2)
    var file = try #require(try SymbolFile.load(path: path, reading: .presence).first)
    #expect(file.symbols.count == 0 && file.hasSymbols)
    let first = whole.symbols.symbols[0].address, last = whole.symbols.symbols[whole.symbols.count - 1].address
    try file.readSymbols(for: [first])
    #expect(file.symbols.count == 1)
    try file.readSymbols(for: [first])  // covered: kept
    #expect(file.symbols.count == 1)
    try file.readSymbols(for: [first, last])  // not covered: read again
    #expect(file.symbols.symbol(containing: last) == whole.symbols.symbol(containing: last))
    #expect(file.symbols.symbol(containing: first) == whole.symbols.symbol(containing: first))
    try file.readSymbols(for: nil)  // the whole table
    #expect(file.symbols.count == whole.symbols.count)
  }

  @Test func malformedSymbolTables() {
    let bytes: [UInt8] = Array(repeating: 0xFF, count: 40)
    bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      #expect(throws: FormatError.elf("symbol table sh_entsize 8 is smaller than 24")) {
        try SymbolTable.elf(symbols: reader, strings: reader, entrySize: 8, is64Bit: true)
      }
      #expect(throws: FormatError.machO("LC_SYMTAB nsyms 3 needs 48 bytes, 40 available")) {
        try SymbolTable.machO(symbols: reader, count: 3, strings: reader, is64Bit: true)
      }
      // A ULEB128 delta longer than 64 bits.
      #expect(throws: FormatError.machO("LC_FUNCTION_STARTS: ULEB128 longer than 64 bits at offset 0")) {
        try SymbolTable.functionStartAddresses(reader, textVMAddress: 0)
      }
    }
  }
}
