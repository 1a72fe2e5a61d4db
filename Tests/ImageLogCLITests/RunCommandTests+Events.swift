import Glibc
import ImageLogTestSupport
import Testing

extension RunCommandTests {
  /// The module computes each image's fields in C from the link map and program headers: checked
  /// against eu-unstrip on the same process while it still runs (start, size, build-id@address).
  @Test(.enabled(if: processTestHaveCC && haveTool("eu-unstrip"), "cc or eu-unstrip missing"))
  func recordsMatchEuUnstripOnTheLiveProcess() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let events = programs.directory + "/events"
    let run = try RunningChild([processTestImagelog, "run", "--format", "unstrip", "--output", events, "--",
                                      programs.loop, "hold", programs.libraryA])
    let pidLine = try #require(run.readLine())
    try run.wait(for: "loaded")
    let pid = try #require(Int32(pidLine.dropFirst(4)))
    // The module wrote each line before dlopen returned, so before the program printed "loaded".
    let ours = (readFile(events) ?? "").split(separator: "\n")
    let unstrip = try runProcessTest(["eu-unstrip", "-n", "-p", String(pid)])
    let fromOutside = try runProcessTest([processTestImagelog, "pid", String(pid), "--format", "unstrip"])
    run.signal(SIGTERM)  // the program is the process imagelog was
    _ = run.readAll()
    run.reap()
    #expect(run.rawStatus & 0x7f == SIGTERM)
    func key(_ line: Substring) -> String { line.split(separator: " ").prefix(2).joined(separator: " ") }
    func startAndID(_ line: Substring) -> String {
      let fields = line.split(separator: " ")
      return String(fields[0].prefix { $0 != "+" }) + " " + String(fields[1])
    }
    // The audit module's own namespace holds a second libc; when the kernel maps it right after the
    // first, eu-unstrip merges the two into one module (it groups adjacent mappings of one inode),
    // so its sizes are checked through `imagelog pid`, which eu-unstrip checks elsewhere.
    let theirs = Set(unstrip.output.split(separator: "\n").map(startAndID))
    let outside = Set(fromOutside.output.split(separator: "\n").map(key))
    #expect(ours.count == 5, "executable, loader, vDSO, libc, liba.so: \(ours)")
    for line in ours {
      #expect(line.hasPrefix("Added: "))
      #expect(theirs.contains(startAndID(line.dropFirst(7))), "\(line) not in eu-unstrip's \(theirs)")
      #expect(outside.contains(key(line.dropFirst(7))), "\(line) not in imagelog pid's \(outside)")
    }
  }
}

extension RunCommandTests {
  /// Each line is written as its event happens, not at a flush the program might never reach: a
  /// program that calls _exit or dies of a signal right after a dlopen still has every image
  /// reported, the same ones the loader's own trace shows.
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"), arguments: ["_exit", "abort"])
  func eventsSurviveAnAbruptEnd(how: String) throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let run = try runTraced([programs.loop, "end", how, programs.libraryA], in: programs.directory)
    #expect(run.result.output == "loaded\n")
    if how == "_exit" {
      #expect(run.result.exitStatus == 5)
    } else {
      #expect(run.result.signal == SIGABRT, "imagelog ends with the program's signal")
    }
    let expected = loaderEvents(run.trace)
    #expect(expected.count == 2, "libc and liba.so traced: \(expected)")
    #expect(ourEvents(run.ours) == expected)
    #expect(run.ours.split(separator: "\n").contains { field("path", in: $0) == programs.libraryA })
  }

  /// The loader run as the program (`ld.so PROGRAM`): the kernel's auxiliary vector then describes
  /// the loader, and the module takes every table from the link maps (CImageLogAudit/audit.c). The
  /// images and their order are those of the same program started by the kernel.
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func theLoaderRunAsTheProgramReportsTheSameImages() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let headers = try runProcessTest(["readelf", "-lW", programs.loop]).output
    let interpreter = try #require(headers.split(separator: "\n").first { $0.contains("Requesting program interpreter: ") }?
      .split(separator: ": ").last?.dropLast())
    let command = [programs.loop, "cycle", "1", programs.libraryA]
    let direct = try runProcessTest([processTestImagelog, "run", "--format", "json", "--", String(interpreter)] + command)
    let started = try runProcessTest([processTestImagelog, "run", "--format", "json", "--"] + command)
    #expect(direct.exitStatus == 3 && started.exitStatus == 3)
    func images(_ lines: String) -> [String] {
      lines.split(separator: "\n").map { "\(field("event", in: $0) ?? "?") \(field("name", in: $0) ?? "?") \(field("buildID", in: $0) ?? "?")" }
    }
    let ours = images(direct.error), expected = images(started.error)
    try #require(ours.count == expected.count && ours.count > 4, "\(direct.error)")
    // The first line is the program (its build-id; /proc/self/exe names the loader, as it does for the program itself).
    #expect(ours.first?.hasPrefix("added ") == true && ours.first?.hasSuffix(expected[0].split(separator: " ").last ?? "") == true)
    #expect(Array(ours.dropFirst()) == Array(expected.dropFirst()))
    #expect(!direct.error.contains("imagelog:"))
  }

  /// A child forked without exec reports with its own PID (the module notices the fork without a
  /// system call per event), labelled; with --no-follow too (it executes nothing).
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"), arguments: [[], ["--no-follow"]])
  func forkedChildReportsWithItsOwnPID(options: [String]) throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let command = [programs.loop, "end", "fork", programs.libraryA]
    let result = try runProcessTest([processTestImagelog, "run"] + options + ["--format", "crash", "--"] + command)
    #expect(result.exitStatus == 0)
    let childLine = try #require(result.output.split(separator: "\n").first { $0.hasPrefix("child ") })
    let childPID = String(childLine.dropFirst(6))
    let lines = result.error.split(separator: "\n")
    let library = lines.filter { $0.hasSuffix(programs.libraryA) }
    #expect(library.count == 1, "\(lines)")
    #expect(library.first?.hasPrefix("[pid \(childPID)] Added: ") == true, "\(library)")
    #expect(lines.first?.hasPrefix("Added: ") == true, "the command's own events are not labelled")
  }
}

