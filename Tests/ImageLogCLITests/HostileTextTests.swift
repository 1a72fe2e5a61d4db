#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
import ImageReaders

/// Text from files is data: names in binaries (Scripts/make-hostile-fixtures) and hostile paths reach
/// every text style escaped (`TextEscaping`), read back to the original bytes, and forge no line.
@Suite struct HostileTextTests {
  static let fixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures/hostile"
  static let elf = fixtures + "/libhostile-x86_64.so"
  static let machO = fixtures + "/libhostile-x86_64-macos.dylib"
  /// The name the recipe puts in SONAME, DT_NEEDED, DT_RUNPATH, LC_ID_DYLIB (after /usr/lib/) and LC_RPATH.
  static let evil: [UInt8] = Array("libevil\u{1B}[2J\ntype:          executable\u{9B}\\.so".utf8)
  /// The function's symbol in Scripts/fixtures-src/hostile.c.
  static let evilSymbol: [UInt8] = Array("evil\u{1B}[2J\nRemoved: 0xdead (0x1) FORGED\u{9B}\\name".utf8)

  static func imagelog(_ arguments: [String]) throws -> ChildResult {
    try runChild([builtProduct("imagelog")] + arguments)
  }

  /// No C0 control but the line breaks, no DEL, no C1 control.
  static func expectNoControl(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let bad = text.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }
    #expect(bad.isEmpty, "raw control characters \(bad.map(\.value)) in output", sourceLocation: sourceLocation)
  }

  /// The value of each `label: value` line of a detailed view.
  static func values(_ label: String, in text: String) -> [String] {
    text.split(separator: "\n").compactMap { line in
      let trimmed = line.drop { $0 == " " }
      guard trimmed.hasPrefix(label + ":") else { return nil }
      return String(trimmed.dropFirst(label.count + 1).drop { $0 == " " })
    }
  }

  @Test func detailedViewOfAnELFShowsItsNamesEscaped() throws {
    let run = try Self.imagelog(["file", "--format", "detailed", Self.elf])
    #expect(run.exitCode == 0)
    Self.expectNoControl(run.output)
    #expect(Self.values("type", in: run.output) == ["shared-object"], "one type line: the SONAME forged none")
    #expect(Self.values("install name", in: run.output).map(TextEscaping.unescaped) == [Self.evil])
    #expect(Self.values("needs", in: run.output).map(TextEscaping.unescaped) == [Self.evil])
    #expect(Self.values("runpath", in: run.output).map(TextEscaping.unescaped) == [Self.evil])
  }

  /// readelf prints the SONAME raw: what it shows between `[` and `]` is what our line un-escapes to.
  @Test(.enabled(if: haveTool("readelf"), "readelf is not installed"))
  func theELFNamesAgreeWithReadelf() throws {
    let readelf = try runChild(["readelf", "-d", Self.elf])
    let soname = try #require(readelf.output.firstRange(of: "Library soname: ["))
    let value = readelf.output[soname.upperBound...].prefix { $0 != "]" }
    let run = try Self.imagelog(["file", "--format", "detailed", Self.elf])
    #expect(Self.values("install name", in: run.output).map(TextEscaping.unescaped) == [Array(value.utf8)])
  }

  @Test func detailedViewOfAMachOShowsItsInstallNameEscaped() throws {
    let run = try Self.imagelog(["file", "--format", "detailed", Self.machO])
    #expect(run.exitCode == 0)
    Self.expectNoControl(run.output)
    #expect(Self.values("type", in: run.output) == ["dylib"], "one type line: the install name forged none")
    #expect(Self.values("install name", in: run.output).map(TextEscaping.unescaped) == [Array("/usr/lib/".utf8) + Self.evil])
    #expect(Self.values("rpath", in: run.output).map(TextEscaping.unescaped) == [Self.evil])
  }

  @Test func jsonKeepsTheNamesExactly() throws {
    let run = try Self.imagelog(["file", "--format", "json", Self.elf, Self.machO])
    #expect(run.exitCode == 0)
    let document = try JSONValue.parse(Substring(run.output))
    let files = try #require(document.array)
    #expect(files.count == 2)
    #expect(files.first?["installName"]?.string.map { Array($0.utf8) } == Self.evil)
    #expect(files.first?["elf"]?["soname"]?.string.map { Array($0.utf8) } == Self.evil)
    #expect(files.last?["installName"]?.string.map { Array($0.utf8) } == Array("/usr/lib/".utf8) + Self.evil)
  }

  /// A file whose own path holds ESC and a newline: one crash line, one --uuid line, each path
  /// un-escaping to the path given.
  @Test func crashAndUUIDLinesEscapeThePath() throws {
    let folder = try makeTemporaryDirectory("imagelog-hostile")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let path = folder + "/lib\u{1B}[2J\nAdded: 0xdead FORGED.so"
    _ = try runChild(["cp", packageRoot + "/Tests/ImageReadersTests/Fixtures/elf/libfixture-x86_64.so", path])
    let crash = try Self.imagelog(["file", path])
    #expect(crash.exitCode == 0)
    Self.expectNoControl(crash.output)
    let lines = crash.output.split(separator: "\n")
    #expect(lines.count == 1)
    let shownPath = try #require(lines.first?.firstRange(of: "> ")).upperBound
    #expect(TextEscaping.unescaped(String(lines[0][shownPath...])) == Array(path.utf8))
    #expect(lines[0].contains(" lib\\x1b[2J\\nAdded: 0xdead FORGED.so x86_64  <"), "the name is escaped too")

    let uuid = try Self.imagelog(["file", "--uuid", path])
    Self.expectNoControl(uuid.output)
    let uuidLines = uuid.output.split(separator: "\n")
    #expect(uuidLines.count == 1)
    let uuidPath = try #require(uuidLines.first?.firstRange(of: "(x86_64) ")).upperBound
    #expect(TextEscaping.unescaped(String(uuidLines[0][uuidPath...])) == Array(path.utf8))
  }

  /// Diagnostics on standard error are one line each, their paths escaped: a file name cannot forge a
  /// second `imagelog:` line or drive the terminal.
  @Test func diagnosticsEscapeThePath() throws {
    let path = "/nonexistent-imagelog/lib\u{1B}[2J\nimagelog: FORGED\u{9B}.so"
    for arguments in [["file", path], ["file", "--format", "json", path], ["symbolicate", path]] {
      let result = try Self.imagelog(arguments)
      #expect(result.exitCode == 1, "\(arguments)")
      Self.expectNoControl(result.error)
      let lines = result.error.split(separator: "\n")
      #expect(lines.count == 1, "\(arguments): \(lines)")
      let line = try #require(lines.first)
      #expect(line.hasPrefix("imagelog: /nonexistent-imagelog/lib\\x1b[2J\\nimagelog: FORGED\\u{9b}.so: "), "\(line)")
      #expect(try #require(TextEscaping.unescaped(String(line))).starts(with: Array("imagelog: \(path): ".utf8)))
    }
  }

  /// symbolicate's text output names the hostile function escaped, on one line.
  @Test func symbolicatedNamesAreEscaped() throws {
    let run = try Self.imagelog(["symbolicate", "--no-lines", "--image", Self.elf + "@0x10000", "0x112f2"])
    #expect(run.exitCode == 0)
    Self.expectNoControl(run.output)
    let lines = run.output.split(separator: "\n")
    #expect(!lines.contains { $0.hasPrefix("Removed:") }, "no forged line")
    let line = try #require(lines.first)
    let start = try #require(line.firstRange(of: "0x00000000000112f2 ")).upperBound
    let end = try #require(line.firstRange(of: " + 2 (in libhostile-x86_64.so)")).lowerBound
    #expect(TextEscaping.unescaped(String(line[start..<end])) == Self.evilSymbol)
  }
}

