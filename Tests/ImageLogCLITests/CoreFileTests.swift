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

  // MARK: cores without NT_FILE

  /// `core` with its `NT_FILE` note turned into a note of an unknown type (see `hideFileNotes`), as a
  /// core from QEMU, an older kernel or another dumper has none: written beside it, its path returned.
  static func withoutFileNote(_ core: String) throws -> String {
    var bytes = try #require(readFileBytes(core))
    try #require(hideFileNotes(&bytes) == 1, "\(core): no NT_FILE note to hide")
    let path = "\(core).nofile"
    try writeFile(path, bytes: bytes)
    let notes = try runTool(["eu-readelf", "-n", path]).output
    try #require(!notes.contains("FILE") && notes.contains("AUXV"), "NT_FILE still seen:\n\(notes)")
    return path
  }

  /// `core` and the same core without `NT_FILE`: eu-unstrip lists the same modules for both (it reads
  /// the dynamic linker's list), and we match it on the second as on the first, the list said to come
  /// from link_map; symbolicate unwinds and names the same frames as with `NT_FILE`, libc's included.
  static func expectSameWithoutFileNote(_ core: String, _ comment: String, architecture: String,
                                        sourceLocation: SourceLocation = #_sourceLocation) throws {
    let hidden = try withoutFileNote(core)
    let withNote = try runTool(["eu-unstrip", "-n", "--core", core])
    let without = try runTool(["eu-unstrip", "-n", "--core", hidden])
    #expect(without.output.contains("libc.so.6"), "\(comment): eu-unstrip lists no libc:\n\(without.output)",
            sourceLocation: sourceLocation)
    #expect(unstripKeys(without.output).withBuildID == unstripKeys(withNote.output).withBuildID,
            "\(comment): eu-unstrip differs without NT_FILE:\n\(withNote.output)\n\(without.output)",
            sourceLocation: sourceLocation)
    let lines = try expectMatchesUnstrip(hidden, "\(comment) without NT_FILE", sourceLocation: sourceLocation)
    #expect(lines.contains { $0.contains("/libc.so.6 ") }, "\(lines)", sourceLocation: sourceLocation)
    let details = try imagelog(["file", "--format", "detailed", hidden])
    #expect(details.exitCode == 0 && details.error.isEmpty, "\(details.error)", sourceLocation: sourceLocation)
    #expect(details.output.contains("  images:        \(lines.count) (from the dynamic linker's link_map list: no NT_FILE)"),
            "\(details.output)", sourceLocation: sourceLocation)
    #expect(details.output.contains("  architecture:  \(architecture)"), sourceLocation: sourceLocation)
    let original = try imagelog(["file", "--format", "detailed", core])
    #expect(original.output.contains("  images:        \(lines.count) (from NT_FILE)"), "\(original.output)",
            sourceLocation: sourceLocation)

    let ours = try ourStacks(hidden)
    let reference = try ourStacks(core)
    #expect(Set(ours.keys) == Set(reference.keys), sourceLocation: sourceLocation)
    for (tid, frames) in reference {
      #expect(ours[tid]?.map(\.name) == frames.map(\.name), "\(comment): thread \(tid) without NT_FILE",
              sourceLocation: sourceLocation)
    }
    // A frame's file is the one its symbols came from: libc itself, or its debug file by build-id.
    let libcLine = try #require(lines.first { $0.contains("/libc.so.6 ") })
    let libcID = String(libcLine.split(separator: " ")[1].split(separator: "@")[0])
    let libcFrames = ours.values.joined().filter { frame in
      frame.file.map { $0.hasSuffix("/libc.so.6") || $0.contains(libcID.dropFirst(2)) } ?? false
    }
    // (An i386 libc without its debug file leaves some frames between exported symbols unnamed, with
    // NT_FILE as without: the stacks above are the same.)
    let named = libcFrames.filter { $0.name != nil }.count
    #expect(named > 0 && (architecture != "x86_64" || named == libcFrames.count),
            "\(comment): frames in libc are named: \(ours)", sourceLocation: sourceLocation)
    let report = try imagelog(["symbolicate", hidden])
    #expect(report.exitCode == 0 && report.error.isEmpty, "\(report.error)", sourceLocation: sourceLocation)
  }

  /// The core `bytes` decoded, and where its link_map walk found r_debug and each entry (for tests that
  /// break them).
  static func linkMapLayout(_ bytes: [UInt8]) throws -> (core: ELFCore, rDebug: UInt64, entries: [UInt64]) {
    try bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      let core = try ELFCore(source: reader)
      var walk = ELFCoreLinkMap(core: core) { address, length throws(FormatError) in
        try core.memory(at: address, length: length, in: reader)
      }
      walk.run()
      return (core, try #require(walk.debugAddress), walk.entryAddresses)
    }
  }

  /// gcore's and the kernel's cores of a threaded C program, without NT_FILE: the images come from
  /// the dynamic linker's list; eu-unstrip is the oracle, and the same cores with NT_FILE, held to
  /// eu-stack by the tests above, the reference for the stacks.
  @Test(.enabled(if: haveGcore && kernelWritesCores && haveStack && haveTool("cc"),
                 "gcore, eu-unstrip, eu-stack, readelf or cc missing, or the kernel cannot write cores here"))
  func coresWithoutFileNoteMatchUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-nofile")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try Self.buildThreadsProgram(in: directory)
    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let gcoreFile = try Self.gcore(child.pid, in: directory)
    child.stop()
    try Self.expectSameWithoutFileNote(gcoreFile, "gcore of coredump-threads", architecture: "x86_64")
    let kernelDirectory = "\(directory)/kernel"
    try #require(mkdir(kernelDirectory, 0o755) == 0)
    let kernelFile = try Self.kernelCore([program, "crash"], in: kernelDirectory)
    try Self.expectSameWithoutFileNote(kernelFile, "kernel core of coredump-threads", architecture: "x86_64")

    // Hostile lists, end to end: a loop in link_map and an absurd r_debug each give one line on standard
    // error and a partial list, with exit status 0 (the images found are still right).
    let hidden = "\(kernelFile).nofile"
    let original = try #require(readFileBytes(hidden))
    let (core, rDebug, entries) = try Self.linkMapLayout(original)
    try #require(entries.count >= 4)
    func broken(_ name: String, _ words: [UInt64], at address: UInt64) throws -> String {
      var bytes = original
      let range = try #require(core.fileRange(ofMemory: address, length: 8 * words.count))
      bytes.replaceSubrange(range, with: words.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> ($0 * 8)) } })
      let path = "\(directory)/\(name)"
      try writeFile(path, bytes: bytes)
      return path
    }
    let looping = try broken("looping.core", [entries[1]], at: entries[2] + 24)
    var run = try Self.imagelog(["file", "--format", "unstrip", looping])
    #expect(run.exitCode == 0)
    #expect(run.error == "imagelog: \(looping): link_map entry 3 (0x\(hexDigits(entries[1]))) comes round again: "
              + "the list loops; the first 3 entries are listed\n")
    #expect(run.output.split(separator: "\n").count >= 3, "\(run.output)")
    let absurd = try broken("absurd.core", [77], at: rDebug)
    run = try Self.imagelog(["symbolicate", absurd])
    #expect(run.exitCode == 0)
    #expect(run.error == "imagelog: \(absurd): r_debug at 0x\(hexDigits(rDebug)) has r_version 77 (1 or 2 expected): "
              + "not a dynamic linker's list; libraries not listed\n")
    // The program, the dynamic linker (by AT_BASE) and the vDSO remain, and frames in them are named.
    let images = run.output.split(separator: "\n", omittingEmptySubsequences: false).drop { $0 != "Binary Images:" }
      .dropFirst().prefix { !$0.isEmpty }
    #expect(images.count == 3 && images.contains { $0.contains(" ld-linux-x86-64.so.2 ") }, "\(run.output)")
    #expect(run.output.contains(" core_main_wait "), "\(run.output)")
  }

  /// The hand-made cores without NT_FILE (Scripts/make-core-fixtures, ELFCLASS64 and ELFCLASS32): the
  /// program, a library and the dynamic linker found only through NT_AUXV, DT_DEBUG and link_map, with
  /// the same start, size and build-id@address as eu-unstrip, each library named by its l_name as
  /// eu-unstrip names it.
  @Test(.enabled(if: haveTool("eu-unstrip"), "eu-unstrip (elfutils) missing"), arguments: ["x86_64", "i386"])
  func handMadeCoresWithoutFileNoteMatchUnstrip(_ architecture: String) throws {
    let core = "\(packageRoot)/Tests/ImageReadersTests/Fixtures/cores/linkmap-\(architecture).core"
    let lines = try Self.expectMatchesUnstrip(core, "hand-made \(architecture) core without NT_FILE")
    #expect(lines.count == 3)
    let theirs = try runTool(["eu-unstrip", "-n", "--core", core]).output.split(separator: "\n")
    for line in lines where !line.contains("/nonexistent/prog") {
      let fields = line.split(separator: " ")
      let name = fields.last.map { String($0.split(separator: "/").last ?? $0) }
      #expect(theirs.contains { $0.hasPrefix("\(fields[0]) ") && $0.hasSuffix(" \(name ?? "?")") }, "\(line)\n\(theirs)")
    }
    let details = try Self.imagelog(["file", "--format", "detailed", core])
    #expect(details.exitCode == 0 && details.error.isEmpty, "\(details.error)")
    #expect(details.output.contains("  images:        3 (from the dynamic linker's link_map list: no NT_FILE)"))
    #expect(details.output.contains(" +prog \(architecture) "), "AT_EXECFN names the program: \(details.output)")
  }

  /// The hand-made x86_64 core with the program's ELF header broken and its PT_DYNAMIC gone, and
  /// AT_EXECFN naming a real file: nothing in the core ties that file to the program, so it is not
  /// read in its place (no build-id is guessed), and each problem is one line.
  @Test func aFileNothingTiesToTheProgramIsNotUsed() throws {
    var bytes = try #require(readFileBytes("\(packageRoot)/Tests/ImageReadersTests/Fixtures/cores/linkmap-x86_64.core"))
    let core = try bytes.withUnsafeBytes { try ELFCore(source: ByteReader($0)) }
    let phdr = try #require(core.auxiliaryValue(ELFCore.auxPHDR))
    let program = phdr - 64  // the ELF header, 64 bytes before the program headers (Scripts/make-core-fixtures)
    func patch(_ address: UInt64, _ value: [UInt8]) throws {
      let range = try #require(core.fileRange(ofMemory: address, length: value.count))
      bytes.replaceSubrange(range, with: value)
    }
    try patch(program, Array("XELF".utf8))
    try patch(phdr + 3 * 56, [0, 0, 0, 0])  // the fourth program header, PT_DYNAMIC, becomes PT_NULL
    try patch(try #require(core.auxiliaryValue(ELFCore.auxExecFN)), Array("/usr/bin/true\0".utf8))
    let directory = try makeTemporaryDirectory("imagelog-core-untied")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let path = "\(directory)/untied.core"
    try writeFile(path, bytes: bytes)
    let run = try Self.imagelog(["file", path])
    #expect(run.exitCode == 0)
    #expect(run.error.split(separator: "\n") == [
      "imagelog: \(path): /usr/bin/true: its ELF headers in the core are damaged (not an ELF or Mach-O file (magic 0x464c4558))",
      "imagelog: \(path): /usr/bin/true: the core kept no ELF headers for it and nothing in the core ties the file on disk "
        + "to it; its build-id is unknown",
    ], "\(run.error)")
    // The program is listed without a build-id; the dynamic linker by AT_BASE, with its own.
    let lines = run.output.split(separator: "\n")
    #expect(lines.count == 2, "\(run.output)")
    #expect(lines.contains { $0.contains(" +true x86_64  <00000000000000000000000000000000> /usr/bin/true") }, "\(run.output)")
    #expect(lines.contains { $0.hasSuffix(" /nonexistent/ld.so") && !$0.contains("<000000") }, "\(run.output)")
  }

  /// QEMU's user-mode cores have no NT_FILE. Held to eu-unstrip whatever QEMU keeps: when it recognizes
  /// modules we list the same ones; when it recognizes none (QEMU leaves out every read-only file
  /// mapping, the program's headers included), we list none and say why in one line.
  @Test(.enabled(if: haveTool("aarch64-linux-gnu-gcc") && haveTool("qemu-aarch64") && haveTool("eu-unstrip"),
                 "aarch64-linux-gnu-gcc, qemu-aarch64 (qemu-user) or eu-unstrip missing"))
  func qemuCoreOfADynamicProgramAgreesWithUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-qemu")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/coredump-threads"
    let build = try runTool(["aarch64-linux-gnu-gcc", "-O2", "-pthread", "\(packageRoot)/Tests/Programs/coredump-threads.c",
                             "-o", program])
    try #require(build.status == 0, "aarch64-linux-gnu-gcc failed: \(build.error)")
    _ = try runTool(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && "
                       + "QEMU_LD_PREFIX=/usr/aarch64-linux-gnu exec qemu-aarch64 '\(program)' crash"])
    let names = try runTool(["ls", directory]).output.split(separator: "\n")
    let name = try #require(names.first { $0.hasPrefix("qemu_") && $0.hasSuffix(".core") }, "QEMU wrote no core: \(names)")
    let core = "\(directory)/\(name)"
    let notes = try runTool(["eu-readelf", "-n", core]).output
    try #require(notes.contains("AUXV") && !notes.contains("FILE"), "QEMU's core has NT_AUXV and no NT_FILE:\n\(notes)")
    let theirs = try runTool(["eu-unstrip", "-n", "--core", core])
    let details = try Self.imagelog(["file", "--format", "detailed", core])
    #expect(details.output.contains("(from the dynamic linker's link_map list: no NT_FILE)"), "\(details.output)")
    if theirs.status == 0 {
      try Self.expectMatchesUnstrip(core, "QEMU core of an aarch64 program")
      return
    }
    #expect(theirs.error.contains("No modules recognized"), "\(theirs.error)")
    let ours = try Self.imagelog(["file", "--format", "unstrip", core])
    #expect(ours.exitCode == 0 && ours.output.isEmpty, "\(ours.output)")
    let lines = ours.error.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].hasPrefix("imagelog: \(core): the main executable's program headers (AT_PHDR 0x")
              && lines[0].hasSuffix(" entries) are not in the core's memory"), "\(ours.error)")
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

  /// A library replaced on disk after the core was written: the core's build-id is listed, the
  /// mismatch is said on standard error, and the file is not read in its place.
  @Test(.enabled(if: haveGcore && haveTool("cc") && haveTool("readelf"), "gcore, eu-unstrip, cc or readelf missing"))
  func aLibraryChangedSinceIsReported() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-changed")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let library = "\(directory)/libcorechanged.so"
    func buildLibrary(_ value: Int, into path: String) throws {
      let source = "int core_changed_value(void) { return \(value); }"
      try #require(try runTool(["sh", "-c", "echo '\(source)' | cc -shared -fPIC -Wl,--build-id -x c - -o '\(path)'"]).status == 0)
    }
    func buildID(_ path: String) throws -> String {
      let notes = try runTool(["readelf", "-n", path]).output
      return try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init))
    }
    try buildLibrary(1, into: library)
    let program = "\(directory)/uses-library"
    let main = "int core_changed_value(void); int main(void) { if (core_changed_value() != 1) return 1; "
      + "puts(\"ready\"); fflush(stdout); for (;;) pause(); }"
    let build = try runTool(["sh", "-c", "printf '#include <stdio.h>\\n#include <unistd.h>\\n%s\\n' '\(main)' | "
                               + "cc -x c - -o '\(program)' -L'\(directory)' -lcorechanged -Wl,-rpath,'\(directory)'"])
    try #require(build.status == 0, "cc failed: \(build.error)")
    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")
    let core = try Self.gcore(child.pid, in: directory)
    let before = try buildID(library)
    try buildLibrary(2, into: "\(library).new")
    try #require(rename("\(library).new", library) == 0)
    let after = try buildID(library)
    try #require(before != after)

    let run = try Self.imagelog(["file", "--format", "unstrip", core])
    #expect(run.exitCode == 0)
    #expect(run.output.contains(" \(before)@"), "the core's build-id is listed: \(run.output)")
    #expect(!run.output.contains(after))
    #expect(run.error == "imagelog: \(core): \(library): build-id \(before) in the core, \(after) on disk: "
              + "the file changed since the core was written; not read in its place\n")
    try Self.expectMatchesUnstrip(core, "core with a replaced library")
    // symbolicate says it too, and the library's frames are not named from the other build.
    let report = try Self.imagelog(["symbolicate", core])
    #expect(report.error.hasPrefix("imagelog: \(core): \(library): build-id \(before) in the core, \(after) on disk: "),
            "\(report.error)")
  }

  /// A kernel core cut short keeps its notes (written first): the images whose first pages were cut
  /// off come from their files, checked against the core's mappings, so the list is the whole core's
  /// (but for the vDSO, which has no file).
  /// A gcore core keeps its notes last: cut short, it has none, and that is one line naming the file.
  @Test(.enabled(if: haveGcore && kernelWritesCores && haveTool("cc") && haveTool("truncate"),
                 "gcore, eu-unstrip, cc or truncate missing, or the kernel cannot write cores here"))
  func truncatedCores() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-truncated")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try Self.buildThreadsProgram(in: directory)
    let core = try Self.kernelCore([program, "crash"], in: directory)
    let whole = try Self.imagelog(["file", "--format", "unstrip", core])
    try #require(whole.exitCode == 0)
    var info = stat()
    try #require(stat(core, &info) == 0)
    for fraction in [2, 4, 20] {
      let cut = "\(directory)/cut-\(fraction)"
      try #require(try runTool(["cp", core, cut]).status == 0)
      try #require(truncate(cut, info.st_size / off_t(fraction)) == 0)
      let run = try Self.imagelog(["file", "--format", "unstrip", cut])
      #expect(run.exitCode == 0, "\(run.error)")
      // The vDSO has no file to stand in for it: it goes when its page is cut off.
      let expected = whole.output.split(separator: "\n").filter { !$0.hasSuffix(" [vdso]") }
      let got = run.output.split(separator: "\n").filter { !$0.hasSuffix(" [vdso]") }
      #expect(got == expected, "cut to 1/\(fraction)")
      // The vDSO's bytes are read from what is left: cut off or partly there, symbolicate neither traps nor fails.
      let report = try Self.imagelog(["symbolicate", cut])
      #expect(report.exitCode == 0 && report.output.contains("Binary Images:"), "cut to 1/\(fraction): \(report.error)")
    }

    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let gcoreFile = try Self.gcore(child.pid, in: directory)
    try #require(stat(gcoreFile, &info) == 0)
    try #require(truncate(gcoreFile, info.st_size / 2) == 0)
    let run = try Self.imagelog(["file", gcoreFile])
    #expect(run.exitCode == 1)
    #expect(run.output.isEmpty)
    let lines = run.error.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].hasPrefix("imagelog: \(gcoreFile): PT_NOTE (the core is truncated or damaged) 0x"),
            "\(run.error)")
    let report = try Self.imagelog(["symbolicate", gcoreFile])
    #expect(report.exitCode == 1)
    #expect(report.output.isEmpty)
    #expect(report.error == run.error, "symbolicate says what file says")
  }

  /// A regular binary has no images to list in eu-unstrip's form, and no report to print unsymbolicated.
  @Test func unstripFormatNeedsACore() throws {
    let library = "\(packageRoot)/Tests/ImageReadersTests/Fixtures/elf/libfixture-x86_64.so"
    let run = try Self.imagelog(["file", "--format", "unstrip", library])
    #expect(run.exitCode == 1)
    #expect(run.error == "imagelog: \(library): not a core file (--format unstrip lists a core's images)\n")
    let symbolicate = try Self.imagelog(["symbolicate", "--no-symbolicate", library])
    #expect(symbolicate.exitCode == 1)
    #expect(symbolicate.error == "imagelog: \(library): not a core file (--no-symbolicate prints a core's report as built)\n")
  }

  // MARK: symbolicate CORE against eu-stack --core

  /// Each thread's function names by tid, as `imagelog symbolicate --format json --demangle none CORE`
  /// gives them (the function each frame is in, not the inlined ones), with each frame's image file;
  /// `inVDSO` marks a frame in the vDSO, whose symbols come from the core's memory (it has no file).
  static func ourStacks(_ core: String) throws -> [Int: [(name: String?, file: String?, inVDSO: Bool)]] {
    let run = try imagelog(["symbolicate", "--format", "json", "--demangle", "none", core])
    try #require(run.exitCode == 0, "symbolicate failed: \(run.error)")
    let document = try JSONValue.parse(run.output[...])
    var tids: [Int: Int] = [:]
    for thread in document["threads"]?.array ?? [] {
      if let index = thread["index"]?.integer, let tid = thread["tid"]?.integer { tids[index] = tid }
    }
    var files: [String: String] = [:]
    for image in document["images"]?.array ?? [] {
      if let name = image["name"]?.string, let file = image["file"]?.string { files[name] = file }
    }
    var stacks: [Int: [(name: String?, file: String?, inVDSO: Bool)]] = [:]
    for frame in document["frames"]?.array ?? [] {
      guard let index = frame["thread"]?.integer, let tid = tids[index] else { continue }
      let name = frame["mangledSymbol"]?.string ?? frame["symbol"]?.string
      let inVDSO = frame["image"]?.string == "[vdso]"
      stacks[tid, default: []].append((name, frame["image"]?.string.flatMap { files[$0] }, inVDSO))
    }
    return stacks
  }

  /// Each thread's function names by tid, as `eu-stack --core CORE` prints them (nil where it has none).
  static func theirStacks(_ core: String) throws -> [Int: [String?]] {
    let run = try runTool(["eu-stack", "--core", core])
    var stacks: [Int: [String?]] = [:]
    var tid: Int?
    for line in run.output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if fields.first == "TID", fields.count == 2 { tid = Int(fields[1].dropLast()); continue }
      guard let tid, let first = fields.first, first.hasPrefix("#"), fields.count >= 2 else { continue }
      stacks[tid, default: []].append(fields.count >= 3 ? String(fields[2]) : nil)
    }
    return stacks
  }

  /// The name without a symbol version (`@@GLIBC_2.34`) and without glibc's hidden-alias prefix (`__GI_`).
  static func plainName(_ name: String) -> String {
    var name = name.split(separator: "@", maxSplits: 1).first.map(String.init) ?? name
    if name.hasPrefix("__GI_") { name.removeFirst(5) }
    return name
  }

  /// Every symbol's address in `file` and in its separate debug file under /usr/lib/debug, by name
  /// (readelf), to tell aliases of one function apart from different functions.
  static func symbolAddresses(_ file: String) throws -> [String: Set<String>] {
    var files = [file]
    let notes = try runTool(["readelf", "-n", file]).output
    if let id = notes.split(separator: "\n").first(where: { $0.contains("Build ID:") })?.split(separator: " ").last, id.count > 2 {
      files.append("/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug")
    }
    var addresses: [String: Set<String>] = [:]
    for path in files where access(path, R_OK) == 0 {
      for line in try runTool(["readelf", "-sW", "--dyn-syms", path]).output.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 8, fields[0].hasSuffix(":"), fields[3] == "FUNC" || fields[3] == "IFUNC" else { continue }
        addresses[plainName(String(fields[7])), default: []].insert(String(fields[1]))
      }
    }
    return addresses
  }

  /// Our stacks against eu-stack's: the same threads by tid, and in each the same functions in the
  /// same order (a name eu-stack prints and ours may differ only as aliases of one address in the same
  /// file: `read` and `__read`). A frame in the vDSO (read from the core's memory, as eu-stack reads
  /// it: i386 threads block in `__kernel_vsyscall`) must have eu-stack's very name. Returns how many
  /// vDSO frames were compared.
  @discardableResult
  static func expectSameStacks(_ core: String, _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    try expectSameStacks(try ourStacks(core), as: core, comment, sourceLocation: sourceLocation)
  }

  /// `ours` (each thread's functions by tid, as `ourStacks` gives them) against `eu-stack --core CORE`.
  @discardableResult
  static func expectSameStacks(_ ours: [Int: [(name: String?, file: String?, inVDSO: Bool)]], as core: String,
                               _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    let theirs = try theirStacks(core)
    #expect(!theirs.isEmpty, "\(comment): eu-stack printed no thread", sourceLocation: sourceLocation)
    #expect(Set(ours.keys) == Set(theirs.keys), "\(comment): threads \(ours.keys.sorted()) vs eu-stack's \(theirs.keys.sorted())",
            sourceLocation: sourceLocation)
    var aliases: [String: [String: Set<String>]] = [:]
    var vdsoFrames = 0
    for (tid, their) in theirs {
      let our = ours[tid] ?? []
      let ourNames = our.map { $0.name.map(plainName) ?? "?" }
      let theirNames = their.map { $0.map(plainName) ?? "?" }
      guard ourNames.count == theirNames.count else {
        Issue.record("\(comment): thread \(tid): \(ourNames) vs eu-stack's \(theirNames)", sourceLocation: sourceLocation)
        continue
      }
      for (index, (mine, other)) in zip(ourNames, theirNames).enumerated() {
        if our[index].inVDSO {
          vdsoFrames += 1
          // The x86_64 vDSO exports each function twice at one address: `__vdso_clock_gettime` and `clock_gettime`.
          let vdsoName = { (name: String) in name.hasPrefix("__vdso_") ? String(name.dropFirst(7)) : name }
          #expect(vdsoName(mine) == vdsoName(other) && mine != "?", "\(comment): thread \(tid) frame \(index) in the vDSO: \(mine) vs eu-stack's \(other)",
                  sourceLocation: sourceLocation)
          continue
        }
        guard mine != other else { continue }
        var same = false
        if let file = our[index].file {
          if aliases[file] == nil { aliases[file] = try symbolAddresses(file) }
          let table = aliases[file] ?? [:]
          same = !(table[mine] ?? []).isDisjoint(with: table[other] ?? [])
        }
        #expect(same, "\(comment): thread \(tid) frame \(index): \(mine) vs eu-stack's \(other)\n\(ourNames)\n\(theirNames)",
                sourceLocation: sourceLocation)
      }
    }
    return vdsoFrames
  }
}
