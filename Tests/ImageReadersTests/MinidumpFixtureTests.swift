#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
@testable import ImageReaders
@testable import SnapshotFormatting

/// The committed minidump fixtures (Fixtures/minidump/*.dmp): small dumps `MinidumpWriter` makes from
/// the values below, for the mutation test and `make fuzz`'s seeds. This test holds them equal to
/// what the writer makes now; `Scripts/make-minidump-fixtures` rewrites them (it runs this suite with
/// IMAGELOG_WRITE_MINIDUMP_FIXTURES=1).
@Suite struct MinidumpFixtureTests {
  /// The fixtures by file name.
  static func fixtures() throws -> [(name: String, bytes: [UInt8])] {
    var result: [(name: String, bytes: [UInt8])] = []
    for (name, layout, architecture) in [("x86_64", MinidumpContext.Layout.amd64, UInt16(9)), ("arm64", .arm64, 12),
                                         ("arm64-breakpad", .arm64Old, 0x8003), ("i386", .x86, 0)] {
      let wide = layout != .x86
      var system = MinidumpWriter.SystemInfo(processorArchitecture: architecture)
      system.processorCount = 4
      system.osVersion = (6, 1, 0)
      system.csdVersion = "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 x86_64"
      let text: UInt64 = wide ? 0x5555_5555_4000 : 0x0804_8000, stack: UInt64 = wide ? 0x7FFF_FFFF_E000 : 0xBFFF_E000
      var threads: [MinidumpWriter.Thread] = []
      for index in 0..<2 {
        let sp = stack - UInt64(index) * 0x1000 + 0x40
        let context = MinidumpContext(layout: layout, registers: [
          MinidumpContext.pcName(layout): text + 0x100 + UInt64(index), MinidumpContext.spName(layout): sp,
          wide ? (layout == .amd64 ? "rbp" : "fp") : "ebp": sp + 0x20])
        // A stack whose words point back into it and into the text, as a real one does.
        var bytes = [UInt8]()
        for word in 0..<32 {
          let value = word % 3 == 0 ? text + 0x180 : sp + UInt64(word * 8)
          if wide { bytes.append64(value) } else { bytes.append32(UInt32(truncatingIfNeeded: value)) }
        }
        threads.append(MinidumpWriter.Thread(tid: 1000 + UInt32(index), name: index == 0 ? "main" : "worker",
                                             context: .registers(context), stackAddress: sp - 0x40, stack: bytes))
      }
      let contents = MinidumpWriter.Contents(
        timeDateStamp: 1_700_000_000, systemInfo: system, processID: 1000, processCreateTime: 1_699_999_990, threads: threads,
        modules: [MinidumpWriter.Module(baseAddress: text - 0x4000, size: 0x5000, path: "/usr/bin/fixture",
                                        buildID: Array(0x10..<0x24), isMainExecutable: true),
                  MinidumpWriter.Module(baseAddress: wide ? 0x7FFF_F7C0_0000 : 0xF7C0_0000, size: 0x1000, path: "/lib/libfixture.so.1",
                                        buildID: [0xCA, 0xFE, 0xF0, 0x0D])],
        memory: [(text + 0x100 - 0x80, [UInt8](repeating: 0x90, count: 0x100))],
        extraStreams: [(MinidumpFile.linuxCommandLineType, Array("/usr/bin/fixture\u{0}-v\u{0}".utf8)),
                       (MinidumpFile.linuxMapsType, Array("\(hexDigits(text - 0x4000))-\(hexDigits(text + 0x1000)) r-xp 00000000 08:01 7 /usr/bin/fixture\n".utf8)),
                       (MinidumpFile.linuxProcStatusType, Array("Name:\tfixture\nPid:\t1000\nPPid:\t1\n".utf8))],
        exception: MinidumpWriter.Exception(tid: 1001, signal: 11, code: 1, address: 0x8, parameters: [0x8]))
      result.append(("minidump/writer-\(name).dmp", try MinidumpWriter.write(contents)))
    }
    return result
  }

  @Test func committedFixturesAreTheWritersOutput() throws {
    let rewrite = getenv("IMAGELOG_WRITE_MINIDUMP_FIXTURES") != nil
    for (name, bytes) in try Self.fixtures() {
      if rewrite {
        _ = try runTool(["mkdir", "-p", Fixtures.path("minidump")])
        try writeFile(Fixtures.path(name), bytes: bytes)
      }
      let committed = try Fixtures.bytes(name)
      #expect(committed == bytes, "\(name) differs from the writer's output: run Scripts/make-minidump-fixtures")
      let dump = try MinidumpFile(bytes: committed)
      #expect(dump.problems.isEmpty, "\(name): \(dump.problems)")
      #expect(dump.threads.map(\.name) == ["main", "worker"])
      #expect(dump.linux.procStatusValue("Pid") == "1000")
    }
  }
}
