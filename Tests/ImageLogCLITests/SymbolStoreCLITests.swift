#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog symbolicate --symbols STORE` (and `IMAGELOG_SYMBOLS`) with a program gone and only its
/// Breakpad symbol file in a store, made by `dump_syms -s` and by `imagelog symbols --store`: every
/// frame of the program named as Sentry's `symbolic` names its address from the same `.sym` (function,
/// file, line, inlined calls), on AddressSanitizer's report of a heap overflow (clang); a `.sym` with
/// another debug id, or one that does not read, not used and named in a note.
@Suite(.serialized) struct SymbolStoreCLITests {
  static let imagelog = builtProduct("imagelog")
  static let clang = which("clang")
  static let symbolicPath = pipelineToolsDirectory + "/python"
  static let haveSymbolic = access(symbolicPath + "/symbolic", F_OK) == 0 && haveTool("python3")
  static let canRun = clang != nil && MinidumpCLI.dumpSyms != nil && haveSymbolic
  static let reason: Comment = "needs clang with AddressSanitizer, dump_syms and symbolic (Scripts/install-test-tools)"

  /// A crash of Tests/Programs/symbol-store-asan.c built with AddressSanitizer in `directory`: the
  /// program's path and the sanitizer's report (symbolize=0: module+offset and build-id per frame).
  static func sanitizerCrash(in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> (program: String, report: String) {
    let program = directory + "/symbol-store-asan"
    let clang = try #require(clang, sourceLocation: sourceLocation)
    let built = try runChild([clang, "-fsanitize=address", "-O2", "-g", "-Wl,--build-id",
                              packageRoot + "/Tests/Programs/symbol-store-asan.c", "-o", program])
    try #require(built.exitCode == 0, "clang: \(built.error)", sourceLocation: sourceLocation)
    let run = try runChild([program], environment: ["ASAN_OPTIONS": "symbolize=0"])
    try #require(run.error.contains("AddressSanitizer: heap-buffer-overflow") && run.error.contains("(BuildId: "),
                 "no sanitizer report: \(run.error)", sourceLocation: sourceLocation)
    let report = directory + "/report.txt"
    try writeFile(report, run.error)
    return (program, report)
  }

