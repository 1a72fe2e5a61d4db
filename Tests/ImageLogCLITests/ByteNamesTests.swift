import FoundationEssentials
import Glibc
import ImageLogTestSupport
import Testing

/// Paths and names are bytes: a program in a folder whose name holds a Latin-1 byte (`caf\xe9`, not
/// UTF-8), with threads whose names hold such bytes, read by `file`, `pid`, `pid --threads` and
/// `symbolicate` of its core; and a folder named with a backslash. The folders are made from raw bytes
/// through the C library, and every path that holds the byte reaches a program through a shell glob
/// (`caf?`), so no Swift string ever carries it to the kernel.
@Suite struct ByteNamesTests {
  static let latin1Folder: [UInt8] = Array("caf".utf8) + [0xE9]
  static let backslashFolder: [UInt8] = Array("back\\slash".utf8)

  /// `directory/name` made by mkdir(2) from the bytes themselves.
  static func makeFolder(_ directory: String, _ name: [UInt8]) throws {
    let path = Array(directory.utf8) + [UInt8(ascii: "/")] + name + [0]
    let made = path.map { CChar(bitPattern: $0) }.withUnsafeBufferPointer { mkdir($0.baseAddress!, 0o755) }
    try #require(made == 0, "mkdir failed: \(String(cString: strerror(errno)))")
  }

  /// Builds Tests/Programs/byte-names.c into `directory/GLOB/byte-names` (moved there by the shell).
  static func buildProgram(in directory: String, folderGlob: String) throws {
    let build = try runTool(["sh", "-c", "cd '\(directory)' && cc -g -O0 -pthread "
                               + "'\(packageRoot)/Tests/Programs/byte-names.c' -o byte-names && mv byte-names \(folderGlob)/"])
    try #require(build.status == 0, "cc failed: \(build.error)")
  }

  /// A new temporary folder holding `caf\xe9/byte-names`.
  static func latin1Program(_ label: String) throws -> String {
    let directory = try makeTemporaryDirectory(label)
    try makeFolder(directory, latin1Folder)
    try buildProgram(in: directory, folderGlob: "caf?")
    return directory
  }

  /// Calls `body` with a new temporary folder holding `caf\xe9/byte-names` and the program running
  /// from there, its threads named and blocked; stops it and removes the folder after.
  static func withRunningLatin1Program(_ label: String, _ body: (String, RunningChild) throws -> Void) throws {
    let directory = try latin1Program(label)
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let child = try start(in: directory, folderGlob: "caf?")
    defer { child.stop() }
    try body(directory, child)
  }

  /// `imagelog ARGUMENTS` through the shell, so `caf?` in them names the folder by its bytes.
  static func imagelog(_ arguments: String) throws -> ChildResult {
    try runChild(["sh", "-c", "exec '\(processTestImagelog)' \(arguments)"])
  }

