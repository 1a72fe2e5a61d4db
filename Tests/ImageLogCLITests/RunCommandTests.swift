import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog run`: events from the rtld-audit module, checked against the loader's own
/// `LD_DEBUG=libs,files` trace of the same run.
@Suite(.serialized) struct RunCommandTests {
  /// A JSON line's string field (our own flat output: no nesting, no escaped quotes in these fields).
  func field(_ name: String, in line: Substring) -> String? {
    let key = "\"" + name + "\":"
    guard let range = processTestRange(of: key, in: line) else { return nil }
    var rest: Substring = line[range.upperBound...]
    if rest.hasPrefix("\"") {
      rest = rest.dropFirst()
      guard let end = rest.firstIndex(of: "\"") else { return nil }
      return String(rest[..<end])
    }
    guard let end = rest.firstIndex(where: { $0 == "," || $0 == "}" }) else { return nil }
    return String(rest[..<end])
  }

  /// The loader's add/remove sequence for one process from an LD_DEBUG=libs,files trace:
  /// "add 0xBASE" at "generating link map" (the next line has base: l_addr), "remove PATH" at
  /// "destroying link map". The main executable, the loader and the vDSO get no such lines.
  func loaderEvents(_ trace: String) -> [String] {
    var events: [String] = []
    let lines = trace.split(separator: "\n")
    for (index, line) in lines.enumerated() {
      // Namespace 0 only: "[1]" is the audit module's own namespace, which the loader does not report to it.
      guard processTestRange(of: " [0];  ", in: line) != nil else { continue }
      if line.hasSuffix("generating link map"), index + 1 < lines.count,
         let base = processTestRange(of: "base: 0x", in: lines[index + 1]) {
        let digits = lines[index + 1][base.upperBound...].prefix { $0.isHexDigit }
        events.append("add 0x" + String(UInt64(digits, radix: 16) ?? 0, radix: 16))
      } else if line.hasSuffix("destroying link map"), let file = processTestRange(of: "file=", in: line) {
        let rest = line[file.upperBound...]
        let end = processTestRange(of: " [", in: rest)?.lowerBound ?? rest.endIndex
        events.append("remove " + String(rest[..<end]))
      }
    }
    return events
  }

  /// Our events in the same terms, leaving out the three images the loader does not trace.
  func ourEvents(_ jsonLines: String) -> [String] {
    jsonLines.split(separator: "\n").compactMap { line in
      guard let event = field("event", in: line), let path = field("path", in: line),
            let bias = field("loadBias", in: line), let main = field("isMainExecutable", in: line) else { return nil }
      if main == "true" || path == "[vdso]" || path.contains("/ld-linux") { return nil }
      return event == "added" ? "add \(bias)" : "remove \(path)"
    }
  }

  /// Runs `command` under `imagelog run --format json --output FILE` with LD_DEBUG=libs,files
  /// writing the loader's trace per process; returns our lines, the command's trace and result.
  func runTraced(_ command: [String], in directory: String) throws -> (ours: String, trace: String, result: ProcessTestResult) {
    let events = directory + "/events.jsonl"
    let environment = environment(applying: [:]).filter { !$0.hasPrefix("LD_DEBUG") }
      + ["LD_DEBUG=libs,files", "LD_DEBUG_OUTPUT=\(directory)/ld-debug"]
    let result = try runProcessTest([processTestImagelog, "run", "--format", "json", "--output", events, "--"] + command,
                                    environment: environment)
    // One trace file per process (ld-debug.PID). imagelog executes the command in its own process, so
    // the loader's trace of the command follows imagelog's own in the same file: it starts after the
    // line where the loader starts imagelog's initializers (the first of which executes the command).
    let listing = try runProcessTest(["sh", "-c", "ls \(directory)/ld-debug.*"]).output.split(separator: "\n")
    let program = command[0].split(separator: "/").last.map(String.init) ?? command[0]
    let handOver = "initialize program: \(processTestImagelog)"
    let trace = listing.map { file -> String in
      let text = (readFile(String(file)) ?? "")
      guard let start = processTestRange(of: handOver, in: Substring(text)) else { return text }
      return String(text[start.upperBound...])
    }.first { $0.contains("initialize program: ") && $0.contains(program) }
    return ((readFile(events) ?? ""), trace ?? "", result)
  }

  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func cProgramEventsMatchTheLoaderTrace() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let run = try runTraced([programs.loop, "cycle", "2", programs.libraryA, "libz.so.1", programs.libraryB],
                            in: programs.directory)
    #expect(run.result.exitStatus == 3, "the command's exit status passes through")
    #expect(run.result.output.hasSuffix("done\n"))
    let expected = loaderEvents(run.trace)
    #expect(expected.filter { $0.hasPrefix("remove ") }.count == 6, "6 dlcloses traced: \(expected)")
    #expect(expected.filter { $0.hasPrefix("add ") }.count == 7, "libc and 6 dlopens traced: \(expected)")
    #expect(ourEvents(run.ours) == expected)
    // The first three events: the executable, the loader and the vDSO, before anything else.
    let lines = run.ours.split(separator: "\n")
    try #require(lines.count >= 4)
    #expect(field("path", in: lines[0]) == programs.loop)
    #expect(field("isMainExecutable", in: lines[0]) == "true")
    #expect(field("path", in: lines[1])?.contains("ld-linux") == true)
    #expect(field("path", in: lines[2]) == "[vdso]")
    #expect(lines.allSatisfy { field("buildID", in: $0) != "null" })
  }

  @Test(.enabled(if: haveTool("python3"), "python3 missing"))
  func pythonCtypesEventsMatchTheLoaderTrace() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-python")
    defer { _ = try? runProcessTest(["rm", "-rf", directory]) }
    let script = """
      import ctypes, _ctypes
      for name in ("libuuid.so.1", "libexpat.so.1", "libuuid.so.1"):
          try:
              handle = ctypes.CDLL(name)._handle
          except OSError:
              continue
          _ctypes.dlclose(handle)
      print("done")
      """
    let python = try #require(try runProcessTest(["sh", "-c", "command -v python3"]).output.split(separator: "\n").first)
    // pyenv's python3 is a shell script that execs the real one: resolve it so the audit module follows.
    let real = String(try runProcessTest([String(python), "-c", "import sys; print(sys.executable)"]).output
      .split(separator: "\n").first ?? "python3")
    let run = try runTraced([real, "-c", script], in: directory)
    #expect(run.result.exitStatus == 0)
    #expect(run.result.output == "done\n")
    let expected = loaderEvents(run.trace)
    #expect(expected.contains { $0.hasPrefix("remove ") }, "a library ctypes loaded was unloaded")
    #expect(ourEvents(run.ours) == expected)
  }

  /// The module changes nothing: same output, same error output, same status, with and without it.
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func programBehavesTheSameUnderRun() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let command = [programs.loop, "cycle", "50", programs.libraryA, programs.libraryB, "libz.so.1"]
    let plain = try runProcessTest(command)
    let audited = try runProcessTest([processTestImagelog, "run", "--output", programs.directory + "/events", "--"] + command)
    #expect(plain.exitStatus == 3)
    #expect(audited.exitStatus == plain.exitStatus)
    #expect(audited.output == plain.output)
    #expect(audited.error == plain.error)
    let events = (readFile(programs.directory + "/events") ?? "").split(separator: "\n")
    #expect(events.filter { $0.hasPrefix("Added: ") && $0.contains("liba.so") }.count == 50)
    #expect(events.filter { $0.hasPrefix("Removed: ") && $0.contains("liba.so") }.count == 50)
    // Each removal says how long the image was loaded (issue 39): "  (loaded for 0.123 ms)".
    let removals = events.filter { $0.hasPrefix("Removed: ") && $0.contains("liba.so") }
    #expect(removals.allSatisfy { line in
      guard let open = line.ranges(of: "  (loaded for ").last, line.hasSuffix(" ms)") else { return false }
      let number = line[open.upperBound...].dropLast(4).split(separator: ".")
      return number.count == 2 && UInt64(number[0]) != nil && number[1].count == 3 && UInt64(number[1]) != nil
    }, "\(removals.prefix(3))")
  }

  @Test func exitStatusAndSignalsPassThrough() throws {
    #expect(try runProcessTest([processTestImagelog, "run", "--", "sh", "-c", "exit 7"]).exitStatus == 7)
    let killed = try runProcessTest([processTestImagelog, "run", "--", "sh", "-c", "kill -TERM $$"])
    #expect(killed.signal == SIGTERM)
    // The events go to standard error by default, the program's output stays on standard output.
    let echo = try runProcessTest([processTestImagelog, "run", "--format", "crash", "--", "sh", "-c", "echo hello"])
    #expect(echo.output == "hello\n")
    #expect(echo.error.split(separator: "\n").first?.hasPrefix("Added: 0x") == true)
  }

  /// The signals a program starts with ignored and blocked are the ones it gets without imagelog:
  /// `nohup` (SIGHUP ignored) and a shell's `trap ''` keep working through `imagelog run`.
  @Test func ignoredAndBlockedSignalsPassThrough() throws {
    let show = "grep -E '^Sig(Ign|Blk):' /proc/self/status"
    let plain = try runProcessTest(["sh", "-c", "trap '' HUP USR2; exec \(show)"])
    let audited = try runProcessTest(["sh", "-c", "trap '' HUP USR2; exec \(processTestImagelog) run --output /dev/null -- \(show)"])
    try #require(plain.exitStatus == 0 && audited.exitStatus == 0)
    // SIGHUP is bit 0 and SIGUSR2 bit 11 of the SigIgn mask: 0x801.
    let ignored = plain.output.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }
    let mask = ignored?.split(whereSeparator: { $0 == " " || $0 == "\t" }).last.flatMap { UInt64($0, radix: 16) }
    #expect(mask.map { $0 & 0x801 == 0x801 } == true)
    #expect(audited.output == plain.output)
  }

  /// --no-follow: the programs the command executes run plain, without the module, its variables or
  /// its descriptor.
  @Test func noFollowKeepsToTheCommand() throws {
    let result = try runProcessTest([processTestImagelog, "run", "--no-follow", "--format", "crash", "--",
                                     "sh", "-c", "env; ls /proc/self/fd"])
    #expect(result.exitStatus == 0)
    #expect(!result.output.contains("LD_AUDIT="))
    #expect(!result.output.contains("IMAGELOG_AUDIT"))
    // ls sees the high descriptors it sees without imagelog: the module's (just under 1024) is closed on
    // exec. Low numbers are left out: a test running meanwhile may briefly hold an inheritable one.
    let plain = try runProcessTest(["sh", "-c", "env; ls /proc/self/fd"])
    func descriptors(_ output: String) -> [Int] {
      output.split(separator: "\n").compactMap { Int($0) }.filter { $0 >= 64 }
    }
    #expect(descriptors(result.output) == descriptors(plain.output))
    // Only sh's own images: env and ls are not followed.
    #expect(result.error.contains(" +dash ") || result.error.contains(" +bash ") || result.error.contains(" +sh "))
    #expect(!result.error.contains(" +env ") && !result.error.contains(" +ls "))
    #expect(!result.error.contains("[pid "))
  }

  /// By default, as LD_DEBUG does, exec is followed: a wrapper reaches the real program. Through
  /// /usr/bin/env (and, where python3 is pyenv's shim, a bash script that runs helpers and executes the
  /// real python) python's ctypes load of libz is reported.
  @Test(.enabled(if: haveTool("python3"), "python3 missing"))
  func execIsFollowedThroughAWrapper() throws {
    let result = try runProcessTest([processTestImagelog, "run", "--format", "crash", "--",
                                     "/usr/bin/env", "python3", "-c", "import ctypes; ctypes.CDLL('libz.so.1'); print('ok')"])
    #expect(result.exitStatus == 0)
    #expect(result.output == "ok\n")
    let lines = result.error.split(separator: "\n")
    #expect(lines.first?.contains(" +env ") == true, "\(lines.first ?? "")")
    #expect(lines.contains { $0.contains("Added: ") && $0.contains(" libz.so.1 ") }, "\(lines)")
  }

  @Test(.enabled(if: getuid() == 0, "needs root to make a set-user-ID program owned by someone else"))
  func setUserIDProgramIsReported() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-setuid")
    defer { _ = try? runProcessTest(["rm", "-rf", directory]) }
    let program = directory + "/true-setuid"
    let made = try runProcessTest(["sh", "-c", "cp /bin/true \(program) && chown 65534 \(program) && chmod 4755 \(program) && chmod 755 \(directory)"])
    try #require(made.exitStatus == 0)
    let result = try runProcessTest([processTestImagelog, "run", "--", program])
    #expect(result.exitStatus == 0)
    #expect(result.error.contains("imagelog: \(program): set-user-ID or set-group-ID program: the dynamic loader ignores LD_AUDIT"))
  }

  @Test func moduleIsFoundNextToTheBinaryOrInPrefixLib() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-install")
    defer { _ = try? runProcessTest(["rm", "-rf", directory]) }
    let binDirectory = processTestImagelog[..<(processTestImagelog.lastIndex(of: "/") ?? processTestImagelog.startIndex)]
    let setup = try runProcessTest(["sh", "-c", """
      mkdir -p \(directory)/alone \(directory)/prefix/bin \(directory)/prefix/lib/imagelog &&
      cp \(processTestImagelog) \(directory)/alone/ && cp \(processTestImagelog) \(directory)/prefix/bin/ &&
      cp \(binDirectory)/libImageLogAudit.so \(directory)/prefix/lib/imagelog/
      """])
    try #require(setup.exitStatus == 0)
    let alone = try runProcessTest(["\(directory)/alone/imagelog", "run", "--", "true"])
    #expect(alone.exitStatus == 1)
    #expect(alone.error.hasPrefix("imagelog: cannot find the audit module libImageLogAudit.so"))
    let installed = try runProcessTest(["\(directory)/prefix/bin/imagelog", "run", "--", "true"])
    #expect(installed.exitStatus == 0)
    #expect(installed.error.contains("Added: "))
  }

  @Test func usageErrors() throws {
    #expect(try runProcessTest([processTestImagelog, "run"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "run", "--format", "xml", "--", "true"]).exitStatus == 64)
    let missing = try runProcessTest([processTestImagelog, "run", "--", "no-such-command-imagelog"])
    #expect(missing.exitStatus == 1)
    #expect(missing.error == "imagelog: no-such-command-imagelog: command not found\n")
  }

  /// `run` reads its arguments in C, before the Swift runtime starts (CImageLogMain/run.c); its usage
  /// errors read as those of the commands ArgumentScanner parses: the same mistake given to `pid`
  /// (Swift) gives the same message, with run's usage line. Help stays the Swift side's.
  @Test func usageErrorsReadAsTheSwiftCommandsRead() throws {
    let help = try runProcessTest([processTestImagelog, "run", "--help"])
    #expect(help.exitStatus == 0)
    #expect(help.output == (try runProcessTest([processTestImagelog, "help", "run"])).output)
    #expect(try runProcessTest([processTestImagelog, "run", "--format", "xml", "--", "--help"]).exitStatus == 64,
            "after --, --help is the command's")
    let usage = try #require(help.output.split(separator: "\n").first { $0.hasPrefix("USAGE: ") }?.dropFirst(7))
    let pidUsage = try #require(try runProcessTest([processTestImagelog, "pid", "--help"]).output
      .split(separator: "\n").first { $0.hasPrefix("USAGE: ") }?.dropFirst(7))
    let mistakes: [(run: [String], pid: [String])] = [
      (["--bogus", "--", "true"], ["--bogus", "1"]),
      (["-x", "true"], ["-x", "1"]),
      (["--timing=1", "--", "true"], ["--timing=1", "1"]),
      (["--format"], ["--format"]),
      (["--format", "xml", "--", "true"], ["--format", "xml", "1"]),
      (["--format=xml", "--", "true"], ["--format=xml", "1"]),
      (["--format", "--full-build-ids", "--", "true"], ["--format", "--full-build-ids", "1"]),
      ([], []),
    ]
    for mistake in mistakes {
      let ours = try runProcessTest([processTestImagelog, "run"] + mistake.run)
      let swift = try runProcessTest([processTestImagelog, "pid"] + mistake.pid)
      #expect(swift.exitStatus == 64)
      #expect(ours.exitStatus == 64, "\(mistake.run)")
      let expected = swift.error.replacing(String(pidUsage), with: String(usage))
        .replacing("'imagelog pid --help'", with: "'imagelog run --help'")
        .replacing("'<pid>'", with: "'<command>'")
      #expect(ours.error == expected, "\(mistake.run)")
      #expect(ours.output.isEmpty)
    }
    // Options taken as ArgumentScanner takes them: a flag is removed before an option looks for its
    // value, and the last of a repeated option wins.
    let missing = try runProcessTest([processTestImagelog, "run", "--output", "--timing"])
    #expect(missing.error.hasPrefix("Error: Missing value for '--output <value>'\nUsage: \(usage)\n"))
    let short = try runProcessTest([processTestImagelog, "run", "-o"])
    #expect(short.error.hasPrefix("Error: Missing value for '-o <value>'\n"))
    let repeated = try runProcessTest([processTestImagelog, "run", "--format", "unstrip", "--format=json", "-o", "/dev/stdout",
                                       "--", "true"])
    #expect(repeated.exitStatus == 0)
    #expect(repeated.output.hasPrefix("{\"event\":\"added\""))
  }

  /// `--output FILE` never writes through a symbolic link to a file (one planted in a folder others
  /// write): the run stops with one line naming the path and the target keeps its bytes. A file of its
  /// own is emptied and written, as a shell's `>` does; `/dev/stdout`, a link to a stream, is still
  /// written (the test above).
  @Test func outputThroughALinkToAFileIsRefused() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-output")
    defer { _ = try? runProcessTest(["rm", "-rf", directory]) }
    let victim = directory + "/victim", planted = directory + "/events"
    try writeFile(victim, bytes: Array("keep me\n".utf8))
    #expect(symlink(victim, planted) == 0)
    let refused = try runProcessTest([processTestImagelog, "run", "--output", planted, "--", "true"])
    #expect(refused.exitStatus != 0)
    #expect(refused.error == "imagelog: \(planted): is a symbolic link to a file: not written through (give the file's own path)\n")
    #expect(readFile(victim) == "keep me\n")
    // The file itself: emptied of what it held, then the events.
    let own = try runProcessTest([processTestImagelog, "run", "--format", "json", "--output", victim, "--", "true"])
    #expect(own.exitStatus == 0, "\(own.error)")
    let written = readFile(victim) ?? ""
    #expect(written.hasPrefix("{\"event\":\"added\"") && !written.contains("keep me"), "\(written)")
  }

  /// An exec that fails says why: a file without execute permission is not "command not found", and
  /// neither is a file the kernel cannot execute.
  @Test func execErrorsNameTheRealCause() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-exec")
    defer { _ = try? runProcessTest(["rm", "-rf", directory]) }
    let made = try runProcessTest(["sh", "-c", """
      cd '\(directory)' && printf '#!/bin/sh\\necho hi\\n' > plain && printf 'garbage' > garbage && chmod +x garbage
      """])
    try #require(made.exitStatus == 0)
    let notExecutable = try runProcessTest([processTestImagelog, "run", "--", directory + "/plain"])
    #expect(notExecutable.exitStatus == 1)
    #expect(notExecutable.error == "imagelog: \(directory)/plain: cannot run \(directory)/plain: Permission denied\n")
    let onPath = try runProcessTest([processTestImagelog, "run", "--", "plain"],
                                    environment: environment(applying: [:]).filter { !$0.hasPrefix("PATH=") } + ["PATH=\(directory)"])
    #expect(onPath.error == "imagelog: plain: cannot run \(directory)/plain: Permission denied\n")
    let garbage = try runProcessTest([processTestImagelog, "run", "--", directory + "/garbage"])
    #expect(garbage.exitStatus == 1)
    #expect(garbage.error == "imagelog: \(directory)/garbage: cannot run \(directory)/garbage: Exec format error\n")
    let aDirectory = try runProcessTest([processTestImagelog, "run", "--", directory])
    #expect(aDirectory.error == "imagelog: \(directory): cannot run \(directory): Permission denied\n")
  }

  @Test func timingAddsWhenAndHowLong() throws {
    let result = try runProcessTest([processTestImagelog, "run", "--timing", "--", "true"])
    let lines = result.error.split(separator: "\n")
    #expect(!lines.isEmpty)
    #expect(lines.allSatisfy { $0.hasPrefix("Added: ") && $0.contains(" ms (loaded in ") })
    let json = try runProcessTest([processTestImagelog, "run", "--timing", "--format", "json", "--", "true"])
    #expect(json.error.split(separator: "\n").allSatisfy { $0.contains("\"addedAtNanoseconds\":") && $0.hasSuffix("}") })
  }
}

extension RunCommandTests {
  /// Paths with a space and a program whose directory name needs escaping come back whole.
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func pathsWithSpacesSurvive() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let spaced = programs.directory + "/with space"
    #expect(try runProcessTest(["sh", "-c", "mkdir '\(spaced)' && cp \(programs.loop) \(programs.libraryA) '\(spaced)/'"]).exitStatus == 0)
    let result = try runProcessTest([processTestImagelog, "run", "--format", "json", "--",
                                     spaced + "/loop", "cycle", "1", spaced + "/liba.so"])
    let lines = result.error.split(separator: "\n")
    #expect(lines.first.flatMap { field("path", in: $0) } == spaced + "/loop")
    #expect(lines.contains { field("path", in: $0) == spaced + "/liba.so" && field("event", in: $0) == "removed" })
  }
}

extension RunCommandTests {
  /// A shell's command reports too, labelled with its PID; with --no-follow, only the shell.
  @Test func programsTheCommandExecutesAreReportedLabelled() throws {
    let followed = try runProcessTest([processTestImagelog, "run", "--format", "crash", "--",
                                       "sh", "-c", "/bin/true; echo done"])
    #expect(followed.exitStatus == 0)
    #expect(followed.output == "done\n")
    let lines = followed.error.split(separator: "\n")
    #expect(lines.first?.hasPrefix("Added: 0x") == true)
    #expect(lines.contains { $0.hasPrefix("[pid ") && $0.contains(" +true ") })
    let json = try runProcessTest([processTestImagelog, "run", "--format", "json", "--",
                                   "sh", "-c", "/bin/true; echo done"])
    #expect(json.error.split(separator: "\n").contains { $0.hasPrefix("{\"pid\":") && $0.contains("\"name\":\"true\"") })
    let plain = try runProcessTest([processTestImagelog, "run", "--no-follow", "--format", "crash", "--",
                                    "sh", "-c", "/bin/true; echo done"])
    #expect(plain.output == "done\n")
    #expect(!plain.error.contains(" +true "))
    #expect(!plain.error.contains("[pid "))
  }

  /// The program is imagelog's process: the PID and parent imagelog was started with.
  @Test func theProgramKeepsImagelogsPIDAndParent() throws {
    let result = try runProcessTest(["sh", "-c", """
      echo "$$"; exec \(processTestImagelog) run --output /dev/null -- sh -c 'echo "$$ $PPID"'
      """])
    #expect(result.exitStatus == 0)
    let lines = result.output.split(separator: "\n")
    try #require(lines.count == 2, "\(lines)")
    let shellPID = lines[0]
    let fields = lines[1].split(separator: " ")
    #expect(fields.first == shellPID, "the program's PID is the one imagelog was started with")
    let parent = try runProcessTest(["sh", "-c", """
      \(processTestImagelog) run --output /dev/null -- sh -c 'echo "$PPID"' & echo "$$"; wait
      """])
    let parentLines = parent.output.split(separator: "\n")
    #expect(parentLines.count == 2 && parentLines[0] == parentLines[1], "the program's parent is imagelog's: \(parentLines)")
  }

  /// A library whose file name holds a newline and a forged event stays one line: the name is escaped.
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func aForgedLibraryNameCannotForgeAnEvent() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    let forged = programs.directory + "/libx\nRemoved: 0xdead (0x1) FORGED.so"
    #expect(try runProcessTest(["cp", programs.libraryA, forged]).exitStatus == 0)
    for style in ["logger", "crash", "unstrip"] {
      let result = try runProcessTest([processTestImagelog, "run", "--format", style, "--",
                                       programs.loop, "cycle", "1", forged])
      #expect(result.exitStatus == 3)
      let lines = result.error.split(separator: "\n", omittingEmptySubsequences: false)
      #expect(!lines.contains { $0.hasPrefix("Removed: 0xdead") || $0.contains("FORGED.so <") && !$0.contains("libx\\n") })
      #expect(lines.filter { $0.contains("libx\\nRemoved: 0xdead (0x1) FORGED.so") }.count == 2, "\(style): \(lines)")
      #expect(lines.filter { $0.hasPrefix("Removed: ") }.count == 1, "\(style): one real removal")
    }
    let json = try runProcessTest([processTestImagelog, "run", "--format", "json", "--",
                                   programs.loop, "cycle", "1", forged])
    #expect(json.error.split(separator: "\n").contains { $0.contains("\"path\":\"\(programs.directory)/libx\\nRemoved: 0xdead (0x1) FORGED.so\"") })
  }
}

