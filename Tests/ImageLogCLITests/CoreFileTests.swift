#if canImport(Glibc)
import Glibc
#endif
import ImageLog
import ImageLogTestSupport
@testable import ImageReaders
import Testing

/// Core files made here, by gdb's `gcore` and by the kernel, read by `imagelog file CORE` and held to
/// `eu-unstrip -n --core CORE`: every module with a build-id has the same start, size and
/// build-id@address, and we list no ELF module eu-unstrip does not.
@Suite(.serialized) struct CoreFileTests {
  static let haveGcore = haveTool("gcore") && haveTool("eu-unstrip")
  /// eu-stack is the oracle for backtraces, readelf for telling aliases (`read`, `__read`) apart.
  static let haveStack = haveTool("eu-stack") && haveTool("readelf")

  /// Why the kernel cannot write a core where a test can find it, or nil when it can: a pattern that
  /// pipes to a helper (systemd-coredump, apport) or names another folder is the machine's business,
  /// and the tests do not change it. A plain name (`core`, with `core_uses_pid` or `%p`/`%e` in it) is
  /// written in the crashing process's folder once `ulimit -c unlimited` allows it.
  static let kernelCoreProblem: String? = {
    guard let pattern = readFile("/proc/sys/kernel/core_pattern")?.split(separator: "\n").first.map(String.init) else {
      return "cannot read /proc/sys/kernel/core_pattern"
    }
    if pattern.hasPrefix("|") { return "core_pattern pipes cores to a helper (\(pattern))" }
    if pattern.contains("/") { return "core_pattern writes cores to another folder (\(pattern))" }
    return nil
  }()
  static let kernelWritesCores = kernelCoreProblem == nil

  static let binary = builtProduct("imagelog")

  static func imagelog(_ arguments: [String]) throws -> ChildResult { try runChild([binary] + arguments) }