  /// The program started from its folder, its threads named and blocked.
  static func start(in directory: String, folderGlob: String) throws -> RunningChild {
    let child = try RunningChild(["sh", "-c", "exec '\(directory)'/\(folderGlob)/byte-names"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 2)
    return child
  }

  /// The build-id readelf reads from the program (through the glob).
  static func buildID(_ path: String) throws -> String {
    let notes = try runTool(["sh", "-c", "readelf -n \(path)"]).output
    return try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init))
  }

  @Test(.enabled(if: haveTool("cc") && haveTool("readelf"), "needs cc and readelf"))
  func fileReadsAPathUnderALatin1Folder() throws {
    let directory = try Self.latin1Program("imagelog-bytes-file")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let id = try Self.buildID("'\(directory)'/caf?/byte-names")

    let run = try Self.imagelog("file '\(directory)'/caf?/byte-names")
    #expect(run.exitCode == 0 && run.error.isEmpty, "\(run.error)")
    #expect(run.output.hasSuffix(" byte-names x86_64  <\(id.prefix(32))> \(directory)/caf\\xe9/byte-names\n"), "\(run.output)")
    // JSON cannot hold the byte: the text styles' `\xe9`, as a JSON string (a backslash, then `xe9`).
    let json = try Self.imagelog("file --format json '\(directory)'/caf?/byte-names")
    #expect(json.exitCode == 0)
    #expect(json.output.contains("\"path\":\"\(directory)/caf\\\\xe9/byte-names\""), "\(json.output)")
    #expect(json.output.contains("\"buildID\":\"\(id)\""))
  }

  @Test(.enabled(if: haveTool("cc") && haveTool("eu-unstrip"), "needs cc and eu-unstrip (elfutils)"))
  func pidListsAProgramUnderALatin1Folder() throws {
    try Self.withRunningLatin1Program("imagelog-bytes-pid") { directory, child in

      let run = try runChild([processTestImagelog, "pid", String(child.pid)])
      #expect(run.exitCode == 0, "\(run.error)")
      let lines = run.output.split(separator: "\n")
      #expect(lines.contains { $0.contains(" +byte-names x86_64 ") && $0.hasSuffix(" \(directory)/caf\\xe9/byte-names") },
              "\(run.output)")
      #expect(!run.output.contains("\u{FFFD}"))
      // Every image eu-unstrip finds with a build-id, at the same address, by its file's own bytes.
      let theirs = try runTool(["eu-unstrip", "-n", "-p", String(child.pid)])
      try #require(theirs.status == 0, "\(theirs.error)")
      for line in theirs.output.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 2, fields[1] != "-", let at = fields[1].firstIndex(of: "@"),
              let start = UInt64(fields[0].split(separator: "+")[0].dropFirst(2), radix: 16) else { continue }
        let id = fields[1][..<at].prefix(32)
        #expect(lines.contains { $0.hasPrefix("0x\(String(start, radix: 16)) - ") && $0.contains("<\(id)>") },
                "eu-unstrip's \(line) in\n\(run.output)")
      }
    }
  }

  /// pid --threads: the program is found (its frames named as eu-stack names them), and the process
  /// and thread names keep their bytes (the kernel's comm holds them as the program set them).
  @Test(.enabled(if: haveTool("cc") && haveTool("eu-stack"), "needs cc and eu-stack (elfutils)"))
  func threadsOfAProgramWithByteNames() throws {
    try Self.withRunningLatin1Program("imagelog-bytes-threads") { directory, child in
      let tids = threadIDs(of: child.pid)
      try #require(tids.count == 2)
      #expect(readFileBytes("/proc/\(child.pid)/task/\(tids[1])/comm") == [0x77, 0xE9, 0x72, 0x6B, 0xFF, 0x0A])

      let text = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid)])
      #expect(text.exitStatus == 0 && text.error.isEmpty, "\(text.error)")
      let lines = text.output.split(separator: "\n").map(String.init)
      #expect(lines.first == "Process:         m\\xe9in [\(child.pid)]")
      #expect(lines.contains("Path:            \(directory)/caf\\xe9/byte-names"))
      #expect(lines.contains("Thread 0 name:  m\\xe9in"))
      #expect(lines.contains("Thread 1 name:  w\\xe9rk\\xff"))
      #expect(lines.contains { $0.hasPrefix("1   byte-names ") && $0.contains(" worker + ") && $0.contains("byte-names.c:") }, "\(text.output)")
      #expect(!text.output.contains("\u{FFFD}"))

      let json = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--format", "json",
                                     "--no-lines", "--demangle", "none"])
      #expect(json.exitStatus == 0)
      let report = try JSONDecoder().decode(PidThreadsCommandTests.Report.self, from: Data(json.output.utf8))
      #expect(report.threads.map(\.name) == ["m\\xe9in", "w\\xe9rk\\xff"])
      let peer = EuStackThread.parse(try runChild(["eu-stack", "-p", String(child.pid)]).output)
      #expect(report.threads.map(\.tid) == peer.map(\.tid))
      for (thread, theirs) in zip(report.threads, peer) {
        let frames = report.frames.filter { $0.thread == thread.index }.sorted { $0.frame < $1.frame }
        #expect(PidThreadsCommandTests.sameFunctions(frames, theirs.frames.map(\.name)),
                "tid \(thread.tid): \(frames.map(\.symbol)) vs eu-stack's \(theirs.frames.map(\.name))")
      }
      #expect(report.frames.contains { $0.symbol == "worker" } && report.frames.contains { $0.symbol == "main" })
      #expect(noThreadStopped(child.pid))
    }
  }

  /// A core of that program (gcore): symbolicate opens the program by its NT_FILE bytes and names its
  /// frames as eu-stack --core does.
  @Test(.enabled(if: haveTool("cc") && CoreFileTests.haveGcore && CoreFileTests.haveStack, "needs cc, gcore, eu-unstrip, eu-stack and readelf"))
  func gcoreOfAProgramUnderALatin1Folder() throws {
    try Self.withRunningLatin1Program("imagelog-bytes-gcore") { directory, child in
      try Self.expectCoreFindsTheProgram(try CoreFileTests.gcore(child.pid, in: directory), directory, "gcore")
    }
  }

  /// The kernel's core of that program, killed by SIGABRT: the same.
  @Test(.enabled(if: haveTool("cc") && CoreFileTests.haveStack && CoreFileTests.kernelWritesCores,
                 "needs cc, eu-stack and readelf, and a core_pattern that writes cores in the process's folder"))
  func kernelCoreOfAProgramUnderALatin1Folder() throws {
    let directory = try Self.latin1Program("imagelog-bytes-kernel-core")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let child = try RunningChild(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && exec ./caf?/byte-names"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 2)
    child.signal(SIGABRT)
    child.reap()
    let core = "\(directory)/core"
    try #require(access(core, R_OK) == 0, "the kernel wrote no core in \(directory)")
    try Self.expectCoreFindsTheProgram(core, directory, "kernel core")
  }

  /// A minidump of that program (`imagelog minidump PID`): its module list and thread names hold the
  /// bytes (as UTF-16 of the scalars that stand for them), and symbolicate finds the program again.
  @Test(.enabled(if: haveTool("cc"), "needs cc"))
  func minidumpOfAProgramUnderALatin1Folder() throws {
    try Self.withRunningLatin1Program("imagelog-bytes-minidump") { directory, child in
      let dump = "\(directory)/byte-names.dmp"
      let made = try runChild([processTestImagelog, "minidump", String(child.pid), "-o", dump])
      #expect(made.exitCode == 0, "\(made.error)")
      let report = try runChild([processTestImagelog, "symbolicate", dump])
      #expect(report.exitCode == 0, "\(report.error)")
      for expected in ["Path:            \(directory)/caf\\xe9/byte-names\n", "Thread 0 name:  m\\xe9in\n",
                       "Thread 1 name:  w\\xe9rk\\xff\n", " worker + ", " 0 missing, 0 mismatched"] {
        #expect(report.output.contains(expected), "\(expected) in\n\(report.output)")
      }
    }
  }

  /// symbolicate and file of `core`: the program found under `caf\xe9`, its frames named as eu-stack's.
  static func expectCoreFindsTheProgram(_ core: String, _ directory: String, _ label: String,
                                        sourceLocation: SourceLocation = #_sourceLocation) throws {
    let report = try runChild([processTestImagelog, "symbolicate", core])
    #expect(report.exitCode == 0, "\(label): \(report.error)", sourceLocation: sourceLocation)
    #expect(report.output.contains("Path:            \(directory)/caf\\xe9/byte-names\n"), "\(label): \(report.output)",
            sourceLocation: sourceLocation)
    #expect(report.output.contains(" 0 missing, 0 mismatched"), "\(label): \(report.output)", sourceLocation: sourceLocation)
    #expect(report.output.contains(" worker + ") && report.output.contains(" main + "), "\(label): \(report.output)",
            sourceLocation: sourceLocation)
    try CoreFileTests.expectSameStacks(core, "\(label) of byte-names under caf\\xe9", sourceLocation: sourceLocation)
    let listed = try runChild([processTestImagelog, "file", core])
    #expect(listed.output.contains(" +byte-names x86_64 ") && listed.output.contains(" \(directory)/caf\\xe9/byte-names\n"),
            "\(label): \(listed.output)", sourceLocation: sourceLocation)
  }

  /// A report whose own lines hold a raw byte that is not UTF-8 (as the in-process crash handler
  /// writes its `Path:` line): symbolicate keeps the line as written, byte for byte, and still finds
  /// the program through the Binary Images line, which says `caf\xe9`.
  @Test(.enabled(if: haveTool("cc"), "needs cc"))
  func reportLinesKeepTheirBytes() throws {
    try Self.withRunningLatin1Program("imagelog-bytes-report") { directory, child in
      let plain = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-symbolicate"])
      #expect(plain.exitStatus == 0)
      let escapedPath = Array("Path:            \(directory)/caf\\xe9/byte-names\n".utf8)
      let rawPath = Array("Path:            \(directory)/caf".utf8) + [0xE9] + Array("/byte-names\n".utf8)
      var report = Array(plain.output.utf8)
      let at = try #require(report.firstRange(of: escapedPath), "\(plain.output)")
      report.replaceSubrange(at, with: rawPath)
      try writeFile("\(directory)/report.txt", bytes: report)
      let run = try runTool(["sh", "-c", "'\(processTestImagelog)' symbolicate '\(directory)/report.txt' > '\(directory)/out.txt'"])
      #expect(run.status == 0, "\(run.error)")
      let output = try #require(readFileBytes("\(directory)/out.txt"))
      #expect(output.firstRange(of: rawPath) != nil, "the Path line as written")
      let text = String(decoding: output, as: UTF8.self)
      #expect(text.contains(" worker + ") && text.contains(" 0 missing"), "\(text)")
    }
  }

  /// A folder named `back\slash`: printed once escaped (`back\\slash`), and a saved report that says
  /// so is read back to the path itself, whose file is found (it was looked for as `back\\slash`).
  @Test(.enabled(if: haveTool("cc"), "needs cc"))
  func backslashPathIsFoundAndEscapedOnce() throws {
    let directory = try makeTemporaryDirectory("imagelog-bytes-backslash")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try Self.makeFolder(directory, Self.backslashFolder)
    try Self.buildProgram(in: directory, folderGlob: "'back\\slash'")
    let program = "\(directory)/back\\slash/byte-names"
    #expect(access(program, X_OK) == 0)

    let file = try runChild([processTestImagelog, "file", program])
    #expect(file.exitCode == 0 && file.output.hasSuffix(" \(directory)/back\\\\slash/byte-names\n"), "\(file.output)\(file.error)")

    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 2)
    let plain = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--no-symbolicate"])
    #expect(plain.exitStatus == 0)
    #expect(plain.output.contains("Path:            \(directory)/back\\\\slash/byte-names\n"))
    let saved = "\(directory)/report.txt"
    try writeFile(saved, plain.output)
    let later = try runChild([processTestImagelog, "symbolicate", saved])
    #expect(later.exitCode == 0, "\(later.error)")
    #expect(later.output.contains(" worker + ") && later.output.contains(" main + "), "\(later.output)")
    #expect(later.output.contains(" 0 missing"), "\(later.output)")
    #expect(!later.output.contains("back\\\\\\\\slash"), "escaped once, never twice:\n\(later.output)")
  }
}
