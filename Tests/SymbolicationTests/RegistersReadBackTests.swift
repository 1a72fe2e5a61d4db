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
    let snapshot = try ProcessSnapshot.minidump(try FileBytes(path: Self.folder + "/" + name)).snapshot
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
}
