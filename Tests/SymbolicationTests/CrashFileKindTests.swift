import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing
@testable import SnapshotSources

/// `CrashFileKind`, the one place commands learn whether a file is a core, a minidump or text, held to
/// file(1) on every file of the reader fixtures (ELF binaries, cores, Mach-O, minidumps from several
/// writers, Breakpad symbol files, DWARF, hostile bytes) and the report fixtures.
@Suite struct CrashFileKindTests {
  static let readerFixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures"
  static let reportFixtures = packageRoot + "/Tests/SymbolicationTests/Fixtures"

  /// Every regular file under `folder`.
  static func files(under folder: String) throws -> [String] {
    try runTool(["find", folder, "-type", "f"]).output.split(separator: "\n").map(String.init).sorted()
  }

  @Test(.enabled(if: haveTool("file"), "needs file(1)"))
  func kindIsWhatFileSays() throws {
    let paths = try Self.files(under: Self.readerFixtures) + Self.files(under: Self.reportFixtures)
    try #require(paths.count > 50, "\(paths.count) fixtures")
    var counts: [CrashFileKind: Int] = [:]
    for path in paths {
      let said = try runTool(["file", "-b", path]).output
      let expected: CrashFileKind = said.contains("core file") ? .core : said.hasPrefix("Mini DuMP") ? .minidump : .text
      #expect(CrashFileKind(path: path) == expected, "\(path): file(1) says \(said)")
      counts[expected, default: 0] += 1
    }
    #expect((counts[.core] ?? 0) >= 2 && (counts[.minidump] ?? 0) >= 3, "\(counts)")
  }

  @Test func unreadableAndStandardInputAreText() throws {
    let folder = try makeTemporaryDirectory("imagelog-kind")
    defer { _ = try? runTool(["rm", "-rf", folder]) }
    try writeFile(folder + "/empty", "")
    try writeFile(folder + "/MDM", "MDM")
    for path in ["-", folder + "/missing", folder, folder + "/empty", folder + "/MDM"] {
      #expect(CrashFileKind(path: path) == .text, "\(path)")
    }
  }
}
