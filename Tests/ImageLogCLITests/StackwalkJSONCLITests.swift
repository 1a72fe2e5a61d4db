#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog symbolicate --format stackwalk-json` held to `minidump-stackwalk --json --symbols-path
/// STORE` on the same dump: every field both fill is equal (the field dumps of other writers in
/// Tests/ImageReadersTests/Fixtures/minidump-field, and a Crashpad dump made here). What is not
/// compared, and why:
/// - frames past the first whose address differs: the two unwinders may part (minidump-stackwalk
///   scans the stack where imagelog stops); the walk itself is held to minidump-stackwalk by
///   MinidumpCrashpadCLITests. `frame_count` follows.
/// - `modules[].version`, `corrupt_symbols`, and the fields imagelog leaves `null` (the doc comment of
///   `stackwalkJSON()` says why); `loaded_symbols`/`missing_symbols` only for modules a compared frame
///   is in (each tool looks only where its frames are).
/// - `system_info.cpu_count` of a dump: imagelog leaves it null (`stackwalkJSON()` says why).
/// - `system_info.os_ver` of a Linux dump: the same words, spaced as each joins them.
/// - names in system libraries imagelog reads itself (a Crashpad dump's libc): another alias at the
///   same address may be chosen (`__read` for dump_syms's `read`), and imagelog does not take the
///   store's names for a file it found; `function_offset` is compared where both name the frame.
/// - frames in a module whose `.sym` minidump-stackwalk calls corrupt (`linux_inline`'s): it names none.
/// - registers only imagelog names (`rfl`, `cr2`): the shared names' values are compared.
@Suite struct StackwalkJSONCLITests {
  static let canRun = MinidumpCLI.stackwalk != nil
  static let fieldFolder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field"
  static let stores = ["breakpad", "rust-minidump"].map { fieldFolder + "/" + $0 + "/symbols" }
  static let fieldDumps = ["breakpad", "rust-minidump"].flatMap { sub in
    directoryNames(fieldFolder + "/" + sub).filter { $0.hasSuffix(".dmp") }.sorted().map { sub + "/" + $0 }
  }

  static func theirs(_ dump: String, stores: [String]) throws -> JSONValue {
    let tool = try #require(MinidumpCLI.stackwalk)
    let run = try runChild([tool, "--json"] + stores.flatMap { ["--symbols-path", $0] } + [dump])
    try #require(run.exitCode == 0, "minidump-stackwalk: \(run.error)")
    return try JSONValue.parse(run.output[...])
  }

