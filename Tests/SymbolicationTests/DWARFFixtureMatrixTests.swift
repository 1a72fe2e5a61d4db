import ImageLogTestSupport
import Testing

/// The DWARF fixtures are what Scripts/make-dwarf-fixtures says they are, by the tools' own reading:
/// the DWARF version and compression of each, inlined frames at -O2, the debuglink and the dwz altlink.
/// DWARFOracleTests relies on this, so a fixture rebuilt wrongly fails here with a clear reason.
@Suite(.enabled(if: DWARFOracle.haveTools && haveTool("readelf"),
                "needs llvm-symbolizer, llvm-objdump-14, llvm-objcopy-14, objcopy and readelf (binutils, llvm-14)"))
struct DWARFFixtureMatrixTests {
  @Test func matrixIsComplete() {
    let names = Set(DWARFOracle.cases.map(\.name))
    for compiler in ["gcc", "clang"] {
      for language in ["c", "cxx"] {
        for level in ["O0", "O2"] {
          for version in [4, 5] { #expect(names.contains("\(compiler)-\(language)-\(level)-dwarf\(version)")) }
        }
      }
      for compressed in ["c-O2-dwarf5-zlib", "cxx-O2-dwarf4-zlib", "c-O2-dwarf4-zstd", "cxx-O2-dwarf5-zstd"] {
        #expect(names.contains("\(compiler)-\(compressed)"))
      }
    }
    for other in ["split-gcc-cxx-O2", "dwz-a", "dwz-b", "swift-Onone", "swift-O", "macho-c-O2", "macho-cxx-O2"] {
      #expect(names.contains(other))
    }
  }

  @Test(arguments: DWARFOracle.cases.filter { $0.name.hasPrefix("gcc-") || $0.name.hasPrefix("clang") })
  func versionAndCompression(_ fixture: DWARFOracleCase) throws {
    // readelf, not llvm-dwarfdump-14: LLVM 14 cannot read zstd-compressed sections.
    let dump = try runChild(["readelf", "--debug-dump=info", fixture.debugPath])
    let version = fixture.name.contains("dwarf5") ? "5" : "4"
    let units = dump.output.split(separator: "\n").filter { $0.hasPrefix("   Version:") }
    // Every unit from our sources has the version asked for (crt objects may bring others: count ours).
    #expect(units.filter { $0.hasSuffix(" " + version) }.count >= (fixture.name.contains("-cxx-") ? 2 : 3),
            "\(fixture.name): \(units)")
    let sections = try runChild(["readelf", "-t", fixture.debugPath]).output
    let info = sections.split(separator: "\n", omittingEmptySubsequences: false)
      .drop { !$0.hasSuffix(".debug_info") }.prefix(5).joined(separator: "\n")
    for kind in ["zlib", "zstd"] {
      #expect(info.contains(kind.uppercased()) == fixture.name.hasSuffix("-" + kind), "\(fixture.name): \(info)")
    }
  }

  /// Optimized fixtures have addresses in inlined frames (so the inline chains are really compared), and
  /// every fixture has line information for a hundred instructions or more.
  @Test(arguments: DWARFOracle.cases)
  func oracleAnswers(_ fixture: DWARFOracleCase) throws {
    let addresses = try DWARFOracle.instructionAddresses(fixture.codePath)
    #expect(addresses.count > 50, "\(fixture.name): \(addresses.count) instructions")
    let answers = try DWARFOracle.symbolize(fixture.oraclePath, addresses, decompressing: fixture.oracleNeedsDecompression,
                                            isELF: fixture.isELF)
    // Swift programs link swiftrt.o's code, which has no DWARF: a count, not a share.
    let withLines = answers.filter { $0.contains { $0.line > 0 } }.count
    #expect(withLines >= 100, "\(fixture.name): \(withLines) of \(answers.count) have lines")
    let optimized = fixture.name.contains("-O2") || fixture.name.hasPrefix("dwz-a") || fixture.name == "swift-O"
    if optimized && !fixture.name.hasPrefix("swift") {
      #expect(answers.contains { $0.count > 2 }, "\(fixture.name): no address two inlined levels deep")
    }
    if fixture.name.hasPrefix("gcc-") || fixture.name.hasPrefix("clang") {
      let files = Set(answers.flatMap { $0.map(\.file) })
      #expect(files.contains { $0.hasSuffix("/vector.h") } && files.count >= 3, "\(fixture.name): files \(files)")
    }
  }

  @Test func separateDebugFileAndDWZ() throws {
    let directory = DWARFOracle.directory
    let split = try runChild(["readelf", "--string-dump=.gnu_debuglink", directory + "/split-gcc-cxx-O2"]).output
    #expect(split.contains("split-gcc-cxx-O2.debug"))
    let stripped = try runChild(["readelf", "-S", directory + "/split-gcc-cxx-O2"]).output
    #expect(!stripped.contains(".debug_info"))
    for program in ["dwz-a", "dwz-b"] {
      let link = try runChild(["readelf", "--string-dump=.gnu_debugaltlink", directory + "/" + program]).output
      #expect(link.contains("dwz-common.debug"), "\(program): \(link)")
    }
    // The supplementary file really holds shared DIEs: the programs refer into it.
    let dump = try runChild(["readelf", "--debug-dump=info", directory + "/dwz-a"]).output
    #expect(dump.contains("DW_FORM_GNU_ref_alt") || dump.contains("<alt"), "dwz-a has no DW_FORM_GNU_ref_alt")
  }
}
