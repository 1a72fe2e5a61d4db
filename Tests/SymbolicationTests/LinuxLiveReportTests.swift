import Glibc
import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication

/// C programs built with the sanitizers (Tests/Programs/sanitizer-*.c) and one printing its stack with
/// glibc's `backtrace_symbols_fd` (Tests/Programs/glibc-backtrace.c), compiled once per test run.
enum LinuxPrograms {
  static let haveClang = haveTool("clang")

  /// Swift's own clang ships compiler-rt; its TSan runtime also needs the toolchain's libdispatch.
  static let toolchainLibraries: String? = {
    guard let clang = which("clang") else { return nil }
    let folder = String(clang[..<(clang.lastIndex(of: "/") ?? clang.endIndex)]) + "/../lib/swift/linux"
    return access(folder + "/libdispatch.so", R_OK) == 0 ? folder : nil
  }()

  static let directory: Result<String, TestSupportError> = Result { try makeTemporaryDirectory("imagelog-linux-reports") }
    .mapError { TestSupportError("\($0)") }

  /// Builds `source` with `flags` (`-Wl,--build-id`: the report then names the program's build-id).
  static func build(_ source: String, _ output: String, _ flags: [String]) -> Result<String, TestSupportError> {
    do {
      let path = try directory.get() + "/" + output
      var arguments = ["clang", "-g", "-O0", "-Wl,--build-id"] + flags + [packageRoot + "/Tests/Programs/" + source, "-o", path]
      if flags.contains("-fsanitize=thread"), let libraries = toolchainLibraries {
        arguments += ["-L" + libraries, "-ldispatch", "-lBlocksRuntime", "-Wl,-rpath," + libraries]
      }
      let result = try runChild(arguments)
      guard result.status == 0 else { return .failure(TestSupportError("clang \(flags.joined(separator: " ")): \(result.error.suffix(400))")) }
      return .success(path)
    } catch let error as TestSupportError {
      return .failure(error)
    } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }

  static let asan = build("sanitizer-uaf.c", "uaf", ["-fsanitize=address"])
  static let tsan = build("sanitizer-race.c", "race", ["-fsanitize=thread"])
  static let ubsan = build("sanitizer-overflow.c", "overflow", ["-fsanitize=undefined"])
  static let backtrace = build("glibc-backtrace.c", "backtrace", [])
  static let backtraceDynamic = build("glibc-backtrace.c", "backtrace-rdynamic", ["-rdynamic"])

  /// One function of a frame: what a sanitizer's `symbolize=1` line says, or what imagelog found.
  struct Function: CustomStringConvertible {
    var name: String
    var file: String?
    var line: Int?
    var column: Int?
    var description: String { name + (file.map { " \($0):\(line ?? 0):\(column ?? 0)" } ?? "") }
  }

  /// The stacks of a sanitizer report printed with `symbolize=1`: `#N 0x… in NAME FILE:LINE:COL`,
  /// `#N 0x… in NAME (module+0x…)`, TSan's `#N NAME FILE:LINE:COL (module+0x…)`. A stack starts at `#0`.
  static func symbolizedStacks(_ text: String) -> [[Function]] {
    var stacks: [[Function]] = []
    for line in text.split(separator: "\n") {
      let trimmed = line.drop { $0 == " " }
      guard trimmed.hasPrefix("#"), let space = trimmed.firstIndex(of: " "), let number = Int(trimmed.dropFirst().prefix { $0.isNumber }),
            trimmed.dropFirst().prefix(while: { $0.isNumber }).count == trimmed.distance(from: trimmed.index(after: trimmed.startIndex), to: space)
      else { continue }
      var rest = trimmed[trimmed.index(after: space)...]
      if rest.hasPrefix("0x") { rest = rest.drop { $0 != " " }.dropFirst() }
      if rest.hasPrefix("in ") { rest = rest.dropFirst(3) }
      for _ in 0..<2 {  // `(module+0x…)`, then TSan's `(BuildId: …)` after it
        if rest.hasSuffix(")"), let open = rest.indices.last(where: { rest[$0...].hasPrefix(" (") }) { rest = rest[..<open] }
      }
      var function = Function(name: String(rest))
      if let lastSpace = rest.lastIndex(of: " ") {
        let location = rest[rest.index(after: lastSpace)...].split(separator: ":")
        if location.count >= 2, let lineNumber = Int(location[1]) {
          function = Function(name: String(rest[..<lastSpace]), file: String(location[0]), line: lineNumber,
                              column: location.count > 2 ? Int(location[2]) : nil)
        }
      }
      if number == 0 { stacks.append([]) }
      if !stacks.isEmpty { stacks[stacks.count - 1].append(function) }
    }
    return stacks
  }

  /// imagelog's functions for each stack of `report`, inlined ones first, as sanitizers list them.
  static func ourStacks(_ symbolicated: ProcessSnapshot) -> [[Function]] {
    var stacks: [[Function]] = []
    for frame in symbolicated.frames {
      while stacks.count <= frame.thread { stacks.append([]) }
      for function in frame.functions {
        stacks[frame.thread].append(Function(name: function.name ?? "???", file: function.file, line: function.line, column: function.column))
      }
      if frame.functions.isEmpty { stacks[frame.thread].append(Function(name: "<\(frame.status)>")) }
    }
    return stacks
  }

