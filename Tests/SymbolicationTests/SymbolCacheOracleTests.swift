import ImageLogTestSupport
import ImageReaders
@testable import Symbolication
import Testing

/// The symbol cache against `llvm-symbolizer --inlines`, as DWARFOracleTests checks the DWARF reader:
/// every instruction of every DWARF fixture and a sample of libc's debug file, answered by a file that
/// maps the cache entry an earlier open wrote (function, file, line, column, the whole inline chain).
@Suite(.enabled(if: DWARFOracle.haveTools, "needs llvm-symbolizer, llvm-objdump-14, llvm-objcopy-14 (llvm-14) and objcopy (binutils)"))
struct SymbolCacheOracleTests {
  /// `path` answered from its cache entry in `folder`: the first open builds and writes it, the second
  /// maps it. Files without a build-id (clang's fixtures here) get one of zeros.
  static func fromCache(_ path: String, supplementaryPath: String?, folder: String) throws -> DebugInfoFile {
    let identity = (try SymbolFile.load(path: path, withSymbols: false)).first?.buildID ?? BuildID([UInt8](repeating: 0, count: 20))
    let settings = SymbolCacheSettings(directory: folder)
    _ = try DebugInfoFile.open(path: path, architecture: nil, supplementaryPath: supplementaryPath, identity: identity,
                               symbolCache: settings)
    let file = try DebugInfoFile.open(path: path, architecture: nil, supplementaryPath: supplementaryPath, identity: identity,
                                      symbolCache: settings)
    guard case .symbolCache = file.answers else { throw TestSupportError("\(path): not answered from the cache") }
    try #require(directoryNames(folder).count == 1, "\(directoryNames(folder))")
    return file
  }

  @Test(arguments: DWARFOracle.cases)
  func everyInstructionAgrees(_ fixture: DWARFOracleCase) throws {
    let folder = try makeTemporaryDirectory("symbol-cache-oracle")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let addresses = try DWARFOracle.instructionAddresses(fixture.codePath)
    let answers = try DWARFOracle.symbolize(fixture.oraclePath, addresses, decompressing: fixture.oracleNeedsDecompression,
                                            isELF: fixture.isELF)
    let file = try Self.fromCache(fixture.debugPath, supplementaryPath: fixture.supplementaryPath, folder: folder)
    var comparison = OracleComparison(name: fixture.name + " (cache)")
    for (address, expected) in zip(addresses, answers) {
      comparison.compare(address, ours: Result { try DWARFOracleTests.frames(file, address) }, oracle: expected) {
        DWARFOracle.secondOpinion(fixture.debugPath, address)
      }
    }
    #expect(comparison.compared == addresses.count && comparison.compared > 50)
    #expect(comparison.mismatchCount == 0, "\(comparison)")
  }

  @Test(.enabled(if: DWARFOracle.libcDebugFile != nil, "needs libc6-dbg (libc's debug file under /usr/lib/debug/.build-id)"))
  func libcSampleAgrees() throws {
    let folder = try makeTemporaryDirectory("symbol-cache-oracle")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let path = try #require(DWARFOracle.libcDebugFile)
    let addresses = try DWARFOracle.sampleFunctionAddresses(path, count: 5_000, seed: 0xCAC4E)
    let answers = try DWARFOracle.symbolize(path, addresses)
    let file = try Self.fromCache(path, supplementaryPath: nil, folder: folder)
    var comparison = OracleComparison(name: "libc debug file (cache)")
    for (address, expected) in zip(addresses, answers) {
      comparison.compare(address, ours: Result { try DWARFOracleTests.frames(file, address) }, oracle: expected) {
        DWARFOracle.secondOpinion(path, address)
      }
    }
    #expect(comparison.withInlinedFrames > 500, "\(comparison)")
    #expect(comparison.mismatchCount == 0, "\(comparison)")
  }
}
