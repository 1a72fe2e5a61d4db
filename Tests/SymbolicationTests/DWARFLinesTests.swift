import ImageLogTestSupport
import Testing
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication
import ImageReaders

/// The native DWARF reader against `llvm-symbolizer --inlines --output-style=JSON` on a small C program
/// (Tests/Programs/dwarf-lines.c) built several ways: every byte address of every function it defines
/// gets the same chain of functions, files, lines and columns, innermost first.
@Suite(.enabled(if: haveTool("clang") && haveTool("gcc") && haveTool("objcopy") && haveTool("llvm-symbolizer")
                && haveTool("llvm-nm"), "needs clang, gcc, objcopy, llvm-symbolizer and llvm-nm"))
struct DWARFLinesTests {
  struct Variant: Sendable, CustomStringConvertible {
    var compiler: String
    var flags: [String]
    /// `objcopy --compress-debug-sections=` applied after linking.
    var recompress: String? = nil
    var description: String { ([compiler] + flags + (recompress.map { ["objcopy:" + $0] } ?? [])).joined(separator: " ") }
  }

  static let variants: [Variant] = [
    Variant(compiler: "clang", flags: ["-O0"]),
    Variant(compiler: "clang", flags: ["-O2"]),
    Variant(compiler: "clang", flags: ["-O2", "-gdwarf-4"]),
    Variant(compiler: "clang", flags: ["-O2", "-gz=zlib"]),
    Variant(compiler: "gcc", flags: ["-O0"]),
    Variant(compiler: "gcc", flags: ["-O2"]),
    Variant(compiler: "gcc", flags: ["-O2", "-gdwarf-4"]),
    Variant(compiler: "gcc", flags: ["-O2", "-gdwarf-4"], recompress: "zlib-gnu"),
    Variant(compiler: "gcc", flags: ["-O2", "-gz=zlib"]),
  ]

  /// Builds `variant` and returns the program's path.
  static func build(_ variant: Variant, in directory: String) throws -> String {
    let program = directory + "/dwarf-lines"
    let build = try runChild([variant.compiler, "-g"] + variant.flags
                               + [packageRoot + "/Tests/Programs/dwarf-lines.c", "-o", program])
    try #require(build.status == 0, "\(variant): \(build.error)")
    if let recompress = variant.recompress {
      let result = try runChild(["objcopy", "--compress-debug-sections=" + recompress, program])
      try #require(result.status == 0, "\(result.error)")
    }
    return program
  }

