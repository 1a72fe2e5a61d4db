#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
@testable import SnapshotFormatting
import Testing

/// Small hostile minidumps that cost far more than their size (issue 35), made at test time from the
/// committed writer fixture (`MinidumpShapes`), through the CLI as a crash server would run it, measured
/// by GNU time: memory must be bounded by the file however many descriptors name one range of it, and
/// the time of threads times modules must not be their product. No wall-clock bound: memory is a peak
/// resident size, and time a ratio of processor times measured side by side.
@Suite struct MinidumpShapesCLITests {
  static let fixture = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump/writer-x86_64.dmp"
  static let haveTime = access("/usr/bin/time", X_OK) == 0
  static let mebibyte = 1 << 20

  struct Measured {
    var run: ChildResult
    /// Peak resident set size in bytes (`%M`).
    var peak: Int
    /// User and system processor time in seconds (`%U + %S`).
    var processorSeconds: Double
  }

  /// `imagelog arguments` under `/usr/bin/time`, its figures written to a file in `folder`.
  static func measure(_ arguments: [String], in folder: String) throws -> Measured {
    let figures = folder + "/time.txt"
    let run = try runChild(["/usr/bin/time", "-o", figures, "-f", "%M %U %S", MinidumpCLI.imagelog] + arguments,
                           timeoutSeconds: 600)
    let fields = (readFile(figures) ?? "").split(separator: "\n").last?.split(separator: " ") ?? []
    let numbers = fields.compactMap { Double($0) }
    try #require(numbers.count == 3, "/usr/bin/time wrote \(readFile(figures) ?? "nothing")")
    return Measured(run: run, peak: Int(numbers[0]) * 1024, processorSeconds: numbers[1] + numbers[2])
  }

  /// The frame lines of each thread of imagelog's text report, by thread heading (`Thread 3:  tid 1003`),
  /// the crashed one left out.
  static func frames(_ report: String) -> [(heading: String, frames: [Substring])] {
    var threads: [(heading: String, frames: [Substring])] = []
    var current: (heading: String, frames: [Substring])?
    for line in report.split(separator: "\n", omittingEmptySubsequences: false) {
      if line.hasPrefix("Thread "), line.contains(":  tid "), !line.contains("Crashed") {
        if let current { threads.append(current) }
        current = (String(line), [])
      } else if line.isEmpty || line.hasPrefix("Thread ") {
        if let current { threads.append(current) }
        current = nil
      } else if current != nil {
        current?.frames.append(line)
      }
    }
    if let current { threads.append(current) }
    return threads
  }

  /// Issue 35, item 1: 1,000 threads whose stack descriptors all name one 1 MiB range of a 1 MB dump
  /// (at one address, then at 1,000 addresses), and 1,000 whose descriptors name overlapping ranges
  /// each a byte further on. The old code copied each thread's stack: 1 GiB for `file` and `symbolicate`.
  /// Now the range is held once (under 100 MB in all), and overlapping ranges are held up to the file's
  /// size, the rest left out with one line; every thread not crashed shows the frames of the base
  /// dump's first thread, whose stack bytes they share.
  @Test(.enabled(if: haveTime, "needs /usr/bin/time (GNU time)"),
        arguments: ["one address", "1,000 addresses", "overlapping ranges"])
  func threadsSharingOneStackHoldItOnce(_ shape: String) throws {
    let folder = try makeTemporaryDirectory("imagelog-minidump-shapes")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let base = try #require(readFileBytes(Self.fixture))
    let dump = try #require(MinidumpShapes.replicating(
      base, threads: 1000, modules: 2, stackSize: Self.mebibyte, stackShift: shape == "overlapping ranges" ? 1 : 0,
      stackAddressStep: shape == "one address" ? 0 : UInt64(Self.mebibyte)))
    let path = folder + "/shared-stack.dmp"
    try writeFile(path, bytes: dump)
    let basePath = folder + "/base.dmp"
    try writeFile(basePath, bytes: base)
    let expected = try runChild([MinidumpCLI.imagelog, "symbolicate", "--no-symbolicate", basePath])
    let baseFrames = try #require(Self.frames(expected.output).first { $0.heading.hasPrefix("Thread 0:") }?.frames)
    try #require(!baseFrames.isEmpty, "\(expected.output)")

    for command in [["file"], ["symbolicate", "--no-symbolicate"]] {
      let measured = try Self.measure(command + [path], in: folder)
      #expect(measured.run.exitCode == 0 && !measured.run.timedOut, "\(command): \(measured.run.error)")
      #expect(measured.peak < 100 * Self.mebibyte, "\(command): peak \(measured.peak / Self.mebibyte) MiB")
      let leftOut = "imagelog: \(path): ThreadList stream (directory 0): the stacks of "
      #expect(measured.run.error.contains(leftOut) == (shape == "overlapping ranges"), "\(command): \(measured.run.error)")
      guard command[0] == "symbolicate" else {
        #expect(measured.run.output.contains(" /usr/bin/fixture\n"), "\(measured.run.output.prefix(500))")
        continue
      }
      #expect(measured.run.output.contains("Threads:         1000\n"))
      let threads = Self.frames(measured.run.output)
      #expect(threads.count == 999, "\(threads.count) threads besides the crashed one")
      // A thread is walked over its own stack, as minidump-stackwalk walks it: where each thread's
      // descriptor moved its stack away from the stack pointer its context holds (every thread but the
      // first), only frame 0 is left; where all share the base's address, the base's frames.
      for thread in threads {
        let moved = shape != "one address" && !thread.heading.hasPrefix("Thread 0:")
        let expected = moved ? Array(baseFrames.prefix(1)) : Array(baseFrames)
        if Array(thread.frames) != expected {
          Issue.record("\(thread.heading): \(thread.frames), not \(expected)")
          break
        }
      }
    }
  }

  /// Issue 35, item 2: 20,000 threads and 20,000 modules in a 3.1 MB dump. Every frame found its image
  /// by a scan of the images (and every thread's walk rebuilt the unwinder's image table): 11-13 s
  /// where 20,000 threads alone took 2 s and 20,000 modules 0.2 s. Now the processor time of both
  /// together stays within twice the sum of each alone (plus a second for start-up noise), and every
  /// thread's frame is still placed in the first module.
  @Test(.enabled(if: haveTime, "needs /usr/bin/time (GNU time)"))
  func threadsTimesModulesIsNotTheirProduct() throws {
    let folder = try makeTemporaryDirectory("imagelog-minidump-shapes")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let base = try #require(readFileBytes(Self.fixture))
    var seconds: [String: Double] = [:]
    var output = ""
    for (name, threads, modules) in [("threads", 20_000, 1), ("modules", 1, 20_000), ("both", 20_000, 20_000)] {
      let path = folder + "/\(name).dmp"
      try writeFile(path, bytes: try #require(MinidumpShapes.replicating(base, threads: threads, modules: modules)))
      let measured = try Self.measure(["symbolicate", "--no-symbolicate", path], in: folder)
      #expect(measured.run.exitCode == 0 && !measured.run.timedOut, "\(name): \(measured.run.error)")
      seconds[name] = measured.processorSeconds
      if name == "both" { output = measured.run.output }
    }
    let alone = (seconds["threads"] ?? 0) + (seconds["modules"] ?? 0)
    #expect(seconds["both"] ?? .infinity < 2 * alone + 1, "processor seconds: \(seconds)")
    #expect(output.contains("Threads:         20000\n"))
    let threads = Self.frames(output)
    #expect(threads.count == 19_999)
    // Frame 0 in the first module, and the frames scanning finds in the shared stack bytes (every
    // thread the same: minidump-stackwalk gives the base dump's thread 0 so) there too.
    let misplaced = threads.first {
      !($0.frames.count > 1 && $0.frames[0].contains(" fixture ") && $0.frames[0].hasSuffix(" 0x555555550000 + 16640")
        && $0.frames.allSatisfy { $0.contains(" fixture ") })
    }
    #expect(misplaced == nil, "\(misplaced.map { "\($0.heading): \($0.frames)" } ?? "")")
  }
}

