import ImageLogTestSupport
import Testing
import ImageReaders
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication

/// What symbolication stores of a frame's function, source format by source format: the function's
/// start (`startAddress`, the symbol's address where its file places it), the address looked up and
/// the frame's own address there (`lookupAddress`, `linkAddress`), against `llvm-nm` and
/// `llvm-symbolizer`'s `StartAddress` for ELF symbol tables, DWARF and the symbol cache, `dump_syms`'
/// `FUNC` records for a `.sym`, `llvm-nm-14` for Mach-O; the offsets writers show are measured from
/// these facts as each reference measures them.
@Suite(.enabled(if: haveTool("clang") && haveTool("llvm-nm") && haveTool("llvm-symbolizer"),
                "needs clang, llvm-nm and llvm-symbolizer"))
struct FunctionStartTests {
  /// Tests/Programs/glibc-backtrace.c built with `flags` into a folder of its own, with `llvm-nm -S`'s
  /// start and size of each defined function.
  struct Program {
    var folder: String
    var path: String
    var functions: [String: (start: UInt64, size: UInt64)]

    init(_ flags: [String]) throws {
      folder = try makeTemporaryDirectory("function-start")
      path = folder + "/function-start"
      let build = try runChild(["clang", "-O0", "-Wl,--build-id"] + flags
                                 + [packageRoot + "/Tests/Programs/glibc-backtrace.c", "-o", path])
      try #require(build.status == 0, "\(build.error)")
      var functions: [String: (start: UInt64, size: UInt64)] = [:]
      for line in try runChild(["llvm-nm", "-S", "--defined-only", path]).output.split(separator: "\n") {
        let words = line.split(separator: " ")
        guard words.count == 4, words[2] == "T" || words[2] == "t",
              let start = UInt64(words[0], radix: 16), let size = UInt64(words[1], radix: 16) else { continue }
        functions[String(words[3])] = (start, size)
      }
      self.functions = functions
    }
  }

  /// A frame `at` bytes into `function`: the PC (not a return address) first, callers after.
  typealias Place = (function: String, at: UInt64)
  static let places: [Place] = [("dump", 4), ("inner", 9), ("outer", 5), ("main", 7)]
  static let load: UInt64 = 0x5555_0000_0000

  /// One thread of frames at `places` in `program`'s image loaded at `load`, in a snapshot of `format`.
  static func snapshot(_ program: Program, format: ProcessSnapshot.Format) throws -> ProcessSnapshot {
    let files = try SymbolFile.load(path: program.path)
    let image = ProcessSnapshot.Image(name: "function-start", path: program.path, loadAddress: load, endAddress: nil,
                                      identity: files[0].buildID.map(ImageIdentity.init), architecture: nil)
    var frames: [ProcessSnapshot.Frame] = []
    for (index, place) in places.enumerated() {
      let function = try #require(program.functions[place.function], "llvm-nm has no \(place.function)")
      try #require(place.at < function.size)
      frames.append(ProcessSnapshot.Frame(number: index, address: load + function.start + place.at, isReturnAddress: index > 0,
                                          imageIndex: 0))
    }
    return ProcessSnapshot(format: format, threads: [ProcessSnapshot.Thread(number: 0, crashed: true, frames: frames)],
                           images: [image])
  }

  /// llvm-symbolizer's `StartAddress` of each link-time address in `path`.
  static func symbolizerStarts(_ path: String, _ addresses: [UInt64]) throws -> [UInt64?] {
    let output = try runChild(["llvm-symbolizer", "--output-style=JSON", "--obj=" + path]
                                + addresses.map { "0x" + String($0, radix: 16) }).output
    let answers = try #require(try JSONValue.parse(output[...]).array)
    return answers.map { answer in
      answer["Symbol"]?.array?.last?["StartAddress"]?.string.flatMap { UInt64($0.dropFirst(2), radix: 16) }
    }
  }