  /// `dump_syms --inlines -s STORE FILE` and `imagelog symbols --inlines --store STORE FILE`: the two
  /// stores, and the path of dump_syms' `.sym` (`NAME/DEBUGID/NAME.sym`).
  static func stores(of file: String, in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> (dumpSyms: String, imagelog: String, symbolFile: String) {
    let dumpSymsStore = directory + "/dump_syms-store", imagelogStore = directory + "/imagelog-store"
    let dumped = try runChild([try #require(MinidumpCLI.dumpSyms), "--inlines", "-s", dumpSymsStore, file])
    try #require(dumped.exitCode == 0, "dump_syms: \(dumped.error)", sourceLocation: sourceLocation)
    let written = try runChild([imagelog, "symbols", "--inlines", "--store", imagelogStore, file])
    try #require(written.exitCode == 0, "imagelog symbols: \(written.error)", sourceLocation: sourceLocation)
    let name = String(file.split(separator: "/").last ?? "")
    let ids = directoryNames(dumpSymsStore + "/" + name)
    try #require(ids.count == 1 && directoryNames(imagelogStore + "/" + name) == ids, "debug ids: \(ids)",
                 sourceLocation: sourceLocation)
    return (dumpSymsStore, imagelogStore, "\(dumpSymsStore)/\(name)/\(ids[0])/\(name).sym")
  }

  /// One function of a frame: name, file and line (innermost first).
  struct Location: Equatable, CustomStringConvertible {
    var name: String
    var file: String?
    var line: Int?
    var description: String { "\(name) \(file ?? "-"):\(line.map(String.init) ?? "-")" }
  }

  /// What symbolic's SymCache, made from the `.sym` at `path`, gives for each of `offsets`: the
  /// functions, innermost first (a `PUBLIC` without file or line).
  static func symbolicLookups(_ path: String, _ offsets: [UInt64], arch: String = "x86_64",
                              sourceLocation: SourceLocation = #_sourceLocation) throws -> [[Location]] {
    let script = """
      import json, sys, symbolic
      cache = symbolic.Archive.open(sys.argv[1]).get_object(arch=sys.argv[2]).make_symcache()
      print(json.dumps([[[l.symbol, l.full_path, l.line] for l in cache.lookup(int(a))] for a in sys.argv[3:]]))
      """
    let run = try runChild(["python3", "-c", script, path, arch] + offsets.map { String($0) },
                           environment: ["PYTHONPATH": symbolicPath])
    try #require(run.exitCode == 0, "symbolic: \(run.error)", sourceLocation: sourceLocation)
    let frames = try JSONValue.parse(run.output[...]).array ?? []
    return frames.map { (frame: JSONValue) -> [Location] in
      (frame.array ?? []).map { (location: JSONValue) -> Location in
        let fields = location.array ?? []
        let file: String? = fields.count > 1 ? fields[1].string : nil
        let line: Int? = fields.count > 2 ? fields[2].integer : nil
        return Location(name: fields.first?.string ?? "", file: file, line: file == nil ? nil : line)
      }
    }
  }

  /// One frame of image `name`: its number in its thread, offset, status and functions (innermost first).
  typealias Frame = (number: Int, offset: UInt64, status: String, functions: [Location])

  /// `imagelog symbolicate --format json --demangle none --no-system-debug ARGUMENTS REPORT` (or
  /// `command` instead of `symbolicate`): the frames of image `name`, the JSON and the run.
  static func symbolicate(_ report: String, image name: String, arguments: [String], environment: [String: String] = [:],
                          status: Int32 = 0, command: [String] = ["symbolicate"],
                          sourceLocation: SourceLocation = #_sourceLocation) throws
    -> (frames: [Frame], json: JSONValue, run: ChildResult) {
    let run = try runChild([imagelog] + command + ["--format", "json", "--demangle", "none", "--no-system-debug"]
                           + arguments + [report], environment: environment)
    try #require(run.exitCode == status, "imagelog \(command[0]): \(run.error)", sourceLocation: sourceLocation)
    let json = try JSONValue.parse(run.output[...])
    var frames: [Frame] = []
    for frame in json["frames"]?.array ?? [] where frame["image"]?.string == name {
      var functions: [Location] = []
      for inlined in frame["inlined"]?.array ?? [] {
        functions.append(Location(name: inlined["symbol"]?.string ?? "", file: inlined["file"]?.string, line: inlined["line"]?.integer))
      }
      if let symbol = frame["symbol"]?.string {
        functions.append(Location(name: symbol, file: frame["file"]?.string, line: frame["line"]?.integer))
      }
      frames.append((frame["frame"]?.integer ?? -1, frame["imageOffset"]?.unsigned ?? 0, frame["status"]?.string ?? "", functions))
    }
    return (frames, json, run)
  }

  /// The program's file name (its image's name in reports, its folder in a store).
  let name = "symbol-store-asan"

  /// `sanitizerCrash` and both `stores` in `directory`, then the program deleted.
  static func deletedProgram(in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> (report: String, dumpSymsStore: String, imagelogStore: String, symbolFile: String) {
    let (program, report) = try sanitizerCrash(in: directory, sourceLocation: sourceLocation)
    let (dumpSymsStore, imagelogStore, symbolFile) = try stores(of: program, in: directory, sourceLocation: sourceLocation)
    #expect(unlink(program) == 0, sourceLocation: sourceLocation)
    return (report, dumpSymsStore, imagelogStore, symbolFile)
  }

  @Test(.enabled(if: canRun, reason))
  func sanitizerReportOfADeletedProgram() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbol-store")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let (report, dumpSymsStore, imagelogStore, symbolFile) = try Self.deletedProgram(in: directory)

    // Gone, and no store: nothing names the program's frames.
    let bare = try Self.symbolicate(report, image: name, arguments: [])
    #expect(bare.frames.count >= 4 && bare.frames.allSatisfy { $0.status == "missing-image" }, "\(bare.frames)")

    // Sanitizers give the address of the call itself (already less 1): looked up as it is.
    let expected = try Self.symbolicLookups(symbolFile, bare.frames.map(\.offset))
    // deep (with store_read inlined), middle, main, _start and ASan's malloc.
    #expect(expected.count >= 5, "\(expected)")
    #expect(expected.allSatisfy { !$0.isEmpty }, "\(expected)")
    #expect(expected.contains { $0.count > 1 && $0.first?.name == "store_read" }, "an inlined frame: \(expected)")
    for store in [dumpSymsStore, imagelogStore] {
      // A store given that is not there is said, as a --search folder is (status 1); the others serve.
      let named = try Self.symbolicate(report, image: name, arguments: ["--symbols", directory + "/none", "--symbols", store],
                                       status: 1)
      #expect(named.run.error == "imagelog: \(directory)/none: no such file or directory\n", "\(named.run.error)")
      #expect(named.frames.map(\.offset) == bare.frames.map(\.offset))
      for (frame, want) in zip(named.frames, expected) {
        #expect(frame.status == "symbolicated" && frame.functions == want, "\(store): +0x\(hexDigits(frame.offset))")
      }
      let image = named.json["images"]?.array?.first { $0["name"]?.string == name }
      #expect(image?["via"]?.string == "symbol store" && image?["file"]?.string?.hasPrefix(store + "/" + name + "/") == true,
              "\(String(describing: image))")
      // The same from IMAGELOG_SYMBOLS, a folder that is not there passed over.
      let fromEnvironment = try Self.symbolicate(report, image: name, arguments: [],
                                                 environment: ["IMAGELOG_SYMBOLS": directory + "/none:" + store])
      #expect(fromEnvironment.run.output == named.run.output && fromEnvironment.run.error.isEmpty, "\(fromEnvironment.run.error)")
      // A batch (--output-dir, its files found once for all reports) writes what one report prints.
      let single = try runChild([Self.imagelog, "symbolicate", "--no-system-debug", "--symbols", store, report])
      let batch = try runChild([Self.imagelog, "symbolicate", "--no-system-debug", "--symbols", store, "--output-dir",
                                directory + "/batch", report])
      #expect(batch.exitCode == 0 && single.output.contains(" in store_middle "), "\(batch.error)")
      #expect(readFile(directory + "/batch/report.txt") == single.output)
    }
  }

  @Test(.enabled(if: canRun, reason))
  func symbolFilesOfAnotherBuildOrUnreadableAreNotUsed() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbol-store-refused")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let (report, store, _, symbolFile) = try Self.deletedProgram(in: directory)
    let text = try #require(readFile(symbolFile))
    let id = String(symbolFile.split(separator: "/").dropLast().last ?? "")
    let otherID = "0123456789ABCDEF0123456789ABCDEF0"
    func replaced(_ text: String, _ old: String, _ new: String) -> String {
      text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
        .map { $0.offset == 0 ? $0.element.split(separator: " ").map { $0 == old ? new : String($0) }.joined(separator: " ") : String($0.element) }
        .joined(separator: "\n")
    }

    // Another build's .sym alone, under its own debug id: a mismatch, as a file of another build is.
    let other = directory + "/other"
    #expect(mkdir(other, 0o755) == 0 && mkdir("\(other)/\(name)", 0o755) == 0 && mkdir("\(other)/\(name)/\(otherID)", 0o755) == 0)
    try writeFile("\(other)/\(name)/\(otherID)/\(name).sym", replaced(text, id, otherID))
    let mismatched = try Self.symbolicate(report, image: name, arguments: ["--symbols", other])
    #expect(!mismatched.frames.isEmpty && mismatched.frames.allSatisfy { $0.status == "uuid-mismatch" && $0.functions.isEmpty },
            "\(mismatched.frames)")
    let image = mismatched.json["images"]?.array?.first { $0["name"]?.string == name }
    #expect(image?["status"]?.string == "uuid-mismatch" && image?["fileID"]?.string == otherID, "\(String(describing: image))")

    // Under the image's debug id, but its MODULE line says another: refused, with a note.
    try writeFile(symbolFile, replaced(text, id, otherID))
    let lying = try Self.symbolicate(report, image: name, arguments: ["--symbols", store])
    #expect(lying.frames.allSatisfy { $0.status == "missing-image" }, "\(lying.frames)")
    let notes = lying.json["notes"]?.array?.compactMap(\.string) ?? []
    #expect(notes == ["\(symbolFile): not used: MODULE debug id \(otherID) differs from \(try #require(Self.buildID(report)))"],
            "\(notes)")

