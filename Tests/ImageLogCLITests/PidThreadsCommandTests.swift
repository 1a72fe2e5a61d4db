import FoundationEssentials
import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog pid --threads`: every thread's stack against `eu-stack -p` on the same process (a C
/// program without frame pointers, python3 with named threads, a Swift program), the report's
/// layout, and the errors; after each run the target runs on, no thread stopped.
@Suite struct PidThreadsCommandTests {
  static let haveEuStack = haveTool("eu-stack")

  struct Report: Decodable {
    struct Frame: Decodable {
      var thread: Int; var frame: Int; var address: String; var symbol: String?; var trust: String?; var image: String?
      var imageOffset: UInt64?; var status: String
    }
    struct Thread: Decodable { var index: Int; var tid: Int32; var name: String?; var state: String? }
    struct Image: Decodable { var name: String; var loadAddress: String; var status: String }
    var frames: [Frame]
    var threads: [Thread]
    var images: [Image]
  }

  /// A symbol as glibc's aliases of one function compare: without its version, and without the
  /// `__GI_`, `__libc_` and leading `_` that glibc's internal aliases of the same address add
  /// (eu-stack names `read` what the symbol table also calls `__read` and `__libc_read`).
  static func canonical(_ name: String?) -> String? {
    guard var name = name.map(unversionedSymbol) else { return nil }
    while true {
      if name.hasPrefix("__GI_") { name.removeFirst(5) } else if name.hasPrefix("__libc_") { name.removeFirst(7) }
      // The x86_64 vDSO exports each function twice at one address: `__vdso_clock_gettime` and `clock_gettime`.
      else if name.hasPrefix("__vdso_") { name.removeFirst(7) }
      else if name.hasPrefix("_"), name.count > 1 { name.removeFirst() } else { break }
    }
    return name
  }

  /// Our frames' functions against a peer's, position by position: equal as `canonical` names; a vDSO
  /// frame too (its symbols read from the target's memory, as eu-stack reads them: every i386 system
  /// call goes through its `__kernel_vsyscall`).
  static func sameFunctions(_ ours: [Report.Frame], _ theirs: [String?]) -> Bool {
    ours.count == theirs.count && zip(ours, theirs).allSatisfy { frame, name in
      canonical(frame.symbol) == canonical(name)
    }
  }

  /// Runs ours (JSON, symbol tables, names as stored) and eu-stack on `pid`, and checks: the same
  /// threads by tid in the same order; in each, the same frame addresses and the same functions in the
  /// same order. Returns our report.
  @discardableResult
  func expectSameStacksAsEuStack(_ pid: pid_t, _ label: String) throws -> Report {
    let ours = try runProcessTest([processTestImagelog, "pid", "--threads", String(pid), "--format", "json",
                                   "--no-lines", "--demangle", "none"])
    #expect(ours.exitStatus == 0, "\(label): \(ours.error)")
    #expect(noThreadStopped(pid), "\(label): a thread was left stopped")
    let peer = try runChild(["eu-stack", "-p", String(pid)])
    let theirs = EuStackThread.parse(peer.output)
    let report = try JSONDecoder().decode(Report.self, from: Data(ours.output.utf8))
    #expect(report.threads.map(\.tid) == theirs.map(\.tid), "\(label): threads")
    #expect(report.threads.map(\.index) == Array(report.threads.indices))
    for (thread, peerThread) in zip(report.threads, theirs) {
      let frames = report.frames.filter { $0.thread == thread.index }.sorted { $0.frame < $1.frame }
      let addresses = frames.map { UInt64($0.address.dropFirst(2), radix: 16) ?? 0 }
      #expect(addresses == peerThread.frames.map(\.address), "\(label) tid \(thread.tid): addresses\n\(peer.output)")
      #expect(Self.sameFunctions(frames, peerThread.frames.map(\.name)),
              "\(label) tid \(thread.tid): functions \(frames.map(\.symbol)) vs \(peerThread.frames.map(\.name))")
      #expect(thread.name == readFile("/proc/\(pid)/task/\(thread.tid)/comm").map { String($0.dropLast()) })
    }
    return report
  }

  @Test(.enabled(if: haveEuStack && haveTool("cc"), "needs eu-stack (elfutils) and cc"))
  func cProgramWithoutFramePointers() throws {
    let directory = try makeTemporaryDirectory("imagelog-pid-threads")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try RunningChild([try buildThreadsProgram(in: directory), "5"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 6)
    let report = try expectSameStacksAsEuStack(child.pid, "C")
    #expect(report.threads.map(\.name) == ["process-threads", "reader-0", "sleeper-1", "waiter-2", "reader-3", "sleeper-4"])
    #expect(report.threads.allSatisfy { $0.state == "S" })
    // Each worker's own frames, by CFI alone (no frame pointers): the blocking function, then worker.
    let names = { (index: Int) in report.frames.filter { $0.thread == index }.compactMap(\.symbol) }
    #expect(names(1).contains("blocked_in_read") && names(2).contains("blocked_in_sleep") && names(3).contains("blocked_on_condition"))
    #expect(names(0).starts(with: ["pause", "main_waits", "main"]))
    #expect(report.frames.allSatisfy { $0.trust == nil || $0.trust == "cfi" || $0.trust == "context" }, "\(report.frames.map(\.trust))")

    // The text report: the crash report's header (README.md's "Crash reports"), each thread's name, tid and state, Binary Images.
    let text = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid)])
    #expect(text.exitStatus == 0 && text.error.isEmpty, "\(text.error)")
    let lines = text.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(lines.first == "Process:         process-threads [\(child.pid)]")
    #expect(lines.contains("Path:            \(directory)/process-threads"))
    #expect(lines.contains("Threads:         6"))
    let stopped = try #require(lines.first { $0.hasPrefix("Stopped:         ") })
    #expect(stopped.hasSuffix(" ms") && Double(stopped.dropFirst(17).dropLast(3)) != nil, "\(stopped)")
    #expect(lines.contains("Thread 1 name:  reader-0"))
    #expect(lines.contains("Thread 1:  tid \(threadIDs(of: child.pid)[1])  state S"))
    #expect(lines.contains { $0.hasPrefix("1   process-threads ") && $0.contains(" blocked_in_read + ") && $0.contains("process-threads.c:") })
    #expect(lines.contains("Binary Images:"))
    #expect(noThreadStopped(child.pid))

    // --no-symbolicate: addresses as image + offset, which imagelog symbolicate then names as pid did.
    let plain = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-symbolicate"])
    #expect(plain.exitStatus == 0)
    #expect(!plain.output.contains("blocked_in_read"))
    let saved = directory + "/report.txt"
    try writeFile(saved, plain.output)
    let later = try runProcessTest([processTestImagelog, "symbolicate", saved])
    #expect(later.output.contains(" blocked_in_read + "), "\(later.output)")

    // --no-symbolicate --format json: the shape of symbolicate's JSON, every frame placed in its image
    // (image, offset) and not looked up, every image not searched; the same frames, images and
    // offsets as symbolicate gives the text saved above (the threads are blocked where they were).
    let plainJSON = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-symbolicate",
                                        "--format", "json"])
    #expect(plainJSON.exitStatus == 0 && plainJSON.error.isEmpty, "\(plainJSON.error)")
    let unlooked = try JSONDecoder().decode(Report.self, from: Data(plainJSON.output.utf8))
    let looked = try JSONDecoder().decode(
      Report.self, from: Data(try runProcessTest([processTestImagelog, "symbolicate", saved, "--format", "json"]).output.utf8))
    #expect(unlooked.frames.allSatisfy { $0.status == "not-looked-up" && $0.symbol == nil })
    #expect(unlooked.images.allSatisfy { $0.status == "not-searched" } && !unlooked.images.isEmpty)
    #expect(looked.frames.allSatisfy { $0.status == "symbolicated" })
    let placement = { (report: Report) in report.frames.map { "\($0.thread) \($0.frame) \($0.address) \($0.image ?? "?") \($0.imageOffset ?? 0)" } }
    #expect(placement(unlooked) == placement(looked))
    #expect(unlooked.images.map(\.name) == looked.images.map(\.name))
    #expect(unlooked.threads.map(\.tid) == looked.threads.map(\.tid))
  }

  /// x86_64's `clock_gettime` runs in the vDSO (`__vdso_clock_gettime`): a program calling it in a loop
  /// is caught there, and that frame is named as `eu-addr2line --pid` names its address (frame 0: the
  /// address itself), then unwound through the vDSO's CFI into libc's `clock_gettime` and `main`.
  @Test(.enabled(if: haveTool("eu-addr2line") && haveTool("cc"), "needs eu-addr2line (elfutils) and cc"))
  func frameInTheVDSOIsNamedAsElfutilsNamesIt() throws {
    let directory = try makeTemporaryDirectory("imagelog-vdso-spin")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    try writeFile(directory + "/spin.c", """
      #include <stdio.h>
      #include <time.h>
      int main(void) { struct timespec t; puts("ready"); fflush(stdout); for (;;) clock_gettime(CLOCK_MONOTONIC, &t); }
      """)
    let build = try runChild(["cc", "-O2", "-g", directory + "/spin.c", "-o", directory + "/spin"])
    try #require(build.exitCode == 0, "cc: \(build.error)")
    let child = try RunningChild([directory + "/spin"])
    defer { child.stop() }
    try child.wait(for: "ready")
    // The loop is mostly in the vDSO; a stop that lands in libc or main instead is tried again.
    for _ in 0..<100 {
      let ours = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--format", "json",
                                     "--no-lines", "--demangle", "none"])
      try #require(ours.exitStatus == 0, "\(ours.error)")
      let report = try JSONDecoder().decode(Report.self, from: Data(ours.output.utf8))
      let frames = report.frames.filter { $0.thread == 0 }.sorted { $0.frame < $1.frame }
      guard let top = frames.first, top.image == "[vdso]" else { continue }
      let peer = try runChild(["eu-addr2line", "--pid=\(child.pid)", "-f", top.address])
      let theirs = peer.output.split(separator: "\n").first.map(String.init)
      #expect(top.symbol != nil && Self.canonical(top.symbol) == Self.canonical(theirs),
              "\(top.address): \(top.symbol ?? "none") vs eu-addr2line's \(theirs ?? "nothing") \(peer.error)")
      #expect(frames.dropFirst().prefix(2).map { Self.canonical($0.symbol) } == ["clock_gettime", "main"],
              "\(frames.map(\.symbol))")
      return
    }
    Issue.record("pid \(child.pid) was never stopped in the vDSO in 100 tries")
  }

  /// A report saved with `--no-symbolicate` on this machine, symbolicated later: its vDSO has the
  /// build-id of ours (same kernel), so its frames are named from our own vDSO. Frames are added at
  /// addresses across the vDSO's code and held to `eu-addr2line --pid`, which reads the target's vDSO
  /// (frames after the first are return addresses: looked up one byte before, as eu-stack does).
  @Test(.enabled(if: haveTool("eu-addr2line") && haveTool("python3"), "needs eu-addr2line (elfutils) and python3"))
  func savedReportNamesVDSOFramesFromOurOwnVDSO() throws {
    let child = try RunningChild(["python3", "-c", "import signal; print('ready', flush=True); signal.pause()"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let plain = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-symbolicate"])
    try #require(plain.exitStatus == 0, "\(plain.error)")
    let maps = try #require(readFile("/proc/\(child.pid)/maps"))
    let range = try #require(maps.split(separator: "\n").first { $0.hasSuffix(" [vdso]") }?.split(separator: " ").first)
    let bounds = range.split(separator: "-").compactMap { UInt64($0, radix: 16) }
    try #require(bounds.count == 2 && bounds[0] < bounds[1])
    // Our frames after thread 0's first, every 16 bytes from the vDSO's second page on (its code).
    let addresses = Array(stride(from: bounds[0] + 0x400, to: bounds[1], by: 16))
    var lines = plain.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let first = try #require(lines.firstIndex { $0.hasPrefix("0   ") })
    let added = addresses.enumerated().map { index, address in
      let number = String(index + 1).padding(toLength: 4, withPad: " ", startingAt: 0)
      let image = "[vdso]".padding(toLength: 30, withPad: " ", startingAt: 0)
      let hex = String(address, radix: 16)
      return number + image + "0x" + String(repeating: "0", count: 16 - hex.count) + hex
        + " 0x\(String(bounds[0], radix: 16)) + \(address - bounds[0])"
    }
    lines.removeSubrange(first + 1..<(lines[(first + 1)...].firstIndex { !($0.first?.isNumber ?? false) } ?? first + 1))
    lines.insert(contentsOf: added, at: first + 1)
    let directory = try makeTemporaryDirectory("imagelog-vdso-report")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    try writeFile(directory + "/report.txt", lines.joined(separator: "\n"))
    let ours = try runProcessTest([processTestImagelog, "symbolicate", "--format", "json", "--no-lines", "--demangle", "none",
                                   directory + "/report.txt"])
    try #require(ours.exitStatus == 0, "\(ours.error)")
    let report = try JSONDecoder().decode(Report.self, from: Data(ours.output.utf8))
    let frames = report.frames.filter { $0.thread == 0 && $0.image == "[vdso]" }.sorted { $0.frame < $1.frame }
    try #require(frames.count == addresses.count, "\(ours.output)")
    let peer = try runChild(["eu-addr2line", "--pid=\(child.pid)", "-f"] + addresses.map { "0x" + String($0 - 1, radix: 16) })
    let theirNames = peer.output.split(separator: "\n").enumerated().filter { $0.offset % 2 == 0 }.map { $0.element == "??" ? nil : String($0.element) }
    try #require(theirNames.count == addresses.count, "\(peer.output)\(peer.error)")
    var named = 0
    for (frame, name) in zip(frames, theirNames) {
      #expect(Self.canonical(frame.symbol) == Self.canonical(name), "\(frame.address): \(frame.symbol ?? "none") vs eu-addr2line's \(name ?? "??")")
      if frame.symbol != nil { named += 1 }
    }
    #expect(named > 0, "no vDSO frame named")
    print("PidThreadsCommandTests: saved report: \(named) of \(frames.count) vDSO frames named as eu-addr2line names them")
  }

  /// A 32-bit process on the x86_64 kernel (Tests/Programs/process-threads.c built with gcc -m32 -O2
  /// -fomit-frame-pointer): PTRACE_GETREGSET gives i386's 17 registers and every thread is unwound as
  /// 32-bit code. Held to `eu-stack --core` on a gcore of the same blocked process (the same threads,
  /// addresses and functions), and to `eu-stack -p`, whose live walk of an i386 main thread ends at
  /// `main` where its walk of the core goes on to `_start`: each of its threads is a prefix of ours.
  @Test(.enabled(if: haveEuStack && haveTool("gcore") && canRun32BitLibcPrograms,
                 "needs eu-stack (elfutils), gcore (gdb) and gcc -m32 with a 32-bit libc (gcc-12-multilib)"))
  func i386Program() throws {
    let directory = try makeTemporaryDirectory("imagelog-pid-threads-i386")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let program = directory + "/process-threads32"
    let build = try runChild(["gcc", "-m32", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                              packageRoot + "/Tests/Programs/process-threads.c", "-o", program])
    try #require(build.exitCode == 0, "gcc -m32: \(build.error)")
    let child = try RunningChild([program, "5"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 6)
    let ours = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--format", "json",
                                   "--no-lines", "--demangle", "none"])
    #expect(ours.exitStatus == 0 && ours.error.isEmpty, "\(ours.error)")
    #expect(noThreadStopped(child.pid))
    let report = try JSONDecoder().decode(Report.self, from: Data(ours.output.utf8))
    let live = EuStackThread.parse(try runChild(["eu-stack", "-p", String(child.pid)]).output)
    _ = try runChild(["gcore", "-o", directory + "/core", String(child.pid)])
    let core = directory + "/core.\(child.pid)"
    let dumped = EuStackThread.parse(try runChild(["eu-stack", "--core", core]).output)
    #expect(report.threads.map(\.tid) == threadIDs(of: child.pid))
    #expect(Set(report.threads.map(\.tid)) == Set(dumped.map(\.tid)) && Set(report.threads.map(\.tid)) == Set(live.map(\.tid)))
    var frameCount = 0
    for thread in report.threads {
      let frames = report.frames.filter { $0.thread == thread.index }.sorted { $0.frame < $1.frame }
      let addresses = frames.map { UInt64($0.address.dropFirst(2), radix: 16) ?? 0 }
      frameCount += frames.count
      let full = try #require(dumped.first { $0.tid == thread.tid })
      #expect(addresses == full.frames.map(\.address), "tid \(thread.tid): \(addresses) vs eu-stack --core \(full.frames)")
      #expect(Self.sameFunctions(frames, full.frames.map(\.name)),
              "tid \(thread.tid): \(frames.map(\.symbol)) vs eu-stack --core \(full.frames.map(\.name))")
      let partial = try #require(live.first { $0.tid == thread.tid })
      #expect(partial.frames.count >= 4 && frames.count >= partial.frames.count, "tid \(thread.tid): eu-stack -p \(partial.frames)")
      let prefix = Array(frames.prefix(partial.frames.count))
      #expect(Array(addresses.prefix(partial.frames.count)) == partial.frames.map(\.address), "tid \(thread.tid)")
      #expect(Self.sameFunctions(prefix, partial.frames.map(\.name)), "tid \(thread.tid): eu-stack -p \(partial.frames)")
    }
    let names = { (index: Int) in report.frames.filter { $0.thread == index }.compactMap(\.symbol) }
    #expect(names(0).starts(with: ["__kernel_vsyscall", "pause", "main_waits", "main"]), "\(names(0))")
    #expect(names(1).contains("blocked_in_read") && names(2).contains("blocked_in_sleep") && names(3).contains("blocked_on_condition"))
    // Each blocked thread's frame 0 is in the vDSO, named (as eu-stack named it, checked above).
    let vdsoFrames = report.frames.filter { $0.image == "[vdso]" }
    #expect(vdsoFrames.count >= report.threads.count && vdsoFrames.allSatisfy { $0.symbol == "__kernel_vsyscall" },
            "\(vdsoFrames.map(\.symbol))")
    print("PidThreadsCommandTests: i386: \(report.threads.count) threads, \(frameCount) frames equal eu-stack --core's")
  }

  @Test(.enabled(if: haveEuStack && haveTool("python3"), "needs eu-stack (elfutils) and python3"))
  func pythonWithNamedThreads() throws {
    let script = """
      import ctypes, os, signal, threading
      libc = ctypes.CDLL(None)
      r, w = os.pipe()
      def named(name, body):
          def run():
              libc.prctl(15, name.encode(), 0, 0, 0)
              body()
          return threading.Thread(target=run, daemon=True)
      for t in [named('py-reader', lambda: os.read(r, 1)), named('py-pause', signal.pause),
                named('py-event', lambda: threading.Event().wait())]:
          t.start()
      print('ready', flush=True)
      signal.pause()
      """
    let child = try RunningChild(["python3", "-c", script])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 4)
    try waitUntil("the threads of \(child.pid) have their names") {
      threadIDs(of: child.pid).dropFirst().compactMap { readFile("/proc/\(child.pid)/task/\($0)/comm") }
        == ["py-reader\n", "py-pause\n", "py-event\n"]
    }
    let report = try expectSameStacksAsEuStack(child.pid, "python3")
    #expect(report.threads.dropFirst().map(\.name) == ["py-reader", "py-pause", "py-event"])
  }

  @Test(.enabled(if: haveEuStack && haveTool("swiftc"), "needs eu-stack (elfutils) and swiftc"))
  func swiftProgram() throws {
    let directory = try makeTemporaryDirectory("imagelog-pid-threads-swift")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let program = directory + "/sleeper"
    let build = try runChild(["swiftc", packageRoot + "/Tests/Programs/process-swift-sleeper.swift", "-o", program])
    try #require(build.exitCode == 0, "swiftc: \(build.error)")
    let child = try RunningChild([program])
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: program)
    try waitUntilThreadsBlocked(child.pid, count: threadIDs(of: child.pid).count)
    let report = try expectSameStacksAsEuStack(child.pid, "Swift")
    #expect(report.frames.contains { $0.symbol == "main" })
  }

  @Test(.enabled(if: haveTool("cc"), "needs cc"))
  func alreadyTraced() throws {
    let directory = try makeTemporaryDirectory("imagelog-pid-tracer")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let (parent, traced) = try startTracedProcess(in: directory)
    defer { kill(traced, SIGKILL) }
    let result = try runProcessTest([processTestImagelog, "pid", "--threads", String(traced)])
    #expect(result.exitStatus == 1)
    #expect(result.output.isEmpty)
    #expect(result.error == "imagelog: pid \(traced): already traced by pid \(parent.pid) (process-tracer): a process has one "
            + "tracer at a time; detach the debugger first\n")
    #expect(noThreadStopped(traced))
  }

  /// Another user's process. As root: imagelog runs as nobody against root's process; otherwise
  /// against PID 1 (root's).
  @Test(.droppedUserReaches(running: [processTestImagelog, "--version"]))
  func anotherUsersProcess() throws {
    var target: RunningChild?
    let result: ProcessTestResult
    if getuid() == 0 {
      let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
      try child.wait(for: "ready")
      try waitUntilSleeping(child.pid, in: "sleep")  // the exec and the loader are done
      target = child
      result = try runProcessTest(droppedUserPrefix + [processTestImagelog, "pid", "--threads", String(child.pid)])
    } else {
      result = try runProcessTest([processTestImagelog, "pid", "--threads", "1"])
    }
    let pid = target.map { String($0.pid) } ?? "1"
    let targetUID = (readFile("/proc/\(pid)/status") ?? "").split(separator: "\n")
      .first { $0.hasPrefix("Uid:") }?.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst(2).first.map(String.init)
    let ourUID = getuid() == 0 ? "65534" : String(getuid())
    #expect(result.exitStatus == 1)
    #expect(result.output.isEmpty)
    #expect(result.error.hasPrefix("imagelog: pid \(pid): ptrace refused (PTRACE_SEIZE: permission denied): "), "\(result.error)")
    #expect(result.error.contains("it runs as uid \(targetUID ?? "?"), imagelog as uid \(ourUID)"), "\(result.error)")
    #expect(result.error.hasSuffix("give imagelog CAP_SYS_PTRACE\n"), "\(result.error)")
    #expect(result.error.split(separator: "\n").count == 1)
    if let target { #expect(noThreadStopped(target.pid)) }
  }

  @Test(.enabled(if: (readFile("/proc/2/stat") ?? "").contains("(kthreadd)"),
                 "PID 2 is not kthreadd: not in the initial PID namespace (a container); skipped"))
  func kernelThread() throws {
    let result = try runProcessTest([processTestImagelog, "pid", "--threads", "2"])
    #expect(result.exitStatus == 1)
    #expect(result.error == "imagelog: pid 2: kthreadd is a kernel thread: it has no user-space stack to unwind\n")
  }

  @Test(.enabled(if: haveTool("python3"), "needs python3 to make a zombie"))
  func zombie() throws {
    let child = try RunningChild(["python3", "-c",
      "import os, signal\npid = os.fork()\nif pid == 0: os._exit(0)\nprint(pid, flush=True)\nsignal.pause()"])
    let zombiePID = try #require(child.readLine())
    try waitUntil("pid \(zombiePID) is a zombie") { threadState(pid_t(zombiePID) ?? 0, pid_t(zombiePID) ?? 0) == "Z" }
    let command = try #require(readFile("/proc/\(zombiePID)/comm")).dropLast()
    let result = try runProcessTest([processTestImagelog, "pid", "--threads", zombiePID])
    #expect(result.exitStatus == 1)
    #expect(result.error == "imagelog: pid \(zombiePID): \(command) is a zombie (exited, not yet reaped): it has no threads to stop\n")
  }

  @Test func noSuchProcessAndUsage() throws {
    let missing = try runProcessTest([processTestImagelog, "pid", "--threads", "99999999"])
    #expect(missing.exitStatus == 1)
    #expect(missing.error == "imagelog: pid 99999999: no such process\n")
    #expect(try runProcessTest([processTestImagelog, "pid", "--threads"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "pid", "--threads", "1", "--format", "crash"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "pid", "--threads", "1", "--format", "xml"]).exitStatus == 64)
    let help = try runProcessTest([processTestImagelog, "pid", "--help"]).output
    #expect(help.contains("imagelog pid [--threads] <pid>") && help.contains("THREADS:"))
  }

  /// Processes that end while they are read (threads coming and going, then the whole process):
  /// every run is a report (status 0; threads that ended meanwhile listed as such) or one line per
  /// problem naming the PID with status 1; never a crash or a hang, and no thread left stopped.
  @Test(.enabled(if: haveTool("python3"), "needs python3"))
  func processesExitingWhileRead() throws {
    // Ends after some work of its own, not after a time: early or late in imagelog's reading.
    let script = threadChurnScript(then: """
      for _ in range(int(sys.argv[1])): t = threading.Thread(target=lambda: None); t.start(); t.join()
      os._exit(0)
      """)
    var outcomes: Set<Int32> = []
    for round in 0..<12 {
      let child = try RunningChild(["python3", "-c", script, String((round % 4) * 100)])
      try child.wait(for: "ready")
      let result = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-symbolicate"])
      outcomes.insert(result.exitStatus ?? -1)
      if result.exitStatus == 0 {
        #expect(result.output.hasPrefix("Process:") && result.output.contains("Binary Images:"))
        #expect(result.error.isEmpty)
      } else {
        #expect(result.exitStatus == 1, "\(result.error)")
        let lines = result.error.split(separator: "\n")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.hasPrefix("imagelog: pid \(child.pid): ") }, "\(result.error)")
      }
      for line in result.output.split(separator: "\n") where line.hasPrefix("(not unwound: ") {
        #expect(line == "(not unwound: the thread exited while it was being read)"
                || line == "(not unwound: no frame could be read (the process exited meanwhile))", "\(line)")
      }
      #expect(noThreadStopped(child.pid))
    }
    #expect(outcomes.isSubset(of: [0, 1]))
  }
}
