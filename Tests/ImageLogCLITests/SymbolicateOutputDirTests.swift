import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog symbolicate --output-dir DIR REPORT...`: each report written to `DIR/<its name>` exactly as
/// `imagelog symbolicate REPORT` prints it, one summary line per report, failures named without
/// stopping the others, and each file read once for all the reports.
@Suite struct SymbolicateOutputDirTests {
  /// libz (every Debian has it): its real path, build-id and a few exported functions' addresses.
  struct Library {
    var path: String
    var buildID: String
    var functions: [UInt64]
  }

  static func library() throws -> Library {
    let path = try runChild(["readlink", "-f", "/lib/x86_64-linux-gnu/libz.so.1"]).output
      .trimmingCharacters(in: .whitespacesAndNewlines)
    let line = try runChild([SymbolicateCLI.executable, "file", "--format", "crash", path]).output
    let buildID = try #require(line.split(separator: "<").dropFirst().first?.split(separator: ">").first.map(String.init))
    let nm = try runChild(["llvm-nm", "-D", "--defined-only", path])
    let functions = nm.output.split(separator: "\n").compactMap { line -> UInt64? in
      let words = line.split(separator: " ")
      return words.count == 3 && words[1] == "T" ? UInt64(words[0], radix: 16) : nil
    }
    try #require(functions.count > 10, "llvm-nm -D \(path) lists \(functions.count) functions")
    return Library(path: path, buildID: buildID, functions: functions)
  }

  /// An imagelog report of `count` frames inside libz's functions, starting at function `first`.
  static func report(_ library: Library, first: Int, count: Int) -> String {
    let load: UInt64 = 0x7f12_3400_0000
    var text = "Process:         app [\(100 + first)]\nOS Version:      Linux 6.1.0 x86_64\nCrashed Thread:  0  tid 1\n\nThread 0 Crashed:\n"
    for index in 0..<count {
      let offset = library.functions[(first + index) % library.functions.count] + 4
      let address = load + offset
      let hex = String(address, radix: 16)
      text += String(index).padding(toLength: 4, withPad: " ", startingAt: 0)
        + "libz.so.1".padding(toLength: 30, withPad: " ", startingAt: 0)
        + "0x" + String(repeating: "0", count: 16 - hex.count) + hex + " 0x" + String(load, radix: 16) + " + \(offset)\n"
    }
    text += "\nBinary Images:\n0x\(String(load, radix: 16)) - 0x\(String(load + 0xFFFFF, radix: 16)) libz.so.1 x86_64  "
      + "<\(library.buildID)> \(library.path)\n"
    return text
  }

  @Test func eachReportAsOneProcessWouldWriteIt() throws {
    let library = try Self.library()
    let directory = try makeTemporaryDirectory("imagelog-output-dir")
    var reports: [String] = []
    for index in 0..<3 {
      let path = directory + "/crash-\(index).crash"
      try writeFile(path, Self.report(library, first: index * 7, count: 5 + index))
      reports.append(path)
    }
    let garbage = directory + "/garbage.txt"
    try writeFile(garbage, "nothing to see here\n")
    let missing = directory + "/missing.crash"
    let output = directory + "/out"
    let result = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--output-dir", output,
                               reports[0], garbage, reports[1], missing, reports[2]])
    // The two bad inputs are named; the three reports are still written, in order, one line each.
    #expect(result.status == 1 << 8)
    #expect(result.error.contains("imagelog: \(garbage): not a crash report"), "\(result.error)")
    #expect(result.error.contains("imagelog: \(missing): "), "\(result.error)")
    let lines = result.output.split(separator: "\n").map(String.init)
    #expect(lines == (0..<3).map { index in
      "\(reports[index]): \(5 + index) of \(5 + index) frames; 1 of 1 images found, 0 missing, 0 mismatched -> \(output)/crash-\(index).crash"
    }, "\(result.output)")
    for report in reports {
      let alone = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", report])
      #expect(alone.status == 0)
      let written = try #require(readFile(output + "/" + String(report.split(separator: "/").last ?? "")))
      #expect(written == alone.output)
      #expect(written.contains(" (in libz.so.1)") || written.contains("libz.so.1"))
    }
    #expect(readFile(output + "/garbage.txt") == nil && readFile(output + "/missing.crash") == nil)
    // The style applies to every file.
    let json = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--format", "json",
                             "--output-dir", output, reports[0]])
    #expect(json.status == 0)
    #expect(readFile(output + "/crash-0.crash")?.hasPrefix("{") == true)
  }

  /// A link planted in the folder under a report's name (pointing at a file another would lose) is
  /// replaced by the report, never written through: the file it names is unchanged, and the report
  /// is a file of its own, mode 0600 under umask 022 (it holds registers and memory's values).
  @Test func aPlantedLinkIsNotFollowed() throws {
    let library = try Self.library()
    let directory = try makeTemporaryDirectory("imagelog-output-dir-link")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let report = directory + "/crash.crash"
    try writeFile(report, Self.report(library, first: 3, count: 4))
    let victim = directory + "/victim"
    try writeFile(victim, "precious\n")
    let output = directory + "/out"
    #expect(mkdir(output, 0o755) == 0)
    #expect(symlink(victim, output + "/crash.crash") == 0)
    let result = try runChild(["sh", "-c", "umask 022; exec \"$@\"", "sh", SymbolicateCLI.executable, "symbolicate",
                               "--no-system-debug", "--output-dir", output, report])
    #expect(result.status == 0, "\(result.error)")
    #expect(readFile(victim) == "precious\n")
    var info = stat()
    #expect(lstat(output + "/crash.crash", &info) == 0 && info.st_mode & S_IFMT == S_IFREG, "not a regular file")
    #expect(info.st_mode & 0o777 == 0o600, "mode \(String(info.st_mode & 0o777, radix: 8))")
    let alone = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", report])
    #expect(readFile(output + "/crash.crash") == alone.output)
    #expect(directoryNames(output) == ["crash.crash"], "\(directoryNames(output))")
  }

  /// One process finds and reads each file once, however many reports name it: the library is opened
  /// as often for three reports as for one (`strace -e trace=openat`).
  @Test(.enabled(if: haveTool("strace"), "needs strace (Scripts/install-test-tools installs it)"))
  func eachFileIsReadOnce() throws {
    let library = try Self.library()
    let directory = try makeTemporaryDirectory("imagelog-output-dir-once")
    var reports: [String] = []
    for index in 0..<3 {
      let path = directory + "/r\(index).crash"
      try writeFile(path, Self.report(library, first: index * 5, count: 20))
      reports.append(path)
    }
    func opens(_ paths: [String]) throws -> Int {
      let log = directory + "/strace-\(paths.count).log"
      let result = try runChild(["strace", "-f", "-e", "trace=openat", "-o", log, SymbolicateCLI.executable, "symbolicate",
                                 "--no-system-debug", "--output-dir", directory + "/out-\(paths.count)"] + paths)
      #expect(result.status == 0, "\(result.error)")
      let trace = try #require(readFile(log))
      return trace.split(separator: "\n").filter { $0.contains("\"\(library.path)\"") && !$0.contains("ENOENT") }.count
    }
    let once = try opens([reports[0]])
    #expect(once >= 1)
    #expect(try opens(reports) == once)
  }

  @Test(arguments: [
    (["--output-dir", "/tmp/x", "-"], "--output-dir writes files named after the reports: standard input has no name"),
    (["--output-dir", "/tmp/x", "report.crash", "0x1234"], "--output-dir takes report files, not addresses or --image"),
    (["--output-dir", "/tmp/x"], "Missing a crash report for --output-dir"),
  ])
  func usageErrors(arguments: [String], message: String) throws {
    let result = try runChild([SymbolicateCLI.executable, "symbolicate"] + arguments)
    #expect(result.status == 64 << 8)
    #expect(result.error.hasPrefix("Error: \(message)"), "\(result.error)")
  }

  @Test func twoReportsOfTheSameNameAreNotMixed() throws {
    let library = try Self.library()
    let directory = try makeTemporaryDirectory("imagelog-output-dir-names")
    for folder in ["a", "b"] {
      _ = mkdir(directory + "/" + folder, 0o755)
      try writeFile(directory + "/\(folder)/crash.crash", Self.report(library, first: folder == "a" ? 0 : 9, count: 3))
    }
    let output = directory + "/out"
    let result = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--output-dir", output,
                               directory + "/a/crash.crash", directory + "/b/crash.crash"])
    #expect(result.status == 1 << 8)
    #expect(result.error.contains("imagelog: \(directory)/b/crash.crash: \(output)/crash.crash is already written for \(directory)/a/crash.crash"),
            "\(result.error)")
    let alone = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", directory + "/a/crash.crash"])
    #expect(readFile(output + "/crash.crash") == alone.output)
    // The report's own folder as the output folder: the report is not written over.
    let original = try #require(readFile(directory + "/a/crash.crash"))
    let same = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--output-dir", directory + "/a",
                             directory + "/a/crash.crash"])
    #expect(same.status == 1 << 8)
    #expect(same.error.contains("imagelog: \(directory)/a/crash.crash: --output-dir would write over the report itself"), "\(same.error)")
    #expect(readFile(directory + "/a/crash.crash") == original)
  }
}
