#if canImport(Glibc)
import ImageLogTestSupport
import Glibc
#endif
import Testing
@testable import ImageReaders

/// Every ELF shared library at the top level of the system library folder against readelf: build-id,
/// SONAME, NEEDED and the load segments. One readelf process per batch of files keeps it quick.
@Suite struct ELFSystemLibraryTests {
  static let folder = "/usr/lib/x86_64-linux-gnu"

  /// Top-level `*.so` and `*.so.*` names that resolve to a regular ELF file, one name per real file.
  static func libraries() -> [String] {
    let names = directoryNames(folder).filter { $0.hasSuffix(".so") || $0.contains(".so.") }
    var seen: Set<String> = []
    var result: [String] = []
    for name in names.sorted() {
      let path = folder + "/" + name
      guard let resolved = realpath(path, nil) else { continue }
      let real = String(cString: resolved)
      free(resolved)
      guard seen.insert(real).inserted, isELF(real) else { continue }
      result.append(real)
    }
    return result
  }

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
  /// `/usr/lib/debug/.build-id/xx/yyyy.debug` files: separate debug files (NOBITS sections, stale
  /// program headers) named by their build-id, the layout gdb and debuginfod use.
  static func debugFiles() -> [(path: String, buildID: String)] {
    let root = "/usr/lib/debug/.build-id"
    var result: [(String, String)] = []
    for prefix in directoryNames(root) where prefix.count == 2 {
      for name in directoryNames(root + "/" + prefix) where name.hasSuffix(".debug") {
        let path = root + "/" + prefix + "/" + name
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
        result.append((path, prefix + String(name.dropLast(6))))
      }
    }
    return result.sorted { $0.0 < $1.0 }
  }

  @Test(.enabled(if: !debugFiles().isEmpty, "no separate debug files under /usr/lib/debug/.build-id"))
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
