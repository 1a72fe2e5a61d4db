#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing

/// `imagelog minidump PID|CORE -o FILE` on a live threaded C program without frame pointers, on gdb's
/// core of it and on the kernel's core of a threaded crash, held to the peers: minidump-stackwalk
/// reads each dump, with the threads `/proc/PID/task` (or the core) has; its frames, with the symbols
/// dump_syms made from the same files, are `eu-stack`'s (`-p PID`, `--core CORE`) address for address,
/// and so are imagelog's own (`symbolicate DUMP`), function for function; every module's debug id is
/// the one dump_syms gives its file. A live process is stopped for the copy only: afterwards it runs
/// on, no thread stopped. A dump of a 4-thread process stays under 256 KiB.
@Suite(.serialized) struct MinidumpWriteCLITests {
  static let canRun = MinidumpCLI.haveOracles && haveTool("eu-stack") && haveTool("cc")
  static let reason: Comment = "needs minidump-stackwalk and dump_syms (Scripts/install-test-tools), eu-stack (elfutils) and cc"

  /// `imagelog minidump TARGET -o DUMP`: its one line, and the dump's size.
  static func writeDump(_ target: String, to dump: String, threads: Int, modules: Int? = nil,
                        sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    let run = try runChild([MinidumpCLI.imagelog, "minidump", target, "-o", dump])
    try #require(run.exitCode == 0, "imagelog minidump \(target): \(run.error)", sourceLocation: sourceLocation)
    var info = stat()
    try #require(stat(dump, &info) == 0, sourceLocation: sourceLocation)
    let words = run.output.split(separator: " ")
    #expect(run.output.hasPrefix("\(dump): \(threads) threads, ") && run.output.hasSuffix(" \(info.st_size) bytes\n"),
            "\(run.output)", sourceLocation: sourceLocation)
    if let modules { #expect(words.count > 4 && words[3] == "\(modules)", "\(run.output)", sourceLocation: sourceLocation) }
    return Int(info.st_size)
  }

