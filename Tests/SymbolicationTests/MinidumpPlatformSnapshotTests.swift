import ImageLog
import ImageLogTestSupport
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication
import Testing

/// Two cases no public dump in Fixtures/minidump-field covers, made with `MinidumpWriter` in the layouts
/// other writers use and held to `minidump-stackwalk` 0.25: a 32-bit ARM process (Breakpad's
/// `MDRawContextARM`), whose threads get their frame 0 and registers; and a dump Breakpad's or Crashpad's
/// client was asked for (`DUMP_REQUESTED`, signal -1), where nothing crashed.
@Suite struct MinidumpPlatformSnapshotTests {
  static let stackwalk = pipelineTool("minidump-stackwalk")
  static let base: UInt64 = 0x0001_0000

  /// Two threads (tids 100, 101) in `layout`, pcs inside one module at `base`, and an exception on the
  /// second with `signal` and `code`.
  static func dump(_ layout: MinidumpContext.Layout, architecture: UInt16, signal: UInt32, code: UInt32) throws -> [UInt8] {
    let threads = (0..<2).map { index in
      let sp: UInt64 = 0x7000_0000 + UInt64(index) * 0x10_0000
      let context = MinidumpContext(layout: layout, registers: [
        "pc": base + 0x120 + UInt64(index) * 0x10, "sp": sp + 0x40, "lr": base + 0x300, "fp": sp + 0x80, "r0": 7,
        "r12": 0x1212, "cpsr": 0x6000_0010, "rip": base + 0x120 + UInt64(index) * 0x10, "rsp": sp + 0x40,
      ])
      return MinidumpWriter.Thread(tid: 100 + UInt32(index), context: .registers(context), stackAddress: sp,
                                   stack: [UInt8](repeating: 0, count: 512))
    }
    let module = MinidumpWriter.Module(baseAddress: base, size: 0x1000, path: "/system/lib/libcrash.so",
                                       buildID: Array(1...20), isMainExecutable: true)
    return try MinidumpWriter.write(MinidumpWriter.Contents(
      timeDateStamp: 0, systemInfo: MinidumpWriter.SystemInfo(processorArchitecture: architecture), threads: threads,
      modules: [module], exception: MinidumpWriter.Exception(tid: 101, signal: signal, code: code, address: 0x44)))
  }

  static func read(_ bytes: [UInt8], in directory: String) throws -> (ours: ProcessSnapshot, theirs: JSONValue) {
    let path = directory + "/written.dmp"
    try writeFile(path, bytes: bytes)
    let run = try runTool([try #require(stackwalk), "--json", path])
    try #require(run.status == 0, "minidump-stackwalk: \(run.error)")
    return (try ProcessSnapshot.minidump(try FileBytes(path: path)), try JSONValue.parse(run.output[...]))
  }

  static func hex(_ value: JSONValue?) -> UInt64? {
    guard case .string(let text)? = value, text.hasPrefix("0x") else { return nil }
    return UInt64(text.dropFirst(2), radix: 16)
  }

  /// Every 32-bit ARM thread, walked as `symbolicate` walks it (ARM threads are unwound now; their whole
  /// walks are held to minidump-stackwalk by MinidumpFieldFramesTests), has its frame 0 (the pc, in its
  /// module at minidump-stackwalk's offset) and its registers, the crashed thread's equal to
  /// minidump-stackwalk's. Before, ARM threads had none.
  @Test(.enabled(if: stackwalk != nil, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func armThreadsHaveFrameZeroAndRegisters() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-arm")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    var (ours, theirs) = try Self.read(try Self.dump(.arm, architecture: 5, signal: 11, code: 1), in: directory)
    Symbolicator.walkStacks(&ours, locator: DebugFileLocator(searchPaths: [], systemDirectories: false))
    #expect(theirs["system_info"]?["cpu_arch"]?.string == "arm")
    let threads = theirs["threads"]?.array ?? []
    try #require(ours.threads.count == 2 && threads.count == 2)
    for (thread, their) in zip(ours.threads, threads) {
      let frame = try #require(thread.frames.first, "thread \(thread.tid ?? 0) has no frame")
      let first = their["frames"]?.array?.first
      #expect(frame.address == Self.hex(first?["offset"]))
      #expect(frame.imageIndex.map { ours.images[$0].name } == first?["module"]?.string)
      #expect(frame.imageIndex.map { frame.address - ours.images[$0].loadAddress } == Self.hex(first?["module_offset"]))
      #expect(thread.registers?.pc == frame.address)
    }
    let crashed = try #require(ours.crashedThreadIndex)
    #expect(crashed == theirs["crash_info"]?["crashing_thread"]?.integer)
    let registers = try #require(ours.threads[crashed].registers)
    guard case .object(let members)? = theirs["crashing_thread"]?["frames"]?.array?.first?["registers"] else {
      Issue.record("minidump-stackwalk gave no registers")
      return
    }
    var compared = 0
    for (name, value) in members {
      // minidump-stackwalk names r11 `fp` and r12 `r12`; Apple's rows name them r11 and ip.
      let ourName = name == "fp" ? "r11" : name == "r12" ? "ip" : name
      guard let ourValue = registers[ourName] else { continue }
      #expect(ourValue == Self.hex(value), "\(name)")
      compared += 1
    }
    #expect(compared >= 16, "\(compared) registers compared")
    #expect(ours.imagelogReportText().contains("ARM Thread State (32-bit)"))
  }

  /// A dump the client asked for (Breakpad's and Crashpad's `DUMP_REQUESTED`, signal -1): the reason is
  /// minidump-stackwalk's, its requesting thread is minidump-stackwalk's `crashing_thread`, and no thread
  /// is marked crashed (before: `signal -1`, thread 1 crashed).
  @Test(.enabled(if: stackwalk != nil, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func dumpRequestedMarksNoThreadCrashed() throws {
    let directory = try makeTemporaryDirectory("imagelog-minidump-requested")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let (ours, theirs) = try Self.read(try Self.dump(.amd64, architecture: 9, signal: 0xFFFF_FFFF, code: 0), in: directory)
    let exception = try #require(ours.exception)
    #expect(exception.isDumpRequested)
    #expect(exception.reason == theirs["crash_info"]?["type"]?.string)
    #expect(ours.crashedThreadIndex == nil)
    #expect(ours.threads.firstIndex(where: \.requestedDump) == theirs["crash_info"]?["crashing_thread"]?.integer)
    let text = ours.imagelogReportText()
    #expect(text.contains("Dump Requested:  by thread 1  tid 101 (nothing crashed)"), "\(text)")
    #expect(!text.contains("Crashed"), "\(text)")
    // Written again as a minidump, it is still a requested dump, asked for by the same thread.
    try writeFile(directory + "/again.dmp", bytes: try ours.minidumpBytes())
    let again = try ProcessSnapshot.minidump(try FileBytes(path: directory + "/again.dmp"))
    #expect(again.exception?.isDumpRequested == true)
    #expect(again.threads.firstIndex(where: \.requestedDump) == 1)
  }
}
