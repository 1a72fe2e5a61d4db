#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// What the minidump CLI tests share: a dump as `minidump-stackwalk --json` (rust-minidump 0.25.0) sees
/// it, with symbols `dump_syms` wrote into a Breakpad store, and as the built `imagelog` sees it
/// (`symbolicate --format json`, `file --format json` and `--format detailed`), in one shape, and the
/// comparison of the two.
enum MinidumpCLI {
  static let imagelog = builtProduct("imagelog")
  static let stackwalk = pipelineTool("minidump-stackwalk")
  static let dumpSyms = pipelineTool("dump_syms")
  static let crashpadHandler = pipelineTool("crashpad_handler")
  /// minidump-stackwalk and dump_syms, the oracles of every comparison.
  static let haveOracles = stackwalk != nil && dumpSyms != nil

  /// One frame: the module it is in and its offset from the module's base, its address (a caller's
  /// return address), and how it was found (minidump-stackwalk's `context`, `cfi`, `frame_pointer`,
  /// `scan`; imagelog's JSON names only `frame-pointer` and `stack-scan`).
  struct Frame: Equatable, CustomStringConvertible {
    var module: String?
    var offset: UInt64?
    var address: UInt64
    var trust: String?
    var symbol: String? = nil
    var description: String {
      "\(module ?? "?")+0x\(hexDigits(offset ?? 0)) (0x\(hexDigits(address)) \(trust ?? "-")\(symbol.map { " " + $0 } ?? ""))"
    }
  }

  struct Thread {
    var tid: UInt64
    var name: String?
    var frames: [Frame]
  }

  struct Module: Equatable {
    var name: String
    var base: UInt64
    /// The build-id as hex (minidump-stackwalk's `code_id` for an ELF module).
    var buildID: String?
    /// Breakpad's debug id: the build-id's first 16 bytes as a byte-swapped GUID, then the age (0).
    var debugID: String?
  }

  /// A dump as one reader sees it.
  struct View {
    var threads: [Thread] = []
    var crashedTID: UInt64?
    var signal: Int?
    var crashAddress: UInt64?
    /// The crashed thread's registers at the crash.
    var registers: [String: UInt64] = [:]
    var modules: [Module] = []
    /// minidump-stackwalk's `system_info.cpu_info` (`family 25 model 1 stepping 1` on x86).
    var cpuInfo: String?
  }

