import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders
import ImageLog

/// Apple `.crash` and `.ips` reports built at test time over the project's Mach-O fixtures
/// (Tests/ImageReadersTests/Fixtures/macho, made by Scripts/make-fixtures): function addresses from
/// `llvm-nm-14`, UUIDs from `llvm-dwarfdump-14 --uuid`, `__TEXT` from `llvm-otool-14 -l`, and the
/// answers checked against `llvm-symbolizer` on the same link-time addresses.
@Suite(.enabled(if: MachOFixtures.haveTools, "needs llvm-nm-14, llvm-dwarfdump-14, llvm-otool-14 and llvm-symbolizer"))
struct MachOSymbolicationTests {
  @Test(arguments: ["fixture-arm64-macos", "fixture-x86_64-macos", "libfixture-arm64-macos.dylib",
                    "libfixture-x86_64-macos.dylib", "libfixture-arm64-ios.dylib", "libfixture-armv7-ios.dylib",
                    "debugfixture"])
  func crashReportAgreesWithLLVMSymbolizer(fixture: String) throws {
    let path = MachOFixtures.directory + "/" + fixture
    let slice = try #require(try MachOFixtures.slices(path).first)
    try checkCrashReport(path: path, slice: slice, codeType: nil)
  }

  /// A universal file: the report's architecture (its `Code Type:`, or the image's arch column) picks
  /// the slice; each slice has its own UUID and addresses.
  @Test(arguments: ["universal-macos", "universal-ios.dylib"])
  func universalSliceByReportArchitecture(fixture: String) throws {
    let path = MachOFixtures.directory + "/" + fixture
    let slices = try MachOFixtures.slices(path)
    try #require(slices.count >= 2)
    for slice in slices {
      try checkCrashReport(path: path, slice: slice, codeType: slice.architecture == "x86_64" ? "X86-64 (Native)" : "ARM-64 (Native)")
    }
  }

