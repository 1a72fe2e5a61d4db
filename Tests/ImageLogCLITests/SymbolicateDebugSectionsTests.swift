import ImageLogTestSupport
import Testing

/// `imagelog symbolicate --image` on programs whose debug sections' headers are broken or lie
/// (Tests/ImageReadersTests/Fixtures/hostile, from Scripts/make-hostile-fixtures): what is readable is
/// used, the image is found, a note says what is not, and the names are those other tools give.
@Suite struct SymbolicateDebugSectionsTests {
  static let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/hostile"
  static let loadAddress: UInt64 = 0x40_0000

  /// The fixture's functions (`leaf_function`, `middle_function`, `main`), each at its start + 2, from
  /// `symbols` (address, name).
  static func addresses(_ symbols: [(UInt64, String)]) -> [(link: UInt64, name: String)] {
    symbols.filter { ["leaf_function", "middle_function", "main"].contains($0.1) }.map { ($0.0 + 2, $0.1) }
  }

  /// Runs `imagelog symbolicate --image FIXTURE@0x400000` on `links` (link-time addresses of a PIE).
  static func symbolicate(_ path: String, _ links: [UInt64]) throws -> ChildResult {
    try runChild([SymbolicateCLI.executable, "symbolicate", "--image", path + "@0x400000"]
                 + links.map { "0x" + String($0 + loadAddress, radix: 16) })
  }

  /// Each frame line's function and its `(file:line:col)` when there is one.
  static func frames(_ output: String) -> [(name: String, location: String?)] {
    output.split(separator: "\n").filter { $0.hasPrefix("0x") }.map { line in
      let words = line.split(separator: " ")
      let location = line.hasSuffix(")") && words.last?.hasPrefix("(") == true && words.last?.contains(":") == true
        ? String(words.last!.dropFirst().dropLast()) : nil
      return (String(words[1]), location)
    }
  }

  /// `.debug_info`'s offset points past the end: the image is found, its functions named from the
  /// symbol table as llvm-symbolizer names them, and the note names the section (it was
  /// "??? [image file not found]", the image counted missing, status 1).
  @Test(.enabled(if: haveTool("llvm-nm") && haveTool("llvm-symbolizer"), "needs llvm-nm and llvm-symbolizer"))
  func debugInfoPastTheEndKeepsTheSymbols() throws {
    let path = Self.folder + "/debug-info-past-end"
    let wanted = Self.addresses(try SymbolicateCLI.functionSymbols(path))
    try #require(wanted.count == 3, "llvm-nm: \(wanted)")
    let theirs = try SymbolicateCLI.llvmSymbolizerNames(path, wanted.map(\.link))
    let result = try Self.symbolicate(path, wanted.map(\.link))
    #expect(result.exitCode == 0, "\(result.error)")
    #expect(result.error == "")
    #expect(Self.frames(result.output).map(\.name) == theirs)
    #expect(theirs == wanted.map(\.name))
    #expect(result.output.contains("3 of 3 frames; 1 of 1 images found, 0 missing"), "\(result.output)")
    let size = try #require(readFileBytes(path)?.count)
    let header = try readelfSection(path, ".debug_info")
    #expect(result.output.contains("  note: no file:line information: \(path): section \(header.index) (.debug_info) "
                                   + "0x\(String(header.fileOffset, radix: 16))+0x\(String(header.size, radix: 16)) past end (\(size) bytes)\n"),
            "\(result.output)")
  }

  /// `.debug_loclists`, which symbolication does not read, points past the end: nothing is lost, the
  /// names and lines are llvm-symbolizer's.
  @Test(.enabled(if: haveTool("llvm-nm") && haveTool("llvm-symbolizer"), "needs llvm-nm and llvm-symbolizer"))
  func anUnreadSectionPastTheEndCostsNothing() throws {
    let path = Self.folder + "/debug-loclists-past-end"
    let wanted = Self.addresses(try SymbolicateCLI.functionSymbols(path))
    try #require(wanted.count == 3, "llvm-nm: \(wanted)")
    let peer = try runChild(["llvm-symbolizer", "--obj=" + path] + wanted.map { "0x" + String($0.link, radix: 16) })
    let answers = peer.output.split(separator: "\n").map(String.init)
    let theirs = stride(from: 0, to: answers.count - 1, by: 2).map { (answers[$0], answers[$0 + 1]) }
    let result = try Self.symbolicate(path, wanted.map(\.link))
    #expect(result.exitCode == 0 && result.error == "", "\(result.error)")
    let ours = Self.frames(result.output)
    #expect(ours.map(\.name) == theirs.map(\.0))
    #expect(ours.map(\.location) == theirs.map(\.1), "\(result.output)\n\(peer.output)")
    #expect(!result.output.contains("note:"), "\(result.output)")
  }

  /// A library whose `.symtab` points past the end: the names come from `.dynsym`, as binutils'
  /// `nm -D` gives them (llvm-nm and llvm-symbolizer refuse the file), and a note says the full table
  /// could not be read.
  @Test(.enabled(if: haveTool("nm") && haveTool("readelf"), "needs nm and readelf (binutils)"))
  func symbolTablePastTheEndLeavesTheExportedNames() throws {
    let path = Self.folder + "/libsymtab-past-end.so"
    let nm = try runChild(["nm", "-D", "--defined-only", path])
    let exported = nm.output.split(separator: "\n").compactMap { line -> (UInt64, String)? in
      let words = line.split(separator: " ")
      guard words.count == 3, words[1] == "T", let address = UInt64(words[0], radix: 16) else { return nil }
      return (address, String(words[2]))
    }
    let wanted = Self.addresses(exported)
    try #require(wanted.count == 3, "nm -D: \(nm.output)")
    let result = try Self.symbolicate(path, wanted.map(\.link))
    #expect(result.exitCode == 0, "\(result.error)")
    #expect(Self.frames(result.output).map(\.name) == wanted.map(\.name), "\(result.output)")
    #expect(result.output.contains("1 of 1 images found, 0 missing"))
    let size = try #require(readFileBytes(path)?.count)
    let header = try readelfSection(path, ".symtab")
    #expect(result.output.contains("  note: \(path): section \(header.index) (.symtab) 0x\(String(header.fileOffset, radix: 16))"
                                   + "+0x\(String(header.size, radix: 16)) past end (\(size) bytes): only its exported symbols (.dynsym) are read\n"),
            "\(result.output)")
  }

  /// Compressed section headers that each claim 16 MiB (within the per-section limit and zlib's
  /// ratio), 66 of them over the same 16 KB stream: 1056 MiB together. Nothing is inflated (it took
  /// a gigabyte of inflating), the note says the total is over the limit, the names are llvm-nm's.
  @Test(.enabled(if: haveTool("llvm-nm"), "needs llvm-nm"))
  func compressedSectionsOverTheTotalAreRefusedTogether() throws {
    let path = Self.folder + "/debug-inflate-past-total"
    let wanted = Self.addresses(try SymbolicateCLI.functionSymbols(path))
    try #require(wanted.count == 3, "llvm-nm: \(wanted)")
    let result = try Self.symbolicate(path, wanted.map(\.link))
    #expect(result.exitCode == 0, "\(result.error)")
    #expect(Self.frames(result.output).map(\.name) == wanted.map(\.name), "\(result.output)")
    #expect(result.output.contains("  note: no file:line information: \(path): compressed debug sections: "
                                   + "uncompressed total 1107296754 exceeds the limit of 1073741824\n"), "\(result.output)")
  }
}
