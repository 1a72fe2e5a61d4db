#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

enum FileSystemProbe {
  /// True when `path` is a symbolic link whose target does not exist.
  static func isDanglingLink(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK && stat(path, &info) != 0
  }
}

extension CoreHandlerTests {
  // MARK: The folder

  @Test(.enabled(if: kernelCores || haveOracles, "no kernel core or gcore (see CoreFileTests)"))
  func filesAppearWholeAndTheOldestGo() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-folder")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (core, live) = try Self.smallCore(in: directory)
    defer { live?.stop() }
    let pid = Self.unusedPID()
    let bytes = try #require(readFileBytes(core))

    // While the core is on its way, the compressed copy is being written and nothing is visible.
    let reports = "\(directory)/reports"
    let fifo = "\(directory)/stream"
    #expect(mkfifo(fifo, 0o600) == 0)
    let handler = try RunningChild(["sh", "-c", "exec \(Self.quoted(Self.binary)) core-handler --output-dir "
                                      + "\(Self.quoted(reports)) --pid \(pid) --keep-core --time 1000 < \(Self.quoted(fifo))"])
    let writer = open(fifo, O_WRONLY | O_CLOEXEC)
    try #require(writer >= 0)
    let previous = signal(SIGPIPE, SIG_IGN)
    defer { signal(SIGPIPE, previous) }
    func send(_ range: Range<Int>) {
      bytes[range].withUnsafeBytes { raw in
        guard let base = raw.baseAddress else { return }
        var done = 0
        while done < raw.count {
          let wrote = write(writer, base + done, raw.count - done)
          if wrote < 0 && errno == EINTR { continue }
          guard wrote > 0 else { return }
          done += wrote
        }
      }
    }
    send(0..<bytes.count / 2)
    try waitUntil("the handler holds an unnamed file in \(reports)") {
      Self.files(in: "/proc/\(handler.pid)/fd").contains { descriptor in
        var target = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/\(handler.pid)/fd/\(descriptor)", &target, target.count - 1)
        return length > 0 && String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self).hasPrefix(reports + "/")
      }
    }
    #expect(Self.files(in: reports).isEmpty, "nothing visible while the core is read: \(Self.files(in: reports))")
    send(bytes.count / 2..<bytes.count)
    close(writer)
    let written = handler.readAll()
    handler.reap()
    #expect(handler.rawStatus == 0)
    let name = try Self.processInfo(core, "fname")
    let first = "\(name).\(pid).19700101T001640Z"
    #expect(Self.files(in: reports) == ["\(first).core.zst", "\(first).crash", "\(first).dmp"])
    #expect(written == ["\(reports)/\(first).core.zst", "\(reports)/\(first).dmp", "\(reports)/\(first).crash"])

    // At most --max-crashes crashes: the oldest go, by the time in their names; other files stay.
    try writeFile("\(reports)/notes.txt", "kept\n")
    for time in [4000, 2000, 3000] {
      let run = try Self.handle(core, pid: pid, into: reports, ["--time", String(time), "--max-crashes", "2"])
      #expect(run.exitCode == 0, "\(run.error)")
    }
    #expect(Self.files(in: reports) == ["\(name).\(pid).19700101T005000Z.crash", "\(name).\(pid).19700101T005000Z.dmp",
                                         "\(name).\(pid).19700101T010640Z.crash", "\(name).\(pid).19700101T010640Z.dmp",
                                         "notes.txt"], "\(Self.files(in: reports))")
    // A second crash of the same name, pid and second gets a name of its own.
    let again = try Self.handle(core, pid: pid, into: reports, ["--time", "4000", "--max-crashes", "5"])
    #expect(again.output == "\(reports)/\(name)_2.\(pid).19700101T010640Z.dmp\n\(reports)/\(name)_2.\(pid).19700101T010640Z.crash\n",
            "\(again.output)")

    // --max-core-size: the copy is the core's first bytes, and the report says it was cut.
    let cut = "\(directory)/cut"
    let small = try Self.handle(core, pid: pid, into: cut, ["--keep-core", "--max-core-size", "1M", "--time", "0"])
    #expect(small.exitCode == 0, "\(small.error)")
    let stem = "\(name).\(pid).19700101T000000Z"
    #expect(try Self.report(in: cut).contains("note: the core, \(bytes.count) bytes (cut at --max-core-size 1048576): \(stem).core.zst\n"))
    if haveTool("zstd") {
      let same = try runTool(["sh", "-c", "zstd -q -dc \(Self.quoted("\(cut)/\(stem).core.zst")) | cmp - \(Self.quoted(core)) 2>&1"])
      #expect(same.output.contains("EOF on -") && same.output.contains("after byte 1048576"), "\(same.output)")
    }
  }

  /// A folder others can write (/var/crash often is): a name taken by any entry, a dangling link
  /// too, is skipped, not failed on; the files are the writer's alone (mode 0600); crashes named
  /// with times in the future never push out the crash just written; and only the handler's own files
  /// are ever removed (a file of that name pattern another user owns, or one of root's the handler
  /// did not write, stays).
  @Test(.enabled(if: kernelCores || haveOracles, "no kernel core or gcore (see CoreFileTests)"))
  func othersFilesAndNamesInTheFolder() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-others")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (core, live) = try Self.smallCore(in: directory)
    defer { live?.stop() }
    let pid = Self.unusedPID()
    let name = try Self.processInfo(core, "fname")
    let reports = "\(directory)/reports"
    #expect(mkdir(reports, 0o755) == 0)
    func exists(_ path: String) -> Bool { var info = stat(); return lstat(path, &info) == 0 }

    // A dangling link at the very name the crash would get: the next name is taken, the link stays.
    let predicted = "\(reports)/\(name).\(pid).19700101T001640Z.crash"
    #expect(symlink("\(directory)/nowhere", predicted) == 0)
    let linked = try Self.handle(core, pid: pid, into: reports, ["--time", "1000"])
    #expect(linked.exitCode == 0, "\(linked.error)")
    let second = "\(reports)/\(name)_2.\(pid).19700101T001640Z"
    #expect(linked.output == "\(second).dmp\n\(second).crash\n", "\(linked.output)")
    #expect(FileSystemProbe.isDanglingLink(predicted) && !exists("\(directory)/nowhere"))
    for file in ["\(second).dmp", "\(second).crash"] {
      var info = stat()
      #expect(lstat(file, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o777 == 0o600,
              "\(file): mode \(String(info.st_mode & 0o777, radix: 8))")
    }

    // Files of the same pattern the handler did not write: older than every crash, yet never removed.
    let strangers = ["notes.1.19690101T000000Z.crash", "notes.1.19690101T000000Z.dmp", "mine.2.19690102T000000Z.crash",
                     "later.3.21000101T000000Z.crash"]
    for stranger in strangers { try writeFile("\(reports)/\(stranger)", "not the handler's\n") }
    if Self.isRoot { #expect(chown("\(reports)/notes.1.19690101T000000Z.crash", 65534, 65534) == 0) }
    // Two crashes recorded with a clock far ahead (2100), then one now-ish (2033) with room for two.
    for _ in 0..<2 {
      let future = try Self.handle(core, pid: pid, into: reports, ["--time", "4102444800"])
      #expect(future.exitCode == 0, "\(future.error)")
    }
    let now = try Self.handle(core, pid: pid, into: reports, ["--time", "2000000000", "--max-crashes", "2"])
    #expect(now.exitCode == 0, "\(now.error)")
    let current = "\(name).\(pid).20330518T033320Z"
    let futureStems = ["\(name).\(pid).21000101T000000Z", "\(name)_2.\(pid).21000101T000000Z"]
    #expect(now.output == "\(reports)/\(current).dmp\n\(reports)/\(current).crash\n", "\(now.output)")
    // Kept: the crash just written and the later-written of the two future ones (same time: by name,
    // the first goes); the 1970 crash goes; every stranger and the planted link stay.
    let expected = (["\(current).crash", "\(current).dmp", "\(futureStems[1]).crash", "\(futureStems[1]).dmp",
                     "\(name).\(pid).19700101T001640Z.crash"] + strangers).sorted()
    #expect(Self.files(in: reports) == expected, "\(Self.files(in: reports))")
  }

  /// As systemd-coredump grants access: owned by root, readable by the crashed user through an ACL
  /// entry (its mask shows as the group's bits, 0640; the group itself gets nothing), checked with
  /// getfacl (Debian's acl package), and not when the process was not dumpable (then mode 0600).
  @Test(.enabled(if: isRoot && haveTool("getfacl") && haveTool("setpriv") && haveOracles,
                 "needs root (to run a program as another user), getfacl (acl), setpriv, gcore, eu-stack and cc"))
  func filesAreReadableByTheCrashedUserAsSystemdMakesThem() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-acl")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    chmod(directory, 0o755)
    let program = try CoreFileTests.buildThreadsProgram(in: directory)
    let child = try RunningChild(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let core = try CoreFileTests.gcore(child.pid, in: directory)
    let reports = "\(directory)/reports"
    let run = try Self.handle(core, pid: child.pid, into: reports, ["--uid", "4242", "--dumpable", "1", "--keep-core"])
    #expect(run.exitCode == 0, "\(run.error)")
    for name in Self.files(in: reports) {
      let path = "\(reports)/\(name)"
      var info = stat()
      #expect(stat(path, &info) == 0)
      #expect(info.st_uid == 0 && info.st_mode & 0o777 == 0o640, "\(name): uid \(info.st_uid), mode \(String(info.st_mode & 0o777, radix: 8))")
      let acl = try runTool(["getfacl", "-n", "-p", path]).output
      #expect(acl.contains("\nuser::rw-\nuser:4242:r--\ngroup::---\nmask::r--\nother::---\n"), "\(name):\n\(acl)")
    }
    #expect(Self.files(in: reports).count == 3)
    // Not dumpable (set-user-ID, prctl): root's alone.
    let closed = "\(directory)/closed"
    let secret = try Self.handle(core, pid: child.pid, into: closed, ["--uid", "4242", "--dumpable", "2"])
    #expect(secret.exitCode == 0)
    for name in Self.files(in: closed) {
      let acl = try runTool(["getfacl", "-n", "-p", "\(closed)/\(name)"]).output
      #expect(!acl.contains("user:4242") && acl.contains("\nuser::rw-\ngroup::---\nother::---\n"), "\(acl)")
    }
  }

  /// Started by the kernel, a handler has only standard input open: nothing it writes may land in
  /// the files it makes.
  @Test(.enabled(if: kernelCores || haveOracles, "no kernel core or gcore (see CoreFileTests)"))
  func onlyStandardInputOpen() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-handler-fds")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (core, live) = try Self.smallCore(in: directory)
    defer { live?.stop() }
    let pid = Self.unusedPID()
    let closed = try Self.handle(core, pid: pid, into: "\(directory)/closed", ["--time", "5", "--keep-core"],
                                 redirections: ">&- 2>&-")
    let open = try Self.handle(core, pid: pid, into: "\(directory)/open", ["--time", "5", "--keep-core"])
    #expect(closed.exitCode == 0 && open.exitCode == 0)
    #expect(try Self.report(in: "\(directory)/closed") == (try Self.report(in: "\(directory)/open")))
    // The compressed core (open while the paths written are printed) is the core, nothing after it.
    let kept = try #require(Self.files(in: "\(directory)/closed").first { $0.hasSuffix(".core.zst") })
    #expect(readFileBytes("\(directory)/closed/\(kept)") == readFileBytes("\(directory)/open/\(kept)"))
    if haveTool("zstd") {
      let same = try runTool(["sh", "-c", "zstd -q -dc \(Self.quoted("\(directory)/closed/\(kept)")) | cmp - \(Self.quoted(core))"])
      #expect(same.status == 0, "\(same.output)\(same.error)")
    }
  }
}
