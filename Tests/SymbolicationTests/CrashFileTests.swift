import Glibc
import ImageLogTestSupport
import ImageReaders
import ProcessInspection
import Snapshot
import SnapshotFormatting
import Symbolication
import Testing
@testable import SnapshotSources

/// `CrashFile.open`, the one place every command opens a crash file, held to file(1) on every file of
/// the reader fixtures (ELF binaries, cores, Mach-O, minidumps from several writers, Breakpad symbol
/// files, DWARF, hostile bytes) and the report fixtures; each kind opened (a core's threads as readelf
/// counts them, a minidump's as minidump-stackwalk does, each text report kind, a crash document, bare
/// addresses); bad files refused in one line naming them.
@Suite struct CrashFileTests {
  static let readerFixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures"
  static let reportFixtures = packageRoot + "/Tests/SymbolicationTests/Fixtures"
  static let fieldDumps = readerFixtures + "/minidump-field"
  static let stores = ["breakpad", "rust-minidump"].map { fieldDumps + "/" + $0 + "/symbols" }
  static let stackwalk = pipelineTool("minidump-stackwalk")

  /// Every regular file under `folder`.
  static func files(under folder: String) throws -> [String] {
    try runTool(["find", folder, "-type", "f"]).output.split(separator: "\n").map(String.init).sorted()
  }

  /// The kind `open` gives `path`, or the kind its error names (text that holds no crash: `.text`).
  static func openedKind(_ path: String) -> CrashFileKind? {
    do { return try CrashFile.open(path).kind } catch { return error.kind }
  }

  @Test(.enabled(if: haveTool("file"), "needs file(1)"))
  func kindIsWhatFileSays() throws {
    let paths = try Self.files(under: Self.readerFixtures) + Self.files(under: Self.reportFixtures)
    try #require(paths.count > 50, "\(paths.count) fixtures")
    var counts: [CrashFileKind: Int] = [:]
    for path in paths {
      let said = try runTool(["file", "-b", path]).output
      // An empty file has no first bytes to say a kind.
      let expected: CrashFileKind? = said.contains("core file") ? .core : said.hasPrefix("Mini DuMP") ? .minidump
        : said.hasPrefix("empty") ? nil : .text
      #expect(Self.openedKind(path) == expected, "\(path): file(1) says \(said)")
      if let expected, expected != .text {
        // Every committed core and minidump opens whole.
        #expect(throws: Never.self, "\(path)") { _ = try CrashFile.open(path) }
      }
      if let expected { counts[expected, default: 0] += 1 }
    }
    #expect((counts[.core] ?? 0) >= 2 && (counts[.minidump] ?? 0) >= 3, "\(counts)")
  }

  /// A core opens as its dump: its snapshot has the threads readelf counts (one NT_PRSTATUS each).
  @Test(.enabled(if: haveTool("readelf"), "needs readelf"))
  func coreOpensWithItsThreads() throws {
    let cores = try Self.files(under: Self.readerFixtures + "/cores").filter { $0.hasSuffix(".core") }
    try #require(cores.count >= 2, "\(cores)")
    for path in cores {
      guard case .core(let dump) = try CrashFile.open(path) else {
        Issue.record("\(path): not opened as a core")
        continue
      }
      let notes = try runTool(["readelf", "-n", path]).output
      let threads = notes.split(separator: "\n").filter { $0.contains("NT_PRSTATUS") }.count
      try #require(threads > 0, "readelf -n \(path): \(notes)")
      #expect(ProcessSnapshot.core(dump).snapshot.threads.count == threads, "\(path)")
    }
  }