extension RunCommandTests {
  /// When nobody reads the output yet (a FIFO), the program waits in write(2) for room, as it
  /// would on any full descriptor, and nothing is dropped: its 8000 events all arrive once the reader
  /// reads. The program's own output goes elsewhere, so nothing but the events can hold it up.
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func aProgramWaitsForRoomAndLosesNothing() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let fifo = programs.directory + "/events", programOutput = programs.directory + "/output"
    try #require(mkfifo(fifo, 0o600) == 0)
    // Opened before imagelog opens it for writing, and not read until the program waits.
    let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    try #require(reader >= 0)
    defer { close(reader) }
    let run = try RunningChild(["sh", "-c", "exec \"$0\" run --output \"$1\" -- \"$2\" cycle 4000 \"$3\" > \"$4\"",
                                      processTestImagelog, fifo, programs.loop, programs.libraryA, programOutput])
    // sh executes imagelog, which executes the program: all three are process run.pid in turn.
    try waitUntil("the program under imagelog (pid \(run.pid)) waits in write for room in the FIFO") {
      (readFile("/proc/\(run.pid)/comm") ?? "") == "loop\n" && blockedSystemCall(of: run.pid) == SystemCallNumber.write
    }
    #expect(kill(run.pid, 0) == 0, "the program still runs: it waits, it does not give up")
    // Read through a second descriptor until imagelog closes the FIFO (`reader` stays unread).
    let bytes = try #require(readFileBytes(fifo))
    run.reap()
    #expect(run.rawStatus >> 8 == 3)
    let events = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    #expect(events.filter { $0.hasPrefix("Added: ") && $0.contains("/liba.so") }.count == 4000)
    #expect(events.filter { $0.hasPrefix("Removed: ") && $0.contains("/liba.so") }.count == 4000)
    let output = (readFile(programOutput) ?? "").split(separator: "\n")
    #expect(output.filter { $0 == "open \(programs.libraryA)" }.count == 4000)
    #expect(output.last == "done")
  }

  /// The module and the program write to one pipe nobody reads yet: the program blocks, and once
  /// the pipe is read every event arrives and the lines of the two writers arrive whole (each line is
  /// one write).
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func aSharedFullPipeWaitsAndLosesNothing() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let run = try RunningChild([processTestImagelog, "run", "--output", "/dev/stdout", "--",
                                      programs.loop, "cycle", "4000", programs.libraryA])
    try waitUntil("the program (pid \(run.pid), imagelog's own) blocks writing to the full pipe") {
      blockedSystemCall(of: run.pid) == SystemCallNumber.write
    }
    let lines = run.readAll()
    run.reap()
    #expect(run.rawStatus >> 8 == 3)
    #expect(lines.filter { $0.hasPrefix("Added: ") && $0.contains("/liba.so") }.count == 4000)
    #expect(lines.filter { $0.hasPrefix("Removed: ") && $0.contains("/liba.so") }.count == 4000)
    #expect(lines.filter { $0 == "open \(programs.libraryA)" }.count == 4000)
    #expect(lines.filter { $0 == "close \(programs.libraryA)" }.count == 4000)
    #expect(lines.contains("done"))
  }
}
