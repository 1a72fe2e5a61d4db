import Foundation
import ImageLogTestSupport
import Testing
import ImageLog
import ImageReaders

/// The fixture dSYM bundle (Scripts/make-fixtures: dsymutil-14 over the debug fixture): its DWARF file
/// is found and carries the executable's UUID, as `llvm-dwarfdump-14 --uuid` reads both.
@Suite struct DSYMBundleTests {
  static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../ImageReadersTests/Fixtures/macho").standardized.path

  @Test func findsTheDWARFFile() throws {
    let bundle = Self.fixtures + "/debugfixture.dSYM"
    #expect(DSYMBundle.isBundle(bundle))
    #expect(DSYMBundle.isBundle(bundle + "/"))
    #expect(!DSYMBundle.isBundle(Self.fixtures))
    let files = try DSYMBundle.dwarfFiles(inBundle: bundle + "/")
    #expect(files == [bundle + "/Contents/Resources/DWARF/debugfixture"])
    #expect(throws: DSYMBundle.ListError.noDWARFFolder) { try DSYMBundle.dwarfFiles(inBundle: Self.fixtures) }
  }

  @Test func companionCarriesTheExecutablesUUID() throws {
    let bundle = Self.fixtures + "/debugfixture.dSYM"
    let dwarf = try #require(try DSYMBundle.dwarfFiles(inBundle: bundle).first)
    func summary(_ path: String) throws -> SliceSummary? {
      try MappedFile(path: path).withReader { reader throws(FormatError) in try BinaryFile.parse(reader).slices.first }
    }
    let companion = try #require(try summary(dwarf))
    let executable = try #require(try summary(Self.fixtures + "/debugfixture"))
    #expect(companion.fileType == "dsym")
    #expect(companion.buildID != nil)
    #expect(companion.buildID == executable.buildID)
  }

  @Test(.enabled(if: haveTool("llvm-dwarfdump-14"), "needs llvm-dwarfdump-14"))
  func uuidsAgreeWithLLVMDwarfdump() throws {
    let dwarf = try #require(try DSYMBundle.dwarfFiles(inBundle: Self.fixtures + "/debugfixture.dSYM").first)
    for path in [dwarf, Self.fixtures + "/debugfixture"] {
      let line = try runChild(["llvm-dwarfdump-14", "--uuid", path]).output
      let words = line.split(separator: " ")
      try #require(words.count >= 3 && words[0] == "UUID:" && words[2] == "(arm64)", "\(line)")
      let theirs = words[1].lowercased().filter { $0 != "-" }
      let ours = try MappedFile(path: path).withReader { reader throws(FormatError) in
        try BinaryFile.parse(reader).slices.first?.buildID?.hex
      }
      #expect(ours == theirs, "\(path)")
    }
  }
}
