import Glibc
import ImageReaders
import ImageLogTestSupport
import Testing

/// One source frame as an oracle or our reader gives it: the function (linkage name when the DWARF has
/// one, else its name), file, line and column. An address's answer is its frames, innermost inlined first.
struct SourceFrame: Equatable, CustomStringConvertible {
  var function: String?
  var file: String
  var line: Int
  var column: Int

  var description: String { "\(function ?? "??") \(file):\(line):\(column)" }
}

/// One DWARF fixture of Scripts/make-dwarf-fixtures, and which file each side reads.
struct DWARFOracleCase: CustomStringConvertible, Sendable {
  /// The fixture's name (a file under Fixtures/dwarf).
  var name: String
  /// The file our reader opens.
  var debugPath: String
  /// The dwz supplementary file, when the debug file has a `.gnu_debugaltlink`.
  var supplementaryPath: String?
  /// The file llvm-symbolizer opens: the same file, or one with the same code and DWARF it can read.
  var oraclePath: String
  /// The file whose instructions are the addresses asked (the debug file's code may be SHT_NOBITS).
  var codePath: String
  /// LLVM is built without zstd here: llvm-symbolizer reads a copy GNU objcopy decompressed.
  var oracleNeedsDecompression = false
  /// An ELF file: llvm-symbolizer reads a copy without `.symtab` (see `DWARFOracle.symbolize`).
  var isELF = true

  var description: String { name }
}

/// The fixtures, the addresses to ask, and llvm-symbolizer's answers.
enum DWARFOracle {
  static let directory = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf"
  /// The current llvm-symbolizer (the Swift toolchain's; see `currentLLVMSymbolizer` for why not
  /// Debian's LLVM 14: it doubles a relative DWARF 5 directory 0, so libc's `peek_token` would be in
  /// ./posix/./posix/regcomp.c instead of gdb's ./posix/regcomp.c).
  static let symbolizer = currentLLVMSymbolizer ?? "llvm-symbolizer"
  static let objdump = "llvm-objdump-14"
  static let haveTools = haveTool(symbolizer) && haveTool(objdump) && haveTool("llvm-objcopy-14") && haveTool("objcopy")

  /// Every fixture: the compiler matrix (gcc-*, clang*-*: the program holds its own DWARF), the split
  /// pair (both sides read the debug file; the addresses are the stripped program's instructions), the
  /// dwz pair (llvm-symbolizer cannot follow `.gnu_debugaltlink`, so it reads the program as linked
  /// before dwz), Swift, and the Mach-O programs (llvm-symbolizer finds `<program>.dSYM` next to the
  /// program; we open its DWARF file).
  static let cases: [DWARFOracleCase] = {
    let names = (try? runChild(["ls", directory]).output.split(separator: "\n").map(String.init)) ?? []
    var cases: [DWARFOracleCase] = []
    for name in names {
      let path = directory + "/" + name
      if name.hasPrefix("gcc-") || name.hasPrefix("clang") || name.hasPrefix("swift-") {
        cases.append(DWARFOracleCase(name: name, debugPath: path, oraclePath: path, codePath: path,
                                     oracleNeedsDecompression: name.hasSuffix("-zstd")))
      } else if name.hasPrefix("split-") && !name.hasSuffix(".debug") {
        cases.append(DWARFOracleCase(name: name, debugPath: path + ".debug", oraclePath: path + ".debug", codePath: path))
      } else if name.hasPrefix("dwz-") && !name.contains(".") {
        cases.append(DWARFOracleCase(name: name, debugPath: path, supplementaryPath: directory + "/dwz-common.debug",
                                     oraclePath: path + ".orig", codePath: path))
      } else if name.hasPrefix("macho-") && !name.hasSuffix(".dSYM") {
        cases.append(DWARFOracleCase(name: name, debugPath: "\(path).dSYM/Contents/Resources/DWARF/\(name)",
                                     oraclePath: path, codePath: path, isELF: false))
      }
    }
    return cases
  }()

