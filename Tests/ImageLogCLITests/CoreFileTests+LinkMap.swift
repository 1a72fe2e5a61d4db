#if canImport(Glibc)
import Glibc
#endif
import ImageLog
import ImageLogTestSupport
@testable import ImageReaders
import Testing

extension CoreFileTests {
  // MARK: cores without NT_FILE

  /// `core` with its `NT_FILE` note turned into a note of an unknown type (see `hideFileNotes`), as a
  /// core from QEMU, an older kernel or another dumper has none: written beside it, its path returned.
  static func withoutFileNote(_ core: String) throws -> String {
    var bytes = try #require(readFileBytes(core))
    try #require(hideFileNotes(&bytes) == 1, "\(core): no NT_FILE note to hide")
    let path = "\(core).nofile"
    try writeFile(path, bytes: bytes)
    let notes = try runTool(["eu-readelf", "-n", path]).output
    try #require(!notes.contains("FILE") && notes.contains("AUXV"), "NT_FILE still seen:\n\(notes)")
    return path
  }

  /// `core` and the same core without `NT_FILE`: eu-unstrip lists the same modules for both (it reads
  /// the dynamic linker's list), and we match it on the second as on the first, the list said to come
  /// from link_map; symbolicate unwinds and names the same frames as with `NT_FILE`, libc's included.
  static func expectSameWithoutFileNote(_ core: String, _ comment: String, architecture: String,
                                        sourceLocation: SourceLocation = #_sourceLocation) throws {
    let hidden = try withoutFileNote(core)
    let withNote = try runTool(["eu-unstrip", "-n", "--core", core])
    let without = try runTool(["eu-unstrip", "-n", "--core", hidden])
    #expect(without.output.contains("libc.so.6"), "\(comment): eu-unstrip lists no libc:\n\(without.output)",
            sourceLocation: sourceLocation)
    #expect(unstripKeys(without.output).withBuildID == unstripKeys(withNote.output).withBuildID,
            "\(comment): eu-unstrip differs without NT_FILE:\n\(withNote.output)\n\(without.output)",
            sourceLocation: sourceLocation)
    let lines = try expectMatchesUnstrip(hidden, "\(comment) without NT_FILE", sourceLocation: sourceLocation)
    #expect(lines.contains { $0.contains("/libc.so.6 ") }, "\(lines)", sourceLocation: sourceLocation)
    let details = try imagelog(["file", "--format", "detailed", hidden])
    #expect(details.exitCode == 0 && details.error.isEmpty, "\(details.error)", sourceLocation: sourceLocation)
    #expect(details.output.contains("  images:        \(lines.count) (from the dynamic linker's link_map list: no NT_FILE)"),
            "\(details.output)", sourceLocation: sourceLocation)
    #expect(details.output.contains("  architecture:  \(architecture)"), sourceLocation: sourceLocation)
    let original = try imagelog(["file", "--format", "detailed", core])
    #expect(original.output.contains("  images:        \(lines.count) (from NT_FILE)"), "\(original.output)",
            sourceLocation: sourceLocation)

    let ours = try ourStacks(hidden)
    let reference = try ourStacks(core)
    #expect(Set(ours.keys) == Set(reference.keys), sourceLocation: sourceLocation)
    for (tid, frames) in reference {
      #expect(ours[tid]?.map(\.name) == frames.map(\.name), "\(comment): thread \(tid) without NT_FILE",
              sourceLocation: sourceLocation)
    }
    // A frame's file is the one its symbols came from: libc itself, or its debug file by build-id.
    let libcLine = try #require(lines.first { $0.contains("/libc.so.6 ") })
    let libcID = String(libcLine.split(separator: " ")[1].split(separator: "@")[0])
    let libcFrames = ours.values.joined().filter { frame in
      frame.file.map { $0.hasSuffix("/libc.so.6") || $0.contains(libcID.dropFirst(2)) } ?? false
    }
    // (An i386 libc without its debug file leaves some frames between exported symbols unnamed, with
    // NT_FILE as without: the stacks above are the same.)
    let named = libcFrames.filter { $0.name != nil }.count
    #expect(named > 0 && (architecture != "x86_64" || named == libcFrames.count),
            "\(comment): frames in libc are named: \(ours)", sourceLocation: sourceLocation)
    let report = try imagelog(["symbolicate", hidden])
    #expect(report.exitCode == 0 && report.error.isEmpty, "\(report.error)", sourceLocation: sourceLocation)
  }

  /// The core `bytes` decoded, and where its link_map walk found r_debug and each entry (for tests that
  /// break them).
  static func linkMapLayout(_ bytes: [UInt8]) throws -> (core: ELFCore, rDebug: UInt64, entries: [UInt64]) {
    try bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      let core = try ELFCore(source: reader)
      var walk = ELFCoreLinkMap(core: core) { address, length throws(FormatError) in
        try core.memory(at: address, length: length, in: reader)
      }
      walk.run()
      return (core, try #require(walk.debugAddress), walk.entryAddresses)
    }
  }

  /// gcore's and the kernel's cores of a threaded C program, without NT_FILE: the images come from
  /// the dynamic linker's list; eu-unstrip is the oracle, and the same cores with NT_FILE, held to
  /// eu-stack by the tests above, the reference for the stacks.
  @Test(.enabled(if: haveGcore && kernelWritesCores && haveStack && haveTool("cc"),
                 "gcore, eu-unstrip, eu-stack, readelf or cc missing, or the kernel cannot write cores here"))
  func coresWithoutFileNoteMatchUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-nofile")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try Self.buildThreadsProgram(in: directory)
    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let gcoreFile = try Self.gcore(child.pid, in: directory)
    child.stop()
    try Self.expectSameWithoutFileNote(gcoreFile, "gcore of coredump-threads", architecture: "x86_64")
    let kernelDirectory = "\(directory)/kernel"
    try #require(mkdir(kernelDirectory, 0o755) == 0)
    let kernelFile = try Self.kernelCore([program, "crash"], in: kernelDirectory)
    try Self.expectSameWithoutFileNote(kernelFile, "kernel core of coredump-threads", architecture: "x86_64")

    // Hostile lists, end to end: a loop in link_map and an absurd r_debug each give one line on standard
    // error and a partial list, with exit status 0 (the images found are still right).
    let hidden = "\(kernelFile).nofile"
    let original = try #require(readFileBytes(hidden))
    let (core, rDebug, entries) = try Self.linkMapLayout(original)
    try #require(entries.count >= 4)
    func broken(_ name: String, _ words: [UInt64], at address: UInt64) throws -> String {
      var bytes = original
      let range = try #require(core.fileRange(ofMemory: address, length: 8 * words.count))
      bytes.replaceSubrange(range, with: words.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> ($0 * 8)) } })
      let path = "\(directory)/\(name)"
      try writeFile(path, bytes: bytes)
      return path
    }
    let looping = try broken("looping.core", [entries[1]], at: entries[2] + 24)
    var run = try Self.imagelog(["file", "--format", "unstrip", looping])
    #expect(run.exitCode == 0)
    #expect(run.error == "imagelog: \(looping): link_map entry 3 (0x\(hexDigits(entries[1]))) comes round again: "
              + "the list loops; the first 3 entries are listed\n")
    #expect(run.output.split(separator: "\n").count >= 3, "\(run.output)")
    let absurd = try broken("absurd.core", [77], at: rDebug)
    run = try Self.imagelog(["symbolicate", absurd])
    #expect(run.exitCode == 0)
    #expect(run.error == "imagelog: \(absurd): r_debug at 0x\(hexDigits(rDebug)) has r_version 77 (1 or 2 expected): "
              + "not a dynamic linker's list; libraries not listed\n")
    // The program, the dynamic linker (by AT_BASE) and the vDSO remain, and frames in them are named.
    let images = run.output.split(separator: "\n", omittingEmptySubsequences: false).drop { $0 != "Binary Images:" }
      .dropFirst().prefix { !$0.isEmpty }
    #expect(images.count == 3 && images.contains { $0.contains(" ld-linux-x86-64.so.2 ") }, "\(run.output)")
    #expect(run.output.contains(" core_main_wait "), "\(run.output)")
  }

  /// The hand-made cores without NT_FILE (Scripts/make-core-fixtures, ELFCLASS64 and ELFCLASS32): the
  /// program, a library and the dynamic linker found only through NT_AUXV, DT_DEBUG and link_map, with
  /// the same start, size and build-id@address as eu-unstrip, each library named by its l_name as
  /// eu-unstrip names it.
  @Test(.enabled(if: haveTool("eu-unstrip"), "eu-unstrip (elfutils) missing"), arguments: ["x86_64", "i386"])
  func handMadeCoresWithoutFileNoteMatchUnstrip(_ architecture: String) throws {
    let core = "\(packageRoot)/Tests/ImageReadersTests/Fixtures/cores/linkmap-\(architecture).core"
    let lines = try Self.expectMatchesUnstrip(core, "hand-made \(architecture) core without NT_FILE")
    #expect(lines.count == 3)
    let theirs = try runTool(["eu-unstrip", "-n", "--core", core]).output.split(separator: "\n")
    for line in lines where !line.contains("/nonexistent/prog") {
      let fields = line.split(separator: " ")
      let name = fields.last.map { String($0.split(separator: "/").last ?? $0) }
      #expect(theirs.contains { $0.hasPrefix("\(fields[0]) ") && $0.hasSuffix(" \(name ?? "?")") }, "\(line)\n\(theirs)")
    }
    let details = try Self.imagelog(["file", "--format", "detailed", core])
    #expect(details.exitCode == 0 && details.error.isEmpty, "\(details.error)")
    #expect(details.output.contains("  images:        3 (from the dynamic linker's link_map list: no NT_FILE)"))
    #expect(details.output.contains(" +prog \(architecture) "), "AT_EXECFN names the program: \(details.output)")
  }

  /// The hand-made x86_64 core with the program's ELF header broken and its PT_DYNAMIC gone, and
  /// AT_EXECFN naming a real file: nothing in the core ties that file to the program, so it is not
  /// read in its place (no build-id is guessed), and each problem is one line.
  @Test func aFileNothingTiesToTheProgramIsNotUsed() throws {
    var bytes = try #require(readFileBytes("\(packageRoot)/Tests/ImageReadersTests/Fixtures/cores/linkmap-x86_64.core"))
    let core = try bytes.withUnsafeBytes { try ELFCore(source: ByteReader($0)) }
    let phdr = try #require(core.auxiliaryValue(ELFCore.auxPHDR))
    let program = phdr - 64  // the ELF header, 64 bytes before the program headers (Scripts/make-core-fixtures)
    func patch(_ address: UInt64, _ value: [UInt8]) throws {
      let range = try #require(core.fileRange(ofMemory: address, length: value.count))
      bytes.replaceSubrange(range, with: value)
    }
    try patch(program, Array("XELF".utf8))
    try patch(phdr + 3 * 56, [0, 0, 0, 0])  // the fourth program header, PT_DYNAMIC, becomes PT_NULL
    try patch(try #require(core.auxiliaryValue(ELFCore.auxExecFN)), Array("/usr/bin/true\0".utf8))
    let directory = try makeTemporaryDirectory("imagelog-core-untied")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let path = "\(directory)/untied.core"
    try writeFile(path, bytes: bytes)
    let run = try Self.imagelog(["file", path])
    #expect(run.exitCode == 0)
    #expect(run.error.split(separator: "\n") == [
      "imagelog: \(path): /usr/bin/true: its ELF headers in the core are damaged (not an ELF or Mach-O file (magic 0x464c4558))",
      "imagelog: \(path): /usr/bin/true: the core kept no ELF headers for it and nothing in the core ties the file on disk "
        + "to it; its build-id is unknown",
    ], "\(run.error)")
    // The program is listed without a build-id; the dynamic linker by AT_BASE, with its own.
    let lines = run.output.split(separator: "\n")
    #expect(lines.count == 2, "\(run.output)")
    #expect(lines.contains { $0.contains(" +true x86_64  <00000000000000000000000000000000> /usr/bin/true") }, "\(run.output)")
    #expect(lines.contains { $0.hasSuffix(" /nonexistent/ld.so") && !$0.contains("<000000") }, "\(run.output)")
  }

  /// QEMU's user-mode cores have no NT_FILE. Held to eu-unstrip whatever QEMU keeps: when it recognizes
  /// modules we list the same ones; when it recognizes none (QEMU leaves out every read-only file
  /// mapping, the program's headers included), we list none and say why in one line.
  @Test(.enabled(if: haveTool("aarch64-linux-gnu-gcc") && haveTool("qemu-aarch64") && haveTool("eu-unstrip"),
                 "aarch64-linux-gnu-gcc, qemu-aarch64 (qemu-user) or eu-unstrip missing"))
  func qemuCoreOfADynamicProgramAgreesWithUnstrip() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-qemu")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/coredump-threads"
    let build = try runTool(["aarch64-linux-gnu-gcc", "-O2", "-pthread", "\(packageRoot)/Tests/Programs/coredump-threads.c",
                             "-o", program])
    try #require(build.status == 0, "aarch64-linux-gnu-gcc failed: \(build.error)")
    _ = try runTool(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && "
                       + "QEMU_LD_PREFIX=/usr/aarch64-linux-gnu exec qemu-aarch64 '\(program)' crash"])
    let names = try runTool(["ls", directory]).output.split(separator: "\n")
    let name = try #require(names.first { $0.hasPrefix("qemu_") && $0.hasSuffix(".core") }, "QEMU wrote no core: \(names)")
    let core = "\(directory)/\(name)"
    let notes = try runTool(["eu-readelf", "-n", core]).output
    try #require(notes.contains("AUXV") && !notes.contains("FILE"), "QEMU's core has NT_AUXV and no NT_FILE:\n\(notes)")
    let theirs = try runTool(["eu-unstrip", "-n", "--core", core])
    let details = try Self.imagelog(["file", "--format", "detailed", core])
    #expect(details.output.contains("(from the dynamic linker's link_map list: no NT_FILE)"), "\(details.output)")
    if theirs.status == 0 {
      try Self.expectMatchesUnstrip(core, "QEMU core of an aarch64 program")
      return
    }
    #expect(theirs.error.contains("No modules recognized"), "\(theirs.error)")
    let ours = try Self.imagelog(["file", "--format", "unstrip", core])
    #expect(ours.exitCode == 0 && ours.output.isEmpty, "\(ours.output)")
    let lines = ours.error.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].hasPrefix("imagelog: \(core): the main executable's program headers (AT_PHDR 0x")
              && lines[0].hasSuffix(" entries) are not in the core's memory"), "\(ours.error)")
  }
}
