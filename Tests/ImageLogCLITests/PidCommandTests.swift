import Glibc
import ImageLogTestSupport
import Testing
import ImageReaders

/// `imagelog pid`: output against eu-unstrip on the same process, every style, and the errors.
@Suite(.serialized) struct PidCommandTests {
  static let haveUnstrip = haveTool("eu-unstrip")

  /// "0xSTART+0xSIZE BUILDID@0xADDR" of each unstrip line.
  func moduleKeys(_ text: String) -> [String] {
    text.split(separator: "\n").map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
  }

  @Test(.enabled(if: haveUnstrip && haveTool("python3"), "eu-unstrip or python3 missing"))
  func unstripStyleMatchesEuUnstrip() throws {
    let child = try RunningChild(["python3", "-c", "import signal, ssl, sqlite3; print('ready', flush=True); signal.pause()"])
    try child.wait(for: "ready")
    let ours = try runProcessTest([processTestImagelog, "pid", String(child.pid), "--format", "unstrip"])
    let theirs = try runProcessTest(["eu-unstrip", "-n", "-p", String(child.pid)])
    #expect(ours.exitStatus == 0)
    #expect(ours.error == "")
    // eu-unstrip also lists mapped files that are not ELF (locale archives, caches), with no build-id.
    let expected = Set(moduleKeys(theirs.output).filter { !$0.hasSuffix(" -") })
    let got = moduleKeys(ours.output)
    #expect(Set(got) == expected)
    #expect(got.count == expected.count)
    // Each line has the file and name columns too: "- NAME" after the path.
    for line in ours.output.split(separator: "\n") { #expect(line.split(separator: " ").count == 5, "\(line)") }
  }

  @Test func everyStyleListsTheSameImages() throws {
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: "sleep")  // the exec and the loader are done
    let pid = String(child.pid)
    let crash = try runProcessTest([processTestImagelog, "pid", pid])
    let logger = try runProcessTest([processTestImagelog, "pid", pid, "--format", "logger"])
    let json = try runProcessTest([processTestImagelog, "pid", pid, "--format", "json"])
    let crashLines = crash.output.split(separator: "\n")
    #expect(crash.exitStatus == 0)
    #expect(crashLines.count >= 4)  // sleep, libc, vDSO, loader
    #expect(crashLines.filter { $0.contains(" +sleep ") }.count == 1)
    #expect(crashLines.contains { $0.contains(" [vdso] ") })
    #expect(logger.output.split(separator: "\n").allSatisfy { $0.hasPrefix("Added: 0x") })
    #expect(logger.output.split(separator: "\n").count == crashLines.count)
    #expect(json.output.split(separator: "\n").allSatisfy { $0.hasPrefix("{\"event\":\"added\"") && $0.hasSuffix("}") })
    // The start addresses agree across styles.
    let starts = crashLines.map { $0.split(separator: " ")[0] }
    let loggerStarts = logger.output.split(separator: "\n").map { $0.split(separator: " ")[1] }
    #expect(starts == loggerStarts)
  }

