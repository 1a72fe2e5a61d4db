import Testing
@testable import ImageLog

/// The audit module's record lines (format in CImageLogAudit.h) and the watch diff, on hand-made input.
@Suite struct ProcessAuditRecordTests {
  @Test func parsesAnAddRecord() throws {
    let line = "IL1 + 4242 1500000 2500 0 7f0000001000 7f1000000000 7f1000000000 7f1000001234 7f1000003000 7f1000004000 "
      + "0102030405060708090a0b0c0d0e0f1011121314 7f1000000248 62 64 0 /opt/my libs/libx.so"
    let record = try #require(AuditRecord(line: Substring(line)))
    #expect(record.kind == .added)
    #expect(record.pid == 4242)
    #expect(record.nanosecondsSinceStart == 1_500_000)
    #expect(record.stepNanoseconds == 2500)
    #expect(record.linkMap == 0x7f00_0000_1000)
    #expect(record.image.path == "/opt/my libs/libx.so")
    #expect(record.image.name == "libx.so")
    #expect(record.image.loadBias == 0x7f10_0000_0000)
    #expect(record.image.textRange == 0x7f10_0000_0000..<0x7f10_0000_1234)
    #expect(record.image.loadRange == 0x7f10_0000_0000..<0x7f10_0000_3000)
    #expect(record.image.fileMappedRange == 0x7f10_0000_0000..<0x7f10_0000_4000)
    #expect(record.image.buildID?.bytes == Array(1...20))
    #expect(record.image.buildIDAddress == 0x7f10_0000_0248)
    #expect(record.image.architecture == "x86_64")
    #expect(!record.image.isMainExecutable)
  }

  @Test func removalsEscapesAndMissingBuildIDs() throws {
    let removed = try #require(AuditRecord(line: "IL1 - 7 0 0 0 10 0 1000 1100 1200 2000 - 0 3 32 1 /a\\\\b\\x0ac"))
    #expect(removed.kind == .removed)
    #expect(removed.image.path == "/a\\b\nc")
    #expect(removed.image.buildID == nil)
    #expect(removed.image.buildIDAddress == nil)
    #expect(removed.image.architecture == "i386")
    #expect(removed.image.isMainExecutable)
    #expect(AuditRecord(line: "IL1 x 7 0 0 0 10 0 1000 1100 1200 2000 - 0 3 32 0 [vdso]")?.kind == .removedAtExit)
  }

  @Test(arguments: [
    "",
    "IL2 + 1 0 0 0 0 0 0 0 0 0 - 0 62 64 0 /x",         // another format version
    "IL1 ? 1 0 0 0 0 0 0 0 0 0 - 0 62 64 0 /x",         // unknown kind
    "IL1 + 1 0 0 0 0 0 0 0 0 - 0 62 64 0 /x",           // a field short
    "IL1 + 1 0 0 0 0 0 1000 0fff 2000 2000 - 0 62 64 0 /x",  // text ends before it starts
    "IL1 + 1 0 0 0 0 0 0 0 0 0 abc 0 62 64 0 /x",       // odd number of build-id digits
    "IL1 + 99999999999 0 0 0 0 0 0 0 0 0 - 0 62 64 0 /x",  // PID out of range
  ])
  func rejectsMalformedRecords(line: String) {
    #expect(AuditRecord(line: Substring(line)) == nil)
  }

  @Test func changesBetweenSnapshots() {
    func image(_ path: String, _ address: Address) -> Image {
      Image(path: path, loadAddress: address, loadBias: address, textRange: address..<address + 0x1000,
            loadRange: address..<address + 0x2000, buildID: nil, architecture: "x86_64", isMainExecutable: false)
    }
    let a = image("/a.so", 0x1000), b = image("/b.so", 0x5000), c = image("/c.so", 0x9000)
    let bMoved = image("/b.so", 0x7000)
    #expect(ProcessImages.changes(from: [], to: [a, b]) == [.added(a), .added(b)])
    #expect(ProcessImages.changes(from: [a, b], to: [a, b]) == [])
    #expect(ProcessImages.changes(from: [a, b], to: [a, c]) == [.removed(b), .added(c)])
    // Unloaded and loaded again elsewhere between two polls: a removal and an addition.
    #expect(ProcessImages.changes(from: [a, b], to: [a, bMoved]) == [.removed(b), .added(bMoved)])
  }
}
