import ImageLogTestSupport
import Testing
@testable import ImageReaders
@testable import SnapshotFormatting

/// Dumps from `MinidumpWriter` read by `minidump-stackwalk` (the oracle: it must see exactly the
/// threads, names, registers, modules, debug ids, memory and exception we wrote) and by our reader;
/// debug ids of real ELF files held to `dump_syms`' MODULE line.
@Suite struct MinidumpWriterTests {
  /// An ELF file to list as a module: its path and build-id.
  struct ELFModule {
    var path: String
    var buildID: [UInt8]
  }

  static func buildID(of path: String) throws -> [UInt8] {
    let bytes = try #require(readFileBytes(path), "cannot read \(path)")
    return try #require(try ByteReader.reading(bytes) { reader throws(FormatError) in try ELFFile(reader).buildID?.bytes },
                        "\(path) has no build-id")
  }

  /// Test programs linked with build-ids of three lengths (SHA-1's 20 bytes, MD5's 16, and 4 given in
  /// hex), built in `directory`.
  static func programs(in directory: String) throws -> [ELFModule] {
    var modules: [ELFModule] = []
    for (name, style) in [("sha1", "sha1"), ("md5", "md5"), ("short", "0x0badcafe")] {
      let path = "\(directory)/minidump-\(name)"
      let build = try runTool(["cc", "-O2", "-pthread", "-Wl,--build-id=\(style)",
                               "\(packageRoot)/Tests/Programs/minidump-crashpad.c", "-o", path])
      try #require(build.status == 0, "cc failed: \(build.error)")
      modules.append(ELFModule(path: path, buildID: try buildID(of: path)))
    }
    return modules
  }

  /// Distinct register values that fit each field of `layout` (2- and 4-byte fields get small ones).
  static func registers(_ layout: MinidumpContext.Layout, seed: UInt64, pc: UInt64, sp: UInt64) -> MinidumpContext {
    let fields = MinidumpContext.fields(layout)
    var values: [UInt64] = []
    for (index, field) in fields.enumerated() {
      let value = 0x5EED_0000_0000_0000 &+ seed << 32 &+ UInt64(index) &* 0x1_0001
      values.append(field.width == 8 ? value : value & ((1 << UInt64(field.width * 8)) - 1))
    }
    var context = MinidumpContext(layout: layout, values: values)
    if let index = context.names.firstIndex(of: MinidumpContext.pcName(layout)) { context.values[index] = pc }
    if let index = context.names.firstIndex(of: MinidumpContext.spName(layout)) { context.values[index] = sp }
    return context
  }

  /// A dump of three threads (one unnamed, one crashed) in `layout`, with `modules` at made-up bases,
  /// a range of other memory and Linux streams.
  static func contents(_ layout: MinidumpContext.Layout, architecture: UInt16, modules: [ELFModule]) -> MinidumpWriter.Contents {
    let is64 = layout != .x86 && layout != .arm
    let base: UInt64 = is64 ? 0x5555_5555_0000 : 0x0804_8000
    let stackTop: UInt64 = is64 ? 0x7FFF_F000_0000 : 0xBFFF_0000
    var threads: [MinidumpWriter.Thread] = []
    for index in 0..<3 {
      let stackAddress = stackTop - UInt64(index + 1) * 0x10_0000
      let stack = (0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
      let context = registers(layout, seed: UInt64(index), pc: base + 0x1234 + UInt64(index), sp: stackAddress + 0x100)
      threads.append(MinidumpWriter.Thread(tid: 4000 + UInt32(index), name: index == 1 ? nil : "worker \(index) ü",
                                           context: .registers(context), stackAddress: stackAddress, stack: stack,
                                           teb: is64 ? 0x7F00_0000_0000 + UInt64(index) : 0));
    }
    var system = MinidumpWriter.SystemInfo(processorArchitecture: architecture)
    system.processorLevel = 6
    system.processorRevision = 0x0102
    system.processorCount = 2
    system.osVersion = (6, 1, 42)
    system.csdVersion = "Linux 6.1.42 #1 SMP x86_64"
    system.cpuInformation = Array("GenuineIntel".utf8)
    let mapped = modules.enumerated().map { index, module in
      MinidumpWriter.Module(baseAddress: base + UInt64(index) * 0x100_0000, size: 0x4000 + UInt64(index) * 0x1000,
                            path: module.path, buildID: module.buildID, isMainExecutable: index == 0)
    }
    let maps = "55555555000-55555559000 r-xp 00000000 08:01 42 /bin/test\n7ffff0000000-7ffff0100000 rw-p 00000000 00:00 0 [stack]\n"
    return MinidumpWriter.Contents(
      timeDateStamp: 1_700_000_000, systemInfo: system, processID: 3999, processCreateTime: 1_699_999_000, threads: threads,
      modules: mapped, memory: [(base + 0x1200, Array(0..<200))],
      extraStreams: [(MinidumpFile.linuxLSBReleaseType, Array("DISTRIB_ID=Debian\nDISTRIB_RELEASE=12\nDISTRIB_CODENAME=bookworm\nDISTRIB_DESCRIPTION=\"Debian 12\"\n".utf8)),
                     (MinidumpFile.linuxMapsType, Array(maps.utf8)),
                     (MinidumpFile.linuxCommandLineType, Array("/bin/test\u{0}--flag\u{0}".utf8))],
      exception: MinidumpWriter.Exception(tid: 4002, signal: 11, code: 1, address: 0x28))
  }

  /// Writes `contents` to a file of its own and checks it against minidump-stackwalk and our reader.
  static func expectStackwalkReadsWhatWasWritten(_ contents: MinidumpWriter.Contents, cpuArch: String,
                                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
    let bytes = try MinidumpWriter.write(contents)
    let directory = try makeTemporaryDirectory("imagelog-minidump-writer")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try writeFile("\(directory)/written.dmp", bytes: bytes)
    let oracle = try #require(try StackwalkOracle.run("\(directory)/written.dmp"))
    let dump = try MinidumpFile(bytes: bytes)
    // Our reader and the oracle agree on every field...
    let compared = MinidumpOracleChecks.expectSame(dump, oracle, sourceLocation: sourceLocation)
    #expect(compared > 150, "only \(compared) values compared", sourceLocation: sourceLocation)
    // ...and the oracle sees what was written.
    #expect(oracle.json["system_info"]?["cpu_arch"]?.string == cpuArch, sourceLocation: sourceLocation)
    let threads = oracle.json["threads"]?.array ?? []
    #expect(threads.compactMap { $0["thread_id"]?.unsigned } == contents.threads.map { UInt64($0.tid) }, sourceLocation: sourceLocation)
    #expect(threads.map { $0["thread_name"]?.string } == contents.threads.map(\.name), sourceLocation: sourceLocation)
    let contexts = oracle.contexts(after: "MINIDUMP_THREAD")
    #expect(contexts.count == contents.threads.count, sourceLocation: sourceLocation)
    for (thread, theirs) in zip(contents.threads, contexts) {
      guard case .registers(let written) = thread.context else { continue }
      MinidumpOracleChecks.compareContext(written, theirs, "written thread \(thread.tid)") { ours, theirs, what in
        #expect(ours == theirs, "\(what): written \(String(describing: ours)), minidump-stackwalk \(String(describing: theirs))",
                sourceLocation: sourceLocation)
      }
    }
    let modules = oracle.json["modules"]?.array ?? []
    #expect(modules.compactMap { $0["base_addr"]?.hexValue } == contents.modules.map(\.baseAddress), sourceLocation: sourceLocation)
    #expect(modules.compactMap { $0["code_id"]?.string } == contents.modules.compactMap { $0.buildID.map { HexText.bytes($0) } },
            sourceLocation: sourceLocation)
    #expect(modules.compactMap { $0["debug_id"]?.string } == contents.modules.compactMap { $0.buildID.map { BuildID($0).breakpadDebugID() } },
            sourceLocation: sourceLocation)
    let crash = oracle.json["crash_info"]
    #expect(crash?["type"]?.string == "SIGSEGV / SEGV_MAPERR", sourceLocation: sourceLocation)
    #expect(crash?["address"]?.hexValue == 0x28, sourceLocation: sourceLocation)
    #expect(crash?["crashing_thread"]?.unsigned == 2, sourceLocation: sourceLocation)
    #expect(oracle.json["pid"]?.unsigned == 3999, sourceLocation: sourceLocation)
    #expect(oracle.json["lsb_release"]?["id"]?.string == "Debian", sourceLocation: sourceLocation)
    #expect(oracle.json["lsb_release"]?["codename"]?.string == "bookworm", sourceLocation: sourceLocation)
    #expect(oracle.json["linux_memory_map_count"]?.unsigned == 2, sourceLocation: sourceLocation)
    // Memory: every range written is in the oracle's memory list, and reads back the same bytes.
    let regions = oracle.blocks("MINIDUMP_MEMORY_DESCRIPTOR").compactMap { StackwalkOracle.number($0["start_of_memory_range"]) }
    let written = contents.threads.map { ($0.stackAddress, $0.stack) } + contents.memory.map { ($0.address, $0.bytes) }
    #expect(regions.sorted() == written.map(\.0).sorted(), sourceLocation: sourceLocation)
    for (address, expected) in written {
      let read = try ByteReader.reading(bytes) { reader throws(FormatError) in
        try dump.memory(at: address, length: expected.count, in: reader)?.bytes(at: 0, length: expected.count)
      }
      #expect(read == expected, "memory at 0x\(hexDigits(address))", sourceLocation: sourceLocation)
    }
  }

  static var haveOracle: Bool { pipelineTool("minidump-stackwalk") != nil && haveTool("cc") }

  @Test(.enabled(if: haveOracle, "minidump-stackwalk (Scripts/install-test-tools) or cc missing"))
  func x86_64DumpReadsBackInMinidumpStackwalk() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-modules")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let modules = try Self.programs(in: directory) + [ELFModule(path: Self.libc, buildID: try Self.buildID(of: Self.libc))]
    try Self.expectStackwalkReadsWhatWasWritten(Self.contents(.amd64, architecture: 9, modules: modules), cpuArch: "amd64")
  }

  @Test(.enabled(if: haveOracle, "minidump-stackwalk (Scripts/install-test-tools) or cc missing"),
        arguments: [(MinidumpContext.Layout.arm64, UInt16(12)), (.arm64Old, 0x8003)])
  func arm64DumpReadsBackInMinidumpStackwalk(layout: MinidumpContext.Layout, architecture: UInt16) throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-modules")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try Self.expectStackwalkReadsWhatWasWritten(Self.contents(layout, architecture: architecture, modules: try Self.programs(in: directory)),
                                                cpuArch: "arm64")
  }

  @Test(.enabled(if: haveOracle, "minidump-stackwalk (Scripts/install-test-tools) or cc missing"),
        arguments: [(MinidumpContext.Layout.x86, UInt16(0), "x86"), (.arm, 5, "arm")])
  func thirtyTwoBitDumpsReadBackInMinidumpStackwalk(layout: MinidumpContext.Layout, architecture: UInt16, cpuArch: String) throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-modules")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try Self.expectStackwalkReadsWhatWasWritten(Self.contents(layout, architecture: architecture, modules: try Self.programs(in: directory)),
                                                cpuArch: cpuArch)
  }

  static let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"

  /// `dump_syms FILE`'s first line is `MODULE Linux ARCH DEBUGID NAME`: the debug id our build-id
  /// reading and `BuildID.breakpadDebugID` give, for build-ids of 20, 16 and 4 bytes.
  @Test(.enabled(if: pipelineTool("dump_syms") != nil && haveTool("cc"), "dump_syms (Scripts/install-test-tools) or cc missing"))
  func debugIDsEqualDumpSyms() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-dumpsyms")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let dumpSyms = try #require(pipelineTool("dump_syms"))
    var files = try Self.programs(in: directory)
    if readFileBytes(Self.libc) != nil { files.append(ELFModule(path: Self.libc, buildID: try Self.buildID(of: Self.libc))) }
    #expect(Set(files.map(\.buildID.count)) == [20, 16, 4])
    for file in files {
      let run = try runTool([dumpSyms, file.path])
      try #require(run.status == 0, "dump_syms \(file.path): \(run.error)")
      let words = try #require(run.output.split(separator: "\n").first).split(separator: " ")
      try #require(words.count >= 5 && words[0] == "MODULE", "\(words)")
      #expect(BuildID(file.buildID).breakpadDebugID() == String(words[3]), "\(file.path)")
      // And through a dump: the module's debug identifier as the reader gives it.
      let module = MinidumpWriter.Module(baseAddress: 0x1000, size: 0x1000, path: file.path, buildID: file.buildID)
      let dump = try MinidumpFile(bytes: try MinidumpWriter.write(MinidumpWriter.Contents(
        timeDateStamp: 0, systemInfo: MinidumpWriter.SystemInfo(processorArchitecture: 9), threads: [], modules: [module])))
      #expect(dump.modules.first?.debugIdentifier == String(words[3]))
      #expect(dump.modules.first?.debugFileName == String(words[4]))
    }
  }

  /// What the writer was given is what the reader gives back, field by field.
  @Test(arguments: [(MinidumpContext.Layout.amd64, UInt16(9)), (.arm64, 12), (.arm64Old, 0x8003), (.x86, 0), (.arm, 5)])
  func readerGivesBackWhatWasWritten(layout: MinidumpContext.Layout, architecture: UInt16) throws {
    let modules = [ELFModule(path: "/opt/app/bin/app", buildID: Array(0..<20)), ELFModule(path: "/lib/libz.so.1", buildID: [9, 8, 7])]
    let contents = Self.contents(layout, architecture: architecture, modules: modules)
    let dump = try MinidumpFile(bytes: try MinidumpWriter.write(contents))
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    #expect(dump.header.timeDateStamp == contents.timeDateStamp)
    #expect(dump.threads.map(\.tid) == contents.threads.map(\.tid))
    #expect(dump.threads.map(\.name) == contents.threads.map(\.name))
    #expect(dump.threads.map(\.teb) == contents.threads.map(\.teb))
    for (read, written) in zip(dump.threads, contents.threads) {
      guard case .registers(let context) = written.context else { continue }
      #expect(read.context == context)
    }
    #expect(dump.modules.map(\.name) == modules.map(\.path))
    #expect(dump.modules.map { $0.buildID?.bytes } == modules.map(\.buildID))
    #expect(dump.modules.map(\.baseAddress) == contents.modules.map(\.baseAddress))
    #expect(dump.exception?.tid == 4002 && dump.exception?.code == 11 && dump.exception?.flags == 1)
    #expect(dump.exception?.context == dump.threads.last?.context)
    #expect(dump.systemInfo?.csdVersion == contents.systemInfo.csdVersion)
    #expect(dump.systemInfo?.processorArchitecture == architecture)
    #expect(dump.miscInfo?.processID == 3999 && dump.miscInfo?.processCreateTime == 1_699_999_000)
    #expect(dump.linux.arguments == ["/bin/test", "--flag"])
    #expect(dump.linux.maps.map { String(decoding: $0, as: UTF8.self) }?.hasPrefix("55555555000-") == true)
    #expect(dump.memoryRanges.count == 4)
  }

  /// UnloadedModuleList (stream 14), newest first: read back by the reader; a module over 4 GiB is refused.
  @Test func unloadedModulesReadBack() throws {
    var contents = Self.contents(.amd64, architecture: 9, modules: [ELFModule(path: "/opt/app/bin/app", buildID: [1, 2])])
    contents.unloadedModules = [MinidumpWriter.UnloadedModule(baseAddress: 0x7F00_0000_1000, size: 0x4010, path: "/opt/plugins/libnew.so"),
                                MinidumpWriter.UnloadedModule(baseAddress: 0x7F00_0000_9000, size: 0x2000, path: "/opt/plugins/libold.so")]
    let dump = try MinidumpFile(bytes: try MinidumpWriter.write(contents))
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    #expect(dump.unloadedModules == [
      MinidumpFile.UnloadedModule(baseAddress: 0x7F00_0000_1000, size: 0x4010, checksum: 0, timeDateStamp: 0, name: "/opt/plugins/libnew.so"),
      MinidumpFile.UnloadedModule(baseAddress: 0x7F00_0000_9000, size: 0x2000, checksum: 0, timeDateStamp: 0, name: "/opt/plugins/libold.so"),
    ])
    #expect(dump.modules.count == 1)
    contents.unloadedModules = [MinidumpWriter.UnloadedModule(baseAddress: 0, size: 1 << 32, path: "/big.so")]
    #expect(throws: FormatError.minidump("unloaded module 0 (/big.so): size 0x100000000 does not fit SizeOfImage")) {
      try MinidumpWriter.write(contents)
    }
  }
}