  static func ours(_ arguments: [String]) throws -> JSONValue {
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "stackwalk-json"] + arguments,
                           environment: ["DEBUGINFOD_URLS": ""])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    return try JSONValue.parse(run.output[...])
  }

  /// A `"0x…"` address as a number, so that 8 and 16 digits compare.
  static func address(_ value: JSONValue?) -> UInt64? { MinidumpCLI.hex(value) }

  /// Compares every field both fill; returns how many frames were compared, and in `partings` where
  /// each thread's walks part.
  @discardableResult
  static func expectEqualWhereBothFill(_ ours: JSONValue, _ theirs: JSONValue, _ label: String,
                                       partings: inout [String], ownFiles: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    func same(_ path: String, _ a: JSONValue?, _ b: JSONValue?, addresses: Bool = false) {
      guard let a, a != .null else { return }  // imagelog leaves it null: not filled
      if addresses {
        #expect(address(a) == address(b), "\(label) \(path): ours \(a.serialized()) theirs \(b?.serialized() ?? "-")",
                sourceLocation: sourceLocation)
      } else {
        #expect(a == b, "\(label) \(path): ours \(a.serialized()) theirs \(b?.serialized() ?? "-")", sourceLocation: sourceLocation)
      }
    }
    same("status", ours["status"], theirs["status"])
    let os = theirs["system_info"]?["os"]?.string
    for key in ["os", "cpu_arch", "cpu_count"] + (os == "Linux" ? [] : ["os_ver"]) {
      same("system_info." + key, ours["system_info"]?[key], theirs["system_info"]?[key])
    }
    same("crash_info.type", ours["crash_info"]?["type"], theirs["crash_info"]?["type"])
    same("crash_info.address", ours["crash_info"]?["address"], theirs["crash_info"]?["address"], addresses: true)
    same("crash_info.crashing_thread", ours["crash_info"]?["crashing_thread"], theirs["crash_info"]?["crashing_thread"])
    #expect((ours["crash_info"]?["crashing_thread"] ?? .null) == (theirs["crash_info"]?["crashing_thread"] ?? .null),
            "\(label): crashing thread", sourceLocation: sourceLocation)
    same("pid", ours["pid"], theirs["pid"])
    same("thread_count", ours["thread_count"], theirs["thread_count"])
    same("main_module", ours["main_module"], theirs["main_module"])
    // Modules, in the dump's order.
    let ourModules = ours["modules"]?.array ?? [], theirModules = theirs["modules"]?.array ?? []
    #expect(ourModules.count == theirModules.count, "\(label): modules", sourceLocation: sourceLocation)
    for (index, (a, b)) in zip(ourModules, theirModules).enumerated() {
      for key in ["filename", "code_id", "debug_file", "debug_id"] { same("modules[\(index)].\(key)", a[key], b[key]) }
      for key in ["base_addr", "end_addr"] { same("modules[\(index)].\(key)", a[key], b[key], addresses: true) }
    }
    // Threads, and their frames up to where the walks part.
    var compared = 0
    var modulesWithFrames: Set<String> = []
    // A module whose `.sym` minidump-stackwalk refused (`corrupt_symbols`) has no names there.
    let corrupt = Set(theirModules.filter { $0["corrupt_symbols"] == .bool(true) }.compactMap { $0["filename"]?.string })
    let ourThreads = ours["threads"]?.array ?? [], theirThreads = theirs["threads"]?.array ?? []
    #expect(ourThreads.count == theirThreads.count, "\(label): threads", sourceLocation: sourceLocation)
    for (index, (a, b)) in zip(ourThreads, theirThreads).enumerated() {
      same("threads[\(index)].thread_id", a["thread_id"], b["thread_id"])
      same("threads[\(index)].thread_name", a["thread_name"], b["thread_name"])
      for (number, (f, g)) in zip(a["frames"]?.array ?? [], b["frames"]?.array ?? []).enumerated() {
        guard address(f["offset"]) == address(g["offset"]) else {
          partings.append("thread \(index) frame \(number): ours \(f.serialized()) theirs \(g.serialized())")
          break
        }
        compared += 1
        let path = "threads[\(index)].frames[\(number)]"
        let named = !corrupt.contains(g["module"]?.string ?? "")
        // In a system library imagelog reads itself, its name may be another alias at the same address.
        // (and a name the store has that the file's own symbols lack).
        let own = ownFiles.contains(g["module"]?.string ?? "")
        let names = named && !own ? ["function", "file", "line", "inlines", "missing_symbols"] : []
        // One stated difference: on 32-bit Windows minidump-stackwalk walks by a `.sym`'s STACK WIN
        // programs (trust "cfi"), which imagelog does not read yet; it finds the same caller by the frame
        // pointer. The frame must be the same; only the trust may differ so.
        let stackWin = theirs["system_info"]?["cpu_arch"]?.string == "x86" && g["trust"] == .string("cfi")
          && f["trust"] == .string("frame_pointer")
        for key in ["frame", "module"] + (stackWin ? [] : ["trust"]) + names { same(path + "." + key, f[key], g[key]) }
        same(path + ".module_offset", f["module_offset"], g["module_offset"], addresses: true)
        if named, !own || (f["function"] != .null && g["function"] != .null) {
          same(path + ".function_offset", f["function_offset"], g["function_offset"], addresses: true)
        }
        if let module = f["module"]?.string { modulesWithFrames.insert(module) }
      }
    }
    for (index, (a, b)) in zip(ourModules, theirModules).enumerated() where modulesWithFrames.contains(a["filename"]?.string ?? "") {
      for key in ["loaded_symbols", "missing_symbols"] { same("modules[\(index)].\(key)", a[key], b[key]) }
    }
    // Unloaded modules (a Windows dump's stream): range and name; imagelog keeps no code id for them.
    let ourUnloaded = ours["unloaded_modules"]?.array ?? [], theirUnloaded = theirs["unloaded_modules"]?.array ?? []
    #expect(ourUnloaded.count == theirUnloaded.count, "\(label): unloaded_modules", sourceLocation: sourceLocation)
    for (index, (a, b)) in zip(ourUnloaded, theirUnloaded).enumerated() {
      same("unloaded_modules[\(index)].filename", a["filename"], b["filename"])
      for key in ["base_addr", "end_addr"] { same("unloaded_modules[\(index)].\(key)", a[key], b[key], addresses: true) }
    }
    // The crashing thread again, with its index and frame 0's registers.
    if let thread = ours["crashing_thread"] {
      same("crashing_thread.threads_index", thread["threads_index"], theirs["crashing_thread"]?["threads_index"])
      if case .object(let registers)? = thread["frames"]?.array?.first?["registers"] {
        let theirRegisters = theirs["crashing_thread"]?["frames"]?.array?.first?["registers"]
        var shared = 0
        for (name, value) in registers where theirRegisters?[name] != nil {
          same("crashing_thread registers." + name, value, theirRegisters?[name], addresses: true)
          shared += 1
        }
        #expect(shared > 0 || theirRegisters == nil, "\(label): no register in common", sourceLocation: sourceLocation)
      }
    } else {
      #expect(theirs["crashing_thread"] == nil || theirs["crashing_thread"] == .null, "\(label): crashing_thread",
              sourceLocation: sourceLocation)
    }
    return compared
  }

  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"), arguments: fieldDumps)
  func fieldDumpAsMinidumpStackwalkWritesIt(_ name: String) throws {
    let dump = Self.fieldFolder + "/" + name
    let theirs = try Self.theirs(dump, stores: Self.stores)
    let ours = try Self.ours(["--no-system-debug"] + Self.stores.flatMap { ["--symbols", $0] } + [dump])
    var partings: [String] = []
    let compared = Self.expectEqualWhereBothFill(ours, theirs, name, partings: &partings)
    let hasFrames = (theirs["threads"]?.array ?? []).contains { !($0["frames"]?.array ?? []).isEmpty }
    #expect(compared > 0 || !hasFrames, "\(name): no frame compared")
  }

  /// A dump Crashpad's handler wrote of a crash in a library (Tests/Programs/minidump-crashpad.c), with
  /// a store dump_syms made: every field both fill, and the whole crashing walk (CFI both sides).
  @Test(.enabled(if: MinidumpCrashpadCLITests.canRun, MinidumpCrashpadCLITests.reason))
  func crashpadDumpAsMinidumpStackwalkWritesIt() throws {
    let directory = try makeTemporaryDirectory("imagelog-stackwalk-json")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let dump = try Self.crashpadLibraryDump(in: directory)
    let unsymbolicated = try MinidumpCLI.stackwalkView(dump)
    let (store, _) = try MinidumpCLI.symbolStore(for: unsymbolicated.modules, folders: [directory], in: directory)
    let theirs = try Self.theirs(dump, stores: [store])
    // The store's names only (no system debug file), as minidump-stackwalk has only the store.
    let ours = try Self.ours(["--no-system-debug", "--symbols", store, dump])
    var partings: [String] = []
    // libc and the loader: imagelog reads the files themselves (their symbol tables), where several
    // names may share an address (`__read`, `read`; dump_syms kept one of them in the store), and the
    // store may name what the file's tables do not.
    let system = Set((theirs["modules"]?.array ?? []).compactMap { $0["filename"]?.string }.filter { !$0.contains("minidump-crashpad") })
    let compared = Self.expectEqualWhereBothFill(ours, theirs, "crashpad", partings: &partings, ownFiles: system)
    let crashed = try #require(theirs["crashing_thread"]?["frames"]?.array)
    #expect(compared >= crashed.count, "crashpad: \(compared) frames compared; \(partings)")
    #expect(ours["crashing_thread"]?["frames"]?.array?.first?["function"]?.string == "library_third")
  }

  /// A dump Crashpad's handler writes of minidump-crashpad.c crashing in its library (built in
  /// `directory` with build-ids and DWARF).
  static func crashpadLibraryDump(in directory: String) throws -> String {
    try MinidumpCrashpadCLITests.build(["gcc", "-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id",
                                        packageRoot + "/Tests/Programs/minidump-crashpad-lib.c", "-o", directory + "/libminidump-crashpad.so"])
    let program = directory + "/minidump-crashpad"
    try MinidumpCrashpadCLITests.build(["gcc", "-O2", "-g", "-pthread", "-Wl,--build-id", packageRoot + "/Tests/Programs/minidump-crashpad.c",
                                        "-L" + directory, "-Wl,--no-as-needed", "-lminidump-crashpad", "-Wl,-rpath," + directory, "-o", program])
    let handler = try #require(MinidumpCLI.crashpadHandler)
    return try MinidumpCLI.crashpadDump([program, handler, directory + "/database", "library"],
                                        database: directory + "/database", signal: SIGSEGV).path
  }

  /// Other sources in the same schema: an ASan report and imagelog's own crash report have the
  /// structure minidump-stackwalk's JSON has (the members siggen and Socorro read, of the right kinds).
  static let reportFolder = packageRoot + "/Tests/SymbolicationTests/Fixtures"
  /// The repository's report fixtures: Linux (sanitizers, systemd-coredump, Android, glibc, Swift's
  /// backtracer) and Apple (.crash, .ips).
  static let reportFixtures = ["linux-reports", "apple-reports"].flatMap { sub in
    // Not crash reports: hostile inputs, and a list of modules without a stack.
    directoryNames(reportFolder + "/" + sub).filter { !$0.hasSuffix(".md") && !$0.hasPrefix("hostile") && $0 != "coredump-modules.txt" }
      .sorted().map { sub + "/" + $0 }
  }

  /// Each document of a log of several reports (one per report, one after the other).
  static func documents(_ text: String) throws -> [JSONValue] {
    var rest = Substring(text)
    var values: [JSONValue] = []
    while !rest.allSatisfy(\.isWhitespace) {
      let (value, after) = try JSONValue.parsePrefix(rest)
      values.append(value)
      rest = after
    }
    return values
  }

  /// Every report fixture in the schema.
  @Test(arguments: reportFixtures)
  func reportInTheSchema(_ name: String) throws {
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "stackwalk-json", Self.reportFolder + "/" + name],
                           environment: ["DEBUGINFOD_URLS": ""])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let documents = try Self.documents(run.output)
    #expect(!documents.isEmpty)
    for document in documents { try Self.expectStackwalkShape(document, name) }
  }

  /// A core (Tests/ImageReadersTests/Fixtures/cores) and a live process (`pid --threads`) in the schema.
  @Test func coreInTheSchema() throws {
    let core = packageRoot + "/Tests/ImageReadersTests/Fixtures/cores/linkmap-x86_64.core"
    let json = try Self.ours([core])
    try Self.expectStackwalkShape(json, "core")
    #expect((json["threads"]?.array ?? []).contains { !($0["frames"]?.array ?? []).isEmpty })
    #expect(json["system_info"]?["cpu_arch"]?.string == "amd64")
  }

  @Test func liveProcessInTheSchema() throws {
    let directory = try makeTemporaryDirectory("imagelog-stackwalk-pid")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try MinidumpCLI.startBlockedThreads(in: directory)
    defer { child.stop() }
    let run = try runChild([MinidumpCLI.imagelog, "pid", "--threads", "--format", "stackwalk-json", String(child.pid)],
                           environment: ["DEBUGINFOD_URLS": ""])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let json = try JSONValue.parse(run.output[...])
    try Self.expectStackwalkShape(json, "pid")
    #expect(json["pid"]?.integer == Int(child.pid))
    #expect(json["thread_count"]?.integer == 4)
    #expect(json["crash_info"]?["type"] == .null && json["crashing_thread"] == nil)
    let names = (json["threads"]?.array ?? []).compactMap { $0["frames"]?.array?.first?["function"]?.string }
    #expect(names.count == 4, "\(names)")
  }

  static func expectStackwalkShape(_ json: JSONValue, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(json["status"]?.string == "OK", sourceLocation: sourceLocation)
    let crash = try #require(json["crash_info"], sourceLocation: sourceLocation)
    #expect(crash["type"]?.string != nil || crash["type"] == .null, "\(label): crash_info.type", sourceLocation: sourceLocation)
    let threads = try #require(json["threads"]?.array, sourceLocation: sourceLocation)
    #expect(json["thread_count"]?.integer == threads.count, sourceLocation: sourceLocation)
    for thread in threads {
      let frames = try #require(thread["frames"]?.array, sourceLocation: sourceLocation)
      #expect(thread["frame_count"]?.integer == frames.count, sourceLocation: sourceLocation)
      for (index, frame) in frames.enumerated() {
        #expect(frame["frame"]?.integer == index, sourceLocation: sourceLocation)
        #expect(frame["offset"]?.string?.hasPrefix("0x") == true, sourceLocation: sourceLocation)
        #expect(frame["missing_symbols"] == .bool(frame["function"]?.string == nil), sourceLocation: sourceLocation)
        #expect(["context", "cfi", "frame_pointer", "scan", "none"].contains(frame["trust"]?.string ?? ""), sourceLocation: sourceLocation)
      }
    }
    for module in json["modules"]?.array ?? [] {
      #expect(module["filename"]?.string != nil && module["base_addr"]?.string?.hasPrefix("0x") == true,
              sourceLocation: sourceLocation)
    }
  }
}
