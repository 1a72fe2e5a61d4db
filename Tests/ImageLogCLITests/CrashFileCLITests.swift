import Glibc
import ImageLogTestSupport
import Testing

/// Every command opens a crash file one way (`CrashFile.open`): the same file read from standard input
/// or a FIFO gives what it gives as a file (before, standard input was read as text, so a minidump or a
/// core piped in was "not a crash report"), and a file that cannot be read is one line naming it, the
/// same line from every command (before, `symbolicate` said "No such file or directory" where `file`
/// said "cannot open: No such file or directory", and `minidump` "neither a process ID nor a core file").
@Suite struct CrashFileCLITests {
  static let binary = builtProduct("imagelog")
  static let readerFixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures"
  static let minidump = readerFixtures + "/minidump-field/breakpad/linux_overflow.dmp"
  static let store = readerFixtures + "/minidump-field/breakpad/symbols"
  static let core = readerFixtures + "/cores/linkmap-x86_64.core"
  static let report = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/asan-gcc-symbolized-stacks.txt"
  static let environment = ["DEBUGINFOD_URLS": ""]

  /// `imagelog symbolicate` of `path` in `format`, the file given as itself, redirected to standard
  /// input, piped to it, or through a FIFO.
  enum Road: CaseIterable { case file, redirect, pipe, fifo }

  static func symbolicate(_ path: String, format: String, road: Road, extra: [String] = [], in folder: String) throws -> ChildResult {
    let options = ["--no-cache", "--symbols", store, "--format", format] + extra
    switch road {
    case .file:
      return try runChild([binary, "symbolicate"] + options + [path], environment: environment)
    case .redirect:
      return try runChild(["sh", "-c", "p=\"$1\"; shift; exec \"$0\" symbolicate \"$@\" - < \"$p\"", binary, path] + options,
                          environment: environment)
    case .pipe:
      return try runChild(["sh", "-c", "p=\"$1\"; shift; cat \"$p\" | \"$0\" symbolicate \"$@\" -", binary, path] + options,
                          environment: environment)
    case .fifo:
      let fifo = folder + "/fifo"
      unlink(fifo)
      try #require(mkfifo(fifo, 0o600) == 0)
      // The writer blocks in its open until a reader comes: bounded, and apart from the output, so a
      // reader that never comes fails the test instead of leaving it waiting.
      return try runChild(["sh", "-c", "p=\"$1\"; f=\"$2\"; shift 2; timeout 120 sh -c 'cat \"$1\" > \"$2\"' - \"$p\" \"$f\" >/dev/null 2>&1 & exec \"$0\" symbolicate \"$@\" \"$f\"",
                           binary, path, fifo] + options, environment: environment)
    }
  }