  /// Each frame's stored facts: its function's start is llvm-nm's address of the function (and
  /// llvm-symbolizer's `StartAddress` of the address looked up), the lookup is a return address less
  /// one, and the offset the report shows is measured from the facts as the report's kind measures it.
  func expectFacts(_ result: ProcessSnapshot, _ program: Program, _ source: String) throws {
    let frames = result.threads[0].frames
    let lookups = frames.compactMap(\.symbols.lookupAddress)
    try #require(lookups.count == Self.places.count, "\(source): \(frames.map(\.symbols))")
    let starts = try Self.symbolizerStarts(program.path, lookups)
    for (index, (frame, place)) in zip(frames, Self.places).enumerated() {
      let start = try #require(program.functions[place.function]?.start)
      let link = start + place.at
      let symbols = frame.symbols
      #expect(symbols.status == .symbolicated, "\(source) frame \(index)")
      #expect(symbols.function?.name == place.function, "\(source) frame \(index)")
      #expect(symbols.function?.startAddress == start, "\(source) frame \(index): llvm-nm's \(place.function)")
      #expect(symbols.function?.startAddress == starts[index], "\(source) frame \(index): llvm-symbolizer's StartAddress")
      #expect(symbols.linkAddress == link, "\(source) frame \(index)")
      #expect(symbols.lookupAddress == (frame.isReturnAddress ? link - 1 : link), "\(source) frame \(index)")
      // Swift's backtracer counts from the address looked up; every other kind from the frame's address.
      let shown = result.format.measuresOffsetsFromLookup && frame.isReturnAddress ? place.at - 1 : place.at
      #expect(symbols.function?.offset == shown, "\(source) frame \(index)")
      #expect(symbols.functions.dropLast().allSatisfy { $0.startAddress == nil && $0.offset == nil }, "\(source)")
    }
  }

  /// minidump-stackwalk's `function_offset` (its instruction, a return address less one, less the
  /// function's start) in `--format stackwalk-json`, whatever the report's own measure.
  func expectStackwalkOffsets(_ result: ProcessSnapshot, _ source: String) throws {
    let document = try JSONValue.parse(result.formatted(.stackwalkJSON)[...])
    let frames = try #require(document["threads"]?.array?.first?["frames"]?.array)
    let shown = frames.map { Self.hexNumber($0["function_offset"]) }
    #expect(shown == Self.places.enumerated().map { index, place in index > 0 ? place.at - 1 : place.at }, "\(source)")
  }

  /// minidump-stackwalk's `"0x…"` number.
  static func hexNumber(_ value: JSONValue?) -> UInt64? {
    guard let text = value?.string, text.hasPrefix("0x") else { return nil }
    return UInt64(text.dropFirst(2), radix: 16)
  }

  @Test(arguments: [[], ["-g"]])
  func elfSymbolTableAndDWARF(flags: [String]) throws {
    let program = try Program(flags)
    defer { _ = try? runChild(["rm", "-rf", program.folder]) }
    var options = SymbolicationOptions()
    options.systemDirectories = false
    for format in [ProcessSnapshot.Format.imagelog, .appleCrash, .swiftBacktrace] {
      let result = Symbolicator.symbolicated(try Self.snapshot(program, format: format), options: options)
      try expectFacts(result, program, "\(format) \(flags)")
      try expectStackwalkOffsets(result, "\(format) \(flags)")
    }
  }

  /// The symbol cache answers DWARF's lines; the start stays the symbol table's.
  @Test func symbolCache() throws {
    let program = try Program(["-g"])
    defer { _ = try? runChild(["rm", "-rf", program.folder]) }
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.symbolCache = SymbolCacheSettings(directory: program.folder + "/cache")
    let snapshot = try Self.snapshot(program, format: .imagelog)
    _ = Symbolicator.symbolicated(snapshot, options: options)  // writes the cache entry
    try #require(directoryNames(program.folder + "/cache").count == 1, "no cache entry written")
    let result = Symbolicator.symbolicated(snapshot, options: options)
    try expectFacts(result, program, "symbol cache")
    #expect(result.threads[0].frames.allSatisfy { $0.symbols.function?.line != nil })
  }