  /// Every address of every function the program defines in .text (from `llvm-nm -S`).
  static func functionAddresses(_ program: String) throws -> [UInt64] {
    let nm = try runChild(["llvm-nm", "-S", "--defined-only", program]).output
    var addresses: [UInt64] = []
    for line in nm.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count == 4, fields[2] == "t" || fields[2] == "T",
            let start = UInt64(fields[0], radix: 16), let size = UInt64(fields[1], radix: 16) else { continue }
      addresses += Array(start..<(start + size))
    }
    return addresses
  }

  /// `llvm-symbolizer`'s frames for each address, as `DWARFFrame`s (no frame when it knows no line).
  static func oracle(_ program: String, _ addresses: [UInt64]) throws -> [[DWARFFrame]] {
    let output = try runChild(["llvm-symbolizer", "--inlines", "--output-style=JSON", "--no-demangle", "--obj=" + program]
                                + addresses.map { "0x" + String($0, radix: 16) }).output
    var answers: [[DWARFFrame]] = []
    // Addresses on the command line: one JSON array with an object per address.
    let values = try #require(try JSONValue.parse(output[...].drop { $0 != "[" }).array)
    for value in values {
      var frames: [DWARFFrame] = []
      let symbols = value["Symbol"]?.array ?? []
      for (index, symbol) in symbols.enumerated() {
        let name = symbol["FunctionName"]?.string ?? ""
        frames.append(DWARFFrame(function: name.isEmpty ? nil : name, file: symbol["FileName"]?.string ?? "",
                                 line: symbol["Line"]?.integer ?? 0, column: symbol["Column"]?.integer ?? 0,
                                 isInlined: index < symbols.count - 1))
      }
      // No DWARF at all: llvm-symbolizer prints one frame with no file and line 0 (and the symbol's name).
      if frames.count == 1 && frames[0].file.isEmpty && frames[0].line == 0 { frames = [] }
      answers.append(frames)
    }
    return answers
  }

  @Test(arguments: variants)
  func everyAddressAgreesWithLLVMSymbolizer(_ variant: Variant) throws {
    let directory = try makeTemporaryDirectory()
    let program = try Self.build(variant, in: directory)
    let addresses = try Self.functionAddresses(program)
    try #require(addresses.count > 100, "\(variant): too few addresses")
    let expected = try Self.oracle(program, addresses)
    try #require(expected.count == addresses.count, "\(variant): llvm-symbolizer answered \(expected.count) of \(addresses.count)")
    let file = try DebugInfoFile(path: program)
    var inlined = 0
    for (address, theirs) in zip(addresses, expected) {
      var ours = try file.frames(at: address)
      // A function DWARF does not name: llvm-symbolizer names it from the symbol table.
      for index in ours.indices where ours[index].function == nil { ours[index].function = theirs.indices.contains(index) ? theirs[index].function : nil }
      #expect(ours == theirs, "\(variant) 0x\(String(address, radix: 16))")
      if ours.count > 1 { inlined += 1 }
    }
    if variant.flags.contains("-O2") { #expect(inlined > 0, "\(variant): no inlined frames seen") }
  }

  /// Every address of `program` gets the same frames from `file` as from `reference`.
  static func expectSameFrames(_ file: DebugInfoFile, _ reference: DebugInfoFile, _ addresses: [UInt64],
                               _ label: String) throws -> Int {
    var withFrames = 0
    for address in addresses {
      let ours = try file.frames(at: address)
      #expect(ours == (try reference.frames(at: address)), "\(label) 0x\(String(address, radix: 16))")
      if !ours.isEmpty { withFrames += 1 }
    }
    return withFrames
  }

  /// `dwz -m`: the shared DIEs and strings move to a supplementary file that `DW_FORM_GNU_ref_alt` and
  /// `DW_FORM_GNU_strp_alt` point into. With it, every address gets the frames the file had before dwz
  /// (which the test above compares with llvm-symbolizer, whose version here cannot follow these forms);
  /// without it, names that moved are missing.
  @Test(.enabled(if: haveTool("dwz") && haveTool("gcc"), "needs dwz and gcc"))
  func dwzSupplementaryFileGivesTheSameFrames() throws {
    let directory = try makeTemporaryDirectory()
    let original = try Self.build(Variant(compiler: "gcc", flags: ["-O2"]), in: directory)
    let first = directory + "/first", second = directory + "/second"
    #expect(try runChild(["cp", original, first]).exitCode == 0)
    #expect(try runChild(["cp", original, second]).exitCode == 0)
    let dwz = try runChild(["dwz", "-m", directory + "/common.debug", first, second])
    try #require(dwz.exitCode == 0, "dwz: \(dwz.error)")
    let addresses = try Self.functionAddresses(original)
    let reference = try DebugInfoFile(path: original)
    let file = try DebugInfoFile(path: first, supplementaryPath: directory + "/common.debug")
    let answered = try Self.expectSameFrames(file, reference, addresses, "dwz")
    #expect(answered > addresses.count / 2, "\(answered) of \(addresses.count) addresses have frames")
    let alone = try DebugInfoFile(path: first)
    var missingNames = 0
    for address in addresses where try alone.frames(at: address).contains(where: { $0.function == nil }) { missingNames += 1 }
    #expect(missingNames > 0, "no name came from the supplementary file")
  }

  /// `ELFCOMPRESS_ZSTD` sections (made here: no toolchain on Debian 12 writes them): each `.debug_*`
  /// section compressed by the zstd tool behind an `Elf64_Chdr`, `SHF_COMPRESSED` set. Every address
  /// gets the frames of the uncompressed file.
  @Test(.enabled(if: haveTool("zstd") && haveTool("gcc") && haveTool("objcopy") && haveTool("readelf"),
                 "needs zstd, gcc, objcopy and readelf"))
  func zstdCompressedSectionsGiveTheSameFrames() throws {
    let directory = try makeTemporaryDirectory()
    let original = try Self.build(Variant(compiler: "gcc", flags: ["-O2"]), in: directory)
    let compressed = directory + "/zstd"
    var arguments = ["objcopy"]
    let originalBytes = try #require(readFileBytes(original))
    let names = try originalBytes.withUnsafeBytes { raw in
      try ELFFile(ByteReader(raw)).sections.filter { $0.name.hasPrefix(".debug_") }.map(\.name)
    }
    for name in names {
      let raw = directory + "/" + name, packed = raw + ".zst"
      #expect(try runChild(["objcopy", "--dump-section", name + "=" + raw, original]).exitCode == 0)
      #expect(try runChild(["zstd", "-q", "-19", raw, "-o", packed]).exitCode == 0)
      let size = UInt64(try #require(readFileBytes(raw)).count)
      var chdr: [UInt8] = [2, 0, 0, 0, 0, 0, 0, 0]  // ch_type ELFCOMPRESS_ZSTD, ch_reserved
      for shift in stride(from: 0, to: 64, by: 8) { chdr.append(UInt8(truncatingIfNeeded: size >> UInt64(shift))) }
      chdr += [1, 0, 0, 0, 0, 0, 0, 0]  // ch_addralign
      try SymbolFileBytes.write(chdr + (try #require(readFileBytes(packed))), to: raw + ".chdr")
      arguments += ["--update-section", name + "=" + raw + ".chdr"]
    }
    #expect(try runChild(arguments + [original, compressed]).exitCode == 0)
    // SHF_COMPRESSED (0x800) in each debug section's sh_flags (offset 8 of its Elf64_Shdr).
    var bytes = try #require(readFileBytes(compressed))
    let elf = try bytes.withUnsafeBytes { raw in try ELFFile(ByteReader(raw)) }
    for section in elf.sections where names.contains(section.name) {
      bytes[Int(elf.header.sectionHeaderOffset) + section.index * 64 + 9] |= 0x08
    }
    try SymbolFileBytes.write(bytes, to: compressed)
    let readelf = try runChild(["readelf", "-t", "-W", compressed]).output
    #expect(readelf.contains("ZSTD"), "\(readelf)")

    let addresses = try Self.functionAddresses(original)
    let answered = try Self.expectSameFrames(try DebugInfoFile(path: compressed), try DebugInfoFile(path: original),
                                             addresses, "zstd")
    #expect(answered > addresses.count / 2, "\(answered) of \(addresses.count) addresses have frames")
  }
}