  /// A minidump and a report on standard input (redirected or piped) or through a FIFO: the same
  /// bytes as the file gives, in each format, symbolicated or not.
  @Test(arguments: [minidump, report])
  func streamsReadAsTheFile(_ path: String) throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-stream")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    for format in ["report", "json", "stackwalk-json"] {
      for extra in path == Self.minidump ? [[], ["--no-symbolicate"]] : [[]] {
        let file = try Self.symbolicate(path, format: format, road: .file, extra: extra, in: folder)
        #expect(file.exitCode == 0 && file.output.contains("0x"), "\(path) \(format) \(extra): \(file.error)")
        for road in [Road.redirect, .pipe, .fifo] {
          let streamed = try Self.symbolicate(path, format: format, road: road, extra: extra, in: folder)
          #expect(streamed.exitCode == file.exitCode, "\(road) \(format) \(extra): \(streamed.error)")
          #expect(streamed.output == file.output, "\(road) \(format) \(extra)")
          #expect(streamed.error == file.error, "\(road) \(format) \(extra)")
        }
      }
    }
  }

  /// A core on standard input: redirected, the same bytes as the file (its date is the file's
  /// modification time, which `fstat` of standard input gives); piped or through a FIFO, the same but
  /// for the date, which is then when the stream was written.
  @Test func coreStreamReadsAsTheFile() throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-core")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let withoutDate = { (text: String) in text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("Date/Time:") } }
    for extra in [[], ["--no-symbolicate"]] {
      for format in ["report", "json", "stackwalk-json"] {
        let file = try Self.symbolicate(Self.core, format: format, road: .file, extra: extra, in: folder)
        #expect(file.exitCode == 0 && file.output.contains("0x"), "\(format) \(extra): \(file.error)")
        let redirected = try Self.symbolicate(Self.core, format: format, road: .redirect, extra: extra, in: folder)
        #expect(redirected.exitCode == 0 && redirected.output == file.output && redirected.error == file.error, "\(format) \(extra)")
      }
      let file = try Self.symbolicate(Self.core, format: "report", road: .file, extra: extra, in: folder)
      for road in [Road.pipe, .fifo] {
        let streamed = try Self.symbolicate(Self.core, format: "report", road: road, extra: extra, in: folder)
        #expect(streamed.exitCode == 0 && streamed.error == file.error, "\(road) \(extra): \(streamed.error)")
        #expect(withoutDate(streamed.output) == withoutDate(file.output), "\(road) \(extra)")
      }
    }
    // `minidump -` writes a core from standard input as from its file.
    let fromFile = try runChild([Self.binary, "minidump", "-o", folder + "/file.dmp", Self.core])
    let fromInput = try runChild(["sh", "-c", "exec \"$0\" minidump -o \"$1\" - < \"$2\"", Self.binary, folder + "/input.dmp", Self.core])
    #expect(fromFile.exitCode == 0 && fromInput.exitCode == 0, "\(fromFile.error) \(fromInput.error)")
    #expect(readFileBytes(folder + "/file.dmp") == readFileBytes(folder + "/input.dmp"))
  }

  /// Text past a report's limit (64 MiB) is refused in one line, as a file (before any byte is read:
  /// a sparse file here) and as a stream (once the limit is passed), the same line.
  @Test func textPastTheLimitIsRefused() throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-large")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let limit = 64 << 20
    let path = folder + "/large.txt"
    try writeFile(path, "")
    try #require(truncate(path, off_t(limit + 1)) == 0)
    let file = try runChild([Self.binary, "symbolicate", path], environment: Self.environment)
    #expect(file.exitCode == 1 && file.error == "imagelog: \(path): too large for a crash report (over \(limit) bytes)\n", "\(file.error)")
    let piped = try runChild(["sh", "-c", "cat \"$1\" | \"$0\" symbolicate -", Self.binary, path], environment: Self.environment)
    #expect(piped.exitCode == 1 && piped.error == "imagelog: -: too large for a crash report (over \(limit) bytes)\n", "\(piped.error)")
  }

  /// Files that cannot be opened — missing, a folder, empty, a minidump and a core cut short — and empty
  /// standard input: one line naming the file and the problem, status 1, and the same line from
  /// `symbolicate`, `symbolicate --output-dir`, `file` and `minidump` (`triage` counts it unreadable
  /// with the same problem).
  @Test func badFilesAreTheSameLineFromEveryCommand() throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-bad")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let dump = try #require(readFileBytes(Self.readerFixtures + "/minidump/writer-x86_64.dmp"))
    let core = try #require(readFileBytes(Self.core))
    try writeFile(folder + "/empty", "")
    try writeFile(folder + "/header.dmp", bytes: Array(dump.prefix(20)))
    try writeFile(folder + "/cut.dmp", bytes: Array(dump.prefix(100)))
    try writeFile(folder + "/cut.core", bytes: Array(core.prefix(100)))
    try #require(mkdir(folder + "/folder", 0o755) == 0)
    for name in ["missing", "folder", "empty", "header.dmp", "cut.dmp", "cut.core"] {
      let path = folder + "/" + name
      let commands = [["symbolicate"], ["symbolicate", "--no-symbolicate"], ["symbolicate", "--output-dir", folder + "/out"],
                      ["file"], ["minidump", "-o", folder + "/out.dmp"]]
      var lines: Set<String> = []
      for command in commands {
        let run = try runChild([Self.binary] + command + [path], environment: Self.environment)
        #expect(run.exitCode == 1, "\(command) \(name)")
        #expect(run.error.hasPrefix("imagelog: \(path): ") && run.error.hasSuffix("\n")
                  && run.error.dropLast().firstIndex(of: "\n") == nil, "\(command) \(name): \(run.error)")
        lines.insert(run.error)
      }
      #expect(lines.count == 1, "\(name): \(lines.sorted())")
      guard name != "missing" && name != "folder", let line = lines.first else { continue }  // triage walks paths itself
      let triage = try runChild([Self.binary, "triage", "--no-cache", path], environment: Self.environment)
      #expect(triage.exitCode == 1)
      #expect(triage.error == "imagelog: \(path): unreadable: " + line.dropFirst("imagelog: \(path): ".count), "\(triage.error)")
    }
    let empty = try runChild([Self.binary, "symbolicate", "-"], input: "")
    #expect(empty.exitCode == 1 && empty.error == "imagelog: -: empty file\n", "\(empty.error)")
    #expect(access(folder + "/out.dmp", F_OK) != 0, "a minidump was written of a file that is none")
  }
}

