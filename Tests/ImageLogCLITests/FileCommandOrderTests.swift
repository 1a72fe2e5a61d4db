#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
import ImageReaders

/// `imagelog file` reads many files on several threads; what it prints must still follow the
/// argument order, each failure in its place, and options may sit anywhere among the paths.
@Suite struct FileCommandOrderTests {
  typealias CLI = FileCommandTests

  /// Every ELF fixture and up to 100 ELF files of the system library folder, with missing files, a
  /// folder and a text file between them: enough files that the run uses its reader threads.
  static func mixedPaths(in folder: String) throws -> (all: [String], good: [String], bad: [String]) {
    CLI.write(folder + "/text", Array("not a binary\n".utf8))
    mkdir(folder + "/dir", 0o700)
    var good = FileCommandTests.sample.map { CLI.fixtures + "/" + $0 }
    for path in InstalledPackages.libraries() where good.count < 100 {
      if (try? CLI.decode(path)) != nil { good.append(path) }
    }
    var all: [String] = []
    var bad: [String] = []
    for (index, path) in good.enumerated() {
      all.append(path)
      if index % 7 == 3 {
        let extra = [folder + "/missing-\(index)", folder + "/dir", folder + "/text"][index % 3]
        all.append(extra)
        bad.append(extra)
      }
    }
    return (all, good, bad)
  }

  @Test(.enabled(if: CLI.haveBinary, "needs the built imagelog"))
  func crashLinesAndErrorsFollowTheArguments() throws {
    let folder = try CLI.temporaryFolder()
    defer { CLI.remove(folder) }
    let paths = try Self.mixedPaths(in: folder)
    try #require(paths.good.count >= 16, "too few ELF files to read on threads")
    let run = try CLI.imagelog(["file"] + paths.all)
    #expect(run.status == 1)
    // Each crash line ends with its path; paths here have no spaces.
    #expect(run.outLines.map { String($0[$0.index(after: $0.lastIndex(of: " ")!)...]) } == paths.good)
    #expect(run.errLines.map { String($0.dropFirst("imagelog: ".count).prefix { $0 != ":" }) } == paths.bad)
  }

  /// Files in the page cache are read on one thread; `IMAGELOG_THREADS` starts the reader threads at
  /// once, as slow (cold) files do: the order holds with them, and the output is the same.
  @Test(.enabled(if: CLI.haveBinary, "needs the built imagelog"))
  func readerThreadsKeepTheOrder() throws {
    let folder = try CLI.temporaryFolder()
    defer { CLI.remove(folder) }
    let paths = try Self.mixedPaths(in: folder)
    try #require(paths.good.count >= 16, "too few ELF files to read on threads")
    for style in [["--format", "crash"], ["--format", "json"], ["--uuid"]] {
      let single = try CLI.spawn(["env", "IMAGELOG_THREADS=1", CLI.binary, "file"] + style + paths.all)
      for threads in [2, 3] {
        let run = try CLI.spawn(["env", "IMAGELOG_THREADS=\(threads)", CLI.binary, "file"] + style + paths.all)
        #expect(run.status == 1)
        #expect(run.stdout == single.stdout, "\(style) on \(threads) threads")
        #expect(run.stderr == single.stderr, "\(style) on \(threads) threads")
      }
      #expect(single.errLines.map { String($0.dropFirst("imagelog: ".count).prefix { $0 != ":" }) } == paths.bad)
    }
  }

  @Test(.enabled(if: CLI.haveBinary && CLI.have("python3"), "needs the built imagelog and python3 (JSON oracle)"))
  func jsonElementsFollowTheArguments() throws {
    let folder = try CLI.temporaryFolder()
    defer { CLI.remove(folder) }
    let paths = try Self.mixedPaths(in: folder)
    let run = try CLI.imagelog(["file", "--format", "json"] + paths.all)
    #expect(run.status == 1)
    CLI.write(folder + "/out.json", Array(run.stdout.utf8))
    let script = "import json,sys; print('\\n'.join(e['path'] + ' ' + (e['buildID'] or '-') for e in json.load(open(sys.argv[1]))))"
    let parsed = try CLI.spawn(["python3", "-c", script, folder + "/out.json"])
    #expect(parsed.status == 0, "python3 could not load the JSON: \(parsed.stderr)")
    let expected = try paths.good.map { path in "\(path) \(try CLI.decode(path).buildID?.hex ?? "-")" }
    #expect(parsed.stdout.split(separator: "\n").map(String.init) == expected)
  }

