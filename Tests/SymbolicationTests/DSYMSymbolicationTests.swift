import ImageLogTestSupport
import Testing
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication
import ImageReaders
import ImageLog

/// Mach-O file:line through a real dSYM: the debug fixture (Scripts/make-fixtures: clang -g, ld64.lld-14,
/// dsymutil-14) in `.crash` and `.ips` reports with a frame at every instruction of `__text`. Each
/// frame's function and file:line:column must be what `llvm-symbolizer-14 --obj=<the dSYM's DWARF file>`
/// prints for the same link-time address (the address itself for the first frame, the address - 1 for
/// the return addresses below it).
@Suite(.enabled(if: MachOFixtures.haveTools && haveTool("llvm-symbolizer-14"),
                "needs llvm-nm-14, llvm-dwarfdump-14, llvm-otool-14 and llvm-symbolizer-14"))
struct DSYMSymbolicationTests {
  static let binary = MachOFixtures.directory + "/debugfixture"
  static let bundle = MachOFixtures.directory + "/debugfixture.dSYM"
  static let dwarf = bundle + "/Contents/Resources/DWARF/debugfixture"
  /// Where the report says the image was: gone, so only a search finds it.
  static let recordedPath = "/Applications/Gone.app/debugfixture"

  /// Found by searching the fixture folder, the dSYM serves alone: dsymutil copies the symbol table
  /// into it, so it has names and DWARF (the executable has no DWARF).
  @Test func crashReportGetsTheDSYMsFileLines() throws {
    let slice = try #require(try MachOFixtures.slices(Self.binary).first)
    let addresses = try DebugFixture.instructionAddresses(Self.binary)
    let text = MachOFixtures.crashReport(image: "debugfixture", path: Self.recordedPath, architecture: "arm64",
                                         uuid: slice.uuid, textVMAddress: slice.textVMAddress, load: 0x1_0400_0000,
                                         linkAddresses: addresses, codeType: "ARM-64 (Native)")
    let report = try ReportParser.parse(text)
    #expect(report.format == .appleCrash)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.searchPaths = [MachOFixtures.directory]
    var result = report
    Symbolicator.symbolicate(&result, options: options)
    #expect(result.images.compactMap(\.resolution) == [.found(path: Self.dwarf, how: "--search")])
    #expect(result.notes.isEmpty, "\(result.notes)")
    let expected = try DebugFixture.llvmSymbolizer(Self.dwarf, DebugFixture.lookups(addresses))
    try DebugFixture.expectFramesMatch(result, expected)
    // Apple's layout: `name + offset (file:line)`, the file's last component.
    let rendered = result.formatted(.report)
    for location in expected {
      #expect(rendered.contains(" \(location.function) + "), "\(location.function)")
      #expect(rendered.contains(" (\(Image.shortName(of: location.file)):\(location.line))\n"), "\(location.file):\(location.line)")
    }
  }

  /// The executable and its dSYM in unrelated folders under other names, the dSYM's symbol table
  /// emptied: names come from the executable, file:line from the dSYM found by its UUID alone (no
  /// name or folder relates them, so llvm-symbolizer could not find the dSYM by itself).
  @Test func namesFromTheBinaryLinesFromASeparateDSYM() throws {
    let directory = try makeTemporaryDirectory()
    let binaryCopy = directory + "/builds/renamed-app"
    let dwarfCopy = directory + "/symbols/Archive.dSYM/Contents/Resources/DWARF/other-name"
    #expect(try runChild(["mkdir", "-p", directory + "/builds", directory + "/symbols/Archive.dSYM/Contents/Resources/DWARF"]).status == 0)
    #expect(try runChild(["cp", Self.binary, binaryCopy]).status == 0)
    #expect(try runChild(["cp", Self.bundle + "/Contents/Info.plist", directory + "/symbols/Archive.dSYM/Contents/"]).status == 0)
    var bytes = try MachOFixtures.bytes(Self.dwarf)
    try MachOFixtures.emptySymbolTable(&bytes)
    try MachOFixtures.write(bytes, to: dwarfCopy)
    #expect(try MachOFixtures.functions(dwarfCopy, architecture: nil).isEmpty)

    let slice = try #require(try MachOFixtures.slices(Self.binary).first)
    let addresses = try DebugFixture.instructionAddresses(Self.binary)
    let text = MachOFixtures.crashReport(image: "debugfixture", path: Self.recordedPath, architecture: "arm64",
                                         uuid: slice.uuid, textVMAddress: slice.textVMAddress, load: 0x1_0400_0000,
                                         linkAddresses: addresses, codeType: "ARM-64 (Native)")
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.searchPaths = [directory + "/builds", directory + "/symbols"]
    var result = try ReportParser.parse(text)
    Symbolicator.symbolicate(&result, options: options)
    #expect(result.images.compactMap(\.resolution) == [.found(path: binaryCopy, how: "--search")])
    #expect(result.debugFiles == [0: dwarfCopy])
    try DebugFixture.expectFramesMatch(result, try DebugFixture.llvmSymbolizer(Self.dwarf, DebugFixture.lookups(addresses)))
  }

