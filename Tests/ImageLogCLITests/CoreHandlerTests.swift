#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog core-handler` fed real cores on standard input (through a pipe, as the kernel gives them),
/// never by changing /proc/sys/kernel/core_pattern: a gcore of a live threaded program with its PID
/// (the handler reads /proc/PID), a kernel core whose process is gone (the handler reads the core
/// alone), a core larger than the handler's memory, streams cut short, and the folder it writes.
/// Threads and frames are held to `eu-stack --core` on the same core.
@Suite(.serialized) struct CoreHandlerTests {
  static let binary = builtProduct("imagelog")
  static let haveOracles = CoreFileTests.haveGcore && CoreFileTests.haveStack && haveTool("cc")
  static let kernelCores = CoreFileTests.kernelWritesCores && CoreFileTests.haveStack && haveTool("cc")
  static let isRoot = getuid() == 0

  /// Runs the handler with `core` piped on standard input (`cat CORE |`, or its first `bytes` bytes),
  /// writing into `directory`; `prefix` goes before imagelog (`prlimit ...`).
  static func handle(_ core: String, pid: pid_t, into directory: String, _ arguments: [String] = [],
                     bytes: Int? = nil, prefix: [String] = [], redirections: String = "") throws -> ChildResult {
    let source = bytes.map { "head -c \($0) \(quoted(core))" } ?? "cat \(quoted(core))"
    let command = prefix + [binary, "core-handler", "--output-dir", directory, "--pid", String(pid)] + arguments
    return try runChild(["sh", "-c", "\(source) | exec \(command.map(quoted).joined(separator: " ")) \(redirections)"])
  }

  static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

  /// The names in `directory`, sorted.
  static func files(in directory: String) -> [String] { directoryNames(directory).sorted() }

  /// The one report in `directory`.
  static func report(in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let reports = files(in: directory).filter { $0.hasSuffix(".crash") }
    try #require(reports.count == 1, "one report in \(directory): \(files(in: directory))", sourceLocation: sourceLocation)
    return try #require(readFile("\(directory)/\(reports[0])"))
  }