  /// The address of every instruction `llvm-objdump-14 -d` disassembles in the code sections.
  static func instructionAddresses(_ path: String) throws -> [UInt64] {
    let result = try runChild([objdump, "-d", "--no-show-raw-insn", "--no-leading-headers", path])
    guard result.exitCode == 0 else { throw TestSupportError("\(objdump) -d \(path): \(result.error)") }
    var addresses: [UInt64] = []
    for line in result.output.split(separator: "\n") {
      // Instruction lines are "    1210: \tmovq ..." (the address right-aligned); symbol lines are
      // "0000000000001210 <table_total>:", which the space before the colon rules out.
      guard let colon = line.firstIndex(of: ":") else { continue }
      let digits = line[..<colon].drop { $0 == " " }
      if !digits.contains(" "), let address = UInt64(digits, radix: 16) { addresses.append(address) }
    }
    return addresses
  }

  /// llvm-symbolizer's answers for `addresses` in `object`, from one process reading them on standard input.
  ///
  /// For ELF files it reads a copy without `.symtab`: with `--functions=linkage` llvm-symbolizer replaces
  /// the outermost DWARF name by the ELF symbol that covers the address, picking among aliases (libc's
  /// `getrpcbyname_r@@GLIBC_2.2.5` where the DWARF subprogram is `__getrpcbyname_r`, a C1 constructor
  /// where the DWARF says C2). Our reader answers from DWARF alone; naming by symbol is the symbolicator's
  /// part, compared with llvm-symbolizer's by SymbolTableTests.
  /// An address no unit covers is an empty answer.
  static func symbolize(_ object: String, _ addresses: [UInt64], decompressing: Bool = false,
                        isELF: Bool = true) throws -> [[SourceFrame]] {
    let folder = try makeTemporaryDirectory("dwarf-oracle")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    var object = object
    if decompressing {
      let copy = folder + "/decompressed"
      let result = try runChild(["objcopy", "--decompress-debug-sections", object, copy])
      guard result.exitCode == 0 else { throw TestSupportError("objcopy --decompress-debug-sections \(object): \(result.error)") }
      object = copy
    }
    if isELF {
      // llvm-objcopy: GNU objcopy 2.40 keeps .symtab when asked to remove it.
      let copy = folder + "/without-symbols"
      let result = try runChild(["llvm-objcopy-14", "-R", ".symtab", "-R", ".strtab", object, copy])
      guard result.exitCode == 0 else { throw TestSupportError("llvm-objcopy-14 -R .symtab \(object): \(result.error)") }
      object = copy
    }
    let input = folder + "/addresses"
    try writeFile(input, addresses.map { "0x" + String($0, radix: 16) + "\n" }.joined())
    // Addresses from a file, not a pipe we write: the answers fill the output pipe long before the
    // questions are all written.
    let result = try runChild(["sh", "-c", "exec \"$0\" \"$@\" < \"\(input)\"", symbolizer, "--inlines",
                               "--output-style=JSON", "--functions=linkage", "--no-demangle", "--obj=" + object])
    guard result.exitCode == 0 else { throw TestSupportError("\(symbolizer) \(object): \(result.error)") }
    let lines = result.output.split(separator: "\n")
    guard lines.count == addresses.count else {
      throw TestSupportError("\(symbolizer) \(object): \(lines.count) answers for \(addresses.count) addresses")
    }
    return try lines.map { line in
      let answer = try JSONValue.parse(line)
      let symbols = answer["Symbol"]?.array ?? []
      let frames = symbols.map { symbol in
        SourceFrame(function: symbol["FunctionName"]?.string.flatMap { $0.isEmpty ? nil : $0 },
                    file: symbol["FileName"]?.string ?? "", line: symbol["Line"]?.integer ?? 0,
                    column: symbol["Column"]?.integer ?? 0)
      }
      if frames.count == 1, frames[0].function == nil, frames[0].file.isEmpty, frames[0].line == 0 {
        return []
      }
      return frames
    }
  }