  /// The `.ips` form: `symbol`, `symbolLocation`, `sourceFile` (the file's last component, as Apple
  /// writes it) and `sourceLine` filled in from the dSYM.
  @Test func ipsGetsTheDSYMsFileLines() throws {
    let slice = try #require(try MachOFixtures.slices(Self.binary).first)
    let addresses = try DebugFixture.instructionAddresses(Self.binary)
    let frames = addresses.map { JSONValue.object([("imageOffset", .number(String($0 - slice.textVMAddress))),
                                                   ("imageIndex", .number("0"))]) }
    let body = JSONValue.object([
      ("procName", .string("debugfixture")), ("cpuType", .string("ARM-64")), ("faultingThread", .number("0")),
      ("threads", .array([.object([("triggered", .bool(true)), ("frames", .array(frames))])])),
      ("usedImages", .array([.object([("arch", .string("arm64")), ("base", .number(String(0x1_0200_0000))),
                                      ("size", .number("65536")), ("uuid", .string(slice.uuid.lowercased())),
                                      ("path", .string(Self.recordedPath)), ("name", .string("debugfixture"))])])),
    ])
    var report = try ReportParser.parse(#"{"bug_type":"309","name":"debugfixture"}"# + "\n" + body.serialized(indent: 2))
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.searchPaths = [MachOFixtures.directory]
    Symbolicator.symbolicate(&report, options: options)
    let output = report.formatted(.report)
    let document = try JSONValue.parse(output.split(separator: "\n", maxSplits: 1)[1])
    let outFrames = try #require(document["threads"]?.array?.first?["frames"]?.array)
    let lookups = DebugFixture.lookups(addresses)
    let expected = try DebugFixture.llvmSymbolizer(Self.dwarf, lookups)
    let starts = try MachOFixtures.functions(Self.binary, architecture: nil)
    #expect(outFrames.count == expected.count)
    for (index, (frame, location)) in zip(outFrames, expected).enumerated() {
      let start = try #require(starts.last { $0 <= lookups[index] })
      #expect(frame["symbol"]?.string == location.function, "frame \(index)")
      #expect(frame["symbolLocation"]?.integer == Int(addresses[index] - start), "frame \(index)")
      #expect(frame["sourceFile"]?.string == Image.shortName(of: location.file), "frame \(index)")
      #expect(frame["sourceLine"]?.integer == location.line, "frame \(index)")
    }
  }
}

/// The debug fixture's addresses and llvm-symbolizer-14's answers for them.
enum DebugFixture {
  struct Location: Equatable, CustomStringConvertible {
    var function: String
    var file: String
    var line: Int
    var column: Int
    var description: String { "\(function) \(file):\(line):\(column)" }
  }

  /// Every 4-byte instruction address of `__text` (`llvm-otool-14 -l`: the section's addr and size).
  static func instructionAddresses(_ path: String) throws -> [UInt64] {
    let lines = try runChild(["llvm-otool-14", "-l", path]).output.split(separator: "\n").map { $0.trimmingSpaces }
    guard let at = lines.firstIndex(of: "sectname __text"), at + 4 < lines.count else {
      throw TestSupportError("llvm-otool-14 -l \(path): no __text section")
    }
    func field(_ name: String) -> UInt64? {
      lines[(at + 1)...(at + 4)].first { $0.hasPrefix(name + " 0x") }.flatMap { UInt64($0.split(separator: " ").last?.dropFirst(2) ?? "", radix: 16) }
    }
    guard let address = field("addr"), let size = field("size"), size >= 8 else {
      throw TestSupportError("llvm-otool-14 -l \(path): unreadable __text addr/size")
    }
    return Array(stride(from: address, to: address + size, by: 4))
  }

  /// The link-time address looked up for each frame: the first is where it crashed, the others are
  /// return addresses, looked up one byte back (the call).
  static func lookups(_ addresses: [UInt64]) -> [UInt64] {
    addresses.enumerated().map { $0.offset == 0 ? $0.element : $0.element - 1 }
  }

  /// `llvm-symbolizer-14 --no-inlines --obj=OBJECT ADDRESS...`: function, then `file:line:column`.
  static func llvmSymbolizer(_ object: String, _ addresses: [UInt64]) throws -> [Location] {
    let arguments = ["llvm-symbolizer-14", "--no-inlines", "--obj=" + object] + addresses.map { "0x" + String($0, radix: 16) }
    let lines = try runChild(arguments).output.split(separator: "\n").map(String.init)
    guard lines.count == 2 * addresses.count else { throw TestSupportError("llvm-symbolizer-14: \(lines.count) lines for \(addresses.count) addresses") }
    return try stride(from: 0, to: lines.count, by: 2).map { index in
      let parts = lines[index + 1].split(separator: ":", omittingEmptySubsequences: false)
      guard parts.count >= 3, let line = Int(parts[parts.count - 2]), let column = Int(parts[parts.count - 1]), line > 0 else {
        throw TestSupportError("llvm-symbolizer-14: no file:line in \(lines[index + 1])")
      }
      return Location(function: lines[index], file: parts.dropLast(2).joined(separator: ":"), line: line, column: column)
    }
  }

  /// Every frame symbolicated, its function's name, file, line and column those of `expected`.
  static func expectFramesMatch(_ result: ProcessSnapshot, _ expected: [Location],
                                sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(result.frameSymbols.map(\.status) == expected.map { _ in .symbolicated }, sourceLocation: sourceLocation)
    let ours = result.frameSymbols.map { frame in
      frame.function.map { Location(function: $0.name ?? "??", file: $0.file ?? "??", line: $0.line ?? 0, column: $0.column ?? -1) }
    }
    #expect(ours == expected, sourceLocation: sourceLocation)
  }
}