  /// `llvm-nm`'s defined symbols of `files`, name to addresses: two names are one function when they share one.
  static func symbolAddresses(_ files: [String]) throws -> [String: Set<UInt64>] {
    var table: [String: Set<UInt64>] = [:]
    for file in files {
      for dynamic in [false, true] {  // a stripped library has its exported symbols only
        let nm = try runChild(["llvm-nm", "--defined-only", "-C"] + (dynamic ? ["-D"] : []) + [file])
        for line in nm.output.split(separator: "\n") {
          let words = line.split(separator: " ", maxSplits: 2)
          guard words.count == 3, let address = UInt64(words[0], radix: 16) else { continue }
          let name = words[2].split(separator: "@").first.map(String.init) ?? String(words[2])  // `free@@GLIBC_2.2.5`
          table[name, default: []].insert(address)
        }
      }
    }
    return table
  }

  /// The files a report's frames were resolved in (binaries and their debug files), for `symbolAddresses`.
  static func filesUsed(_ symbolicated: ProcessSnapshot) -> [String] {
    var files: Set<String> = []
    for resolution in symbolicated.resolutions {
      switch resolution.status {
      case .found(let path, _), .unverified(let path): files.insert(path)
      default: break
      }
      if let path = symbolicated.images[resolution.imageIndex].path { files.insert(path) }
    }
    return files.sorted()
  }

  /// `./csu/x.c` and `csu/x.c` are one file (llvm-symbolizer keeps the compile folder `.`).
  static func samePath(_ a: String, _ b: String) -> Bool {
    func normal(_ path: String) -> Substring { path.hasPrefix("./") ? path.dropFirst(2) : path[...] }
    return normal(a) == normal(b)
  }

  /// One function under two names: the same name; a versioned symbol (`__libc_start_main@GLIBC_2.2.5`);
  /// compiler-rt's interceptor for `X`, which its `INTERCEPTOR` macro defines as `___interceptor_X` (or
  /// `__interceptor_X`) while DWARF, and so the sanitizer, names it `X`; or aliases at one address (llvm-nm).
  static func sameName(_ ours: String, _ theirs: String, _ addresses: [String: Set<UInt64>]) -> Bool {
    if ours == theirs || ours.hasPrefix(theirs + "@") { return true }
    if ours == "___interceptor_" + theirs || ours == "__interceptor_" + theirs { return true }
    guard let a = addresses[ours], let b = addresses[theirs] else { return false }
    return !a.isDisjoint(with: b)
  }

  /// True when `mine` (imagelog's functions of one stack) equals `theirs` (the sanitizer's): names by
  /// `sameName`, file:line:column where the sanitizer gives them. `extraTail` frames may follow in
  /// `mine` (TSan's symbolized report leaves out its runtime's thread start and what is below `main`).
  static func sameStack(_ mine: [Function], _ theirs: [Function], _ addresses: [String: Set<UInt64>], extraTail: Bool) -> Bool {
    guard mine.count == theirs.count || (extraTail && mine.count > theirs.count) else { return false }
    for (a, b) in zip(mine, theirs) {
      guard sameName(a.name, b.name, addresses) else { return false }
      if let file = b.file {
        guard let ours = a.file, samePath(ours, file), a.line == b.line else { return false }
        if let column = b.column, column > 0, a.column != column { return false }
      }
    }
    if mine.count > theirs.count {
      let last = theirs.last?.name
      let tail = mine[theirs.count...].map(\.name)
      return last == "main" || tail == ["__tsan_thread_start_func"]
    }
    return true
  }
}