  /// Paths with characters JSON escapes (`"`, `\`, control characters) at every position of the
  /// eight-byte words the writer scans at once and of the bytes after them, and non-ASCII names: the
  /// `path` member python's json module reads back is the path.
  @Test(.enabled(if: CLI.haveBinary && CLI.have("python3"), "needs the built imagelog and python3 (JSON oracle)"))
  func pathsAreEscapedInJSON() throws {
    let folder = try CLI.temporaryFolder()
    defer { CLI.remove(folder) }
    let library = try CLI.bytes(CLI.fixtures + "/libfixture-x86_64.so")
    var paths: [String] = []
    for special in ["\"", "\\", "\t", "\u{1}", "\u{1F}", "é"] {
      for position in 0..<17 {
        let name = String(repeating: "a", count: position) + special + String(repeating: "b", count: 16 - position)
        paths.append(folder + "/" + name)
      }
    }
    paths.append(folder + "/" + String(repeating: "c", count: 40))  // nothing to escape
    for path in paths { CLI.write(path, library) }
    let run = try CLI.imagelog(["file", "--format", "json"] + paths)
    #expect(run.status == 0, "\(run.stderr)")
    CLI.write(folder + "/out.json", Array(run.stdout.utf8))
    let script = "import json,sys; print(json.dumps([e['path'] for e in json.load(open(sys.argv[1]))]))"
    let parsed = try CLI.spawn(["python3", "-c", script, folder + "/out.json"])
    #expect(parsed.status == 0, "python3 could not load the JSON: \(parsed.stderr)")
    CLI.write(folder + "/expected.json", Array(paths.joined(separator: "\n").utf8))
    let expected = try CLI.spawn(["python3", "-c", "import json,sys; print(json.dumps(open(sys.argv[1], encoding='utf-8').read().split('\\n')))",
                                  folder + "/expected.json"])
    #expect(parsed.stdout == expected.stdout)
  }

  /// More files than one batch of reports (FileCommand.batchSize, 1024): the same small library named
  /// 1,100 times, with missing files around the batch boundary.
  @Test(.enabled(if: CLI.haveBinary, "needs the built imagelog"))
  func orderHoldsAcrossBatches() throws {
    let library = CLI.fixtures + "/libfixture-x86_64.so"
    var paths = [String](repeating: library, count: 1_100)
    let missing = [5, 1_022, 1_023, 1_024, 1_025, 1_099]
    for index in missing { paths[index] = "/nonexistent/imagelog-order-\(index)" }
    let run = try CLI.imagelog(["file", "--uuid"] + paths)
    #expect(run.status == 1)
    #expect(run.outLines.count == paths.count - missing.count)
    #expect(run.errLines == missing.map { "imagelog: /nonexistent/imagelog-order-\($0): cannot open: No such file or directory" })
  }

  /// On a terminal, output is written line by line, so results and errors appear in argument order
  /// (to a pipe or file it is gathered into large writes).
  @Test(.enabled(if: CLI.haveBinary && CLI.have("script"), "needs the built imagelog and script(1) for a terminal"))
  func onATerminalResultsAndErrorsInterleaveInOrder() throws {
    let library = CLI.fixtures + "/libfixture-x86_64.so"
    let missing = "/nonexistent/imagelog-terminal"
    let command = "\(CLI.binary) file --uuid \(library) \(missing) \(library)"
    let run = try CLI.spawn(["script", "-q", "-e", "-c", command, "/dev/null"])
    #expect(run.status == 1)
    let lines = run.stdout.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }).map(String.init)
    #expect(lines.count == 3)
    #expect(lines.first?.hasPrefix("UUID: ") == true && lines.last?.hasPrefix("UUID: ") == true)
    #expect(lines.dropFirst().first == "imagelog: \(missing): cannot open: No such file or directory")
  }

  @Test(.enabled(if: CLI.haveBinary, "needs the built imagelog"))
  func optionsMaySitAmongThePaths() throws {
    let folder = try CLI.temporaryFolder()
    defer { CLI.remove(folder) }
    let library = CLI.fixtures + "/libfixture-x86_64.so"
    // File names that look like options or carry `=`: after `--` they are paths.
    let oddNames = [folder + "/a=b", folder + "/--format=json"]
    for name in oddNames { CLI.write(name, try CLI.bytes(library)) }
    let reference = try CLI.imagelog(["file", "--format", "json", "--arch", "x86_64", library, oddNames[0]])
    let mixed = try CLI.imagelog(["file", library, "--format=json", oddNames[0], "--arch=x86_64"])
    #expect(reference.status == 0 && mixed.status == 0)
    #expect(mixed.stdout == reference.stdout)
    // The last --format given wins, under either spelling.
    let repeated = try CLI.imagelog(["file", "--format", "crash", library, "--format=json", oddNames[0]])
    let lastWins = try CLI.imagelog(["file", "--format", "json", library, oddNames[0]])
    #expect(repeated.stdout == lastWins.stdout)
    let afterTerminator = try CLI.imagelog(["file", "--uuid", "--", oddNames[1]])
    #expect(afterTerminator.status == 0)
    #expect(afterTerminator.outLines.count == 1 && afterTerminator.outLines.first?.hasSuffix(" " + oddNames[1]) == true)
    let missingValue = try CLI.imagelog(["file", library, "--format"])
    #expect(missingValue.status == 64)
    #expect(missingValue.errLines.first == "Error: Missing value for '--format <value>'")
  }
}
