import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog symbols` as a command: where it writes (standard output, `-o`, a `--store` laid out as
/// `dump_syms -s` lays it out), its MODULE line against readelf, its errors and usage. The records
/// themselves are compared with dump_syms' in SymbolicationTests/BreakpadSymbolsTests.
@Suite struct SymbolsCommandTests {
  static let imagelog = builtProduct("imagelog")
  static let fixtures = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf"
  static let program = fixtures + "/gcc-cxx-O2-dwarf5"

  static func run(_ arguments: [String]) throws -> ChildResult {
    try runChild([imagelog] + arguments)
  }

  @Test(.enabled(if: haveTool("readelf"), "needs readelf"))
  func writesToStandardOutput() throws {
    let result = try Self.run(["symbols", "--inlines", Self.program])
    #expect(result.exitCode == 0 && result.error.isEmpty, "\(result.error)")
    let lines = result.output.split(separator: "\n")
    let notes = try runChild(["readelf", "-n", Self.program]).output
    let buildID = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last)
    // The debug id: the build-id's first 16 bytes with the first three UUID fields byte-swapped, age 0.
    let bytes = stride(from: 0, to: 32, by: 2).map { buildID.dropFirst($0).prefix(2) }
    let swapped = bytes[0..<4].reversed() + bytes[4..<6].reversed() + bytes[6..<8].reversed() + bytes[8...]
    #expect(lines.first == "MODULE Linux x86_64 \(swapped.joined().uppercased())0 gcc-cxx-O2-dwarf5")
    #expect(lines.dropFirst().first == "INFO CODE_ID \(buildID.uppercased())")
    #expect(lines.contains { $0.hasPrefix("INFO GENERATOR imagelog ") })
    #expect(lines.contains { $0.hasPrefix("INLINE_ORIGIN ") } && lines.contains { $0.hasPrefix("INLINE ") })
    #expect(lines.contains { $0.hasPrefix("FUNC ") } && lines.contains { $0.hasPrefix("STACK CFI INIT ") })
    let plain = try Self.run(["symbols", Self.program])
    #expect(!plain.output.contains("INLINE"), "INLINE records only with --inlines")
  }

  @Test func writesAFileAndAStore() throws {
    let folder = try makeTemporaryDirectory("imagelog-symbols-cli")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let printed = try Self.run(["symbols", Self.program]).output
    let written = try Self.run(["symbols", "-o", folder + "/out.sym", Self.program])
    #expect(written.exitCode == 0 && written.output.isEmpty)
    #expect(readFile(folder + "/out.sym") == printed)
    let store = try Self.run(["symbols", "--store", folder + "/store", Self.program, Self.fixtures + "/clang-c-O2-dwarf4"])
    #expect(store.exitCode == 0, "\(store.error)")
    let module = try #require(printed.split(separator: "\n").first?.split(separator: " "))
    #expect(readFile("\(folder)/store/gcc-cxx-O2-dwarf5/\(module[3])/gcc-cxx-O2-dwarf5.sym") == printed)
    let listing = try runChild(["find", folder + "/store", "-type", "f"]).output.split(separator: "\n")
    #expect(listing.count == 2 && listing.contains { $0.hasSuffix("/clang-c-O2-dwarf4.sym") })
    // The layout dump_syms -s makes.
    if let dumpSyms = pipelineTool("dump_syms") {
      let theirs = folder + "/theirs"
      _ = try runChild(["sh", "-c", "cd \"$0\" && exec \"$@\"", folder, dumpSyms, "-s", theirs, Self.program])
      #expect(try runChild(["find", theirs, "-type", "f"]).output.split(separator: "\n").map { $0.dropFirst(theirs.count) }
              == ["/gcc-cxx-O2-dwarf5/\(module[3])/gcc-cxx-O2-dwarf5.sym"])
    }
  }

  @Test func failuresSayWhichFile() throws {
    let folder = try makeTemporaryDirectory("imagelog-symbols-errors")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/text.txt", "not a binary\n")
    let missing = try Self.run(["symbols", folder + "/missing"])
    #expect(missing.exitCode == 1 && missing.error.hasPrefix("imagelog: \(folder)/missing: "), "\(missing.error)")
    let text = try Self.run(["symbols", folder + "/text.txt"])
    #expect(text.exitCode == 1 && text.error.hasPrefix("imagelog: \(folder)/text.txt: not an ELF or Mach-O file"), "\(text.error)")
    #expect(text.output.isEmpty)
    let universal = packageRoot + "/Tests/ImageReadersTests/Fixtures/macho/universal-macos"
    let slice = try Self.run(["symbols", universal])
    #expect(slice.exitCode == 1 && slice.error.contains("several slices") && slice.error.contains("--arch"), "\(slice.error)")
    let named = try Self.run(["symbols", "--arch", "x86_64", universal])
    #expect(named.exitCode == 0 && named.output.hasPrefix("MODULE mac x86_64 "), "\(named.error)")
    // One file failing leaves the others written.
    let mixed = try Self.run(["symbols", "--store", folder + "/store", folder + "/missing", Self.program])
    #expect(mixed.exitCode == 1 && FileSystemCheck.exists("\(folder)/store/gcc-cxx-O2-dwarf5"))
    let unwritable = try Self.run(["symbols", "-o", folder + "/no/such/folder/out.sym", Self.program])
    #expect(unwritable.exitCode == 1 && unwritable.error == "imagelog: \(folder)/no/such/folder/out.sym: cannot make a temporary "
            + "file beside it: No such file or directory\n", "\(unwritable.error)")
  }

  @Test(arguments: [
    ["symbols"],
    ["symbols", "-o", "a", "--store", "b", "file"],
    ["symbols", "file1", "file2"],
    ["symbols", "--frobnicate", "file"],
  ])
  func usageErrors(_ arguments: [String]) throws {
    let result = try Self.run(arguments)
    #expect(result.exitCode == 64 && result.error.contains("Usage: imagelog symbols"), "\(arguments): \(result.error)")
  }

  @Test func helpMatches() throws {
    let help = try Self.run(["help", "symbols"])
    #expect(help.exitCode == 0 && help.output.hasPrefix("OVERVIEW: Write the Breakpad symbol file"))
    #expect(try Self.run(["symbols", "--help"]).output == help.output)
    #expect(try Self.run(["--help"]).output.contains("  symbols "))
  }
}

enum FileSystemCheck {
  static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}