extension MinidumpShapesCLITests {
  static let libc = "/lib/x86_64-linux-gnu/libc.so.6"

  /// Issue 35, the walk's files: 500 modules all naming this system's libc with its build-id (a dump's
  /// module list is 108 bytes a module), read with 64 descriptors allowed. Each module opened the file
  /// again and kept it open: past the descriptor limit the rest were never placed, and 20,000 such
  /// modules held 149 MB. The file is opened once: every module is placed by its program headers, each
  /// line of Binary Images ending where libc's mapping ends (readelf's build-id; `prlimit --nofile`).
  @Test(.enabled(if: access(libc, R_OK) == 0 && haveTool("prlimit") && haveTool("readelf"), "needs libc.so.6, prlimit, readelf"))
  func modulesNamingOneFileOpenItOnce() throws {
    let folder = try makeTemporaryDirectory("imagelog-minidump-shapes")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let notes = try runChild(["readelf", "-n", Self.libc]).output
    let hex = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last)
    let buildID = stride(from: 0, to: hex.count - 1, by: 2).compactMap { offset -> UInt8? in
      let start = hex.index(hex.startIndex, offsetBy: offset)
      return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)
    }
    try #require(buildID.count >= 16, "\(hex)")
    let base: UInt64 = 0x7f00_0000_0000
    let context = MinidumpContext(layout: .amd64, registers: ["rip": base + 0x1000, "rsp": 0x7000_0100])
    let contents = MinidumpWriter.Contents(
      timeDateStamp: 1, systemInfo: MinidumpWriter.SystemInfo(processorArchitecture: 9),
      threads: [MinidumpWriter.Thread(tid: 7, context: .registers(context), stackAddress: 0x7000_0000,
                                      stack: [UInt8](repeating: 0, count: 512))],
      modules: (0..<500).map { index in
        MinidumpWriter.Module(baseAddress: base + UInt64(index) << 24, size: 0x20_0000, path: Self.libc, buildID: buildID)
      },
      memory: [])
    let path = folder + "/libc-500.dmp"
    try writeFile(path, bytes: try MinidumpWriter.write(contents))
    let run = try runChild(["prlimit", "--nofile=64", MinidumpCLI.imagelog, "symbolicate", "--no-symbolicate", path])
    #expect(run.exitCode == 0, "\(run.error)")
    let images = run.output.split(separator: "\n").filter { $0.hasPrefix("0x") && $0.hasSuffix(" " + Self.libc) }
    #expect(images.count == 500)
    // Placed: the range runs to the end of libc's mapping (as the first one's), not the module's 2 MiB.
    let ends = Set(images.compactMap { line in
      line.split(separator: " ").dropFirst(2).first.flatMap { UInt64($0.dropFirst(2), radix: 16) }.map { $0 & 0xFF_FFFF }
    })
    #expect(ends.count == 1 && !ends.contains(0x1F_FFFF), "\(ends)")
  }
}
