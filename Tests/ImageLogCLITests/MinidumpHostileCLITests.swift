#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// Broken minidumps through the CLI (`symbolicate` in both styles, `file` in every style): a dump
/// whose header or stream directory cannot be read is one line, `imagelog: PATH: ` and the problem,
/// nothing on standard output and status 1; a dump broken in one stream is read for the rest, each
/// problem one such line. Never a crash or a hang (each run is bounded by a timeout). The dumps are
/// the committed writer fixture (Scripts/make-minidump-fixtures) cut and patched here; the reader's own
/// table of malformed dumps is MinidumpMalformedTests.
@Suite struct MinidumpHostileCLITests {
  static let fixture = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump/writer-x86_64.dmp"

  /// Every way the CLI reads a dump.
  static let commands: [[String]] = [["symbolicate"], ["symbolicate", "--format", "json"], ["file"],
                                     ["file", "--format", "json"], ["file", "--format", "unstrip"],
                                     ["file", "--format", "detailed"]]

  static func get32(_ bytes: [UInt8], _ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) } }
  static func set32(_ bytes: inout [UInt8], _ at: Int, _ value: UInt32) {
    for index in 0..<4 { bytes[at + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(index))) }
  }

  /// Runs every command on `bytes` written to `DIRECTORY/name`; returns each run.
  static func runAll(_ bytes: [UInt8], named name: String, in directory: String) throws -> [(command: [String], run: ChildResult)] {
    let path = directory + "/" + name
    try writeFile(path, bytes: bytes)
    return try commands.map { command in
      let run = try runChild([MinidumpCLI.imagelog] + command + [path], timeoutSeconds: 60)
      #expect(!run.timedOut && run.signal == nil, "\(name) \(command): \(run.status) \(run.error)")
      return (command, run)
    }
  }

  /// The header or the directory broken: one line naming the file and `problem`, status 1. `file --format
  /// json` still writes its (empty) list: the list of every file's images is JSON whatever fails.
  @Test(arguments: [
    ("cut inside the header", "minidump header truncated: 32 bytes needed, the file has 20"),
    ("garbage after MDMP", "minidump version 0xfa63 is not 0xa793"),
    ("a lying stream count", "stream directory (1000000000 entries of 12 bytes) 0x20+0x2cb417800 past end (4448 bytes)"),
    ("directory past the end", "stream directory (10 entries of 12 bytes) 0x1158+0x78 past end (4448 bytes)"),
    ("cut inside the directory", "stream directory (10 entries of 12 bytes) 0x20+0x78 past end (40 bytes)"),
  ])
  func unreadableDumpIsOneLine(_ name: String, _ problem: String) throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-hostile")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    var bytes = try #require(readFileBytes(Self.fixture))
    try #require(bytes.count == 4448 && Self.get32(bytes, 8) == 10 && Self.get32(bytes, 12) == 0x20,
                 "the fixture changed: the expected messages name its size and directory")
    switch name {
    case "cut inside the header": bytes = Array(bytes.prefix(20))
    case "garbage after MDMP":
      bytes = Array(bytes.prefix(4)) + (4..<bytes.count).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) }
    case "a lying stream count": Self.set32(&bytes, 8, 1_000_000_000)
    case "directory past the end": Self.set32(&bytes, 12, UInt32(bytes.count - 8))
    case "cut inside the directory": bytes = Array(bytes.prefix(40))
    default: Issue.record("no case \(name)")
    }
    let path = directory + "/dump.dmp"
    for (command, run) in try Self.runAll(bytes, named: "dump.dmp", in: directory) {
      #expect(run.exitCode == 1, "\(command)")
      #expect(run.error == "imagelog: \(path): \(problem)\n", "\(command)")
      let json = command.contains("json") && command[0] == "file"
      #expect(run.output == (json ? "[\n]\n" : ""), "\(command): \(run.output)")
    }
  }

  /// One stream broken (its directory entry points past the end of the file): the problem is said, as
  /// one line, by every command (and that the exception's thread is not in the list), and the rest is
  /// read: `file` lists the modules, `symbolicate` reports the dump without its threads.
  @Test func brokenStreamIsSaidAndTheRestRead() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-hostile-stream")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    var bytes = try #require(readFileBytes(Self.fixture))
    // The ThreadList entry (the writer puts it first) at the file's last 20 bytes.
    try #require(Self.get32(bytes, 32) == 3, "the fixture's first stream is its ThreadList")
    let length = Self.get32(bytes, 36)
    Self.set32(&bytes, 40, UInt32(bytes.count - 20))
    let path = directory + "/dump.dmp"
    let problem = "imagelog: \(path): ThreadList stream (directory 0): stream at file offset 0x\(hexDigits(UInt64(bytes.count - 20)))"
      + "+0x\(hexDigits(UInt64(length))) past end (\(bytes.count) bytes)\n"
      + "imagelog: \(path): the exception names thread 1001, which the thread list does not hold\n"
    for (command, run) in try Self.runAll(bytes, named: "dump.dmp", in: directory) {
      #expect(run.exitCode == 0, "\(command): \(run.error)")
      #expect(run.error == problem, "\(command)")
      #expect(!run.output.isEmpty, "\(command)")
      if command == ["file"] { #expect(run.output.split(separator: "\n").count == 2 && run.output.contains(" /usr/bin/fixture\n"), "\(run.output)") }
      if command == ["symbolicate"] { #expect(run.output.contains("Threads:         0\n"), "\(run.output)") }
    }
  }

  /// Every cut of a real dump (imagelog's of a live process: threads, stacks, modules, the Linux files),
  /// at 24 places: each run ends with status 0 or 1, never a signal; with 1, stdout holds nothing (but
  /// `file --format json`'s list) and stderr one line; with 0, every line on stderr names the file.
  @Test(.enabled(if: haveTool("cc"), "cc missing"))
  func everyCutOfARealDump() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-cuts")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let child = try MinidumpCLI.startBlockedThreads(in: directory)
    defer { child.stop() }
    let whole = directory + "/whole.dmp"
    let write = try runChild([MinidumpCLI.imagelog, "minidump", String(child.pid), "-o", whole])
    try #require(write.exitCode == 0, "\(write.error)")
    let bytes = try #require(readFileBytes(whole))
    var failures = 0
    for step in 0..<24 {
      let length = bytes.count * step / 24
      let name = "cut-\(length).dmp"
      let path = directory + "/" + name
      for (command, run) in try Self.runAll(Array(bytes.prefix(length)), named: name, in: directory) {
        let lines = run.error.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.allSatisfy { $0.hasPrefix("imagelog: \(path): ") }, "\(command) \(name): \(run.error)")
        #expect(run.exitCode == 0 || run.exitCode == 1, "\(command) \(name)")
        if run.exitCode == 1 {
          failures += 1
          #expect(lines.count == 1, "\(command) \(name): \(run.error)")
          #expect(run.output.isEmpty || run.output == "[\n]\n", "\(command) \(name): \(run.output)")
        }
      }
    }
    #expect(failures > 0, "the first cuts (inside the header) fail")
  }
}
