#if canImport(Glibc)
import ImageLogTestSupport
import Glibc
#endif
import Testing
@testable import ImageReaders

/// The ELF shared libraries of the system's common library packages (`InstalledPackages.libraries`)
/// against readelf: build-id, SONAME, NEEDED and the load segments. One readelf process per batch of files
/// keeps it quick.
@Suite struct ELFSystemLibraryTests {
  /// The common packages' `*.so` and `*.so.*` files that are ELF (libc.so is a linker script), one path per
  /// real file: what else the machine has installed is not read.
  static func libraries() -> [String] { InstalledPackages.libraries().filter(isELF) }

  /// The first four bytes are `\x7fELF` (linker scripts such as libc.so are text).
  static func isELF(_ path: String) -> Bool {
    guard let file = fopen(path, "rb") else { return false }
    defer { fclose(file) }
    var magic = [UInt8](repeating: 0, count: 4)
    return fread(&magic, 1, 4, file) == 4 && magic == [0x7F, 0x45, 0x4C, 0x46]
  }

  @Test(.enabled(if: haveTool("readelf"), "needs readelf (binutils)"))
  func buildIDSonameNeededAndLoadSegmentsMatchReadelf() throws {
    let paths = Self.libraries()
    try #require(paths.count > 20, "expected the system library folder to hold ELF libraries")
    var compared = 0
    for start in stride(from: 0, to: paths.count, by: 150) {
      let batch = Array(paths[start..<min(start + 150, paths.count)])
      let facts = try ReadelfFacts.run(["-n", "-d", "-lW"], paths: batch)
      for path in batch {
        let oracle = try #require(facts[path], "readelf printed nothing for \(path)")
        let file: ELFFile
        do {
          file = try withMappedFile(path) { reader in
            guard case .elf(let file) = try BinaryFile.parse(reader) else { throw TestSupportError("not ELF") }
            return file
          }
        } catch {
          Issue.record("\(path): \(error)")
          continue
        }
        #expect(file.buildID?.hex == oracle.buildID, "\(path): build-id")
        #expect(file.soname == oracle.soname, "\(path): DT_SONAME")
        #expect(file.needed == oracle.needed, "\(path): DT_NEEDED")
        #expect(file.rpath == oracle.rpath, "\(path): DT_RPATH")
        #expect(file.runpath == oracle.runpath, "\(path): DT_RUNPATH")
        let ours = file.programHeaders.filter { $0.type == ProgramHeader.load }
        let theirs = oracle.segments.filter { $0.type == "LOAD" }
        #expect(ours.count == theirs.count, "\(path): PT_LOAD count")
        for (segment, expected) in zip(ours, theirs) {
          #expect(segment.fileOffset == expected.offset && segment.vmAddress == expected.vmAddress
                    && segment.fileSize == expected.fileSize && segment.vmSize == expected.vmSize
                    && segment.alignment == expected.alignment, "\(path): PT_LOAD at 0x\(hexDigits(expected.vmAddress))")
        }
        let textEnd = theirs.filter { $0.flags.contains("E") }.map { $0.vmAddress + $0.vmSize }.max()
        if let textEnd, let first = theirs.map({ $0.alignment > 1 ? $0.vmAddress & ~($0.alignment - 1) : $0.vmAddress }).min() {
          #expect(file.textVMRange == first..<textEnd, "\(path): text range")
        }
        compared += 1
      }
    }
    #expect(compared == paths.count)
  }
}

extension ELFSystemLibraryTests {
  /// The `/usr/lib/debug/.build-id/xx/yyyy.debug` files of the debug packages `Scripts/install-test-tools`
  /// installs: separate debug files (NOBITS sections, stale program headers) named by their build-id, the
  /// layout gdb and debuginfod use.
  static func debugFiles() -> [(path: String, buildID: String)] {
    InstalledPackages.buildIDDebugFiles(of: ["libc6-dbg", "libstdc++6-12-dbg", "python3.11-dbg"]).map { path in
      let parts = path.split(separator: "/")
      return (path, String(parts[parts.count - 2]) + String(parts[parts.count - 1].dropLast(".debug".count)))
    }
  }

  @Test(.enabled(if: !debugFiles().isEmpty, "needs libc6-dbg (Scripts/install-test-tools)"))
  func separateDebugFilesCarryTheBuildIDTheirNameSays() throws {
    for (path, expected) in Self.debugFiles() {
      let file = try withMappedFile(path) { reader -> ELFFile in
        guard case .elf(let file) = try BinaryFile.parse(reader) else { throw TestSupportError("not ELF") }
        return file
      }
      #expect(file.buildID?.hex == expected, "\(path)")
      #expect(file.debugInfo.hasDebugInfo, "\(path): .debug_info")
      #expect(file.needed.isEmpty && file.soname == nil, "\(path): a debug file has no dynamic array")
    }
  }
}