/// JSON's `textStart` for ELF is where the image starts (as `__TEXT` is for Mach-O), as documented:
/// readelf's first `PT_LOAD` address, equal to `loadStart`; `textEnd` ends the last executable one.
@Suite struct FileTextRangeTests {
  @Test(.enabled(if: haveTool("readelf"), "readelf is not installed"))
  func elfTextStartIsTheFirstLoadSegment() throws {
    let path = packageRoot + "/Tests/ImageReadersTests/Fixtures/elf/libfixture-x86_64.so"
    let loads = try runChild(["readelf", "-lW", path]).output.split(separator: "\n")
      .map { $0.split(separator: " ", omittingEmptySubsequences: true) }.filter { $0.first == "LOAD" }
    let first = try #require(loads.first.flatMap { UInt64($0[2].dropFirst(2), radix: 16) })
    let executable = try #require(loads.last { $0.contains("E") })
    let start = try #require(UInt64(executable[2].dropFirst(2), radix: 16))
    let end = start + (try #require(UInt64(executable[5].dropFirst(2), radix: 16)))
    let run = try runChild([builtProduct("imagelog"), "file", "--format", "json", path])
    let slice = try #require(try JSONValue.parse(Substring(run.output)).array?.first)
    #expect(slice["textStart"]?.unsigned == first)
    #expect(slice["loadStart"]?.unsigned == first)
    #expect(slice["textEnd"]?.unsigned == end)
  }
}