  /// A library whose path holds ESC and a C1 control, preloaded into a running process: `imagelog pid`
  /// shows it escaped in every text style, and the path reads back to the original bytes.
  @Test func hostileLibraryPathsAreEscaped() throws {
    let folder = try makeTemporaryDirectory("imagelog-hostile-pid")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let library = folder + "/lib\u{1B}[2Jhostile\u{9B}\\.so"
    _ = try runChild(["cp", "/usr/lib/x86_64-linux-gnu/libz.so.1", library])
    let child = try RunningChild(["env", "LD_PRELOAD=" + library, "sh", "-c", "echo ready; exec sleep 600"])
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: "sleep")
    for style in ["crash", "logger", "unstrip"] {
      let run = try runProcessTest([processTestImagelog, "pid", String(child.pid), "--format", style])
      #expect(run.exitStatus == 0)
      #expect(!run.output.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) },
              "\(style): raw control characters")
      let shown = "/lib\\x1b[2Jhostile\\u{9b}\\\\.so"
      let lines = run.output.split(separator: "\n").filter { $0.contains(shown) }
      #expect(lines.count == 1, "\(style): \(run.output)")
      let words = lines.first.map { $0.split(separator: " ").map(String.init) } ?? []
      #expect(words.contains { TextEscaping.unescaped($0) == Array(library.utf8) }, "\(style): \(words)")
    }
  }

  @Test func noSuchProcess() throws {
    let result = try runProcessTest([processTestImagelog, "pid", "99999999"])
    #expect(result.exitStatus == 1)
    #expect(result.error == "imagelog: pid 99999999: no such process\n")
    #expect(result.output == "")
  }

  @Test(.enabled(if: (readFile("/proc/2/stat") ?? "").contains("(kthreadd)"),
                 "PID 2 is not kthreadd: not in the initial PID namespace (a container); skipped"))
  func kernelThread() throws {
    let result = try runProcessTest([processTestImagelog, "pid", "2"])
    #expect(result.exitStatus == 1)
    #expect(result.error == "imagelog: pid 2: kthreadd is a kernel thread: it has no images\n")
  }

  @Test(.enabled(if: haveTool("python3"), "needs python3 to make a zombie"))
  func zombie() throws {
    // The parent forks a child that exits at once and never reaps it (a shell may reap on its own).
    let child = try RunningChild(["python3", "-c",
      "import os, signal\npid = os.fork()\nif pid == 0: os._exit(0)\nprint(pid, flush=True)\nsignal.pause()"])
    let zombiePID = try #require(child.readLine())
    try waitUntil("the kernel shows pid \(zombiePID) as a zombie (state Z in /proc/\(zombiePID)/stat)") {
      let stat = (readFile("/proc/\(zombiePID)/stat") ?? "")
      return stat.lastIndex(of: ")").map { stat[$0...].hasPrefix(") Z") } == true
    }
    let result = try runProcessTest([processTestImagelog, "pid", zombiePID])
    #expect(result.exitStatus == 1)
    #expect(result.error == "imagelog: pid \(zombiePID): python3 is a zombie (exited, not yet reaped): it has no images\n")
  }

  /// A process that execs itself over and over (the same PID, a new address space each time): every
  /// `imagelog pid` on it either lists images or says in one line why not, with status 1; never status
  /// 0 with nothing listed (it did about once in 600 runs, caught between exec's two halves).
  @Test func processInTheMiddleOfExec() throws {
    let script = "I=$((${I:-0}+1)); export I; [ \"$I\" -lt 1000000 ] && exec /bin/sh -c \"$S\""
    let child = try RunningChild(["sh", "-c", "echo ready; S='\(script)' exec /bin/sh -c '\(script)'"])
    try child.wait(for: "ready")
    for _ in 0..<150 {
      let result = try runProcessTest([processTestImagelog, "pid", String(child.pid)])
      let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast()  // after the last \n
      if result.exitStatus == 0 {
        #expect(result.output.hasSuffix("\n") && !lines.isEmpty && lines.allSatisfy { !$0.isEmpty },
                "status 0 with \(lines.count) lines: \(result.output)")
      } else {
        #expect(result.exitStatus == 1 && result.output.isEmpty)
        #expect(result.error.hasPrefix("imagelog: pid \(child.pid): ") && result.error.split(separator: "\n").count == 1,
                "\(result.error)")
      }
    }
  }

  /// As root, the same check from the other side: `nobody` may not read root's process.
  @Test(.droppedUserReaches(running: [processTestImagelog, "--version"]))
  func permissionDenied() throws {
    let target: RunningChild?
    let result: ProcessTestResult
    if getuid() == 0 {
      target = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
      try target?.wait(for: "ready")
      if let target { try waitUntilSleeping(target.pid, in: "sleep") }  // the exec and the loader are done
      result = try runProcessTest(droppedUserPrefix + [processTestImagelog, "pid", String(target?.pid ?? 1)])
    } else {
      target = nil
      result = try runProcessTest([processTestImagelog, "pid", "1"])
    }
    let pid = target.map { String($0.pid) } ?? "1"
    #expect(result.exitStatus == 1)
    #expect(result.error.hasPrefix("imagelog: pid \(pid): permission denied reading /proc/\(pid)/"))
    // The hint names the uids as /proc/PID/status gives them, then what would do.
    let targetUID = (readFile("/proc/\(pid)/status") ?? "").split(separator: "\n")
      .first { $0.hasPrefix("Uid:") }?.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst(2).first
    let ourUID = getuid() == 0 ? "65534" : String(getuid())
    #expect(result.error.contains(": it runs as uid \(targetUID ?? "?"), imagelog as uid \(ourUID)"), "\(result.error)")
    #expect(result.error.hasSuffix(": give imagelog CAP_SYS_PTRACE\n"), "\(result.error)")
    #expect(result.error.split(separator: "\n").count == 1)
  }

  /// Root that lacks capabilities the target holds (PID 1 of a container, seen from a `docker exec`
  /// with fewer capabilities): the same uid, so the hint names the capabilities, as capabilities(7)
  /// spells them, that the target's CapPrm has and imagelog's CapEff lacks; not "run as root".
  @Test(.enabled(if: getuid() == 0 && haveTool("setpriv"), "needs root and setpriv (util-linux)"))
  func rootWithoutTheTargetsCapabilities() throws {
    func capabilities(_ status: String, _ key: String) -> UInt64? {
      status.split(separator: "\n").first { $0.hasPrefix(key) }.flatMap { UInt64($0.dropFirst(key.count).trimmingPrefix { $0 == "\t" }, radix: 16) }
    }
    let ptrace: UInt64 = 1 << 19, netAdmin: UInt64 = 1 << 12
    let ours = try #require(capabilities((readFile("/proc/self/status") ?? ""), "CapEff:"))
    try #require(ours & (ptrace | netAdmin) == ptrace | netAdmin, "this test drops CAP_SYS_PTRACE and CAP_NET_ADMIN, which it needs to hold")
    let target = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    try target.wait(for: "ready")
    // "ready" comes before the exec: until sleep runs, the process has no images to refuse (on a busy
    // machine imagelog read it mid-exec and said so).
    try waitUntilSleeping(target.pid, in: "sleep")
    let held = try #require(capabilities((readFile("/proc/\(target.pid)/status") ?? ""), "CapPrm:"))
    #expect(held & (ptrace | netAdmin) == ptrace | netAdmin)
    let result = try runProcessTest(["setpriv", "--bounding-set=-sys_ptrace,-net_admin", processTestImagelog, "pid",
                                     String(target.pid)])
    #expect(result.exitStatus == 1)
    #expect(result.output.isEmpty)
    // Maps may be readable (then memory and the files are what is refused): which, the kernel decides.
    #expect(result.error.hasPrefix("imagelog: pid \(target.pid): permission denied reading /proc/\(target.pid)/"))
    #expect(result.error.hasSuffix(": it holds capabilities imagelog lacks (cap_net_admin, cap_sys_ptrace): give imagelog CAP_SYS_PTRACE\n"),
            "\(result.error)")
    #expect(!result.error.contains("run as root"))
  }

  @Test func usageErrors() throws {
    #expect(try runProcessTest([processTestImagelog, "pid"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "pid", "abc"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "pid", "1", "--format", "xml"]).exitStatus == 64)
    let help = try runProcessTest([processTestImagelog, "help", "pid"])
    #expect(help.output == (try runProcessTest([processTestImagelog, "pid", "--help"])).output)
    #expect(help.output.hasPrefix("OVERVIEW: "))
  }
}