  func checkCrashReport(path: String, slice: MachOFixtures.Slice, codeType: String?) throws {
    let functions = try MachOFixtures.functions(path, architecture: slice.universal ? slice.architecture : nil)
    try #require(!functions.isEmpty, "\(path) \(slice.architecture): no functions")
    let load: UInt64 = 0x1_0400_0000
    let linkAddresses = functions.map { $0 + 2 }
    let text = MachOFixtures.crashReport(image: Image.shortName(of: path), path: path, architecture: slice.architecture,
                                         uuid: slice.uuid.lowercased().filter { $0 != "-" }, textVMAddress: slice.textVMAddress,
                                         load: load, linkAddresses: linkAddresses, codeType: codeType)
    let report = try ReportParser.parse(text)
    #expect(report.format == .appleCrash)
    #expect(report.problems.isEmpty, "\(report.problems)")
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    // A dSYM beside the binary (the debug fixture has one) is found too, and serves names and lines.
    let dsym = path + ".dSYM/Contents/Resources/DWARF/" + Image.shortName(of: path)
    let expected: ProcessSnapshot.Image.Resolution = readFileBytes(dsym) == nil ? .found(path: path, how: "recorded path")
      : .found(path: dsym, how: "dSYM beside the binary")
    #expect(result.resolutions.map(\.status) == [expected])
    let ours = result.frames.map { $0.functions.last?.name ?? "??" }
    let lookups = linkAddresses.enumerated().map { $0.offset == 0 ? $0.element : $0.element - 1 }
    let object = slice.universal ? "\(path):\(slice.architecture)" : path
    #expect(ours == (try MachOFixtures.llvmSymbolizer(object, lookups)), "\(object)")
    #expect(result.frames.map { $0.functions.last?.offset } == linkAddresses.map { _ in 2 })
    let rendered = result.formatted(.report)
    for name in ours { #expect(rendered.contains(" \(name) + 2")) }
  }

  /// The `.ips` form of the same crash: `symbol` and `symbolLocation` filled in (threads and the last
  /// exception backtrace), the rest kept; `--format crash` writes the classic text, which reads back.
  @Test func ipsOverAUniversalFile() throws {
    let path = MachOFixtures.directory + "/universal-macos"
    for slice in try MachOFixtures.slices(path) {
      let functions = try MachOFixtures.functions(path, architecture: slice.architecture)
      let base: UInt64 = 0x1_0200_0000
      let frames = functions.map { JSONValue.object([("imageOffset", .number(String($0 + 8 - slice.textVMAddress))),
                                                     ("imageIndex", .number("0"))]) }
      let body = JSONValue.object([
        ("procName", .string("universal-macos")), ("cpuType", .string(slice.architecture == "x86_64" ? "X86-64" : "ARM-64")),
        ("faultingThread", .number("0")),
        ("threads", .array([.object([("triggered", .bool(true)), ("frames", .array(frames))])])),
        ("lastExceptionBacktrace", .array(frames)),
        ("usedImages", .array([.object([("arch", .string(slice.architecture)), ("base", .number(String(base))),
                                        ("size", .number("65536")), ("uuid", .string(slice.uuid.lowercased())),
                                        ("path", .string(path)), ("name", .string("universal-macos"))])])),
      ])
      let report = try ReportParser.parse(#"{"bug_type":"309","name":"universal-macos"}"# + "\n" + body.serialized(indent: 2))
      var options = SymbolicationOptions()
      options.systemDirectories = false
      let output = Symbolicator.symbolicated(report, options: options).formatted(.report)
      let document = try JSONValue.parse(output.split(separator: "\n", maxSplits: 1)[1])
      let outFrames = try #require(document["threads"]?.array?.first?["frames"]?.array)
      let lookups = functions.enumerated().map { $0.offset == 0 ? $0.element + 8 : $0.element + 7 }
      #expect(outFrames.map { $0["symbol"]?.string ?? "??" } == (try MachOFixtures.llvmSymbolizer("\(path):\(slice.architecture)", lookups)))
      #expect(outFrames.map { $0["symbolLocation"]?.integer } == functions.map { _ in 8 })
      let exceptionFrames = try #require(document["lastExceptionBacktrace"]?.array)
      #expect(exceptionFrames.map { $0["symbol"]?.string ?? "??" } == outFrames.map { $0["symbol"]?.string ?? "??" })

      let classic = Symbolicator.symbolicated(report, options: options).formatted(.crash)
      #expect(classic.contains("Last Exception Backtrace:\n"))
      let reread = try ReportParser.parse(classic)
      // Apple's translation writes the Last Exception Backtrace before the threads.
      #expect(reread.threads.map(\.number) == [-1, 0])
      #expect(reread.frames.map(\.address) == report.frames.map(\.address))
    }
  }

  /// A copy of a fixture with its LC_UUID changed: never used for the report's image, whose frames say
  /// "UUID mismatch" with both ids; the real build, under another name in a --search folder, is found
  /// by its UUID alone.
  @Test func wrongUUIDIsReportedAndTheRightFileFoundByIdentity() throws {
    let original = MachOFixtures.directory + "/fixture-arm64-macos"
    let slice = try #require(try MachOFixtures.slices(original).first)
    let directory = try makeTemporaryDirectory()
    let wrong = directory + "/fixture-arm64-macos"
    var bytes = try MachOFixtures.bytes(original)
    let uuidBytes = try #require(ImageIdentity(slice.uuid)).bytes
    let at = try #require(MachOFixtures.find(uuidBytes, in: bytes))
    bytes[at + 15] ^= 0xFF
    try MachOFixtures.write(bytes, to: wrong)
    let wrongUUID = try #require(try MachOFixtures.slices(wrong).first).uuid
    #expect(wrongUUID != slice.uuid)

    let functions = try MachOFixtures.functions(original, architecture: nil)
    let text = MachOFixtures.crashReport(image: "fixture-arm64-macos", path: wrong, architecture: "arm64",
                                         uuid: slice.uuid, textVMAddress: slice.textVMAddress, load: 0x1_0400_0000,
                                         linkAddresses: functions, codeType: "ARM-64 (Native)")
    let report = try ReportParser.parse(text)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let mismatched = Symbolicator.symbolicated(report, options: options)
    let fileID = try #require(ImageIdentity(wrongUUID)).hex
    for frame in mismatched.frames {
      #expect(frame.status == .mismatch(reportID: slice.uuid, fileID: fileID, path: wrong))
    }
    let rendered = mismatched.formatted(.report)
    #expect(rendered.contains("[UUID mismatch: report \(slice.uuid), file \(fileID) \(wrong)]"))
    #expect(rendered.contains("  mismatch:   fixture-arm64-macos report <\(slice.uuid)> file <\(fileID)> \(wrong)"))

    let search = directory + "/builds/nested"
    #expect(try runChild(["mkdir", "-p", search]).status == 0)
    #expect(try runChild(["cp", original, search + "/renamed-build"]).status == 0)
    options.searchPaths = [directory + "/builds"]
    let found = Symbolicator.symbolicated(report, options: options)
    #expect(found.resolutions.map(\.status) == [.found(path: search + "/renamed-build", how: "--search")])
    #expect(found.frames.allSatisfy { $0.status == .symbolicated })
  }

  /// With `LC_SYMTAB` emptied (a stripped build), `LC_FUNCTION_STARTS` still gives function granularity:
  /// each address resolves to the start `llvm-objdump-14 --function-starts` lists below it.
  @Test(.enabled(if: haveTool("llvm-objdump-14"), "needs llvm-objdump-14"))
  func strippedBinaryUsesFunctionStarts() throws {
    let original = MachOFixtures.directory + "/fixture-arm64-macos"
    let directory = try makeTemporaryDirectory()
    let stripped = directory + "/stripped"
    var bytes = try MachOFixtures.bytes(original)
    try MachOFixtures.emptySymbolTable(&bytes)
    try MachOFixtures.write(bytes, to: stripped)
    let starts = try runChild(["llvm-objdump-14", "--macho", "--function-starts", stripped]).output
      .split(separator: "\n").compactMap { UInt64($0, radix: 16) }
    try #require(!starts.isEmpty)
    let file = try #require(try SymbolFile.load(path: stripped).first)
    #expect(file.symbols.symbols.map(\.address) == starts)
    for start in starts {
      #expect(file.symbols.symbol(containing: start + 3)?.name == "func_0x" + String(start, radix: 16))
    }
  }

  /// A function start inside a named function (a loop label of hand-written assembly, as in dav1d in
  /// libavif: Scripts/fixtures-src/asmlabel.s) does not take the function's name: every address of
  /// every start gets the name llvm-symbolizer gives, and an offset from that symbol (it said
  /// `func_0x…` for the loop).
  @Test(.enabled(if: haveTool("llvm-objdump-14"), "needs llvm-objdump-14"))
  func functionStartInsideASymbolKeepsTheSymbol() throws {
    let path = MachOFixtures.directory + "/libasmlabel-x86_64-macos.dylib"
    let starts = try runChild(["llvm-objdump-14", "--macho", "--function-starts", path]).output
      .split(separator: "\n").compactMap { UInt64($0, radix: 16) }
    let named = Set(try MachOFixtures.functions(path, architecture: nil))
    let unnamed = starts.filter { !named.contains($0) }
    try #require(unnamed.count == 1, "the fixture has one function start without a symbol (the loop label)")
    let file = try #require(try SymbolFile.load(path: path).first)
    let addresses = starts.flatMap { [$0, $0 &+ 1] }
    let expected = try MachOFixtures.llvmSymbolizer(path, addresses)
    #expect(expected.allSatisfy { $0 != "??" })
    #expect(addresses.map { file.symbols.symbol(containing: $0)?.name ?? "??" } == expected)
    let loop = try #require(file.symbols.symbol(containing: unnamed[0]))
    #expect(loop.name == "asm_sum" && loop.address < unnamed[0])
  }
}

enum MachOFixtures {
  static let directory = packageRoot + "/Tests/ImageReadersTests/Fixtures/macho"
  static let haveTools = haveTool("llvm-nm-14") && haveTool("llvm-dwarfdump-14") && haveTool("llvm-otool-14")
    && haveTool("llvm-symbolizer")

  struct Slice { var architecture: String; var uuid: String; var textVMAddress: UInt64; var universal: Bool }

  /// Each slice's architecture and UUID (`llvm-dwarfdump-14 --uuid`) and `__TEXT` vmaddr (`llvm-otool-14 -l`).
  static func slices(_ path: String) throws -> [Slice] {
    let uuids = try runChild(["llvm-dwarfdump-14", "--uuid", path]).output.split(separator: "\n").compactMap { line -> (String, String)? in
      let words = line.split(separator: " ")
      guard words.count >= 3, words[0] == "UUID:" else { return nil }
      return (String(words[2].dropFirst().dropLast()), String(words[1]))
    }
    var result: [Slice] = []
    for (architecture, uuid) in uuids {
      let otool = try runChild(["llvm-otool-14", "-arch", architecture, "-l", path]).output.split(separator: "\n")
      var text: UInt64 = 0
      for (index, line) in otool.enumerated() where line.trimmingSpaces == "segname __TEXT" && index + 1 < otool.count {
        text = UInt64(otool[index + 1].split(separator: " ").last?.dropFirst(2) ?? "", radix: 16) ?? 0
        break
      }
      result.append(Slice(architecture: architecture, uuid: uuid, textVMAddress: text, universal: uuids.count > 1))
    }
    return result
  }

  /// Defined text symbols (`T`/`t`) from `llvm-nm-14`, in address order.
  static func functions(_ path: String, architecture: String?) throws -> [UInt64] {
    let arguments = ["llvm-nm-14", "--defined-only", "-n"] + (architecture.map { ["-arch", $0] } ?? []) + [path]
    return try runChild(arguments).output.split(separator: "\n").compactMap { line -> UInt64? in
      let words = line.split(separator: " ")
      guard words.count == 3, words[1] == "T" || words[1] == "t", words[2] != "__mh_execute_header" else { return nil }
      return UInt64(words[0], radix: 16)
    }
  }

  static func llvmSymbolizer(_ object: String, _ addresses: [UInt64]) throws -> [String] {
    let output = try runChild(["llvm-symbolizer", "--no-inlines", "--obj=" + object] + addresses.map { "0x" + String($0, radix: 16) }).output
    return output.split(separator: "\n").enumerated().filter { $0.offset % 2 == 0 }.map { String($0.element) }
  }

  static func crashReport(image: String, path: String, architecture: String, uuid: String, textVMAddress: UInt64,
                          load: UInt64, linkAddresses: [UInt64], codeType: String?) -> String {
    var text = "Process:             \(image) [77]\nPath:                \(path)\n"
    if let codeType { text += "Code Type:           \(codeType)\n" }
    text += "OS Version:          macOS 14.0 (23A344)\nCrashed Thread:  0\n\nThread 0 Crashed:\n"
    for (index, address) in linkAddresses.enumerated() {
      let offset = address - textVMAddress
      text += String(index).padding(4) + image.padding(30) + "\t0x" + hexDigits(load + offset, width: 16)
      text += " 0x" + hexDigits(load) + " + \(offset)\n"
    }
    text += "\nBinary Images:\n       0x\(hexDigits(load)) -        0x\(hexDigits(load + 0xFFFF)) \(image) \(architecture)  <\(uuid)> \(path)\n"
    return text
  }

  static func bytes(_ path: String) throws -> [UInt8] {
    let file = try SymbolFileBytes.read(path)
    return file
  }

  static func write(_ bytes: [UInt8], to path: String) throws {
    try SymbolFileBytes.write(bytes, to: path)
  }

  static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard needle.count <= haystack.count else { return nil }
    for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle) {
      return start
    }
    return nil
  }

  /// Sets `LC_SYMTAB`'s `nsyms` and `LC_DYSYMTAB`'s symbol ranges to 0 in a thin little-endian 64-bit
  /// Mach-O: what `strip` leaves, near enough for LLVM's tools to read it (llvm-strip-14 cannot write
  /// these fixtures).
  static func emptySymbolTable(_ bytes: inout [UInt8]) throws {
    func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }
    guard u32(0) == 0xFEED_FACF else { throw TestSupportError("not a little-endian 64-bit Mach-O") }
    var offset = 32
    var found = false
    for _ in 0..<u32(16) {
      if u32(offset) == 2 { for i in 0..<4 { bytes[offset + 12 + i] = 0 }; found = true }
      if u32(offset) == 0xB { for i in 0..<24 { bytes[offset + 8 + i] = 0 } }
      offset += Int(u32(offset + 4))
    }
    if !found { throw TestSupportError("no LC_SYMTAB") }
  }
}