  /// A `.sym` (dump_syms') in a symbol store for an image whose file is gone: the start is the `FUNC`
  /// record's address (an offset from the module's base, llvm-nm's for a PIE), the lookup and the
  /// frame's address are offsets from the image's load address.
  @Test(.enabled(if: pipelineTool("dump_syms") != nil, "needs dump_syms (Scripts/install-test-tools)"))
  func breakpadSymbolFile() throws {
    let program = try Program(["-g"])
    defer { _ = try? runChild(["rm", "-rf", program.folder]) }
    let dumped = try runChild([try #require(pipelineTool("dump_syms")), program.path])
    try #require(dumped.status == 0, "\(dumped.error)")
    let module = try #require(dumped.output.split(separator: "\n").first?.split(separator: " "))
    try #require(module.count >= 5 && module[0] == "MODULE")
    let store = program.folder + "/store"
    let folder = store + "/function-start/" + module[3]
    try #require(try runChild(["mkdir", "-p", folder]).status == 0)
    try SymbolFileBytes.write(Array(dumped.output.utf8), to: folder + "/function-start.sym")
    var funcs: [String: UInt64] = [:]
    for line in dumped.output.split(separator: "\n") where line.hasPrefix("FUNC ") {
      let words = line.split(separator: " ").filter { $0 != "m" }
      if words.count >= 5, let address = UInt64(words[1], radix: 16) { funcs[String(words[4])] = address }
    }

    var snapshot = try Self.snapshot(program, format: .imagelog)
    snapshot.images[0].path = program.folder + "/gone/function-start"  // no file: the store answers
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.symbolStores = [store]
    let result = Symbolicator.symbolicated(snapshot, options: options)
    #expect(result.images[0].resolution == .found(path: folder + "/function-start.sym", how: "symbol store"))
    for (index, (frame, place)) in zip(result.threads[0].frames, Self.places).enumerated() {
      let start = try #require(program.functions[place.function]?.start)
      #expect(frame.symbols.function?.name == place.function, "frame \(index)")
      #expect(frame.symbols.function?.startAddress == funcs[place.function], "frame \(index): dump_syms' FUNC")
      #expect(frame.symbols.function?.startAddress == start, "frame \(index): llvm-nm's \(place.function)")
      #expect(frame.symbols.linkAddress == start + place.at, "frame \(index)")
      #expect(frame.symbols.lookupAddress == start + place.at - (frame.isReturnAddress ? 1 : 0), "frame \(index)")
      #expect(frame.symbols.function?.offset == place.at, "frame \(index)")
    }
    try expectStackwalkOffsets(result, ".sym")
  }

  /// glibc's `backtrace_symbols_fd` writes `(NAME+0xOFF)`: `dladdr`'s offset from the exported symbol
  /// to the return address. That is all the report says: the frame keeps the name and the offset as
  /// written (no start address), and stackwalk-json measures it to minidump-stackwalk's instruction.
  @Test func glibcBacktraceKeepsWhatItWrote() throws {
    let program = try Program(["-g", "-rdynamic", "-no-pie"])  // link-time addresses are the addresses
    defer { _ = try? runChild(["rm", "-rf", program.folder]) }
    let run = try runChild([program.path])
    var report = try ReportParser.parse(run.error)
    #expect(report.format == .glibcBacktrace)
    Symbolicator.placeWithoutLookingUp(&report)
    let document = try JSONValue.parse(report.formatted(.stackwalkJSON)[...])
    let shown = try #require(document["threads"]?.array?.first?["frames"]?.array)
    var checked = 0
    for (frame, entry) in zip(report.threads[0].frames, shown) {
      guard let written = frame.symbolOffset, let function = program.functions[written.name],
            let image = frame.imageIndex.map({ report.images[$0] }), image.path?.hasSuffix("/function-start") == true
      else { continue }
      let reported = try #require(report.reportedFunction(of: frame))
      #expect(reported.name == written.name && reported.offset == written.offset)
      #expect(frame.symbols.function == nil)  // nothing looked up: no start is claimed
      // dladdr's measure: the frame's address less the symbol's; minidump-stackwalk's: the instruction's.
      #expect(written.offset == frame.address - function.start, "\(written.name)")
      let instruction = frame.isReturnAddress ? frame.address - 1 : frame.address
      #expect(Self.hexNumber(entry["function_offset"]) == instruction - function.start, "\(written.name)")
      checked += 1
    }
    #expect(checked >= 3, "\(run.error)")
  }

  /// Mach-O: an Apple report of frames 2 bytes into each function of the project's fixtures; the start
  /// is `llvm-nm-14`'s, and Apple's `+ N` is measured from the frame's address.
  @Test(.enabled(if: MachOFixtures.haveTools, "needs llvm-nm-14, llvm-dwarfdump-14, llvm-otool-14 and llvm-symbolizer"),
        arguments: ["fixture-x86_64-macos", "libfixture-arm64-macos.dylib"])
  func machO(fixture: String) throws {
    let path = MachOFixtures.directory + "/" + fixture
    let slice = try #require(try MachOFixtures.slices(path).first)
    let functions = try MachOFixtures.functions(path, architecture: nil)
    try #require(!functions.isEmpty)
    let load: UInt64 = 0x1_0400_0000
    let links = functions.map { $0 + 2 }
    let text = MachOFixtures.crashReport(image: fixture, path: path, architecture: slice.architecture,
                                         uuid: slice.uuid.lowercased().filter { $0 != "-" }, textVMAddress: slice.textVMAddress,
                                         load: load, linkAddresses: links, codeType: nil)
    let report = try ReportParser.parse(text)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    let frames = result.threads.flatMap(\.frames)
    try #require(frames.count == functions.count)
    for (index, frame) in frames.enumerated() {
      #expect(frame.symbols.function?.startAddress == functions[index], "frame \(index)")
      #expect(frame.symbols.linkAddress == links[index], "frame \(index)")
      #expect(frame.symbols.lookupAddress == links[index] - (frame.isReturnAddress ? 1 : 0), "frame \(index)")
      #expect(frame.symbols.function?.offset == 2, "frame \(index)")
    }
  }

  /// Swift's backtracer counts a return address's offset from the call; a `.sym` in a symbol store
  /// answering for the program (its file gone) gives the backtracer's own `symbolicate=full` offsets,
  /// as the program's file does (SwiftBacktraceSymbolicationTests).
  @Test(.enabled(if: CrashPrograms.haveCompilers && pipelineTool("dump_syms") != nil,
                 "needs swiftc, clang and dump_syms"))
  func swiftBacktraceThroughASymbolStore() throws {
    let crasher = try CrashPrograms.crasher.get()
    let unsymbolicated = try CrashPrograms.crash("null", symbolicate: "off")
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash("null", symbolicate: "full"))
    var report = try ReportParser.parse(unsymbolicated)
    #expect(report.format == .swiftBacktrace)
    let imageIndex = try #require(report.images.firstIndex { $0.path == crasher }, "\(report.images.map(\.path))")

    let folder = try makeTemporaryDirectory("function-start-swift")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let dumped = try runChild([try #require(pipelineTool("dump_syms")), crasher])
    try #require(dumped.status == 0, "\(dumped.error)")
    let module = try #require(dumped.output.split(separator: "\n").first?.split(separator: " "))
    try #require(module.count >= 5 && module[0] == "MODULE")
    let name = report.images[imageIndex].name
    let store = folder + "/store"
    try #require(try runChild(["mkdir", "-p", store + "/" + name + "/" + module[3]]).status == 0)
    try SymbolFileBytes.write(Array(dumped.output.utf8), to: store + "/" + name + "/" + module[3] + "/" + name + ".sym")
    report.images[imageIndex].path = folder + "/gone/" + name  // no file: the store answers

    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.symbolStores = [store]
    let result = Symbolicator.symbolicated(report, options: options)
    let crashed = try #require(result.threads.firstIndex { $0.crashed })
    var compared = 0
    for frame in result.threads[crashed].frames where frame.imageIndex == imageIndex {
      guard let theirs = expected.first(where: { $0.index == frame.number }) else { continue }
      let function = try #require(frame.symbols.function, "frame \(frame.number): \(frame.symbols.status)")
      #expect(function.startAddress != nil && frame.symbols.lookupAddress != nil)
      #expect(function.offset.map(Int.init) == theirs.offset, "frame \(frame.number): \(theirs)")
      compared += 1
    }
    #expect(compared >= 3, "\(expected)")
    let rendered = CrashPrograms.crashedThreadFrames(result.formatted(.report))
    for frame in rendered {
      guard let theirs = expected.first(where: { $0.index == frame.index }),
            result.threads[crashed].frames.first(where: { $0.number == frame.index })?.imageIndex == imageIndex else { continue }
      #expect(frame.offset == theirs.offset, "\(frame) against \(theirs)")
    }
  }
}
