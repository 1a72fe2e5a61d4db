import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// The minidumps other people's writers made (Fixtures/minidump-field: Breakpad's and rust-minidump's
/// test data, see its README), read as `minidump-stackwalk` 0.25 reads them: the OS and CPU and their
/// version, the crash as the platform names it and its address, the crashing thread, every thread's id,
/// name and registers, and every module's base, size, file, debug file, debug id and code id.
@Suite struct MinidumpFieldTests {
  static let dumps = Fixtures.all(in: "minidump-field").filter { $0.hasSuffix(".dmp") }
  static let haveOracle = pipelineTool("minidump-stackwalk") != nil

  @Test func theFixturesAreThere() {
    #expect(Self.dumps.count >= 17, "\(Self.dumps)")
  }

  @Test(.enabled(if: haveOracle, "needs minidump-stackwalk (Scripts/install-test-tools)"), arguments: dumps)
  func readsAsMinidumpStackwalkDoes(_ name: String) throws {
    let dump = try MinidumpFile(bytes: try Fixtures.bytes(name))
    let oracle = try #require(try StackwalkOracle.run(Fixtures.path(name)))
    let compared = MinidumpOracleChecks.expectSame(dump, oracle)
    #expect(compared > 20, "\(name): only \(compared) values compared")
  }
}
