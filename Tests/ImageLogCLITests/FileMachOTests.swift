import Foundation
import Testing

/// `imagelog file` on the Mach-O fixtures, run as a process: `--uuid` against `llvm-dwarfdump-14 --uuid`,
/// the detailed view against `llvm-otool-14 -l`, `--entitlements` against the recipe's entitlements file
/// and Foundation's property-list reader, and a universal file with one bad slice.
@Suite struct FileMachOTests {
  static let root = FileCommandTests.root
  static let fixtures = root + "/Tests/ImageReadersTests/Fixtures/macho"
  static let entitlementsSource = root + "/Scripts/fixtures-src/entitlements.plist"
  static var haveBinary: Bool { FileCommandTests.haveBinary }

  static func fixture(_ name: String) -> String { fixtures + "/" + name }

  static var allFixtures: [String] {
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: fixtures)) ?? []).filter { !$0.hasSuffix(".dSYM") }
    return names.sorted().map(fixture) + [fixture("debugfixture.dSYM/Contents/Resources/DWARF/debugfixture")]
  }

  @Test(.enabled(if: haveBinary && FileCommandTests.have("llvm-dwarfdump-14"), "needs the built imagelog and llvm-dwarfdump-14"))
  func uuidMatchesDwarfdump() throws {
    let paths = Self.allFixtures
    let ours = try FileCommandTests.imagelog(["file", "--uuid"] + paths)
    #expect(ours.status == 0)
    #expect(ours.stderr == "")
    let theirs = try FileCommandTests.spawn(["llvm-dwarfdump-14", "--uuid"] + paths)
    // LLVM 14 has no name for ppc7400 and prints "()": the only difference allowed.
    let expected = theirs.outLines.map { $0.replacingOccurrences(of: " () ", with: " (ppc7400) ") }
    #expect(ours.outLines == expected)
  }

  @Test(.enabled(if: haveBinary && FileCommandTests.have("llvm-dwarfdump-14"), "needs the built imagelog and llvm-dwarfdump-14"))
  func uuidOfADSYMBundle() throws {
    let bundle = Self.fixture("debugfixture.dSYM")
    let ours = try FileCommandTests.imagelog(["file", "--uuid", "-r", bundle])
    let theirs = try FileCommandTests.spawn(["llvm-dwarfdump-14", "--uuid", bundle])
    #expect(ours.status == 0)
    #expect(ours.outLines == theirs.outLines)
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func entitlementsAsStored() throws {
    let run = try FileCommandTests.imagelog(["file", "--entitlements", Self.fixture("fixture-arm64-ios-signed")])
    #expect(run.status == 0)
    #expect(run.stdout == (try String(contentsOfFile: Self.entitlementsSource, encoding: .utf8)))
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func entitlementsAsJSON() throws {
    let run = try FileCommandTests.imagelog(["file", "--entitlements", "--format", "json",
                                             Self.fixture("fixture-arm64-ios-signed")])
    #expect(run.status == 0)
    let json = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? NSDictionary
    let plist = try PropertyListSerialization.propertyList(from: Data(contentsOf: URL(fileURLWithPath: Self.entitlementsSource)),
                                                           format: nil) as? NSDictionary
    #expect(json != nil && json == plist)
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func noEntitlementsPrintsNothing() throws {
    let run = try FileCommandTests.imagelog(["file", "--entitlements", Self.fixture("fixture-arm64-macos")])
    #expect(run.status == 0)
    #expect(run.stdout == "")
  }

  @Test(.enabled(if: haveBinary && FileCommandTests.have("llvm-objdump-14"), "needs the built imagelog and llvm-objdump-14"))
  func detailedViewShowsOtoolsSegments() throws {
    let path = Self.fixture("fixture-arm64-ios-signed")
    let run = try FileCommandTests.imagelog(["file", "--format", "detailed", path])
    #expect(run.status == 0)
    let otool = try FileCommandTests.spawn(["llvm-objdump-14", "--macho", "--private-headers", "--non-verbose", path]).outLines
      .map { $0.trimmingCharacters(in: .whitespaces) }
    let names = otool.filter { $0.hasPrefix("segname ") }.map { String($0.dropFirst(8)) }
    var seen = Set<String>()
    let segmentNames = names.filter { seen.insert($0).inserted }
    let vmaddrs = otool.filter { $0.hasPrefix("vmaddr ") }.map { "0x" + String(UInt64($0.dropFirst(9), radix: 16) ?? 0, radix: 16) }
    for (name, vmaddr) in zip(segmentNames, vmaddrs) {
      #expect(run.outLines.contains { $0.contains(" \(name) ") && $0.contains(" \(vmaddr) ") }, "\(name) \(vmaddr)")
    }
    #expect(run.stdout.contains("org.imagelog.fixture, team ABCDE12345"))
    #expect(run.stdout.contains("7 keys (XML and DER"))
    #expect(run.stdout.contains("cryptid 0 (not encrypted)"))
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func archSelectsOneSlice() throws {
    let run = try FileCommandTests.imagelog(["file", "--uuid", "--arch", "arm64e", Self.fixture("universal-ios.dylib")])
    #expect(run.status == 0)
    #expect(run.outLines.count == 1)
    #expect(run.outLines.first?.contains("(arm64e)") == true)
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func universalFileWithABadSlice() throws {
    // universal-macos with its second slice's first cmdsize set to 0: the first slice still prints.
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.fixture("universal-macos"))))
    let offset = Int(bytes[36]) << 24 | Int(bytes[37]) << 16 | Int(bytes[38]) << 8 | Int(bytes[39])  // fat_arch[1].offset
    for index in 0..<4 { bytes[offset + 36 + index] = 0 }
    let folder = try FileCommandTests.temporaryFolder()
    defer { FileCommandTests.remove(folder) }
    let path = folder + "/universal-bad"
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    let run = try FileCommandTests.imagelog(["file", "--uuid", path])
    #expect(run.status == 1)
    #expect(run.outLines.count == 1)
    #expect(run.outLines.first?.contains("(x86_64)") == true)
    #expect(run.errLines == ["imagelog: \(path) (arm64): load command 0: cmdsize 0 is less than 8"])
  }

  /// `nfat_arch` 0 with either magic: one error line naming the file, status 1, in every style and in
  /// symbolicate's `--image` (every place a BinaryFile is parsed from a path).
  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func universalHeaderWithNoArchitectures() throws {
    let folder = try FileCommandTests.temporaryFolder()
    defer { FileCommandTests.remove(folder) }
    for (name, magic) in [("empty32", [0xCA, 0xFE, 0xBA, 0xBE] as [UInt8]), ("empty64", [0xCA, 0xFE, 0xBA, 0xBF])] {
      let path = folder + "/" + name
      try Data(magic + [0, 0, 0, 0]).write(to: URL(fileURLWithPath: path))
      let expected = "imagelog: \(path): universal header: lists no architectures (nfat_arch 0)"
      for style in [[], ["--format", "json"], ["--format", "detailed"], ["--uuid"], ["--entitlements"]] {
        let run = try FileCommandTests.imagelog(["file"] + style + [path])
        #expect(run.status == 1, "\(name) \(style)")
        #expect(run.errLines == [expected], "\(name) \(style)")
      }
      let symbolicate = try FileCommandTests.imagelog(["symbolicate", "--image", path + "@0x1000", "0x1010"])
      #expect(symbolicate.status == 1, "\(name): symbolicate")
      #expect(symbolicate.stderr.contains("universal header: lists no architectures"), "\(name): \(symbolicate.stderr)")
    }
  }
}
