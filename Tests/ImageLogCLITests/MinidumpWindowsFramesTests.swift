import ImageLogTestSupport
import ImageReaders
import Testing

/// Every thread's frames of Windows dumps, `imagelog symbolicate --format stackwalk-json` against
/// `minidump-stackwalk --json --symbols-path STORE` (module, offset in it, trust), with the field
/// fixtures' stores (Tests/ImageReadersTests/Fixtures/minidump-field). Windows x86 frames are walked by
/// the `.sym`'s `STACK WIN` records first (Breakpad's `minidump2.dmp` with `test_app.sym`: before, the
/// records were skipped and frames 1-3 came from frame pointers, then a scan ran on for 13 more), then
/// CFI, the ebp frame record and a scan as rust-minidump's x86.rs does them; Breakpad's own dump thread
/// is not walked, as minidump-stackwalk does not walk it.
@Suite struct MinidumpWindowsFramesTests {
  static let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field"
  static let stores = ["breakpad", "rust-minidump"].map { folder + "/" + $0 + "/symbols" }
  static let canRun = MinidumpCLI.stackwalk != nil

  /// One frame as both tools' JSON give it: module, offset (in the module, else the address), trust.
  static func frames(_ document: JSONValue) -> [[[String]]] {
    (document["threads"]?.array ?? []).map { thread in
      (thread["frames"]?.array ?? []).map { frame in
        let module = frame["module"]?.string
        return [module ?? "", (module == nil ? frame["offset"] : frame["module_offset"])?.string ?? "", frame["trust"]?.string ?? ""]
      }
    }
  }

  static func bothTools(_ dump: String) throws -> (ours: [[[String]]], theirs: [[[String]]]) {
    let path = folder + "/" + dump
    let stackwalk = try runChild([try #require(MinidumpCLI.stackwalk), "--json"] + stores.flatMap { ["--symbols-path", $0] } + [path])
    try #require(stackwalk.exitCode == 0, "minidump-stackwalk: \(stackwalk.error)")
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "stackwalk-json"] + stores.flatMap { ["--symbols", $0] }
                           + [path])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    return (frames(try JSONValue.parse(run.output[...])), frames(try JSONValue.parse(stackwalk.output[...])))
  }

  static func expectEqualFrames(_ ours: [[[String]]], _ theirs: [[[String]]], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(ours.count == theirs.count, sourceLocation: sourceLocation)
    for (index, (mine, other)) in zip(ours, theirs).enumerated() {
      #expect(mine == other, "thread \(index)", sourceLocation: sourceLocation)
    }
  }

  /// Breakpad's Windows XP dump with `test_app.sym` in the store: frames 1-3 by STACK WIN programs
  /// (trust "cfi"), as minidump-stackwalk finds them; its dump thread without frames.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func windowsX86WithStackWin() throws {
    let (ours, theirs) = try Self.bothTools("breakpad/minidump2.dmp")
    try #require(theirs.first?.count == 4 && theirs.first?.dropFirst().allSatisfy { $0[2] == "cfi" } == true,
                 "minidump-stackwalk walks test_app.exe by its STACK WIN records: \(theirs)")
    Self.expectEqualFrames(ours, theirs)
  }

  /// The other Windows dumps of the fixtures, x86 and amd64, thread by thread. amd64 threads are walked
  /// by frame records and scans alone (no module's `.sym` here): a scanned word equal to the frame's own
  /// pc is a frame again (write_av_non_canonical.dmp's thread 1, tiny-exe-with-cet-xsave.dmp), and
  /// with no module's file at hand the code a dump holds around the crash pc does not lengthen a scan
  /// past minidump-stackwalk's window (invalid-parameter.dmp's thread 0 ends at frame 2).
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"),
        arguments: ["breakpad/null_read_av.dmp", "breakpad/stack_exhaustion.dmp", "breakpad/thread_name_list.dmp",
                    "breakpad/tiny-exe-fastfail.dmp", "breakpad/write_av_non_canonical.dmp", "breakpad/tiny-exe-with-cet-xsave.dmp",
                    "rust-minidump/invalid-parameter.dmp"])
  func windowsDumpFrameForFrame(_ dump: String) throws {
    let (ours, theirs) = try Self.bothTools(dump)
    Self.expectEqualFrames(ours, theirs)
  }
}
