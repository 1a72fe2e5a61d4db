import FoundationEssentials
import Glibc
import ImageLogTestSupport
import Testing

/// A process whose main thread called pthread_exit while its other threads run on
/// (Tests/Programs/process-threads.c with `exit-main`): `/proc/PID/maps` is empty and `process_vm_readv(PID)` is
/// refused (eu-stack gives up: "No such process"), but the live threads' `/proc/PID/task/TID` entries
/// reach the process. `imagelog pid` lists the images those maps show, and `pid --threads` unwinds every
/// live thread as gdb, attached to that thread, does. (`pid` called it a zombie with no images, status 1;
/// `pid --threads` printed `???` frames and an empty Binary Images.)
@Suite struct MainThreadExitedTests {
  static let haveCC = haveTool("cc")

  /// The program built in `directory`, started with `threads` threads, once its main thread is a
  /// zombie and each other thread sleeps in a system call; with the live threads' ids.
  static func start(in directory: String, threads: Int) throws -> (child: RunningChild, program: String, live: [pid_t]) {
    let program = try buildThreadsProgram(in: directory)
    let child = try RunningChild([program, String(threads), "exit-main"])
    try child.wait(for: "ready")
    let pid = child.pid
    try waitUntil("the main thread of \(pid) is a zombie and its \(threads) other threads sleep in a system call") {
      let tids = threadIDs(of: pid)
      return tids.count == threads + 1 && threadState(pid, pid) == "Z" && tids.dropFirst().allSatisfy { tid in
        guard threadState(pid, tid) == "S", let text = readFile("/proc/\(pid)/task/\(tid)/syscall"),
              let first = text.split(separator: " ").first, let number = Int(first) else { return false }
        return number >= 0
      }
    }
    return (child, program, Array(threadIDs(of: pid).dropFirst()))
  }

  /// The images `maps` (a live thread's, read here) shows, as (load address, path): each file with an
  /// executable mapping starts at its mapping of offset 0; the vDSO is one.
  static func imagesFromMaps(_ maps: String) -> Set<String> {
    var files: [String: (start: UInt64?, executable: Bool)] = [:]
    for line in maps.split(separator: "\n") {
      let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
      guard fields.count == 6, let dash = fields[0].firstIndex(of: "-"), let start = UInt64(fields[0][..<dash], radix: 16),
            let offset = UInt64(fields[2], radix: 16) else { continue }
      let path = fields[5].trimmingPrefix(while: { $0 == " " })
      guard path.hasPrefix("/") || path == "[vdso]" else { continue }
      var entry = files[String(path)] ?? (nil, false)
      if offset == 0 && entry.start == nil { entry.start = start }
      if fields[1].contains("x") { entry.executable = true }
      files[String(path)] = entry
    }
    return Set(files.compactMap { path, entry in
      guard let start = entry.start, entry.executable else { return nil }
      return "0x" + String(start, radix: 16) + " " + path
    })
  }

  @Test(.enabled(if: haveCC && haveTool("readelf"), "needs cc and readelf"))
  func pidListsWhatTheLiveThreadsMapsShow() throws {
    let directory = try makeTemporaryDirectory("imagelog-main-exited")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let (child, program, live) = try Self.start(in: directory, threads: 2)
    #expect(readFile("/proc/\(child.pid)/maps") == "")  // what made it look like a zombie
    let maps = try #require(readFile("/proc/\(child.pid)/task/\(live[0])/maps"))
    let result = try runProcessTest([processTestImagelog, "pid", String(child.pid)])
    #expect(result.exitStatus == 0, "\(result.error)")
    #expect(result.error == "")
    let lines = result.output.split(separator: "\n")
    // "0x55f3d186c000 - 0x55f3d186d1f4 +name x86_64  <build-id prefix> /path": start and path.
    let ours = Set(lines.map { line in String(line.split(separator: " ")[0]) + " " + String(line.split(separator: " ").last ?? "") })
    #expect(ours == Self.imagesFromMaps(maps), "\(result.output)\n\(maps)")
    #expect(lines.contains { $0.contains(" +process-threads ") && $0.hasSuffix(" " + program) }, "\(result.output)")
    // Each file's identity is its build-id as readelf gives it (the crash style shows its first 16 bytes).
    for line in lines where !line.hasSuffix("[vdso]") {
      let words = line.split(separator: " ")
      let path = String(words.last ?? "")
      let notes = try runChild(["readelf", "-n", path]).output
      let buildID = notes.split(separator: "\n").first { $0.contains("Build ID: ") }?.split(separator: " ").last.map(String.init)
      #expect(buildID.map { "<" + $0.prefix(32) + ">" } == words.first { $0.hasPrefix("<") }.map(String.init), "\(line)")
    }
  }

