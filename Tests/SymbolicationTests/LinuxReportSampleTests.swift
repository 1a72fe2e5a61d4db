import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication

/// Real reports from public issues (Fixtures/linux-reports/README.md names each source), read frame for
/// frame: the expected numbers, addresses, modules, offsets and build-ids are the ones in the lines.
@Suite struct LinuxReportSampleTests {
  static func sample(_ name: String) throws -> ProcessSnapshot {
    let path = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/" + name
    let text = try #require(readFile(path), "cannot read \(path)")
    return try ReportParser.parse(text)
  }

  /// (thread, index, address, image path or name, offset from the image's load address)
  typealias Expected = (thread: Int, index: Int, address: UInt64, module: String?, offset: UInt64?)

  static func check(_ report: ProcessSnapshot, _ expected: [Expected], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(report.frames.count == expected.count, sourceLocation: sourceLocation)
    for (frame, want) in zip(report.frames, expected) {
      #expect(frame.thread == want.thread && frame.index == want.index && frame.address == want.address,
              "frame \(want.index): \(frame)", sourceLocation: sourceLocation)
      let image = frame.imageIndex.map { report.images[$0] }
      #expect((image?.path ?? image?.name) == want.module, "frame \(want.index)", sourceLocation: sourceLocation)
      if let image, let offset = want.offset {
        #expect(frame.address &- image.loadAddress == offset, "frame \(want.index)", sourceLocation: sourceLocation)
      }
    }
    #expect(report.problems.isEmpty, "\(report.problems)", sourceLocation: sourceLocation)
  }

  @Test func rustASanReport() throws {
    let report = try Self.sample("asan-rust-90977.txt")
    #expect(report.format == .sanitizer)
    let foo = "/home/temp/foo/target/x86_64-unknown-linux-gnu/debug/foo"
    Self.check(report, [
      (0, 0, 0x5580a4da22a3, foo, 0x9b2a3), (0, 1, 0x5580a4da1e5a, foo, 0x9ae5a), (0, 2, 0x5580a4da2944, foo, 0x9b944),
      (0, 3, 0x5580a4da1603, foo, 0x9a603), (0, 4, 0x5580a4db71a0, foo, 0xb01a0), (0, 5, 0x5580a4da1565, foo, 0x9a565),
      (0, 6, 0x5580a4da24bb, foo, 0x9b4bb),
    ])
    #expect(report.images.count == 1 && report.images[0].offsetsFromLoadBias && report.images[0].identity == nil)
    #expect(report.threads.first?.name == "READ of size 4 at 0x7ffc05e39530 thread T0")
  }

  @Test func asanInsideInterleavedLogcat() throws {
    let report = try Self.sample("asan-android-logcat-sanitizers-1100.txt")
    let lib = "/data/app/com.company.ui-4SAD7wU_5H1-MMdNytD1oA==/lib/arm64/libcdeAndroidPort.so"
    // The chromium line between #1 and #2 does not split the stack.
    Self.check(report, [(0, 0, 0x76d18550a7, lib, 0x68d0a7), (0, 1, 0x76d1855e37, lib, 0x68de37),
                        (0, 2, 0x76d185665f, lib, 0x68e65f), (0, 3, 0x76d18559df, lib, 0x68d9df)])
    #expect(report.threads.count == 1)
  }

  @Test func coredumpJournalEntry() throws {
    let report = try Self.sample("coredump-systemd-13798.txt")
    #expect(report.format == .coredump)
    Self.check(report, [
      (0, 0, 0x555668fbe11d, "/tmp/a.out", 0x111d), (0, 1, 0x555668fbe12d, "/tmp/a.out", 0x112d),
      (0, 2, 0x555668fbe139, "/tmp/a.out", 0x1139), (0, 3, 0x555668fbe145, "/tmp/a.out", 0x1145),
      (0, 4, 0x7f7b5c828153, "libc.so.6", 0x27153), (0, 5, 0x555668fbe04e, "/tmp/a.out", 0x104e),
    ])
    #expect(report.threads.map(\.name) == ["Stack trace of thread 666897:"])
    #expect(report.frames.map(\.isReturnAddress) == [false, true, true, true, true, true])
    #expect(report.frames[4].reportedSymbol == "__libc_start_main" && report.frames[0].reportedSymbol == nil)
    #expect(!report.images.contains { $0.offsetsFromLoadBias })  // offsets from the module's first mapped byte
  }

  @Test func coredumpctlInfoWithDeletedModule() throws {
    let report = try Self.sample("coredump-systemd-35316.txt")
    let shared = "/usr/lib/systemd/libsystemd-shared-257rc2.so"
    Self.check(report, [(0, 0, 0x7125e6d28877, "libc.so.6", 0x119877), (0, 1, 0x7125e7208c96, shared, 0x408c96),
                        (0, 2, 0x7125e7208e54, shared, 0x408e54), (0, 3, 0x7125e72095fb, shared, 0x4095fb)])
    #expect(report.frames[0].reportedSymbol == "epoll_wait")
  }

  @Test func coredumpModuleLines() throws {
    let path = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/coredump-modules.txt"
    let lines = ReportText.splitLines(try #require(readFile(path)))
    let modules = lines.compactMap(LinuxLogParser.moduleLine)
    #expect(modules.map(\.0) == ["libxapp.so.1", "libgcc_s.so.1", "libpthread.so.0"])
    #expect(modules.map(\.1.hex) == ["2d6867c3b087052ef8acd12a1a6c82b3c62b8f36", "0e3de903950e35ae59a5de8c00b1817a4a71ca01",
                                     "e91114987a0147bd050addbd591eb8994b29f4b3"])
    // `Module libbrotlicommon.so.1 without build-id.` gives no identity.
    let package = try #require(lines.compactMap(LinuxLogParser.packageJSON).first)
    #expect(package.map(\.0) == ["/home/bluca/git/fsverity-utils/libfsverity.so.0", "fsverity"])
    #expect(package.map(\.1.hex) == ["7e698d9f37f379c54adaf334e489cd9875f2252c", "e056d3554b3217a7bcb2d803ba20521451b150f1"])
    // Module lines alone are no report.
    #expect(throws: ReportError.self) { try ReportParser.parse(lines.joined(separator: "\n")) }
  }

  @Test func coredumpFramesTakeTheirModulesBuildIDs() throws {
    let text = try #require(readFile(packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/coredump-systemd-13798.txt"))
    let report = try ReportParser.parse("Module libc.so.6 from deb libc6-2.36 with build-id 93ac61ec5a8eb1396f9fbd350e3169a558528a40\n" + text)
    let libc = try #require(report.images.first { $0.name == "libc.so.6" })
    #expect(libc.identity?.hex == "93ac61ec5a8eb1396f9fbd350e3169a558528a40")
  }

  @Test func androidTombstone() throws {
    let report = try Self.sample("tombstone-anbox-382.txt")
    #expect(report.format == .androidTombstone)
    let libc = "/system/lib/libc.so"
    Self.check(report, [
      (0, 0, 0xc89, nil, nil), (0, 1, 0x8c2ac, libc, 0x8c2ac), (0, 2, 0x877f6, libc, 0x877f6), (0, 3, 0x2a4f0, libc, 0x2a4f0),
      (0, 4, 0x21a7a, libc, 0x21a7a), (0, 5, 0x86d5, "/system/lib/libminijail.so", 0x86d5), (0, 6, 0x2079f, libc, 0x2079f),
    ])
    #expect(report.frames[4].reportedSymbol == "abort+92" && report.frames[6].reportedSymbol == nil)
    #expect(report.frames.allSatisfy { !$0.isReturnAddress })  // the unwinder adjusted the pcs already
  }

  @Test func androidTombstoneArm64() throws {
    let report = try Self.sample("tombstone-trustwallet-31.txt")
    let libc = "/system/lib64/libc.so", art = "/system/lib64/libart.so"
    Self.check(report, [
      (0, 0, 0x6a7d8, libc, 0x6a7d8), (0, 1, 0x680b8, libc, 0x680b8), (0, 2, 0x23a38, libc, 0x23a38), (0, 3, 0x1e1d8, libc, 0x1e1d8),
      (0, 4, 0x433298, art, 0x433298), (0, 5, 0x138004, art, 0x138004), (0, 6, 0x30fe64, art, 0x30fe64), (0, 7, 0x310430, art, 0x310430),
      (0, 8, 0x34c5e0, art, 0x34c5e0),
      (0, 9, 0x1656ac, "/data/app/com.wallet.crypto.trustapp-2/lib/arm64/libTrustWalletCore.so", 0x1656ac),
      (0, 10, 0x1f6112c, "/data/app/com.wallet.crypto.trustapp-2/oat/arm64/base.odex", 0x1f6112c),
    ])
    #expect(report.frames[9].reportedSymbol == "Java_com_wallet_crypto_trustapp_jni_BitcoinTransactionSigner_sign+204")
  }

  @Test func androidTombstoneBuildIDs() throws {
    let report = try Self.sample("tombstone-retroarch-519.txt")
    let retro = "/data/app/~~5W1OciLdIn2yu1R-JTaNcA==/com.retroarch.aarch64-Yx1IiH1N99rNUZWvbiuRPQ==/lib/arm64/libretroarch-activity.so"
    let libc = "/apex/com.android.runtime/lib64/bionic/libc.so"
    Self.check(report, [(0, 21, 0x99da64, retro, 0x99da64), (0, 22, 0xb07b84, retro, 0xb07b84), (0, 23, 0x9ec0b8, retro, 0x9ec0b8),
                        (0, 24, 0xc37b4, libc, 0xc37b4), (0, 25, 0x5d084, libc, 0x5d084)])
    #expect(report.images.map { $0.identity?.hex } == ["ad4ba17473d02b0301f04a818269b1780c7b2569", "37f537c2ba9dcbb262a0a68f41a21da4"])
    #expect(report.frames[3].reportedSymbol == "__pthread_start(void*)+208")
  }

  @Test func artLogcatNativeFrames() throws {
    let report = try Self.sample("logcat-apitrace-502.txt")
    let art = "/system/lib64/libart.so"
    Self.check(report, [(0, 1, 0x47e08c, art, 0x47e08c), (0, 2, 0x4521f8, art, 0x4521f8), (0, 3, 0x469d7c, art, 0x469d7c)])
  }

  @Test func glibcBacktraceSymbolsFD() throws {
    let report = try Self.sample("glibc-linuxcnc-ethercat-430.txt")
    #expect(report.format == .glibcBacktrace)
    let lcec = "/usr/lib/linuxcnc/modules/lcec.so", libc = "/lib/x86_64-linux-gnu/libc.so.6"
    Self.check(report, [
      (0, 0, 0x7f2612ae6c7c, lcec, 0xfc7c), (0, 1, 0x7f2613541050, libc, 0x3c050), (0, 2, 0x7f261365a43f, libc, 0x15543f),
      (0, 3, 0x7f26135614a0, libc, 0x5c4a0), (0, 4, 0x7f2613583758, libc, 0x7e758), (0, 5, 0x7f2612ae921d, lcec, 0x1221d),
      (0, 6, 0x7f2612ae9306, lcec, 0x12306), (0, 7, 0x7f2612ae9429, lcec, 0x12429), (0, 8, 0x7f2612afa4a0, lcec, 0x234a0),
      (0, 9, 0x7f2612ae7e66, lcec, nil), (0, 10, 0x55bc72fd4cf7, "/usr/bin/rtapi_app", 0x10cf7),
    ])
    #expect(report.frames[9].symbolOffset == ProcessSnapshot.SymbolOffset(name: "rtapi_app_main", offset: 0x348))
    #expect(report.images.allSatisfy { $0.identity == nil && !$0.loadAddressFromSymbols })  // lcec's bias comes from its other frames
  }

  @Test func glibcBacktraceInsideALog() throws {
    let report = try Self.sample("glibc-zoneminder-3544.txt")
    let zmu = "/home/peterke/DEV/zoneminder/cmake-build-debug/src/zmu"
    Self.check(report, [(0, 0, 0x484b5f, zmu, nil), (0, 1, 0x7f47f5dbba70, "/lib64/libc.so.6", 0x3ea70), (0, 2, 0x41be2e, zmu, nil),
                        (0, 3, 0x40e982, zmu, nil), (0, 4, 0x7f47f5da6550, "/lib64/libc.so.6", 0x29550)])
    #expect(report.frames[3].symbolOffset == ProcessSnapshot.SymbolOffset(name: "main", offset: 0x69e))
    #expect(report.images.first { $0.path == zmu }?.loadAddressFromSymbols == true)
  }

  @Test func glibcBacktraceSymbols() throws {
    let report = try Self.sample("glibc-nvme-cli-3716.txt")
    Self.check(report, [(0, 0, 0x4004d5, "./stacktrace", nil), (0, 1, 0x400575, "./stacktrace", nil), (0, 2, 0x400581, "./stacktrace", nil),
                        (0, 3, 0x40058d, "./stacktrace", nil), (0, 4, 0x7fa9106355b5, "/lib64/libc.so.6", 0x35b5),
                        (0, 5, 0x7fa910635668, "/lib64/libc.so.6", nil), (0, 6, 0x4003f5, "./stacktrace", nil)])
    #expect(report.frames.map { $0.symbolOffset?.name } == ["print_stacktrace", "foo", "bar", "main", nil, "__libc_start_main", "_start"])
    #expect(report.threads.map(\.name) == ["Stack trace (7 frames):"])
  }
}
