import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication
import ImageLogTestSupport
import ImageReaders
import Testing

/// Our DWARF reader against `llvm-symbolizer --inlines` on every instruction of every DWARF fixture and
/// on a sample of the real libc's debug file: function (linkage name), file, line, column and the whole
/// inline chain must be the same. (How the oracle is asked: `DWARFOracle.symbolize`.)
///
/// Where elfutils 0.188 (`eu-addr2line -f -i`) or GNU binutils 2.40 (`addr2line -f -i`) answer otherwise
/// on these fixtures, llvm-symbolizer is right, checked against the DIEs and rows `llvm-dwarfdump` shows:
/// - eu-addr2line answers `??:0` for every address of the clang DWARF 5 and the Swift fixtures, whose
///   line tables cover them; it adds a `total_area` level at 0x1409 in gcc-cxx-O2-dwarf4, where that
///   inlined instance's DW_AT_ranges leave a hole for the `mean()` inlined straight into `polygon_areas`
///   (polygons.cpp:10:69); it prints DW_AT_name (`vec2_dot`) where a linkage name exists
///   (`_ZL8vec2_dot4vec2S_`), a choice rather than an error.
/// - addr2line puts gcc's -O0 C++ DWARF 5 `vec2_dot` at main.cpp:17 (it is vector.h:17: a file index off
///   by one), drops the innermost frame of clang's DWARF 5 chains (`fill` at vector.h:31, which is
///   `clamp_long`'s body, inlined into `fill`), names gcc's inlined `scaled_sum<3>` `main`, and prints no
///   columns.
/// The disagreement messages carry eu-addr2line's answer as a second opinion.
@Suite(.enabled(if: DWARFOracle.haveTools, "needs llvm-symbolizer, llvm-objdump-14, llvm-objcopy-14 (llvm-14) and objcopy (binutils)"))
struct DWARFOracleTests {
  /// Our frames as `SourceFrame`s; every frame but the outermost must be marked inlined.
  static func frames(_ file: DebugInfoFile, _ address: UInt64) throws -> [SourceFrame] {
    let frames = try file.frames(at: address)
    let inlined = frames.map(\.isInlined)
    guard inlined.isEmpty || inlined == Array(repeating: true, count: frames.count - 1) + [false] else {
      throw TestSupportError("isInlined is \(inlined) for \(frames.count) frames")
    }
    return frames.map { SourceFrame(function: $0.function, file: $0.file, line: $0.line, column: $0.column) }
  }

  @Test(arguments: DWARFOracle.cases)
  func everyInstructionAgrees(_ fixture: DWARFOracleCase) throws {
    let addresses = try DWARFOracle.instructionAddresses(fixture.codePath)
    let answers = try DWARFOracle.symbolize(fixture.oraclePath, addresses, decompressing: fixture.oracleNeedsDecompression,
                                            isELF: fixture.isELF)
    let file = try DebugInfoFile(path: fixture.debugPath, supplementaryPath: fixture.supplementaryPath)
    var comparison = OracleComparison(name: fixture.name)
    for (address, expected) in zip(addresses, answers) {
      comparison.compare(address, ours: Result { try Self.frames(file, address) }, oracle: expected) {
        DWARFOracle.secondOpinion(fixture.debugPath, address)
      }
    }
    print("DWARF oracle: \(comparison)")
    #expect(comparison.compared == addresses.count && comparison.compared > 50)
    #expect(comparison.mismatchCount == 0, "\(comparison)")
  }

  /// libc6-dbg's debug file for the running libc: zlib-compressed DWARF 5 from gcc 12 at -O2, tens of
  /// thousands of inlined subroutines. 5,000 addresses drawn from its function symbols' bytes.
  @Test(.enabled(if: DWARFOracle.libcDebugFile != nil, "needs libc6-dbg (libc's debug file under /usr/lib/debug/.build-id)"))
  func libcSampleAgrees() throws {
    let path = try #require(DWARFOracle.libcDebugFile)
    let addresses = try DWARFOracle.sampleFunctionAddresses(path, count: 5_000, seed: 0xD3A4F)
    let answers = try DWARFOracle.symbolize(path, addresses)
    let file = try DebugInfoFile(path: path)
    var comparison = OracleComparison(name: "libc debug file")
    for (address, expected) in zip(addresses, answers) {
      comparison.compare(address, ours: Result { try Self.frames(file, address) }, oracle: expected) {
        DWARFOracle.secondOpinion(path, address)
      }
    }
    print("DWARF oracle: \(comparison)")
    #expect(comparison.withInlinedFrames > 500, "\(comparison)")
    #expect(comparison.mismatchCount == 0, "\(comparison)")
  }
}