@Suite(.enabled(if: LinuxPrograms.haveClang, "needs clang with compiler-rt (Swift's toolchain ships it)"))
struct LinuxLiveReportTests {
  /// Runs `program` with `symbolize=0` and `symbolize=1` and compares imagelog's reading of the first
  /// with the second: the same stacks, the same functions (or aliases of them), the same file:line:column.
  func compare(_ program: Result<String, TestSupportError>, optionsVariable: String, extraOptions: String = "",
               expectedStacks: Int, allowsExtraTail: Bool = false) throws {
    let path = try program.get()
    let raw = try runChild([path], environment: [optionsVariable: "symbolize=0" + extraOptions])
    // The sanitizer's own symbolizer is the current llvm-symbolizer, not the first on PATH (LLVM 14 here,
    // which doubles a relative DWARF 5 directory 0: see `currentLLVMSymbolizer`).
    let symbolizer = currentLLVMSymbolizer.map { ":external_symbolizer_path=" + $0 } ?? ""
    let symbolized = try runChild([path], environment: [optionsVariable: "symbolize=1" + symbolizer + extraOptions])
    let expected = LinuxPrograms.symbolizedStacks(symbolized.error)
    try #require(expected.count == expectedStacks, "the sanitizer printed \(expected.count) stacks:\n\(symbolized.error)")

    let report = try ReportParser.parse(raw.error)
    #expect(report.format == .sanitizer)
    #expect(report.problems.isEmpty, "\(report.problems)")
    var options = SymbolicationOptions()
    options.searchPaths = [String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])]
    let result = Symbolicator.symbolicated(report, options: options)
    let ours = LinuxPrograms.ourStacks(result)
    #expect(ours.count == expected.count)
    let addresses = try LinuxPrograms.symbolAddresses(LinuxPrograms.filesUsed(result))
    // Each of the sanitizer's stacks equals one of ours. Matched as sets: two runs of a racy program may
    // list the same stacks in another order (which thread's write came first).
    var unmatched = Array(ours.indices)
    for (stack, theirs) in expected.enumerated() {
      let match = unmatched.firstIndex { LinuxPrograms.sameStack(ours[$0], theirs, addresses, extraTail: allowsExtraTail) }
      #expect(match != nil, "the sanitizer's stack \(stack) \(theirs) is none of ours: \(unmatched.map { ours[$0] })")
      if let match { unmatched.remove(at: match) }
    }
    // The text keeps every line and puts the function into each frame line.
    let text = result.formatted(.report)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    for frame in report.frames {
      guard let line = frame.line else { continue }
      let original = report.lines[line]
      #expect(lines[line].hasPrefix(original.prefix(frame.symbolColumn ?? 0)) && lines[line].hasSuffix(original.dropFirst(frame.symbolColumn ?? 0)))
    }
    // The program was linked with a build-id, so its frames are matched by it, not unverified.
    #expect(!text.contains("unverified"), "\(text)")
  }

  @Test func addressSanitizerEveryStack() throws {
    // The access, freed by, previously allocated by, and the thread's creation.
    try compare(LinuxPrograms.asan, optionsVariable: "ASAN_OPTIONS", expectedStacks: 4)
  }

  @Test func threadSanitizerEveryStack() throws {
    // Two accesses and the two threads' creation stacks; TSan prints no addresses, only module offsets.
    try compare(LinuxPrograms.tsan, optionsVariable: "TSAN_OPTIONS", expectedStacks: 4, allowsExtraTail: true)
  }

  @Test func undefinedBehaviorSanitizerStack() throws {
    try compare(LinuxPrograms.ubsan, optionsVariable: "UBSAN_OPTIONS", extraOptions: ":print_stacktrace=1", expectedStacks: 1)
  }

  /// glibc's `backtrace_symbols_fd`, both with `(+0xoffset)` frames and (`-rdynamic`) `(symbol+0xoffset)`
  /// ones: each frame's function is llvm-symbolizer's for the module and the call's offset, and every
  /// frame says it was matched by path only.
  @Test(.enabled(if: haveTool("llvm-symbolizer") && haveTool("llvm-nm"), "needs llvm-symbolizer and llvm-nm as the oracle"),
        arguments: ["backtrace", "backtrace-rdynamic"])
  func glibcBacktrace(variant: String) throws {
    let path = try (variant == "backtrace" ? LinuxPrograms.backtrace : LinuxPrograms.backtraceDynamic).get()
    let run = try runChild([path])
    let report = try ReportParser.parse(run.error)
    #expect(report.format == .glibcBacktrace)
    #expect(report.frames.count >= 7, "\(run.error)")
    let result = Symbolicator.symbolicated(report)
    let files = LinuxPrograms.filesUsed(result)
    let addresses = try LinuxPrograms.symbolAddresses(files)
    for (frame, answer) in zip(report.frames, result.frames) {
      let image = try #require(frame.imageIndex.map { report.images[$0] }, "frame \(frame.index) has no image")
      let modulePath = try #require(image.path)
      // The oracle's offset: from the line's `+0x…`, or from llvm-nm's address of the line's symbol.
      var offset: UInt64
      if let located = frame.symbolOffset {
        let start = try #require(LinuxPrograms.symbolAddresses([modulePath]).merging(addresses) { a, _ in a }[located.name]?.min(),
                                 "llvm-nm has no \(located.name)")
        offset = start + located.offset
      } else {
        offset = frame.address - image.loadAddress
      }
      offset -= 1  // a return address: the call is before it
      let oracle = try runChild(["llvm-symbolizer", "--obj=" + modulePath, "--no-inlines", "--functions=linkage",
                                   "0x" + String(offset, radix: 16)])
      let expected = String(oracle.output.split(separator: "\n").first ?? "")
      let ours = answer.functions.last?.rawName ?? answer.functions.last?.name
      let same = ours.map { LinuxPrograms.sameName($0, expected, addresses) || $0.hasPrefix(expected + "@") } == true
      #expect(same,
              "frame \(frame.index) \(modulePath)+0x\(String(offset, radix: 16)): ours \(ours ?? "none"), llvm-symbolizer \(expected)")
    }
    let text = result.formatted(.report)
    let marked = text.split(separator: "\n").filter { $0.hasSuffix("[unverified: the report has no build-id]") }
    #expect(marked.count == report.frames.count, "\(text)")
    #expect(text.contains("  unverified: the report has no build-id: \(path.split(separator: "/").last ?? "") \(path)"), "\(text)")
  }
}
