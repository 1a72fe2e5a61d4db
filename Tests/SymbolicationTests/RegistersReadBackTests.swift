import ImageLogTestSupport
import ImageReaders
import ProcessInspection
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources

/// A dump's crashing (or dump-requesting) thread's registers, written in imagelog's report and in its
/// JSON document and read back, are the ones read from the dump: every register Apple's rows show (the
/// kernel's others, `cs`, `fs_base`, stay in the snapshot and in a minidump written from it). The dumps
/// are Breakpad's and Crashpad's (Breakpad's and rust-minidump's test data).
@Suite struct RegistersReadBackTests {
  static let folder = String(#filePath.dropLast("SymbolicationTests/RegistersReadBackTests.swift".count))
    + "ImageReadersTests/Fixtures/minidump-field"

  @Test(arguments: ["breakpad/linux_null_read_av.dmp", "breakpad/linux_raise_sigabrt.dmp", "rust-minidump/simple-crashpad.dmp",
                    "rust-minidump/pipeline-inlines-macos-segv.dmp", "breakpad/minidump2.dmp"])
  func reportAndDocumentGiveBackTheDumpsRegisters(_ name: String) throws {
    let snapshot = try ProcessSnapshot.minidump(try FileBytes(path: Self.folder + "/" + name))
    let shownIndex = try #require(snapshot.threads.firstIndex { $0.crashed || $0.requestedDump }, "\(name)")
    let read = try #require(snapshot.threads[shownIndex].registers, "\(name)")
    var shown = Registers(read.architecture)
    for register in read.table where register.appleName != nil { shown[register.name] = read[register.name] }
    #expect(shown.pc == read.pc && shown.sp == read.sp && shown.pc != nil, "\(name)")

    let report = try ReportParser.parse(snapshot.imagelogReportText())
    #expect(report.threads.map(\.number) == snapshot.threads.map(\.number), "\(name)")
    #expect(report.threads[shownIndex].registers == shown, "\(name)")
    #expect(report.threads.indices.allSatisfy { $0 == shownIndex || report.threads[$0].registers == nil }, "\(name)")
    let document = try ReportParser.parse(snapshot.formatted(.json))
    #expect(document.threads[shownIndex].registers == shown, "\(name)")
  }

  /// A dump asked for without a crash: imagelog's report heads the registers `Thread 1 requested the
  /// dump with X86 Thread State (64-bit):`, which is read back as the same registers (before: a
  /// section titled `requested the dump with …`, no architecture).
  @Test func requestedDumpsRegistersReadBack() throws {
    let directory = try makeTemporaryDirectory("imagelog-registers-requested")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try writeFile(directory + "/requested.dmp",
                  bytes: try MinidumpPlatformSnapshotTests.dump(.amd64, architecture: 9, signal: 0xFFFF_FFFF, code: 0))
    let snapshot = try ProcessSnapshot.minidump(try FileBytes(path: directory + "/requested.dmp"))
    let requesting = try #require(snapshot.threads.firstIndex { $0.requestedDump })
    let read = try #require(snapshot.threads[requesting].registers)
    var shown = Registers(read.architecture)
    for register in read.table where register.appleName != nil { shown[register.name] = read[register.name] }
    let text = snapshot.imagelogReportText()
    #expect(text.contains("Thread \(requesting) requested the dump with X86 Thread State (64-bit):"), "\(text)")
    let report = try ReportParser.parse(text)
    #expect(report.threads.first { $0.number == requesting }?.registers == shown)
    let document = try ReportParser.parse(snapshot.formatted(.json))
    #expect(document.threads.first { $0.number == requesting }?.registers == shown)
  }
}