  /// Each thread's functions by tid as a report of the handler (run with `--demangle none`) writes
  /// them: the real function of each frame (the last line of its number; the lines before it are the
  /// functions inlined into it), with the file of its image from `Binary Images:`.
  static func reportStacks(_ text: String) -> [Int: [(name: String?, file: String?, inVDSO: Bool)]] {
    var files: [String: String] = [:]
    var frames: [(tid: Int, number: Int, name: String?, image: String)] = []
    var tid: Int?
    var inImages = false
    for line in text.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if line == "Binary Images:" { inImages = true; continue }
      if inImages {
        if fields.count >= 7, fields[1] == "-" {
          let name = fields[3].hasPrefix("+") ? String(fields[3].dropFirst()) : String(fields[3])
          files[name] = fields[6...].joined(separator: " ")
        }
        continue
      }
      if line.hasPrefix("Thread "), let range = line.range(of: ":  tid ") {
        tid = Int(line[range.upperBound...].split(separator: " ")[0])
        continue
      }
      guard let tid, fields.count >= 4, let number = Int(fields[0]), fields[2].hasPrefix("0x") else { continue }
      let name = fields[3].hasPrefix("0x") ? nil : String(fields[3])
      if let last = frames.last, last.tid == tid, last.number == number { frames.removeLast() }
      frames.append((tid, number, name, String(fields[1])))
    }
    var stacks: [Int: [(name: String?, file: String?, inVDSO: Bool)]] = [:]
    for frame in frames {
      stacks[frame.tid, default: []].append((frame.name, files[frame.image], frame.image == "[vdso]"))
    }
    return stacks
  }

  /// The report's threads and frames against `eu-stack --core CORE`.
  static func expectSameStacks(_ report: String, as core: String, _ comment: String,
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
    let ours = reportStacks(report)
    #expect(!ours.isEmpty, "\(comment): no thread in the report\n\(report)", sourceLocation: sourceLocation)
    try CoreFileTests.expectSameStacks(ours, as: core, comment, sourceLocation: sourceLocation)
  }

  /// A field of a core's NT_PRPSINFO as `eu-readelf -n` prints it (`pid`, `fname`).
  static func processInfo(_ core: String, _ field: String) throws -> String {
    var inInfo = false
    for line in try runTool(["eu-readelf", "-n", core]).output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if fields.first == "CORE" || fields.first == "LINUX" { inInfo = fields.last == "PRPSINFO"; continue }
      if inInfo, let index = fields.firstIndex(of: Substring(field + ":")), index + 1 < fields.count {
        return String(fields[index + 1].split(separator: ",")[0])
      }
    }
    throw TestSupportError("no \(field) in the NT_PRPSINFO of \(core)")
  }

  /// The process id in a core's NT_PRPSINFO.
  static func corePID(_ core: String) throws -> pid_t {
    try #require(pid_t(try processInfo(core, "pid")))
  }

  /// A process id no process has (none under /proc), from the top of the kernel's range down.
  static func unusedPID() -> pid_t {
    var pid: pid_t = 4_194_000
    while access("/proc/\(pid)", F_OK) == 0 { pid -= 1 }
    return pid
  }

  /// The number of program headers (`readelf -lW`'s "There are N program headers").
  static func programHeaderCount(_ core: String) throws -> Int {
    let text = try runTool(["readelf", "-lW", core]).output
    let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("There are ") })
    return try #require(Int(line.split(separator: " ")[2]))
  }

  /// The file offset and size of a core's first PT_NOTE (`readelf -lW`).
  static func noteSegment(_ core: String) throws -> (offset: Int, size: Int) {
    for line in try runTool(["readelf", "-lW", core]).output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if fields.first == "NOTE", fields.count >= 5, let offset = Int(fields[1].dropFirst(2), radix: 16),
         let size = Int(fields[4].dropFirst(2), radix: 16) {
        return (offset, size)
      }
    }
    throw TestSupportError("no PT_NOTE in \(core)")
  }

  /// A core of Tests/Programs/coredump-threads.c built in `directory`: the kernel's of its crash when
  /// the kernel writes cores here, else gdb's of it running (returned, to be stopped by the caller).
  static func smallCore(in directory: String) throws -> (core: String, live: RunningChild?) {
    let program = try CoreFileTests.buildThreadsProgram(in: directory)
    if kernelCores { return (try CoreFileTests.kernelCore([program, "crash"], in: directory), nil) }
    let child = try RunningChild([program, "sleep"])
    try child.wait(for: "ready")
    return (try CoreFileTests.gcore(child.pid, in: directory), child)
  }

  static func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : -1
  }

  // MARK: A live process and its gcore

  @Test(.enabled(if: haveOracles, "gcore (gdb), eu-stack, eu-unstrip, readelf or cc missing"))
  func gcoreOfALiveThreadedProgramIsReadThroughProc() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-gcore")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try buildThreadsProgram(in: directory)
    let child = try RunningChild([program, "5"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 6)
    let core = try CoreFileTests.gcore(child.pid, in: directory)
    try waitUntilThreadsBlocked(child.pid, count: 6)  // gdb let them go: each back in its call

    let reports = "\(directory)/reports"
    let run = try Self.handle(core, pid: child.pid, into: reports, ["--demangle", "none", "--time", "1700000000"])
    #expect(run.exitCode == 0, "\(run.error)")
    #expect(run.error.isEmpty, "\(run.error)")
    let stem = "\(try Self.processInfo(core, "fname")).\(child.pid).20231114T221320Z"
    #expect(Self.files(in: reports) == ["\(stem).crash", "\(stem).dmp"])
    #expect(run.output == "\(reports)/\(stem).dmp\n\(reports)/\(stem).crash\n")
    // The minidump beside the report: every thread, each with the stack read from the dying process.
    let dump = try MinidumpFile(bytes: try #require(readFileBytes("\(reports)/\(stem).dmp")))
    #expect(dump.threads.count == 6 && dump.threads.allSatisfy { $0.stack.location.dataSize > 0 }, "\(dump.threads)")
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    let report = try Self.report(in: reports)
    #expect(report.contains("-- imagelog core-handler: memory read from the dumping process (/proc/\(child.pid))\n"), "\(report)")
    #expect(report.contains("Date/Time:       2023-11-14 22:13:20 +0000\n"))
    #expect(!report.contains("Exception Type:") && !report.contains("Crashed"))
    try Self.expectSameStacks(report, as: core, "gcore of process-threads through /proc")
    // Names from /proc/PID/task/TID/comm (a core has only the process's).
    for tid in threadIDs(of: child.pid) {
      let name = try #require(readFile("/proc/\(child.pid)/task/\(tid)/comm")).split(separator: "\n").first.map(String.init) ?? ""
      #expect(report.contains(" name:  \(name)\nThread ") && report.contains(":  tid \(tid)\n"), "\(tid) \(name)\n\(report)")
    }
    #expect(report.contains("reader-0") && report.contains("sleeper-1") && report.contains("waiter-2"))

    // The same core with the PID of another live process: its memory is not used.
    let other = try RunningChild(["sleep", "1000"])
    defer { other.stop() }
    let elsewhere = "\(directory)/elsewhere"
    let wrong = try Self.handle(core, pid: other.pid, into: elsewhere, ["--demangle", "none"])
    #expect(wrong.exitCode == 0, "\(wrong.error)")
    let fromCore = try Self.report(in: elsewhere)
    #expect(fromCore.contains("-- imagelog core-handler: memory read from the core itself (and the images' files)\n"))
    #expect(fromCore.contains("not the process that wrote this core"), "\(fromCore)")
    // gdb writes its notes after the memory: kept whole within the memory limit, the stacks too.
    try Self.expectSameStacks(fromCore, as: core, "gcore of process-threads, read from the core alone")
  }

  // MARK: A kernel core

  @Test(.enabled(if: kernelCores, "the kernel cannot write cores here (CoreFileTests.kernelCoreProblem), or eu-stack, readelf or cc missing"))
  func kernelCoreOfACrashWhoseProcessIsGone() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-kernel")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try CoreFileTests.buildThreadsProgram(in: directory)
    let core = try CoreFileTests.kernelCore([program, "crash"], in: directory)
    let pid = try Self.corePID(core)
    let crashedTID = try #require(try CoreFileTests.noteThreadIDs(core).first)

    let reports = "\(directory)/reports"
    let run = try Self.handle(core, pid: pid, into: reports, ["--demangle", "none", "--signal", "11", "--keep-core"])
    #expect(run.exitCode == 0, "\(run.error)")
    let report = try Self.report(in: reports)
    #expect(report.contains("memory read from the core itself"), "\(report)")
    #expect(report.contains("pid \(pid): no such process"), "\(report)")
    #expect(report.contains("Exception Type:  SIGSEGV (SEGV_MAPERR)\n"))
    #expect(report.contains("Exception Codes: signal 11, code 1, address 0x0000000000000010\n"))
    #expect(report.contains(" Crashed:  tid \(crashedTID)\n"), "\(report)")
    #expect(report.contains("crashed with X86 Thread State (64-bit):") || !report.contains("x86_64"))
    #expect(!report.contains("the kernel gave signal"))
    try Self.expectSameStacks(report, as: core, "kernel core of coredump-threads crash, process gone")

    // The compressed core is the core.
    let kept = try #require(Self.files(in: reports).first { $0.hasSuffix(".core.zst") })
    #expect(report.contains("note: the core, \(Self.fileSize(core)) bytes: \(kept)\n"), "\(report)")
    if haveTool("zstd") {
      let same = try runTool(["sh", "-c", "zstd -q -t \(Self.quoted("\(reports)/\(kept)")) && zstd -q -dc "
                                + "\(Self.quoted("\(reports)/\(kept)")) | cmp - \(Self.quoted(core))"])
      #expect(same.status == 0, "\(same.output)\(same.error)")
    }

    // Another signal than the core's: said, not believed.
    let other = try Self.handle(core, pid: pid, into: "\(directory)/other", ["--signal", "6"])
    #expect(other.exitCode == 0)
    #expect(try Self.report(in: "\(directory)/other").contains("note: the kernel gave signal 6; the core's notes say 11\n"))
  }

  // MARK: Bounded memory

  /// A 256 MiB process's core through a handler limited to 128 MiB of address space (and 16 MiB of
  /// the core): the report is whole, and the core kept compressed is the core.
  @Test(.enabled(if: (kernelCores || haveOracles) && haveTool("prlimit") && haveTool("zstd"),
                 "no kernel core or gcore, eu-stack, readelf, cc, prlimit or zstd missing"))
  func coreLargerThanTheHandlersMemory() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-big")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/core-handler-big"
    let build = try runTool(["cc", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                             "\(packageRoot)/Tests/Programs/core-handler-big.c", "-o", program])
    try #require(build.status == 0, "cc failed: \(build.error)")
    let core: String
    var live: RunningChild?
    if Self.kernelCores {
      core = try CoreFileTests.kernelCore([program, "256", "crash"], in: directory)
    } else {
      let child = try RunningChild([program, "256", "sleep"])
      try child.wait(for: "ready")
      try waitUntilThreadsBlocked(child.pid, count: 2)
      core = try CoreFileTests.gcore(child.pid, in: directory)
      live = child
    }
    defer { live?.stop() }
    let limit = 128 << 20
    #expect(Self.fileSize(core) > 2 * limit, "the core (\(Self.fileSize(core)) bytes) is larger than the limit")
    let reports = "\(directory)/reports"
    // The PID of no process: the memory is the core's, kept within --max-memory.
    let run = try Self.handle(core, pid: Self.unusedPID(), into: reports,
                              ["--demangle", "none", "--max-memory", "16M", "--keep-core"],
                              prefix: ["prlimit", "--as=\(limit)", "--"])
    #expect(run.exitCode == 0, "\(run.error)")
    let report = try Self.report(in: reports)
    try Self.expectSameStacks(report, as: core, "core of core-handler-big under a 128 MiB address space")
    if Self.kernelCores {
      #expect(report.contains("Exception Codes: signal 11, code 1, address 0x0000000000000020\n"))
      #expect(report.contains(" big_crash "), "\(report)")
    }
    let kept = try #require(Self.files(in: reports).first { $0.hasSuffix(".core.zst") })
    let same = try runTool(["sh", "-c", "zstd -q -dc \(Self.quoted("\(reports)/\(kept)")) | cmp - \(Self.quoted(core))"])
    #expect(same.status == 0, "\(same.output)\(same.error)")

    // The same under a memory limit that cannot hold the stacks: said, and still a report.
    let small = try Self.handle(core, pid: Self.unusedPID(), into: "\(directory)/small",
                                ["--max-memory", "16K"], prefix: ["prlimit", "--as=\(limit)", "--"])
    #expect(small.exitCode == 0, "\(small.error)")
    let partial = try Self.report(in: "\(directory)/small")
    #expect(partial.contains("note: the memory limit of 16384 bytes left out "), "\(partial)")
    #expect(partial.contains("Threads:         2\n"))
  }

  // MARK: Streams cut short and not cores

  @Test(.enabled(if: kernelCores || haveOracles, "no kernel core or gcore (see CoreFileTests)"))
  func truncatedStreams() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-cut")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (core, live) = try Self.smallCore(in: directory)
    defer { live?.stop() }
    let size = Self.fileSize(core)
    let notes = try Self.noteSegment(core)
    let pid = Self.unusedPID()
    let table = "the program headers (bytes 64..<\(64 + 56 * (try Self.programHeaderCount(core))))"
    var cuts: [(bytes: Int, inside: String)] = [(0, "the ELF header"), (30, "the ELF header"), (100, table)]
    cuts.append((notes.offset + notes.size / 2, "the notes (bytes \(notes.offset)..<\(notes.offset + notes.size))"))
    for (index, cut) in cuts.enumerated() {
      let folder = "\(directory)/cut-\(index)"
      let run = try Self.handle(core, pid: pid, into: folder, ["--keep-core"], bytes: cut.bytes)
      #expect(run.exitCode == 1, "cut at \(cut.bytes): \(run.output)")
      #expect(run.error == "imagelog: core-handler: pid \(pid): the core ended after \(cut.bytes) bytes, inside \(cut.inside): no threads to report\n",
              "cut at \(cut.bytes)")
      #expect(Self.files(in: folder).isEmpty, "cut at \(cut.bytes): nothing written, no half file: \(Self.files(in: folder))")
    }
    if notes.offset + notes.size < size / 2 {  // the kernel's layout: notes first, then the memory
      let folder = "\(directory)/cut-memory"
      let run = try Self.handle(core, pid: pid, into: folder, [], bytes: size / 2)
      #expect(run.exitCode == 0, "\(run.error)")
      let report = try Self.report(in: folder)
      #expect(report.contains("note: the core ended after \(size / 2) of the \(size) bytes its program headers describe: memory past it is missing\n"),
              "\(report)")
      #expect(report.contains("Threads:         4\n"))
    }
    // Not cores.
    let notCore = try runChild(["sh", "-c", "exec \(Self.quoted(Self.binary)) core-handler --output-dir \(Self.quoted("\(directory)/exe")) --pid 1 < /bin/sh"])
    #expect(notCore.exitCode == 1)
    #expect(notCore.error == "imagelog: core-handler: pid 1: e_type 3 is not ET_CORE (4): not a core file\n", "\(notCore.error)")
    let text = try runChild([Self.binary, "core-handler", "--output-dir", "\(directory)/text", "--pid", "1"],
                            input: String(repeating: "not a core\n", count: 20))
    #expect(text.exitCode == 1)
    #expect(text.error.hasPrefix("imagelog: core-handler: pid 1: not an ELF") && text.error.split(separator: "\n").count == 1,
            "\(text.error)")
  }

  // MARK: A process inside do_coredump

  /// True when this test process may hold a process in the middle of writing its core: a private
  /// mount namespace with a loop-mounted ext4 that `fsfreeze` can freeze (root, loop devices).
  static let canFreeze: Bool = {
    guard isRoot, ["unshare", "fsfreeze", "mkfs.ext4", "truncate", "gcore", "eu-stack"].allSatisfy(haveTool) else { return false }
    let probe = try? runChild(["unshare", "-m", "--propagation", "private", "sh", "-c",
                               "d=$(mktemp -d) && truncate -s 8M $d/i && mkfs.ext4 -q -F $d/i && mkdir $d/m && "
                                 + "mount -o loop $d/i $d/m && fsfreeze -f $d/m && fsfreeze -u $d/m && umount $d/m; "
                                 + "s=$?; rm -rf $d; exit $s"], timeoutSeconds: 60)
    return probe?.exitCode == 0
  }()

  /// The state the handler relies on, made without core_pattern: the process's working folder is on a
  /// frozen file system, so the kernel, having stopped every thread for the dump (`CoreDumping: 1`),
  /// waits to create the core file. Meanwhile the handler is given a gcore taken just before the
  /// fatal signal (the same registers and stacks: a fatal default action pushes no signal frame) and
  /// the process's PID: it reads the maps, the images and the stacks of the dumping process itself.
  @Test(.enabled(if: canFreeze && haveOracles,
                 "needs root, unshare, a loop-mounted ext4 fsfreeze can freeze, gcore, eu-stack and cc"))
  func aDumpingProcessIsReadThroughProc() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-dumping")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    _ = try CoreFileTests.buildThreadsProgram(in: directory)
    let script = #"""
      set -u
      D=$1; IMAGELOG=$2
      mkdir -p "$D/mnt" && truncate -s 64M "$D/fs.img" && mkfs.ext4 -q -F "$D/fs.img" && mount -o loop "$D/fs.img" "$D/mnt" || exit 2
      P=
      cleanup() { fsfreeze -u "$D/mnt" 2>/dev/null; [ -n "$P" ] && kill -9 "$P" 2>/dev/null; wait; umount "$D/mnt" 2>/dev/null || umount -l "$D/mnt"; }
      trap cleanup EXIT INT TERM HUP
      # Polls (a bounded number of times) until the condition holds.
      until_true() { i=0; until "$@"; do i=$((i + 1)); [ $i -lt 6000 ] || { echo "gave up: $*" >&2; exit 3; }; sleep 0.01; done; }
      blocked() {  # every one of the 4 threads asleep in a system call
        [ "$(ls /proc/$P/task | wc -l)" = 4 ] || return 1
        for f in /proc/$P/task/*/syscall; do read -r n rest < "$f" || return 1; case $n in ''|*[!0-9]*) return 1;; esac; done
      }
      dumping() { grep -q '^CoreDumping:[[:space:]]*1' /proc/$P/status; }
      # Run from the frozen folder (where the kernel would write the core); the program stays outside it,
      # where eu-stack finds it afterwards.
      cd "$D/mnt"
      (ulimit -c unlimited; exec "$D/coredump-threads" sleep > "$D/out.txt") &
      P=$!
      until_true grep -q ready "$D/out.txt"
      until_true blocked
      gcore -o "$D/g" "$P" > /dev/null 2>&1 || exit 4
      until_true blocked
      echo "$P" > "$D/pid"
      fsfreeze -f "$D/mnt"
      kill -SEGV "$P"
      until_true dumping
      grep '^CoreDumping' /proc/$P/status > "$D/before"
      "$IMAGELOG" core-handler --output-dir "$D/reports" --pid "$P" --demangle none < "$D/g.$P" > "$D/handler.out" 2> "$D/handler.err"
      echo $? > "$D/handler.status"
      grep '^CoreDumping' /proc/$P/status > "$D/after"
      fsfreeze -u "$D/mnt"
      wait "$P"
      echo $? > "$D/exit.status"
      ls "$D/mnt" > "$D/written"
      """#
    let run = try runChild(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", directory, Self.binary],
                           timeoutSeconds: 240)
    #expect(run.exitCode == 0, "\(run.output)\(run.error)")
    let pid = try #require(pid_t((readFile("\(directory)/pid") ?? "").filter(\.isNumber)))
    #expect(readFile("\(directory)/before") == "CoreDumping:\t1\n", "the process was dumping when the handler started")
    #expect(readFile("\(directory)/after") == "CoreDumping:\t1\n", "and still when it ended")
    #expect(readFile("\(directory)/handler.status") == "0\n", "\(readFile("\(directory)/handler.err") ?? "")")
    #expect(readFile("\(directory)/exit.status") == "139\n", "the process died of SIGSEGV with a core")
    #expect(readFile("\(directory)/written")?.split(separator: "\n").contains("core") == true, "the kernel wrote its core once thawed")
    let report = try Self.report(in: "\(directory)/reports")
    #expect(report.contains("-- imagelog core-handler: memory read from the dumping process (/proc/\(pid))\n"), "\(report)")
    for name in ["worker-1", "worker-2", "worker-3"] { #expect(report.contains(" name:  \(name)\n"), "\(report)") }
    try Self.expectSameStacks(report, as: "\(directory)/g.\(pid)", "the dumping process read through /proc/\(pid)")
  }

  /// Scripts/print-core-pattern: the line for where imagelog is installed, and what the kernel would
  /// get wrong refused (it splits at spaces and keeps 127 bytes).
  @Test func printCorePattern() throws {
    let script = "\(packageRoot)/Scripts/print-core-pattern"
    let line = try runChild([script, "--prefix", "/opt/imagelog", "--keep-core"])
    #expect(line.exitCode == 0)
    #expect(line.output == "|/opt/imagelog/bin/imagelog core-handler --output-dir /var/crash --pid %P --time %t --uid %u "
              + "--dumpable %d --keep-core\n")
    // The line runs: the words after the program are options core-handler takes (here with an empty
    // core on standard input, and the kernel's %P, %t, %u, %d filled in).
    let directory = try makeTemporaryDirectory("imagelog-core-pattern")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let values = ["%P": "4194302", "%t": "0", "%u": "0", "%d": "1", "/var/crash": "\(directory)/crashes"]
    let options = line.output.dropFirst().dropLast().split(separator: " ").dropFirst(2).map { values[String($0)] ?? String($0) }
    let run = try runChild([Self.binary, "core-handler"] + options)
    #expect(run.error == "imagelog: core-handler: pid 4194302: the core ended after 0 bytes, inside the ELF header: no threads to report\n",
            "\(options): \(run.error)")
    let spaced = try runChild([script, "--output-dir", "/var/my crashes"])
    #expect(spaced.exitCode == 1 && spaced.error.contains("holds a space"))
    let long = try runChild([script, "--prefix", "/" + String(repeating: "p", count: 40)])
    #expect(long.exitCode == 1 && long.error.contains("the kernel keeps 127"), "\(long.error)")
  }

  @Test func usageErrors() throws {
    let missing = try runChild([Self.binary, "core-handler", "--pid", "1"])
    #expect(missing.exitCode == 64)
    #expect(missing.error.hasPrefix("Error: Missing '--output-dir <dir>'\n"), "\(missing.error)")
    let noPID = try runChild([Self.binary, "core-handler", "--output-dir", "/tmp"])
    #expect(noPID.error.hasPrefix("Error: Missing '--pid <pid>'\n"))
    let size = try runChild([Self.binary, "core-handler", "--output-dir", "/tmp", "--pid", "1", "--max-memory", "12X"])
    #expect(size.exitCode == 64)
    #expect(size.error.hasPrefix("Error: The value '12X' is invalid for '--max-memory <size>'"), "\(size.error)")
    let help = try runChild([Self.binary, "help", "core-handler"])
    #expect(help.output.contains("--max-memory <size>") && help.output.contains("default: 128M"))
  }
}