  /// eu-addr2line's answer for one address (function and file:line:column, outermost last), for
  /// reporting a disagreement: elfutils reads DWARF with its own code, so it is a second opinion.
  static func secondOpinion(_ object: String, _ address: UInt64) -> String {
    guard haveTool("eu-addr2line"),
          let result = try? runChild(["eu-addr2line", "-f", "-i", "-e", object, "0x" + String(address, radix: 16)]) else {
      return "(eu-addr2line not available)"
    }
    return result.output.split(separator: "\n").joined(separator: " | ")
  }

  /// The build-id of `path` as `readelf -n` prints it, or nil.
  static func buildID(_ path: String) -> String? {
    guard let notes = try? runChild(["readelf", "-n", path]).output else { return nil }
    return notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init)
  }

  /// The running system's libc and its debug file from libc6-dbg (found by build-id), when installed.
  static let libcDebugFile: String? = {
    guard let id = buildID("/lib/x86_64-linux-gnu/libc.so.6"), id.count > 2 else { return nil }
    let path = "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
    return access(path, R_OK) == 0 ? path : nil
  }()

  /// `count` addresses drawn uniformly from the bytes of the function symbols (`nm -S`) of `path`.
  static func sampleFunctionAddresses(_ path: String, count: Int, seed: UInt64) throws -> [UInt64] {
    let result = try runChild(["nm", "-S", "--defined-only", path])
    guard result.exitCode == 0 else { throw TestSupportError("nm \(path): \(result.error)") }
    var ranges: [(start: UInt64, size: UInt64)] = []
    var total: UInt64 = 0
    for line in result.output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count == 4, "tTWi".contains(fields[2]), let start = UInt64(fields[0], radix: 16),
            let size = UInt64(fields[1], radix: 16), size > 0 else { continue }
      ranges.append((start, size))
      total += size
    }
    guard total > 0 else { throw TestSupportError("nm \(path): no function symbols") }
    var generator = SeededGenerator(seed: seed)
    return (0..<count).map { _ in
      var offset = UInt64.random(in: 0..<total, using: &generator)
      for range in ranges {
        if offset < range.size { return range.start + offset }
        offset -= range.size
      }
      return ranges[0].start
    }
  }
}

/// What comparing one fixture found: counts and the first few disagreements with both answers.
struct OracleComparison: CustomStringConvertible {
  var name: String
  var compared = 0
  var agreed = 0
  var withInlinedFrames = 0
  var withoutLines = 0
  var mismatches: [String] = []
  var mismatchCount = 0

  var description: String {
    "\(name): \(agreed)/\(compared) addresses agree (\(withInlinedFrames) with inlined frames, \(withoutLines) outside the DWARF)"
      + (mismatchCount == 0 ? "" : "; \(mismatchCount) disagree, first ones:\n  " + mismatches.joined(separator: "\n  "))
  }

  /// Compares `ours` with `oracle` at `address`; `opinion` gives a third answer for the first disagreements.
  mutating func compare(_ address: UInt64, ours: Result<[SourceFrame], any Error>, oracle: [SourceFrame],
                        opinion: () -> String) {
    compared += 1
    if oracle.count > 1 { withInlinedFrames += 1 }
    if case .success(let frames) = ours, frames == oracle {
      agreed += 1
      if oracle.isEmpty { withoutLines += 1 }
      return
    }
    // Where a unit covers an address but neither a row nor a subprogram does (crtstuff.c's unit in every
    // gcc-linked program), llvm-symbolizer names the unit's file with line 0 and no function; our reader
    // answers nothing. Both say "no line here"; the unit's name is not a source location.
    if case .success(let frames) = ours, frames.isEmpty, oracle.count == 1, oracle[0].function == nil, oracle[0].line == 0 {
      agreed += 1
      withoutLines += 1
      return
    }
    mismatchCount += 1
    guard mismatches.count < 8 else { return }
    let text: String
    switch ours {
    case .success(let frames): text = frames.isEmpty ? "(nothing)" : frames.map(\.description).joined(separator: " <- ")
    case .failure(let error): text = "error: \(error)"
    }
    mismatches.append("0x\(String(address, radix: 16)): ours \(text); llvm-symbolizer "
                      + (oracle.isEmpty ? "(nothing)" : oracle.map(\.description).joined(separator: " <- "))
                      + "; eu-addr2line \(opinion())")
  }
}