  /// The signal numbers minidump-stackwalk names in `crash_info.type` (`SIGSEGV / SEGV_MAPERR`).
  static let signalNumbers = ["SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8, "SIGSEGV": 11]

  /// A `"0x…"` JSON string (or a number) as a value.
  static func hex(_ value: JSONValue?) -> UInt64? {
    if case .string(let text)? = value, text.hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) }
    return value?.unsigned
  }

  /// `minidump-stackwalk --json [--symbols-path STORE] DUMP`, which must succeed.
  static func stackwalkView(_ dump: String, symbols store: String? = nil,
                            sourceLocation: SourceLocation = #_sourceLocation) throws -> View {
    let tool = try #require(stackwalk, sourceLocation: sourceLocation)
    let run = try runChild([tool, "--json"] + (store.map { ["--symbols-path", $0] } ?? []) + [dump])
    try #require(run.exitCode == 0, "minidump-stackwalk failed on \(dump): \(run.error)", sourceLocation: sourceLocation)
    let json = try JSONValue.parse(run.output[...])
    #expect(json["status"]?.string == "OK", "minidump-stackwalk: status \(String(describing: json["status"]))",
            sourceLocation: sourceLocation)
    var view = View()
    for thread in json["threads"]?.array ?? [] {
      // A caller's `offset` is its return address less one (inside the call, where its line is):
      // made the return address again, as imagelog and eu-stack give it.
      let frames = (thread["frames"]?.array ?? []).enumerated().map { index, frame in
        let back: UInt64 = index == 0 ? 0 : 1
        return Frame(module: frame["module"]?.string, offset: hex(frame["module_offset"]).map { $0 + back },
                     address: (hex(frame["offset"]) ?? 0) + back, trust: frame["trust"]?.string, symbol: frame["function"]?.string)
      }
      view.threads.append(Thread(tid: thread["thread_id"]?.unsigned ?? 0, name: thread["thread_name"]?.string, frames: frames))
    }
    if let index = json["crash_info"]?["crashing_thread"]?.integer, index < view.threads.count {
      view.crashedTID = view.threads[index].tid
    }
    if let type = json["crash_info"]?["type"]?.string {
      view.signal = signalNumbers[String(type.split(separator: " ").first ?? "")]
      view.crashAddress = hex(json["crash_info"]?["address"])
    }
    view.cpuInfo = json["system_info"]?["cpu_info"]?.string
    if case .object(let members)? = json["crashing_thread"]?["frames"]?.array?.first?["registers"] {
      for (name, value) in members { view.registers[name] = hex(value) }
    }
    for module in json["modules"]?.array ?? [] {
      view.modules.append(Module(name: module["filename"]?.string ?? "", base: hex(module["base_addr"]) ?? 0,
                                 buildID: module["code_id"]?.string, debugID: module["debug_id"]?.string))
    }
    return view
  }

  /// `imagelog symbolicate --format json --no-lines DUMP` (threads, frames, the crashed thread's
  /// registers), `imagelog file --format json DUMP` (every module) and `--format detailed` (the
  /// signal and its address). `search` folders go to symbolicate as `--search`, and `arguments` too.
  static func imagelogView(_ dump: String, search: [String] = [], arguments: [String] = [],
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> View {
    let run = try runChild([imagelog, "symbolicate", "--format", "json", "--no-lines", "--demangle", "none"]
                           + search.flatMap { ["--search", $0] } + arguments + [dump])
    try #require(run.exitCode == 0, "imagelog symbolicate failed on \(dump): \(run.error)", sourceLocation: sourceLocation)
    #expect(run.error.isEmpty, "imagelog symbolicate said: \(run.error)", sourceLocation: sourceLocation)
    if CrashDocumentSchema.unavailableReason == nil {
      #expect(try CrashDocumentSchema.problems(run.output) == [], "\(dump)", sourceLocation: sourceLocation)
    }
    let json = try JSONValue.parse(run.output[...])
    var view = View()
    var indexes: [Int: Int] = [:]
    for thread in json["threads"]?.array ?? [] {
      let tid = thread["tid"]?.unsigned ?? 0
      indexes[thread["index"]?.integer ?? -1] = view.threads.count
      view.threads.append(Thread(tid: tid, name: thread["name"]?.string, frames: []))
      guard thread["crashed"] == .bool(true) else { continue }
      view.crashedTID = tid
      if case .object(let members)? = thread["registers"] {
        for (name, value) in members { view.registers[name] = hex(value) }
      }
    }
    for frame in json["frames"]?.array ?? [] {
      guard let thread = frame["thread"]?.integer.flatMap({ indexes[$0] }) else {
        Issue.record("a frame of no thread: \(frame)", sourceLocation: sourceLocation)
        continue
      }
      #expect(frame["frame"]?.integer == view.threads[thread].frames.count, sourceLocation: sourceLocation)
      view.threads[thread].frames.append(Frame(module: frame["image"]?.string, offset: frame["imageOffset"]?.unsigned,
                                               address: hex(frame["address"]) ?? 0, trust: frame["trust"]?.string,
                                               symbol: frame["mangledSymbol"]?.string ?? frame["symbol"]?.string))
    }
    let files = try runChild([imagelog, "file", "--format", "json", dump])
    try #require(files.exitCode == 0 && files.error.isEmpty, "imagelog file failed on \(dump): \(files.error)",
                 sourceLocation: sourceLocation)
    for image in try JSONValue.parse(files.output[...]).array ?? [] {
      // imagelog prints the debug id as a GUID; Breakpad's form has no dashes and ends in the age, 0.
      let guid = image["debugID"]?.string.map { String($0.filter { $0 != "-" }) + "0" }
      view.modules.append(Module(name: image["name"]?.string ?? "", base: hex(image["loadAddress"]) ?? 0,
                                 buildID: image["buildID"]?.string, debugID: guid))
    }
    let details = try runChild([imagelog, "file", "--format", "detailed", dump])
    if let line = details.output.split(separator: "\n").first(where: { $0.hasPrefix("  signal:        signal ") }) {
      // "  signal:        signal 11, code 1, address 0x0000000000000028"
      let words = line.split(separator: " ")
      view.signal = Int(words[2].dropLast())
      view.crashAddress = words.last.flatMap { UInt64($0.dropFirst(2), radix: 16) }
    }
    return view
  }

  /// imagelog's view of a dump against minidump-stackwalk's: the same threads (tids in order, names),
  /// the same crashed thread, signal, address and registers, the same modules (name, base, build-id,
  /// debug id), and in every thread the same frames (module and offset, and address) wherever
  /// minidump-stackwalk did not scan: up to its first scanned frame, or all of them, equal in number,
  /// when it scanned none. Returns how many frames were compared.
  @discardableResult
  static func expectSameWalk(_ ours: View, _ theirs: View, _ label: String,
                             sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    #expect(ours.threads.map(\.tid) == theirs.threads.map(\.tid), "\(label): tids", sourceLocation: sourceLocation)
    #expect(ours.threads.map(\.name) == theirs.threads.map(\.name), "\(label): thread names", sourceLocation: sourceLocation)
    #expect(ours.crashedTID == theirs.crashedTID, "\(label): crashed thread", sourceLocation: sourceLocation)
    #expect(ours.signal == theirs.signal, "\(label): signal", sourceLocation: sourceLocation)
    #expect(ours.crashAddress == theirs.crashAddress, "\(label): crash address", sourceLocation: sourceLocation)
    var registers = 0
    for (name, value) in theirs.registers {
      #expect(ours.registers[name] == value, "\(label): register \(name)", sourceLocation: sourceLocation)
      registers += 1
    }
    #expect(theirs.crashedTID == nil || registers >= 17, "\(label): \(registers) registers compared", sourceLocation: sourceLocation)
    #expect(ours.modules == theirs.modules, "\(label): modules\n\(ours.modules)\n\(theirs.modules)", sourceLocation: sourceLocation)
    var compared = 0
    for (mine, other) in zip(ours.threads, theirs.threads) {
      let trusted = other.frames.prefix { $0.trust != "scan" }
      let text = "\(label): tid \(other.tid)\nours:  \(mine.frames)\ntheirs: \(other.frames)"
      if trusted.count == other.frames.count {
        #expect(mine.frames.count == other.frames.count, "\(text)", sourceLocation: sourceLocation)
      }
      for (index, (a, b)) in zip(mine.frames, trusted).enumerated() {
        #expect(a.module == b.module && a.offset == b.offset && a.address == b.address, "frame \(index): \(text)",
                sourceLocation: sourceLocation)
        compared += 1
      }
      #expect(mine.frames.count >= trusted.count, "\(text)", sourceLocation: sourceLocation)
    }
    return compared
  }

  /// The folders the tests look for modules' files in, after their own: the system's library folders
  /// and the Swift runtime's (beside `swiftc`).
  static let systemFolders: [String] = {
    var folders = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib/aarch64-linux-gnu",
                   "/usr/lib/aarch64-linux-gnu"]
    if let swiftc = which("swiftc"), let resolved = realpath(swiftc, nil) {
      let path = String(cString: resolved)
      free(resolved)
      folders.append(path.split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/")
                     + "/lib/swift/linux")
    }
    return folders
  }()

  /// A Breakpad symbol store (`STORE/NAME/DEBUGID/NAME.sym`) made by `dump_syms -s` from the file of
  /// every module in `modules` but the vDSO (which has no file): each looked for by name in `folders`,
  /// then `systemFolders`. Returns the store and each name's debug ids from the `MODULE` lines
  /// dump_syms wrote.
  static func symbolStore(for modules: [Module], folders: [String], in directory: String,
                          sourceLocation: SourceLocation = #_sourceLocation) throws -> (path: String, debugIDs: [String: Set<String>]) {
    let tool = try #require(dumpSyms, sourceLocation: sourceLocation)
    let store = directory + "/symbols"
    let run = try runChild([tool, "-s", store] + moduleFiles(for: modules, folders: folders))
    try #require(run.exitCode == 0, "dump_syms failed: \(run.error)", sourceLocation: sourceLocation)
    var ids: [String: Set<String>] = [:]
    for name in directoryNames(store) {
      for id in directoryNames(store + "/" + name) {
        // "MODULE Linux x86_64 DEBUGID NAME"
        let first = readFile("\(store)/\(name)/\(id)/\(name).sym")?.split(separator: "\n").first ?? ""
        let words = first.split(separator: " ")
        #expect(words.count == 5 && words[0] == "MODULE" && words[3] == id && words[4] == name, "\(first)",
                sourceLocation: sourceLocation)
        ids[name, default: []].insert(String(words.count > 3 ? words[3] : ""))
      }
    }
    return (store, ids)
  }

  /// The file of every module in `modules` but the vDSO (which has no file): each looked for by name
  /// in `folders`, then `systemFolders`, its links resolved.
  static func moduleFiles(for modules: [Module], folders: [String]) -> [String] {
    var files: [String] = []
    for module in modules where !module.name.contains("vdso") && module.name != "linux-gate.so.1" {
      for folder in folders + systemFolders {
        guard let resolved = realpath(folder + "/" + module.name, nil) else { continue }
        let path = String(cString: resolved)
        free(resolved)
        if !files.contains(path) { files.append(path) }
      }
    }
    return files
  }

  /// Every module of `view` but the vDSO has its symbols in the store under its own debug id: dump_syms
  /// gave its file the debug id the dump holds. Returns how many were checked.
  @discardableResult
  static func expectDebugIDsOfDumpSyms(_ view: View, _ debugIDs: [String: Set<String>], _ label: String,
                                      sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    var checked = 0
    for module in view.modules where !module.name.contains("vdso") {
      #expect(module.debugID.map { debugIDs[module.name]?.contains($0) == true } == true,
              "\(label): \(module.name) debug id \(module.debugID ?? "none"); dump_syms: \(debugIDs[module.name] ?? [])",
              sourceLocation: sourceLocation)
      checked += 1
    }
    return checked
  }

  /// eu-stack's frame addresses by tid (`eu-stack -p PID` or `eu-stack --core CORE`), in its thread order.
  static func euStack(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> [EuStackThread] {
    let run = try runChild(["eu-stack"] + arguments)
    let threads = EuStackThread.parse(run.output)
    try #require(!threads.isEmpty, "eu-stack \(arguments) printed no thread: \(run.error)", sourceLocation: sourceLocation)
    return threads
  }

  /// A view's frames against eu-stack's, thread by thread (by tid): the same addresses in the same
  /// order; with `names`, the same functions too (as glibc's aliases compare). Returns how many frames
  /// were compared.
  @discardableResult
  static func expectSameFrames(_ view: View, as theirs: [EuStackThread], names: Bool, _ label: String,
                               sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    #expect(Set(view.threads.map(\.tid)) == Set(theirs.map { UInt64($0.tid) }), "\(label): threads", sourceLocation: sourceLocation)
    var compared = 0
    for other in theirs {
      guard let mine = view.threads.first(where: { $0.tid == UInt64(other.tid) }) else { continue }
      let text = "\(label): tid \(other.tid)\nours:     \(mine.frames)\neu-stack: \(other.frames)"
      #expect(mine.frames.map(\.address) == other.frames.map(\.address), "\(text)", sourceLocation: sourceLocation)
      if names {
        #expect(mine.frames.map { PidThreadsCommandTests.canonical($0.symbol) } == other.frames.map { PidThreadsCommandTests.canonical($0.name) },
                "\(text)", sourceLocation: sourceLocation)
      }
      compared += other.frames.count
    }
    return compared
  }

  /// Tests/Programs/process-threads.c built in `directory` and started with 3 workers: returned once its
  /// 4 threads are asleep in their system calls (read, nanosleep, a condition variable; the main thread
  /// in pause).
  static func startBlockedThreads(in directory: String) throws -> RunningChild {
    let child = try RunningChild([try buildThreadsProgram(in: directory), "3"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 4)
    return child
  }

  /// The folders of the files `pid` maps (/proc/PID/maps), where its modules' files are.
  static func mappedFolders(of pid: pid_t) -> [String] {
    var folders: [String] = []
    for line in (readFile("/proc/\(pid)/maps") ?? "").split(separator: "\n") {
      guard let slash = line.firstIndex(of: "/"), let last = line.lastIndex(of: "/") else { continue }
      let folder = String(line[slash..<last])
      if !folders.contains(folder) { folders.append(folder) }
    }
    return folders
  }

  /// Runs `arguments` (a program that crashes with Crashpad's handler set up: minidump-crashpad.c's
  /// signal handler) and returns the dump the handler wrote under `database/pending` and the tids the
  /// program printed on its "ready PID TID..." line. It must die of `signal`.
  static func crashpadDump(_ arguments: [String], database: String, signal: Int32, environment: [String: String] = [:],
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> (path: String, ready: [UInt64]) {
    let run = try runChild(arguments, environment: environment, timeoutSeconds: 120)
    try #require(!run.timedOut, "\(arguments[0]) hung", sourceLocation: sourceLocation)
    try #require(run.signal == signal, "\(arguments[0]) should die of signal \(signal): \(run.status)\n\(run.output)\n\(run.error)",
                 sourceLocation: sourceLocation)
    let ready = run.output.split(separator: "\n").first { $0.hasPrefix("ready ") }
    let ids = try #require(ready, "no ready line: \(run.output)", sourceLocation: sourceLocation)
      .split(separator: " ").dropFirst().compactMap { UInt64($0) }
    let dumps = directoryNames(database + "/pending").filter { $0.hasSuffix(".dmp") }
    try #require(dumps.count == 1, "Crashpad wrote \(dumps): \(run.error)", sourceLocation: sourceLocation)
    return (database + "/pending/" + dumps[0], ids)
  }
}