  /// A minidump opens as its snapshot, the threads minidump-stackwalk lists, carrying the dump's memory
  /// for symbolication to walk them in.
  @Test(.enabled(if: stackwalk != nil, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func minidumpOpensWithItsThreads() throws {
    let dumps = try Self.files(under: Self.fieldDumps).filter { $0.hasSuffix(".dmp") }
    try #require(dumps.count >= 10, "\(dumps)")
    for path in dumps {
      guard case .minidump(let snapshot) = try CrashFile.open(path) else {
        Issue.record("\(path): not opened as a minidump")
        continue
      }
      let run = try runTool([try #require(Self.stackwalk), "--json", path])
      try #require(run.status == 0, "minidump-stackwalk \(path): \(run.error)")
      let theirs = try JSONValue.parse(run.output[...])
      #expect(snapshot.threads.count == theirs["threads"]?.array?.count, "\(path)")
      let carried = snapshot.memoryToWalk != nil  // (not the memory itself: its description is the whole dump)
      #expect(carried, "\(path)")
    }
  }

  /// Each report kind of the committed fixtures opens as its reports, of the kind it is.
  @Test(arguments: [
    ("apple-reports/app-specific-backtrace-rtimageassets-5.crash", ProcessSnapshot.Format.appleCrash),
    ("apple-reports/focustogether-abort.ips", .appleIPS),
    ("linux-reports/asan-gcc-symbolized-stacks.txt", .sanitizer),
    ("linux-reports/coredump-systemd-13798.txt", .coredump),
    ("linux-reports/tombstone-retroarch-519.txt", .androidTombstone),
    ("linux-reports/glibc-nvme-cli-3716.txt", .glibcBacktrace),
    ("linux-reports/swift-backtrace-crasher.json", .swiftBacktraceJSON),
  ])
  func textOpensAsItsReports(_ fixture: String, format: ProcessSnapshot.Format) throws {
    let opened = try CrashFile.open(Self.reportFixtures + "/" + fixture)
    guard case .reports(let reports) = opened else {
      Issue.record("\(fixture): opened as \(opened.kind)")
      return
    }
    let first = try #require(try reports.first?.get())
    #expect(first.format == format)
    #expect(first.frameCount > 0)
  }

  /// imagelog's crash document (here a field minidump's, symbolicated) opens as the snapshot it holds:
  /// its threads with their frames, walked already (nothing left to walk).
  @Test func crashDocumentOpens() throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-document")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    guard case .minidump(var snapshot) = try CrashFile.open(Self.fieldDumps + "/breakpad/linux_overflow.dmp") else {
      Issue.record("not a minidump")
      return
    }
    Symbolicator.symbolicate(&snapshot, options: Self.storeOptions)
    try writeFile(folder + "/crash.json", snapshot.formatted(.json))
    guard case .reports(let reports) = try CrashFile.open(folder + "/crash.json"), reports.count == 1 else {
      Issue.record("the document did not open as one report")
      return
    }
    let read = try reports[0].get()
    #expect(read.format == .minidump)
    let walked = read.memoryToWalk == nil
    #expect(walked)
    #expect(read.threads.map { $0.frames.map(\.address) } == snapshot.threads.map { $0.frames.map(\.address) })
    #expect(read.frameCount > 0)
  }

  /// Bare addresses: a file of an image line (imagelog's crash style) and addresses; a file of addresses
  /// with images given beside it (`--image`); addresses given alone, which need images.
  @Test func addressesOpen() throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-addresses")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    try writeFile(folder + "/listed", "0x1000 - 0x1fff lib x86_64  <00112233445566778899aabbccddeeff> /nonexistent/lib\n0x1234\n0x1240\n")
    try writeFile(folder + "/bare", "0x1234 0x5678\n")
    let image = ProcessSnapshot.Image(name: "lib", path: "/nonexistent/lib", loadAddress: 0x1000, endAddress: nil,
                                      identity: nil, architecture: nil)
    let cases: [(CrashFile, Int)] = [
      (try CrashFile.open(folder + "/listed"), 2),
      (try CrashFile.open(folder + "/bare", images: [image]), 2),
      (try CrashFile.open(folder + "/bare", images: [image], addresses: ["0x9abc"]), 3),
      (try CrashFile.addresses(["0x1234"], images: [image]), 1),
    ]
    for (opened, frames) in cases {
      let report = try #require(try opened.snapshots().first?.get())
      #expect(report.format == .addresses)
      #expect(report.frameCount == frames)
      #expect(report.frames.allSatisfy { $0.imageIndex == 0 })
    }
    #expect(throws: CrashFileError.self) { try CrashFile.addresses(["0x1234"], images: []) }
    do {
      _ = try CrashFile.open(folder + "/bare")
      Issue.record("addresses without images opened")
    } catch {
      #expect(error.description.hasPrefix("\(folder)/bare: addresses without images"), "\(error)")
    }
  }

  /// What cannot be opened: one line naming the file and the problem, with the kind when the first bytes
  /// said one. A minidump or core cut short is refused as what it is.
  @Test func badFilesAreOneLineNamingThem() throws {
    let folder = try makeTemporaryDirectory("imagelog-crashfile-bad")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    let dump = try #require(readFileBytes(Self.readerFixtures + "/minidump/writer-x86_64.dmp"))
    let core = try #require(readFileBytes(Self.readerFixtures + "/cores/linkmap-x86_64.core"))
    try writeFile(folder + "/empty", "")
    try writeFile(folder + "/header.dmp", bytes: Array(dump.prefix(20)))
    try writeFile(folder + "/cut.dmp", bytes: Array(dump.prefix(100)))
    try writeFile(folder + "/cut.core", bytes: Array(core.prefix(100)))
    try writeFile(folder + "/text", "hello\n")
    try #require(mkdir(folder + "/folder", 0o755) == 0)
    let expected: [(String, CrashFileKind?, String)] = [
      ("missing", nil, "cannot open: No such file or directory"),
      ("folder", nil, "is a directory, not a regular file"),
      ("empty", nil, "empty file"),
      ("header.dmp", .minidump, "minidump header truncated"),
      ("cut.dmp", .minidump, "past end (100 bytes)"),
      ("cut.core", .core, "past end (100 bytes)"),
      ("text", .text, "not a crash report"),
    ]
    for (name, kind, problem) in expected {
      let path = folder + "/" + name
      do {
        let opened = try CrashFile.open(path)
        Issue.record("\(name): opened as \(opened.kind)")
      } catch {
        #expect(error.path == path && error.kind == kind, "\(name): \(error)")
        #expect(error.description.hasPrefix("\(path): ") && error.description.contains(problem), "\(name): \(error)")
        #expect(!error.description.contains("\n"), "\(name): \(error)")
      }
    }
  }

  static var storeOptions: SymbolicationOptions {
    var options = SymbolicationOptions()
    options.systemDirectories = false
    options.symbolStores = stores
    return options
  }

  /// `Symbolicator.symbolicate` alone walks a minidump's threads (no other call): each thread has as
  /// many frames as minidump-stackwalk gives it with the same symbol stores, for every field dump but
  /// `linux_inline`, whose `.sym` minidump-stackwalk cannot parse (MinidumpFieldFramesTests). Before,
  /// the CLI called `walkStacks` first, and a library caller that did not got no frames.
  @Test(.enabled(if: stackwalk != nil, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func symbolicateAloneWalksAMinidump() throws {
    let dumps = try Self.files(under: Self.fieldDumps).filter { $0.hasSuffix(".dmp") && !$0.hasSuffix("/linux_inline.dmp") }
    try #require(dumps.count >= 10, "\(dumps)")
    var frames = 0
    for path in dumps {
      var snapshot = try ProcessSnapshot.minidump(try FileBytes(path: path))
      Symbolicator.symbolicate(&snapshot, options: Self.storeOptions)
      let walked = snapshot.memoryToWalk == nil
      #expect(walked, "\(path)")
      let run = try runTool([try #require(Self.stackwalk), "--json"] + Self.stores.flatMap { ["--symbols-path", $0] } + [path])
      try #require(run.status == 0, "minidump-stackwalk \(path): \(run.error)")
      let theirs = (try JSONValue.parse(run.output[...]))["threads"]?.array?.map { $0["frames"]?.array?.count ?? 0 }
      #expect(snapshot.threads.map(\.frames.count) == theirs, "\(path)")
      frames += snapshot.frameCount
    }
    #expect(frames > 400, "\(frames) frames")
  }
}