  struct Report: Decodable {
    struct Frame: Decodable { var thread: Int; var frame: Int; var address: String; var symbol: String? }
    struct Thread: Decodable { var index: Int; var tid: Int32; var name: String?; var state: String?; var problem: String? }
    var frames: [Frame]
    var threads: [Thread]
  }

  /// gdb attached to one thread (the process's main task cannot be attached): the frames on its stack
  /// (gdb's inlined frames and the tail calls it infers from DWARF call sites left out), innermost
  /// first, as (pc, function).
  static func gdbFrames(_ tid: pid_t, script: String) throws -> [(pc: UInt64, name: String?)] {
    let run = try runChild(["gdb", "-q", "-batch", "-nx", "-p", String(tid), "-x", script])
    return run.output.split(separator: "\n").compactMap { line in
      let words = line.split(separator: " ")
      guard words.count >= 2, words[0] == "frame", let pc = UInt64(words[1].dropFirst(2), radix: 16) else { return nil }
      return (pc, words.count > 2 && words[2] != "None" ? String(words[2]) : nil)
    }
  }

  @Test(.enabled(if: haveCC && haveTool("gdb"), "needs cc and gdb"))
  func threadsAreUnwoundAsGdbUnwindsEachLiveThread() throws {
    let directory = try makeTemporaryDirectory("imagelog-main-exited-threads")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let (child, program, live) = try Self.start(in: directory, threads: 3)
    let ours = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--format", "json",
                                   "--no-lines", "--demangle", "none"])
    #expect(ours.exitStatus == 0, "\(ours.error)")
    #expect(noThreadStopped(child.pid))
    let report = try JSONDecoder().decode(Report.self, from: Data(ours.output.utf8))
    #expect(report.threads.map(\.tid) == [child.pid] + live)
    #expect(report.threads.first?.state == "Z")
    #expect(report.threads.first?.problem == "the main thread has exited; the process lives on in its other threads")
    #expect(report.threads.dropFirst().map(\.name) == ["reader-0", "sleeper-1", "waiter-2"])
    let script = directory + "/frames.py"
    try writeFile(script, """
      import gdb
      frame = gdb.newest_frame()
      while frame is not None:
          if frame.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
              print("frame 0x%x %s" % (frame.pc(), frame.name()))
          frame = frame.older()
      """)
    for thread in report.threads.dropFirst() {
      let frames = report.frames.filter { $0.thread == thread.index }.sorted { $0.frame < $1.frame }
      let theirs = try Self.gdbFrames(thread.tid, script: script)
      #expect(theirs.count >= 4, "gdb: \(theirs)")
      #expect(frames.map { UInt64($0.address.dropFirst(2), radix: 16) ?? 0 } == theirs.map(\.pc), "tid \(thread.tid)")
      #expect(frames.map { PidThreadsCommandTests.canonical($0.symbol) } == theirs.map { PidThreadsCommandTests.canonical($0.name) },
              "tid \(thread.tid): \(frames.map(\.symbol)) vs \(theirs.map(\.name))")
      #expect(frames.contains { $0.symbol == "worker" }, "tid \(thread.tid)")
    }
    #expect(noThreadStopped(child.pid))

    // The text report names the program and lists its images.
    let text = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-lines"])
    #expect(text.exitStatus == 0 && text.error.isEmpty, "\(text.error)")
    let lines = text.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(lines.contains("Path:            \(program)"))
    let images = lines.drop { $0 != "Binary Images:" }.dropFirst().prefix { !$0.isEmpty }
    #expect(images.contains { $0.hasSuffix(" " + program) } && images.contains { $0.contains(" libc.so.6 ") }, "\(text.output)")
    #expect(!text.output.contains("???"), "\(text.output)")
  }
}