  /// One eu-unstrip module line's `START+SIZE BUILDID@ADDRESS` (nil without a build-id).
  static func unstripKeys(_ output: String) -> (withBuildID: Set<String>, all: [String]) {
    var keys: Set<String> = []
    var all: [String] = []
    for line in output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count >= 2 else { continue }
      let key = "\(fields[0]) \(fields[1])"
      all.append(key)
      if fields[1] != "-" { keys.insert(key) }
    }
    return (keys, all)
  }

  /// `imagelog file --format unstrip CORE` against `eu-unstrip -n --core CORE`; returns our lines.
  @discardableResult
  static func expectMatchesUnstrip(_ core: String, _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
    let ours = try imagelog(["file", "--format", "unstrip", core])
    #expect(ours.exitCode == 0, "\(comment): \(ours.error)", sourceLocation: sourceLocation)
    let theirs = try runTool(["eu-unstrip", "-n", "--core", core])
    try #require(theirs.status == 0, "eu-unstrip failed on \(comment): \(theirs.error)")
    let (theirKeys, _) = unstripKeys(theirs.output)
    let (ourKeys, ourAll) = unstripKeys(ours.output)
    #expect(!theirKeys.isEmpty, "\(comment): eu-unstrip listed no module with a build-id", sourceLocation: sourceLocation)
    for key in theirKeys.subtracting(ourKeys).sorted() {
      Issue.record("\(comment): eu-unstrip has \(key), we do not\n\(ours.output)", sourceLocation: sourceLocation)
    }
    for key in ourKeys.subtracting(theirKeys).sorted() {
      Issue.record("\(comment): we have \(key), eu-unstrip does not\n\(theirs.output)", sourceLocation: sourceLocation)
    }
    #expect(ourAll.count == ourKeys.count, "\(comment): every image we list has a build-id\n\(ours.output)",
            sourceLocation: sourceLocation)
    return ours.output.split(separator: "\n").map(String.init)
  }

  /// Builds Tests/Programs/coredump-threads.c without frame pointers into `directory`.
  static func buildThreadsProgram(in directory: String) throws -> String {
    let program = "\(directory)/coredump-threads"
    let build = try runTool(["cc", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                             "\(packageRoot)/Tests/Programs/coredump-threads.c", "-o", program])
    try #require(build.status == 0, "cc failed: \(build.error)")
    return program
  }

  /// `gcore -o DIR/core PID`: the core's path.
  static func gcore(_ pid: pid_t, in directory: String) throws -> String {
    let result = try runTool(["gcore", "-o", "\(directory)/core", String(pid)])
    let path = "\(directory)/core.\(pid)"
    try #require(access(path, R_OK) == 0, "gcore wrote no core: \(result.error)")
    return path
  }

  /// Runs `arguments` in `directory` with core dumps allowed and returns the core the kernel wrote
  /// when the program died of a signal (`kill` sent after "ready" when given).
  static func kernelCore(_ arguments: [String], in directory: String, kill signal: Int32? = nil) throws -> String {
    let quoted = arguments.map { "'\($0)'" }.joined(separator: " ")
    let child = try RunningChild(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && exec \(quoted)"])
    try child.wait(for: "ready")
    if let signal { child.signal(signal) }
    child.reap()
    let names = try runTool(["ls", directory]).output.split(separator: "\n").map(String.init)
    let core = try #require(names.first { $0 == "core" || $0.hasPrefix("core.") }, "no core in \(directory): \(names)")
    return "\(directory)/\(core)"
  }

  @Test(.enabled(if: haveGcore && haveStack && haveTool("cc"), "gcore (gdb), eu-unstrip, eu-stack (elfutils), readelf or cc missing"))
  func gcoreOfAThreadedCProgramMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-c")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try Self.buildThreadsProgram(in: directory)
    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let core = try Self.gcore(child.pid, in: directory)
    let lines = try Self.expectMatchesUnstrip(core, "gcore of coredump-threads")
    #expect(lines.contains { $0.hasSuffix("/coredump-threads") }, "the program itself is listed")
    #expect(lines.contains { $0.contains("libc.so.6") })
    #expect(lines.contains { $0.contains("[vdso]") })

    // The crash style: the main executable marked with +, the same build-ids.
    let crash = try Self.imagelog(["file", core])
    #expect(crash.exitCode == 0)
    #expect(crash.output.split(separator: "\n").filter { $0.contains(" +coredump-threads ") }.count == 1)
    // JSON: one object per image, as imagelog pid prints them, with the build-ids eu-unstrip printed.
    let json = try Self.imagelog(["file", "--format", "json", core])
    #expect(json.exitCode == 0)
    let objects = json.output.split(separator: "\n").filter { $0.hasPrefix("{") }
    #expect(objects.count == lines.count)
    for line in lines {
      let buildID = line.split(separator: " ")[1].split(separator: "@")[0]
      #expect(objects.contains { $0.contains("\"buildID\":\"\(buildID)\"") }, "\(buildID) in \(json.output)")
    }
    // --uuid: llvm-dwarfdump's line per image with a build-id.
    let uuids = try Self.imagelog(["file", "--uuid", core])
    #expect(uuids.output.split(separator: "\n").count == lines.count)
    #expect(uuids.output.split(separator: "\n").allSatisfy { $0.hasPrefix("UUID: ") && $0.contains(" (x86_64) ") })
    // The detailed view names every thread eu-readelf sees in the notes (NT_PRSTATUS pids).
    let details = try Self.imagelog(["file", "--format", "detailed", core])
    let tids = try Self.noteThreadIDs(core)
    #expect(tids.count == 4)
    #expect(details.output.contains("threads:       4 (\(tids.joined(separator: " ")))"), "\(details.output)")
    // pr_fname holds 16 bytes: the kernel's 15 and a NUL, gdb's all 16.
    #expect(details.output.contains("process:       coredump-thread"), "\(details.output)")
    #expect(details.output.contains(" [\(child.pid)]\n"), "\(details.output)")

    // symbolicate: eu-stack's threads and functions; a live process has no exception, no crashed
    // thread, no register section.
    try Self.expectSameStacks(core, "gcore of coredump-threads")
    let report = try Self.imagelog(["symbolicate", core])
    #expect(report.exitCode == 0)
    #expect(report.output.contains("Threads:         4\n"))
    #expect(!report.output.contains("Exception Type:"))
    #expect(!report.output.contains("Crashed"))
  }

  /// The thread ids `eu-readelf -n` prints for each NT_PRSTATUS (its `pid: N` line), in note order.
  static func noteThreadIDs(_ core: String) throws -> [String] {
    let notes = try runTool(["eu-readelf", "-n", core]).output
    var inStatus = false
    var tids: [String] = []
    for line in notes.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if fields.first == "CORE" || fields.first == "LINUX" { inStatus = fields.last == "PRSTATUS"; continue }
      if inStatus, fields.first == "pid:", fields.count > 1 { tids.append(String(fields[1].filter(\.isNumber))) }
    }
    return tids
  }

  @Test(.enabled(if: kernelWritesCores && haveTool("eu-unstrip") && haveStack && haveTool("cc"),
                 "the kernel cannot write cores here (see kernelCoreProblem), or eu-unstrip, eu-stack, readelf or cc missing"))
  func kernelCoreOfACrashMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-kernel")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try Self.buildThreadsProgram(in: directory)
    let core = try Self.kernelCore([program, "crash"], in: directory)
    try Self.expectMatchesUnstrip(core, "kernel core of coredump-threads crash")
    let details = try Self.imagelog(["file", "--format", "detailed", core])
    #expect(details.output.contains("signal:        signal 11, code 1, address 0x0000000000000010"), "\(details.output)")

    // symbolicate: eu-stack's threads and functions, the signal, the crashed thread and its registers.
    try Self.expectSameStacks(core, "kernel core of coredump-threads crash")

    let run = try Self.imagelog(["symbolicate", core])
    #expect(run.exitCode == 0, "\(run.error)")
    let lines = run.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(lines.contains("Exception Type:  SIGSEGV (SEGV_MAPERR)"))
    #expect(lines.contains("Exception Codes: signal 11, code 1, address 0x0000000000000010"))
    #expect(lines.contains("Threads:         4"))
    let crashedTID = try #require(try Self.noteThreadIDs(core).first)  // the kernel writes the dumping thread first
    #expect(lines.contains { $0.hasPrefix("Crashed Thread:  ") && $0.hasSuffix("  tid \(crashedTID)") }, "\(run.output)")
    #expect(lines.contains { $0.hasSuffix(" Crashed:  tid \(crashedTID)") })
    // The crashed thread's first frame is crash_now, where the bad write is; cr2 is the fault address.
    let crashed = try #require(lines.firstIndex { $0.hasSuffix(" Crashed:  tid \(crashedTID)") })
    #expect(lines[crashed + 1].contains(" crash_now "), "\(lines[crashed + 1])")
    #expect(lines.contains { $0.contains("crashed with X86 Thread State (64-bit):") })
    #expect(lines.contains { $0.contains("cr2: 0x0000000000000010") })
    #expect(lines.contains("Binary Images:"))

    // --no-symbolicate: the report as built, frames as image + offset; symbolicating it later gives
    // the same report as symbolicating the core.
    let raw = try Self.imagelog(["symbolicate", "--no-symbolicate", core])
    #expect(raw.exitCode == 0)
    #expect(raw.output.contains(" coredump-threads "))
    #expect(!raw.output.contains("crash_now"))
    let saved = "\(directory)/report.txt"
    try writeFile(saved, raw.output)
    let later = try Self.imagelog(["symbolicate", saved])
    #expect(later.output == run.output)
    // And in JSON: the frames placed in their images as symbolicate places them, nothing looked up.
    let rawJSON = try Self.imagelog(["symbolicate", "--no-symbolicate", "--format", "json", core])
    let fullJSON = try Self.imagelog(["symbolicate", "--format", "json", core])
    #expect(rawJSON.exitCode == 0)
    let frames = { (text: String) -> [[JSONValue?]] in
      guard case .array(let list)? = (try? JSONValue.parse(text[...]))?["frames"] else { return [] }
      return list.map { frame in ["thread", "frame", "address", "image", "imageOffset", "status"].map { frame[$0] } }
    }
    let unlooked = frames(rawJSON.output), looked = frames(fullJSON.output)
    #expect(!unlooked.isEmpty && unlooked.count == looked.count)
    #expect(unlooked.map { Array($0.prefix(5)) } == looked.map { Array($0.prefix(5)) })
    #expect(unlooked.allSatisfy { $0.last == .string("not-looked-up") }, "\(unlooked.prefix(3))")
    #expect(rawJSON.output.contains("\"status\":\"not-searched\""))
  }

  @Test(.enabled(if: haveGcore && haveStack && haveTool("python3"), "gcore, eu-unstrip, eu-stack, readelf or python3 missing"))
  func gcoreOfPythonWithThreadsMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-python")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let script = "import signal, threading, ssl\n"
      + "for i in range(3): threading.Thread(target=signal.pause, daemon=True).start()\n"
      + "print('ready', flush=True); signal.pause()\n"
    let child = try RunningChild(["python3", "-c", script])
    defer { child.stop() }
    try child.wait(for: "ready")
    let core = try Self.gcore(child.pid, in: directory)
    let lines = try Self.expectMatchesUnstrip(core, "gcore of python3")
    #expect(lines.contains { $0.contains("_ssl") || $0.contains("libssl") })
    try Self.expectSameStacks(core, "gcore of python3 with threads")
  }

  @Test(.enabled(if: haveGcore && haveStack && haveTool("swiftc"), "gcore, eu-unstrip, eu-stack, readelf or swiftc missing"))
  func gcoreOfASwiftProgramMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-swift")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/sleeper"
    let build = try runTool(["swiftc", "\(packageRoot)/Tests/Programs/process-swift-sleeper.swift", "-o", program])
    try #require(build.status == 0, "swiftc failed: \(build.error)")
    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")
    let core = try Self.gcore(child.pid, in: directory)
    let lines = try Self.expectMatchesUnstrip(core, "gcore of a Swift program")
    #expect(lines.contains { $0.contains("libswiftCore.so") })
    try Self.expectSameStacks(core, "gcore of a Swift program")
  }

  static let canBuild32Bit: Bool = {
    guard haveTool("gcc"), let directory = try? makeTemporaryDirectory("imagelog-core-m32") else { return false }
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let built = try? runTool(["gcc", "-m32", "-nostdlib", "-static", "-fno-pic", "-no-pie",
                              "\(packageRoot)/Tests/Programs/process-elf32-sleeper.c", "-o", "\(directory)/p"])
    guard built?.status == 0, let run = try? RunningChild(["\(directory)/p"]) else { return false }
    defer { run.stop() }
    return run.readLine() == "ready"  // no IA-32 emulation: it cannot start
  }()

  /// An i386 program's cores, by gcore and by the kernel (SIGQUIT): ELF32 notes, i386 registers, and
  /// its one thread unwound as eu-stack unwinds it. The program is linked with an `.eh_frame_hdr`
  /// (gcc links static programs without one unless asked): the unwinder finds CFI in memory through
  /// `PT_GNU_EH_FRAME`, as libgcc does, where eu-stack also reads the file's section headers.
  @Test(.enabled(if: haveGcore && haveStack && canBuild32Bit && kernelWritesCores,
                 "gcore, eu-unstrip, eu-stack, readelf, gcc -m32 (IA-32 emulation) missing, or the kernel cannot write cores here"))
  func elf32CoresMatchUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-elf32")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/sleeper32"
    let build = try runTool(["gcc", "-m32", "-nostdlib", "-static", "-fno-pic", "-no-pie", "-Wl,--build-id",
                             "-Wl,--eh-frame-hdr", "\(packageRoot)/Tests/Programs/process-elf32-sleeper.c", "-o", program])
    try #require(build.status == 0)
    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")
    let gcoreFile = try Self.gcore(child.pid, in: directory)
    child.stop()
    try Self.expectMatchesUnstrip(gcoreFile, "gcore of an i386 program")
    let kernelDirectory = "\(directory)/kernel"
    try #require(mkdir(kernelDirectory, 0o755) == 0)
    let kernelFile = try Self.kernelCore([program], in: kernelDirectory, kill: SIGQUIT)
    try Self.expectMatchesUnstrip(kernelFile, "kernel core of an i386 program")
    let details = try Self.imagelog(["file", "--format", "detailed", kernelFile])
    #expect(details.output.contains("architecture:  i386"))
    #expect(details.output.contains("signal:        signal 3,"), "\(details.output)")
    // The thread is unwound: _start, then the word its CFI calls the return address (argc: the
    // program's entry has no caller), as eu-stack prints it.
    try Self.expectSameStacks(gcoreFile, "gcore of an i386 program")
    try Self.expectSameStacks(kernelFile, "kernel core of an i386 program")
    let report = try Self.imagelog(["symbolicate", kernelFile])
    #expect(report.output.contains("Thread 0 Crashed:  tid "), "\(report.output)")
    #expect(report.output.contains(" _start + "), "\(report.output)")
    #expect(!report.output.contains("not unwound"), "\(report.output)")
  }

  /// Tests/Programs/coredump-threads.c built for i386 (`gcc -m32 -O2 -fomit-frame-pointer`): a gcore
  /// of it blocked and a kernel core of its crash. Every thread unwound as `eu-stack --core` unwinds
  /// it (CFI through 32-bit `.eh_frame_hdr` tables, libc's datarel one included, into the vDSO's
  /// `__kernel_vsyscall`), the images as eu-unstrip lists them.
  @Test(.enabled(if: haveGcore && haveStack && canRun32BitLibcPrograms && kernelWritesCores,
                 "gcore, eu-unstrip, eu-stack, readelf or gcc -m32 with a 32-bit libc (gcc-12-multilib) missing, or no kernel cores here"))
  func i386CoresOfAThreadedProgramMatchEuStack() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-i386")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/coredump-threads32"
    let build = try runTool(["gcc", "-m32", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                             "\(packageRoot)/Tests/Programs/coredump-threads.c", "-o", program])
    try #require(build.status == 0, "gcc -m32 failed: \(build.error)")
    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let gcoreFile = try Self.gcore(child.pid, in: directory)
    child.stop()
    try Self.expectMatchesUnstrip(gcoreFile, "gcore of an i386 threaded program")
    // Every blocked i386 thread is in the vDSO's `__kernel_vsyscall`, named as eu-stack names it.
    #expect(try Self.expectSameStacks(gcoreFile, "gcore of an i386 threaded program") >= 4)
    let gcoreReport = try Self.imagelog(["symbolicate", "--no-lines", "--demangle", "none", gcoreFile])
    #expect(gcoreReport.exitCode == 0, "\(gcoreReport.error)")
    #expect(gcoreReport.output.contains("Threads:         4\n"), "\(gcoreReport.output)")
    #expect(gcoreReport.output.split(separator: "\n").filter { $0.contains(" core_worker_start + ") }.count == 3,
            "\(gcoreReport.output)")
    #expect(!gcoreReport.output.contains("not unwound"), "\(gcoreReport.output)")

    let kernelDirectory = "\(directory)/kernel"
    try #require(mkdir(kernelDirectory, 0o755) == 0)
    let kernelFile = try Self.kernelCore([program, "crash"], in: kernelDirectory)
    try Self.expectMatchesUnstrip(kernelFile, "kernel core of an i386 threaded program's crash")
    try Self.expectSameStacks(kernelFile, "kernel core of an i386 threaded program's crash")
    let report = try Self.imagelog(["symbolicate", "--no-lines", "--demangle", "none", kernelFile])
    let lines = report.output.split(separator: "\n").map(String.init)
    let crashedTID = try #require(try Self.noteThreadIDs(kernelFile).first)  // the kernel writes the dumping thread first
    let crashed = try #require(lines.firstIndex { $0.hasSuffix(" Crashed:  tid \(crashedTID)") }, "\(report.output)")
    #expect(lines[crashed + 1].contains(" crash_now "), "\(lines[crashed + 1])")
    #expect(lines[crashed + 2].contains(" core_block_in_read "), "\(lines[crashed + 2])")
    #expect(!report.output.contains("not unwound"), "\(report.output)")
    // The crashed thread's registers in Apple's 32-bit rows, each the value gdb shows for the core's
    // current thread (the dumping one), and cr2 the fault address.
    let heading = try #require(lines.firstIndex { $0.hasSuffix(" crashed with X86 Thread State (32-bit):") }, "\(report.output)")
    var ourRegisters: [String: String] = [:]
    for line in lines[(heading + 1)...].prefix(5) {
      let words = line.split(separator: " ")
      for index in stride(from: 0, to: words.count - 1, by: 2) { ourRegisters[String(words[index].dropLast())] = String(words[index + 1]) }
    }
    #expect(ourRegisters["cr2"] == "0x00000010", "\(ourRegisters)")
    // gdb comes with gcore (both in Debian's gdb).
    let gdb = try runTool(["gdb", "-batch", "-nx", "-ex", "info registers", program, kernelFile]).output
    var checked = 0
    for line in gdb.split(separator: "\n") {
      let words = line.split(separator: " ")
      guard words.count >= 2, let theirs = UInt64(words[1].dropFirst(2), radix: 16) else { continue }
      let name = words[0] == "eflags" ? "efl" : String(words[0])
      guard let ours = ourRegisters[name] else { continue }
      #expect(UInt64(ours.dropFirst(2), radix: 16) == theirs, "\(name): ours \(ours), gdb \(words[1])")
      checked += 1
    }
    #expect(checked == 16, "every register gdb prints is compared:\n\(gdb)")
    // --no-symbolicate, then symbolicate the saved report: the same report, registers included, but for
    // the vDSO: the core has its bytes, the saved report only its build-id, and the only vDSO this
    // (x86_64) imagelog has at hand is its own, another image (the summary says it is missing).
    let raw = try Self.imagelog(["symbolicate", "--no-symbolicate", kernelFile])
    let saved = "\(directory)/report.txt"
    try writeFile(saved, raw.output)
    let fromCore = try Self.imagelog(["symbolicate", kernelFile]).output.split(separator: "\n")
    let fromSaved = try Self.imagelog(["symbolicate", saved]).output.split(separator: "\n")
    let vdsoFrame = { (line: Substring) in line.contains(" [vdso] ") && line.first?.isNumber == true && !line.hasPrefix("0x") }
    #expect(fromCore.filter(vdsoFrame).count >= 3 && fromCore.filter(vdsoFrame).allSatisfy { $0.contains(" __kernel_vsyscall + ") },
            "\(fromCore.filter(vdsoFrame))")
    #expect(fromSaved.filter(vdsoFrame).count == fromCore.filter(vdsoFrame).count)
    #expect(fromSaved.contains { $0.hasPrefix("  missing:    [vdso] <") })
    let same = { (lines: [Substring]) in lines.filter { !vdsoFrame($0) && !$0.hasPrefix("--") && !$0.hasPrefix("  missing:") } }
    #expect(same(fromSaved) == same(fromCore))

    // The vDSO's bytes damaged in the core (its second page, section headers included, overwritten
    // with 0xff) or cut off mid-vDSO: the report is written all the same, its vDSO frames unnamed,
    // and the damage is said.
    let unstrip = try Self.imagelog(["file", "--format", "unstrip", kernelFile]).output
    let vdsoStart = try #require(unstrip.split(separator: "\n").first { $0.hasSuffix(" [vdso]") }?.split(separator: "+").first)
    let vdsoAddress = UInt64(vdsoStart.dropFirst(2), radix: 16)
    let programHeaders: [[Substring]] = try runTool(["readelf", "-lW", kernelFile]).output.split(separator: "\n").map { $0.split(separator: " ") }
    let segment = try #require(programHeaders.first { fields in
      fields.count >= 6 && fields[0] == "LOAD" && UInt64(fields[2].dropFirst(2), radix: 16) == vdsoAddress
    }, "no PT_LOAD at the vDSO's \(vdsoStart)")
    let segmentOffset = try #require(UInt64(segment[1].dropFirst(2), radix: 16))
    let damaged = "\(directory)/damaged-vdso"
    var bytes = try #require(readFileBytes(kernelFile))
    let pageStart = Int(segmentOffset) + 0x1000
    try #require(pageStart + 0x1000 <= bytes.count)
    for index in pageStart..<pageStart + 0x1000 { bytes[index] = 0xFF }
    try writeFile(damaged, bytes: bytes)
    let fromDamaged = try Self.imagelog(["symbolicate", damaged])
    #expect(fromDamaged.exitCode == 0, "\(fromDamaged.error)")
    let damagedLines = fromDamaged.output.split(separator: "\n")
    #expect(damagedLines.filter(vdsoFrame).count == fromCore.filter(vdsoFrame).count
            && !damagedLines.filter(vdsoFrame).contains { $0.contains("__kernel_vsyscall") }, "\(fromDamaged.output)")
    #expect(damagedLines.contains { $0.hasPrefix("  note: [vdso]: not used: its bytes in memory: ") }, "\(fromDamaged.output)")
    let cut = "\(directory)/cut-vdso"
    try writeFile(cut, bytes: Array(bytes[..<(pageStart + 0x100)]))
    let fromCut = try Self.imagelog(["symbolicate", cut])
    #expect(fromCut.exitCode == 0, "\(fromCut.error)")
    #expect(!fromCut.output.contains("__kernel_vsyscall") && fromCut.output.contains("Binary Images:"), "\(fromCut.output)")
  }

  /// A library whose headers the core left out is read from the file its l_name gives only when that
  /// file's PT_DYNAMIC, moved by l_addr, lands at l_ld (as elfutils ties a file to a link_map entry):
  /// then its build-id is the file's, the same as eu-unstrip's; a file that lands elsewhere is said
  /// on standard error and not used. The hand-made x86_64 core, its library page left out, its entry
  /// pointed at a library built here.
  @Test(.enabled(if: haveTool("cc") && haveTool("eu-unstrip") && haveTool("readelf"), "cc, eu-unstrip or readelf missing"))
  func aLibraryTheCoreLeftOutIsReadFromItsFileWhenItLandsAtLLD() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-lld")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let library = "\(directory)/libplaced.so"
    let build = try runTool(["sh", "-c", "echo 'int placed(void) { return 1; }' | cc -shared -fPIC -Wl,--build-id -x c - -o '\(library)'"])
    try #require(build.status == 0, "cc failed: \(build.error)")
    let dynamic = try #require(try runTool(["readelf", "-lW", library]).output.split(separator: "\n")
      .first { $0.trimmingPrefix(while: \.isWhitespace).hasPrefix("DYNAMIC") }?.split(separator: " ")[2])
    let dynamicAddress = try #require(UInt64(dynamic.dropFirst(2), radix: 16))

    var bytes = try #require(readFileBytes("\(packageRoot)/Tests/ImageReadersTests/Fixtures/cores/linkmap-x86_64.core"))
    let (core, rDebug, entries) = try Self.linkMapLayout(bytes)
    try #require(entries.count == 3)
    func patch(_ address: UInt64, _ value: [UInt8]) throws {
      let range = try #require(core.fileRange(ofMemory: address, length: value.count))
      bytes.replaceSubrange(range, with: value)
    }
    func le64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
    // The library entry (the second): l_name -> the path, written at DATA + 0x800; l_ld -> its PT_DYNAMIC.
    let libraryBase = try #require(core.fileRange(ofMemory: entries[1], length: 32)).map { bytes[$0] }
    let base = libraryBase.prefix(8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    try patch(rDebug + 0x800, Array(library.utf8) + [0])
    try patch(entries[1] + 8, le64(rDebug + 0x800))
    // The core leaves the library's page out: its PT_LOAD (the third program header) gets p_filesz 0.
    let libraryHeader = 64 + 2 * 56
    try #require(bytes[libraryHeader] == 1)
    bytes.replaceSubrange(libraryHeader + 32..<libraryHeader + 40, with: le64(0))

    for (name, offset) in [("placed", UInt64(0)), ("misplaced", UInt64(0x10))] {
      try patch(entries[1] + 16, le64(base + dynamicAddress + offset))
      let path = "\(directory)/\(name).core"
      try writeFile(path, bytes: bytes)
      let run = try Self.imagelog(["file", "--format", "unstrip", path])
      #expect(run.exitCode == 0)
      if offset == 0 {
        #expect(run.error.isEmpty, "\(run.error)")
        let lines = try Self.expectMatchesUnstrip(path, "the hand-made core pointed at \(library)")
        #expect(lines.contains { $0.hasPrefix("0x\(hexDigits(base))+") && $0.hasSuffix(" \(library)") }, "\(lines)")
      } else {
        // (eu-unstrip places the file by l_ld alone, here 0x10 past l_addr, off its page: a guess.)
        #expect(run.error == "imagelog: \(path): \(library): the core kept no ELF headers for it and the file on disk does "
                  + "not put its dynamic section at l_ld 0x\(hexDigits(base + dynamicAddress + offset)) as the dynamic "
                  + "linker's list shows; left out\n")
        #expect(!run.output.contains(library) && run.output.split(separator: "\n").count == 2, "\(run.output)")
      }
    }
  }

  static let canBuild32BitThreads: Bool = {
    guard canBuild32Bit, let directory = try? makeTemporaryDirectory("imagelog-core-m32-dynamic") else { return false }
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let built = try? runTool(["gcc", "-m32", "-pthread", "\(packageRoot)/Tests/Programs/coredump-threads.c",
                              "-o", "\(directory)/p"])
    return built?.status == 0
  }()

  /// An ELFCLASS32 core without NT_FILE: 4-byte link_map fields, the same list as eu-unstrip's.
  @Test(.enabled(if: kernelWritesCores && canBuild32BitThreads && haveTool("eu-unstrip") && haveTool("eu-readelf"),
                 "gcc -m32 with 32-bit libc (gcc-12-multilib), IA-32 emulation or eu-unstrip missing, or the kernel cannot write cores here"))
  func elf32CoreWithoutFileNoteMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-nofile32")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/coredump-threads32"
    let build = try runTool(["gcc", "-m32", "-O2", "-g", "-pthread", "\(packageRoot)/Tests/Programs/coredump-threads.c",
                             "-o", program])
    try #require(build.status == 0, "gcc -m32 failed: \(build.error)")
    let core = try Self.kernelCore([program, "crash"], in: directory)
    try Self.expectSameWithoutFileNote(core, "kernel core of an i386 program", architecture: "i386")
  }
}
