import Glibc
import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders

/// The bound on what one file's compressed debug sections may inflate to (`DWARFSections.maximumInflatedTotal`)
/// against the real debug files installed here, and the bound on what `SymbolicationCache` keeps inflated.
@Suite struct InflationLimitTests {
  /// libc6-dbg's debug files (`/usr/lib/debug/.build-id/xx/yyyy.debug`, zlib-compressed DWARF 5), as the
  /// package lists them: other packages' debug files in the same folder are no business of this test.
  static let libcDebugFiles = InstalledPackages.buildIDDebugFiles(of: ["libc6-dbg"])
  /// libstdc++6-12-dbg's library, built with its DWARF uncompressed.
  static let libstdcxxDebug = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"

  /// Every installed libc6-dbg debug file, and libstdc++6-12-dbg's library, is read whole, each at most
  /// a 64th of the total bound (libc's, the largest, inflates to 8.6 MB of the 1 GiB).
  @Test(.enabled(if: !libcDebugFiles.isEmpty, "needs libc6-dbg (debug files under /usr/lib/debug/.build-id)"))
  func realDebugFilesStayFarBelowTheTotal() throws {
    let paths = Self.libcDebugFiles + (access(Self.libstdcxxDebug, R_OK) == 0 ? [Self.libstdcxxDebug] : [])
    var largest: (path: String, count: UInt64) = ("", 0)
    for path in paths {
      let file: DebugInfoFile
      do { file = try DebugInfoFile(path: path) } catch {
        Issue.record("\(error)")
        continue
      }
      #expect(file.inflatedByteCount <= DWARFSections.maximumInflatedTotal / 64, "\(path): \(file.inflatedByteCount)")
      if file.inflatedByteCount > largest.count { largest = (path, file.inflatedByteCount) }
    }
    // libc's debug file is compressed: something was inflated, and counted.
    #expect(largest.count > 1 << 20, "\(largest)")
  }

  /// The cache keeps DWARF whose inflated sections fit its bound, letting the least recently used go:
  /// three zlib-compressed fixtures with room for all but one byte of the three.
  @Test func cacheLetsTheLeastRecentlyUsedDWARFGo() throws {
    let folder = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf/"
    let paths = ["gcc-c-O2-dwarf5-zlib", "clang-c-O2-dwarf5-zlib", "gcc-cxx-O2-dwarf4-zlib"].map { folder + $0 }
    let sizes = try paths.map { try DebugInfoFile(path: $0).inflatedByteCount }
    #expect(sizes.allSatisfy { $0 > 0 }, "\(sizes)")
    let cache = SymbolicationCache(options: SymbolicationOptions(), inflatedLimit: sizes.reduce(0, +) - 1)
    func read(_ index: Int) throws -> DebugInfoFile {
      try cache.debugInfo(path: paths[index], architecture: nil, supplementaryPath: nil)
    }
    let first = try read(0), second = try read(1)
    #expect(try read(0) === first)  // kept, and now used more recently than the second
    let third = try read(2)
    #expect(cache.counts.debugInfoFiles == 2)
    #expect(try read(0) === first)
    #expect(try read(2) === third)
    #expect(try read(1) !== second)  // let go, read again
  }
}