    // Not a symbol file at all: a note, not a failure; the other store still serves.
    try writeFile(symbolFile, "garbage\n")
    let good = directory + "/good"
    #expect(mkdir(good, 0o755) == 0 && mkdir("\(good)/\(name)", 0o755) == 0 && mkdir("\(good)/\(name)/\(id)", 0o755) == 0)
    try writeFile("\(good)/\(name)/\(id)/\(name).sym", text)
    let bad = try Self.symbolicate(report, image: name, arguments: ["--symbols", store, "--symbols", good])
    #expect(bad.frames.allSatisfy { $0.status == "symbolicated" }, "\(bad.frames)")
    let badNotes = bad.json["notes"]?.array?.compactMap(\.string) ?? []
    #expect(badNotes == ["\(symbolFile): not used: line 1: the first record is 'garbage', not MODULE: not a Breakpad symbol file"],
            "\(badNotes)")
    #expect(bad.run.error.isEmpty)
  }

  /// `imagelog pid --threads --symbols STORE` of a process whose program was deleted (a server whose
  /// binary was replaced: Linux names its file `PATH (deleted)`), and `symbolicate --symbols STORE` of
  /// its gcore: process-threads.c (gcc -O2 -fomit-frame-pointer), its 4 threads blocked; every frame in
  /// the program named as symbolic names the call (a return address less 1) from dump_syms' `.sym`.
  @Test(.enabled(if: MinidumpCLI.dumpSyms != nil && haveSymbolic && haveTool("cc"), "needs cc, dump_syms and symbolic"))
  func threadsAndCoreOfAProcessWhoseProgramWasDeleted() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbol-store-pid")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try MinidumpCLI.startBlockedThreads(in: directory)
    defer { child.stop() }
    let program = directory + "/process-threads"
    let store = directory + "/store"
    let dumped = try runChild([try #require(MinidumpCLI.dumpSyms), "-s", store, program])
    try #require(dumped.exitCode == 0, "dump_syms: \(dumped.error)")
    // A core of it too (gdb's gcore), symbolicated the same way once the program is gone.
    let core = haveTool("gcore") ? try CoreFileTests.gcore(child.pid, in: directory) : nil
    #expect(unlink(program) == 0)
    let ids = directoryNames(store + "/process-threads")
    try #require(ids.count == 1, "\(ids)")
    let symbolFile = "\(store)/process-threads/\(ids[0])/process-threads.sym"
    var inputs = [(String(child.pid), "process-threads (deleted)", ["pid", "--threads"])]
    if let core { inputs.append((core, "process-threads", ["symbolicate"])) }
    for (input, name, command) in inputs {
      let bare = try Self.symbolicate(input, image: name, arguments: [], command: command)
      // While the process lives, its deleted program is read through /proc/PID/map_files where the kernel
      // lets this user open that (ReplacedLibraryTests); a core of it has nothing to name its frames.
      let fromMapping = command == ["pid", "--threads"] && Self.canOpenAMapping(of: child.pid)
      #expect(bare.frames.count >= 4 && bare.frames.allSatisfy { $0.status == (fromMapping ? "symbolicated" : "missing-image") },
              "\(command): \(bare.frames)")
      let named = try Self.symbolicate(input, image: name, arguments: ["--symbols", store], command: command)
      #expect(named.frames.map(\.offset) == bare.frames.map(\.offset))
      let expected = try Self.symbolicLookups(symbolFile, named.frames.map { $0.number > 0 ? $0.offset - 1 : $0.offset })
      for (frame, want) in zip(named.frames, expected) {
        #expect(!want.isEmpty && frame.status == "symbolicated" && frame.functions == want,
                "\(command): +0x\(hexDigits(frame.offset)): \(frame.functions) against \(want)")
      }
      #expect(named.frames.contains { $0.functions.last?.name == "blocked_in_read" }, "\(command): \(named.frames)")
    }
  }

  /// Whether this process may open the files process `pid` mapped through `/proc/PID/map_files` (the
  /// kernel allows it with CAP_SYS_ADMIN only).
  static func canOpenAMapping(of pid: Int32) -> Bool {
    let folder = "/proc/\(pid)/map_files"
    guard let entry = directoryNames(folder).first else { return false }
    let descriptor = open(folder + "/" + entry, O_RDONLY | O_CLOEXEC)
    if descriptor >= 0 { close(descriptor) }
    return descriptor >= 0
  }

  /// An Apple crash report of a Mach-O program (the arm64 fixture macho-c-O2, its dSYM beside it) on
  /// a machine where it is not: dump_syms' store of the binary and its dSYM names its frames (a
  /// Mach-O debug id is its LC_UUID unswapped, which `llvm-dwarfdump --uuid` gives), as symbolic does.
  @Test(.enabled(if: MinidumpCLI.dumpSyms != nil && haveSymbolic && haveTool("llvm-dwarfdump"),
                 "needs dump_syms, symbolic (Scripts/install-test-tools) and llvm-dwarfdump"))
  func appleReportOfAMachOProgram() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbol-store-macho")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let binary = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf/macho-c-O2"
    let store = directory + "/store"
    let dumped = try runChild([try #require(MinidumpCLI.dumpSyms), "-s", store, binary, binary + ".dSYM"])
    try #require(dumped.exitCode == 0, "dump_syms: \(dumped.error)")
    let uuidLine = try runChild(["llvm-dwarfdump", "--uuid", binary]).output  // "UUID: 4C4C4422-... (arm64) PATH"
    let uuid = try #require(uuidLine.split(separator: " ").dropFirst().first.map { $0.filter { $0 != "-" }.lowercased() })
    let ids = directoryNames(store + "/macho-c-O2")
    try #require(ids.count == 1, "\(ids)")
    let symbolFile = "\(store)/macho-c-O2/\(ids[0])/macho-c-O2.sym"
    // Frames a little past the start of each function the .sym has (a report of calls between them).
    let starts = (readFile(symbolFile) ?? "").split(separator: "\n").filter { $0.hasPrefix("FUNC ") }.compactMap { line in
      line.split(separator: " ").first { UInt64($0, radix: 16) != nil && $0 != "m" }.flatMap { UInt64($0, radix: 16) }
    }
    try #require(starts.count >= 3, "\(starts)")
    let load: UInt64 = 0x1_0400_0000
    var text = "Process:             macho-c-O2 [77]\nPath:                /Applications/Gone.app/macho-c-O2\n"
    text += "Code Type:           ARM-64\nOS Version:          macOS 14.0 (23A344)\nCrashed Thread:  0\n\nThread 0 Crashed:\n"
    for (index, start) in starts.enumerated() {
      let offset = start + 8
      text += String(index).padding(toLength: 4, withPad: " ", startingAt: 0) + "macho-c-O2".padding(toLength: 30, withPad: " ", startingAt: 0)
        + "\t0x" + hexDigits(load + offset, width: 16) + " 0x" + hexDigits(load) + " + \(offset)\n"
    }
    text += "\nBinary Images:\n       0x\(hexDigits(load)) -        0x\(hexDigits(load + 0xFFFF)) macho-c-O2 arm64  <\(uuid)> "
      + "/Applications/Gone.app/macho-c-O2\n"
    let report = directory + "/macho.crash"
    try writeFile(report, text)
    let named = try Self.symbolicate(report, image: "macho-c-O2", arguments: ["--symbols", store])
    try #require(named.frames.count == starts.count, "\(named.frames)")
    // Frame 0 is where it stopped; the others are return addresses, looked up less 1.
    let expected = try Self.symbolicLookups(symbolFile, named.frames.map { $0.number > 0 ? $0.offset - 1 : $0.offset }, arch: "arm64")
    for (frame, want) in zip(named.frames, expected) {
      #expect(!want.isEmpty && frame.status == "symbolicated" && frame.functions == want,
              "+0x\(hexDigits(frame.offset)): \(frame.functions) against \(want)")
    }
  }

  /// The build-id the sanitizer's report gives for the program.
  static func buildID(_ report: String) -> String? {
    guard let text = readFile(report), let line = text.split(separator: "\n").first(where: { $0.contains("symbol-store-asan+0x") }),
          let start = line.range(of: "(BuildId: ") else { return nil }
    return String(line[start.upperBound...].prefix { $0 != ")" })
  }
}
