#if canImport(Glibc)
import ImageLogTestSupport
import Glibc
#endif
import Testing
@testable import ImageReaders

/// The ELF file kind (executable, PIE, shared object, relocatable) against file(1), for the fixtures,
/// the system libraries and the programs in /usr/bin.
@Suite struct ELFFileKindTests {
  /// file(1)'s words for each kind.
  static func kind(fromFileDescription text: Substring) -> String? {
    if text.contains("pie executable") { return "pie" }
    if text.contains("shared object") { return "shared-object" }
    if text.contains("LSB executable") || text.contains("MSB executable") { return "executable" }
    if text.contains("relocatable") { return "relocatable" }
    if text.contains("core file") { return "core" }
    return nil
  }

  /// The ELF programs of common packages (`InstalledPackages.programPackages`), not all of /usr/bin.
  static func programs() -> [String] {
    InstalledPackages.regularFiles(of: InstalledPackages.programPackages, in: ["/usr/bin", "/bin"])
      .filter(ELFSystemLibraryTests.isELF)
  }

  /// PAM modules: some (pam_cap.so) carry a PT_INTERP without being programs.
  static func pamModules() -> [String] {
    InstalledPackages.regularFiles(of: ["libpam-modules", "libpam-cap"], in: ["/usr/lib/x86_64-linux-gnu/security",
                                                                              "/lib/x86_64-linux-gnu/security"]) {
      $0.hasSuffix(".so")
    }.filter(ELFSystemLibraryTests.isELF)
  }

  @Test(.enabled(if: haveTool("file"), "needs file(1)"))
  func kindMatchesFile() throws {
    let paths = Fixtures.all(in: "elf").map(Fixtures.path) + ELFSystemLibraryTests.libraries() + Self.pamModules()
      + Self.programs()
    var compared = 0
    for start in stride(from: 0, to: paths.count, by: 200) {
      let batch = Array(paths[start..<min(start + 200, paths.count)])
      let output = try runTool(["file", "-N", "-F", "\t"] + batch).output
      for line in output.split(separator: "\n") {
        guard let tab = line.firstIndex(of: "\t") else { continue }
        let path = String(line[..<tab])
        guard let expected = Self.kind(fromFileDescription: line[tab...]) else { continue }
        let file = try withMappedFile(path) { reader -> ELFFile in
          guard case .elf(let file) = try BinaryFile.parse(reader) else { throw TestSupportError("not ELF") }
          return file
        }
        #expect(file.kind.name == expected, "\(path): file(1) says \(line[tab...])")
        compared += 1
      }
    }
    #expect(compared > paths.count / 2)
  }

  /// PIE means `DF_1_PIE` (readelf's `FLAGS_1 ... PIE`); an `ET_DYN` without it is a shared object even
  /// with a `PT_INTERP` (the fixture libinterp-x86_64.so, pam_cap.so, libc.so.6).
  @Test(.enabled(if: haveTool("readelf"), "needs readelf (binutils)"))
  func pieMeansTheFlagAsReadelfShowsIt() throws {
    let paths = Fixtures.all(in: "elf").map(Fixtures.path) + ELFSystemLibraryTests.libraries() + Self.pamModules()
      + Self.programs()
    var sharedWithInterpreter = 0
    for path in paths {
      let file = try withMappedFile(path) { reader -> ELFFile in
        guard case .elf(let file) = try BinaryFile.parse(reader) else { throw TestSupportError("not ELF") }
        return file
      }
      guard file.header.type == 3 else { continue }  // ET_DYN
      let dynamic = try runTool(["readelf", "-dW", path]).output
      let flagged = dynamic.split(separator: "\n").contains { $0.contains("(FLAGS_1)") && $0.split(separator: " ").contains("PIE") }
      #expect(file.kind == (flagged ? .pie : .sharedObject), "\(path): readelf -d says DF_1_PIE \(flagged)")
      if !flagged && file.interpreter != nil { sharedWithInterpreter += 1 }
    }
    // The committed fixture guarantees the case the old rule (PT_INTERP without DT_SONAME) got wrong.
    #expect(sharedWithInterpreter >= 1)
    let fixture = try withMappedFile(Fixtures.path("elf/libinterp-x86_64.so")) { reader -> ELFFile in
      guard case .elf(let file) = try BinaryFile.parse(reader) else { throw TestSupportError("not ELF") }
      return file
    }
    #expect(fixture.interpreter == "/lib/ld-fixture.so.1" && fixture.kind == .sharedObject)
  }
}