  /// The dump against minidump-stackwalk (its frames with dump_syms' symbols: eu-stack's addresses),
  /// imagelog's own reading of it (eu-stack's addresses and functions), and dump_syms' debug ids.
  /// Returns minidump-stackwalk's view.
  @discardableResult
  static func expectSameAsPeers(_ dump: String, euStack: [EuStackThread], folders: [String], in directory: String,
                                _ label: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> MinidumpCLI.View {
    let unsymbolicated = try MinidumpCLI.stackwalkView(dump, sourceLocation: sourceLocation)
    let (store, debugIDs) = try MinidumpCLI.symbolStore(for: unsymbolicated.modules, folders: folders, in: directory,
                                                        sourceLocation: sourceLocation)
    let theirs = try MinidumpCLI.stackwalkView(dump, symbols: store, sourceLocation: sourceLocation)
    let checked = MinidumpCLI.expectDebugIDsOfDumpSyms(theirs, debugIDs, label, sourceLocation: sourceLocation)
    #expect(checked >= 3, "\(label): \(checked) modules' debug ids checked", sourceLocation: sourceLocation)
    // minidump-stackwalk walked every thread by CFI (none scanned) to eu-stack's very frames.
    for thread in theirs.threads {
      #expect(thread.frames.allSatisfy { $0.trust == "context" || $0.trust == "cfi" }, "\(label): \(thread.frames)",
              sourceLocation: sourceLocation)
    }
    let compared = MinidumpCLI.expectSameFrames(theirs, as: euStack, names: false, "\(label), minidump-stackwalk",
                                                sourceLocation: sourceLocation)
    #expect(compared >= 16, "\(label): \(compared) frames compared", sourceLocation: sourceLocation)
    let ours = try MinidumpCLI.imagelogView(dump, sourceLocation: sourceLocation)
    MinidumpCLI.expectSameFrames(ours, as: euStack, names: true, "\(label), imagelog symbolicate", sourceLocation: sourceLocation)
    #expect(ours.threads.allSatisfy { $0.frames.allSatisfy { $0.trust == nil } }, "\(label): every frame by CFI",
            sourceLocation: sourceLocation)
    // And what imagelog reads of the threads and modules is what minidump-stackwalk reads.
    #expect(ours.threads.map(\.tid) == theirs.threads.map(\.tid), sourceLocation: sourceLocation)
    #expect(ours.threads.map(\.name) == theirs.threads.map(\.name), sourceLocation: sourceLocation)
    #expect(ours.modules == theirs.modules, "\(label): modules\n\(ours.modules)\n\(theirs.modules)", sourceLocation: sourceLocation)
    return theirs
  }

  @Test(.enabled(if: canRun, reason))
  func liveProcess() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-live")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try MinidumpCLI.startBlockedThreads(in: directory)
    defer { child.stop() }
    let tids = threadIDs(of: child.pid)
    let dump = directory + "/live.dmp"
    let size = try Self.writeDump(String(child.pid), to: dump, threads: 4)
    #expect(size < 256 * 1024, "a 4-thread process in \(size) bytes")
    // Let go: none stopped, every thread back asleep in its system call (a thread released may run for
    // an instant to restart it: waited for), the process running on.
    #expect(noThreadStopped(child.pid), "\(tids.map { threadState(child.pid, $0) ?? "?" })")
    try waitUntilThreadsBlocked(child.pid, count: 4)
    #expect(threadIDs(of: child.pid) == tids)

    let euStack = try MinidumpCLI.euStack(["-p", String(child.pid)])
    let theirs = try Self.expectSameAsPeers(dump, euStack: euStack, folders: MinidumpCLI.mappedFolders(of: child.pid),
                                            in: directory, "live process-threads")
    #expect(theirs.threads.map(\.tid) == tids.map(UInt64.init))
    #expect(theirs.threads.map(\.name) == tids.map { readFile("/proc/\(child.pid)/task/\($0)/comm").map { String($0.dropLast()) } })
    #expect(theirs.crashedTID == nil && theirs.signal == nil, "a live process did not crash")
    // SystemInfo's processor as Breakpad's writer fills it from /proc/cpuinfo (the first processor's).
    #if arch(x86_64)
    let cpu = (readFile("/proc/cpuinfo") ?? "").split(separator: "\n").prefix { !$0.isEmpty }
    let field = { (name: String) in cpu.first { $0.hasPrefix(name + "\t") }?.split(separator: " ").last.map(String.init) ?? "?" }
    #expect(theirs.cpuInfo == "family \(field("cpu family")) model \(field("model")) stepping \(field("stepping"))")
    #endif
    // eu-stack attached after us: still nothing left stopped.
    #expect(noThreadStopped(child.pid))
  }

  /// A dump holds the threads' stacks (with --environ, the environment the help calls secret): mode
  /// 0600 under umask 022, as the kernel's cores and Crashpad's and Breakpad's dumps are.
  @Test func dumpIsReadableByItsOwnerOnly() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-mode")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: "sleep")  // the exec and the loader are done
    for (index, extra) in [[], ["--environ"]].enumerated() {
      let dump = "\(directory)/dump-\(index).dmp"
      let run = try runChild(["sh", "-c", "umask 022; exec \"$@\"", "sh", MinidumpCLI.imagelog, "minidump", String(child.pid), "-o", dump] + extra)
      #expect(run.exitCode == 0, "\(run.error)")
      var info = stat()
      #expect(stat(dump, &info) == 0 && info.st_mode & 0o777 == 0o600, "\(extra): mode \(String(info.st_mode & 0o777, radix: 8))")
    }
  }

  @Test(.enabled(if: canRun && CoreFileTests.haveGcore, "needs gcore (gdb); \(reason)"))
  func gcoreOfALiveProcess() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-gcore")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try MinidumpCLI.startBlockedThreads(in: directory)
    defer { child.stop() }
    let core = try CoreFileTests.gcore(child.pid, in: directory)
    let dump = directory + "/gcore.dmp"
    let size = try Self.writeDump(core, to: dump, threads: 4)
    // Each stack from its stack pointer to the end of its mapping, as a live dump copies it.
    #expect(size < 256 * 1024, "gcore of a 4-thread process in \(size) bytes")
    let theirs = try Self.expectSameAsPeers(dump, euStack: try MinidumpCLI.euStack(["--core", core]),
                                            folders: [directory], in: directory, "gcore of process-threads")
    #expect(theirs.threads.map(\.tid) == threadIDs(of: child.pid).map(UInt64.init))
    #expect(theirs.crashedTID == nil, "gcore's SIGSTOP is no crash")
  }

  @Test(.enabled(if: canRun && CoreFileTests.kernelWritesCores,
                 "the kernel cannot write cores here (CoreFileTests.kernelCoreProblem), or \(reason)"))
  func kernelCoreOfACrash() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-kernel-core")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let program = try CoreFileTests.buildThreadsProgram(in: directory)
    let core = try CoreFileTests.kernelCore([program, "crash"], in: directory)
    let dump = directory + "/kernel.dmp"
    let size = try Self.writeDump(core, to: dump, threads: 4)
    #expect(size < 256 * 1024, "\(size) bytes")
    let theirs = try Self.expectSameAsPeers(dump, euStack: try MinidumpCLI.euStack(["--core", core]),
                                            folders: [directory], in: directory, "kernel core of coredump-threads")
    // The crash: the thread the kernel wrote first, SIGSEGV at 0x10, its registers the core's.
    let crashed = try #require(try CoreFileTests.noteThreadIDs(core).first.flatMap { UInt64($0) })
    #expect(theirs.crashedTID == crashed)
    #expect(theirs.signal == 11 && theirs.crashAddress == 0x10)
    let ours = try MinidumpCLI.imagelogView(dump)
    #expect(ours.crashedTID == crashed && ours.signal == 11 && ours.crashAddress == 0x10)
    #expect(!theirs.registers.isEmpty && theirs.registers.allSatisfy { ours.registers[$0.key] == $0.value },
            "\(ours.registers)\n\(theirs.registers)")
    let frames = try #require(ours.threads.first { $0.tid == crashed }?.frames)
    #expect(frames.first?.symbol == "crash_now", "\(frames)")
  }
}
