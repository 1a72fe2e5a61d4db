import ImageLogTestSupport
import Foundation
import Testing
@testable import ImageReaders

/// The code signatures of the fixtures: ld64.lld's ad-hoc signature and the recipe's own signature with
/// entitlements (Scripts/fixtures-src/machotool.py sign). No LLVM tool dumps code signatures, so the
/// oracles are the recipe's inputs (identifier, team, the entitlements file) and otool's LC_CODE_SIGNATURE.
@Suite struct CodeSignatureTests {
  static let entitlementsSource: String = {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let path = here.appendingPathComponent("../../Scripts/fixtures-src/entitlements.plist").standardized.path
    return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
  }()

  func signature(_ name: String) throws -> (MachOFile, CodeSignature) {
    guard case .machO(let file) = try MachOFixtures.parse(name) else { throw CancellationError() }
    let signature = try #require(file.codeSignature).get()
    return (file, signature)
  }

  /// dataoff/datasize as `llvm-otool -l` prints them for LC_CODE_SIGNATURE.
  func otoolCodeSignature(_ name: String) throws -> (offset: UInt64, size: UInt64)? {
    let slices = OtoolSlice.parse(try MachOOtoolTests.otoolOutput(name))
    guard let command = slices.first?.commands.first(where: { $0.value("cmd") == "LC_CODE_SIGNATURE" }),
          let offset = command.value("dataoff").flatMap({ UInt64($0) }),
          let size = command.value("datasize").flatMap({ UInt64($0) }) else { return nil }
    return (offset, size)
  }

  @Test(.enabled(if: haveTool("llvm-objdump-14"), "llvm-objdump-14 is not installed; skipped"))
  func recipeSignatureWithEntitlements() throws {
    let name = "fixture-arm64-ios-signed"
    let (_, signature) = try signature(name)
    let range = try #require(try otoolCodeSignature(name))
    #expect(UInt64(signature.length) == range.size)
    let directory = try #require(signature.codeDirectory)
    // The recipe's --identifier and --team.
    #expect(directory.identifier == "org.imagelog.fixture")
    #expect(directory.teamID == "ABCDE12345")
    #expect(directory.version == 0x20400)
    #expect(directory.hashTypeName == "sha256")
    #expect(directory.hashSize == 32)
    #expect(directory.pageSizeLog2 == 12)
    // The hashes cover the file up to the signature, one per 4 KiB page.
    #expect(directory.codeLimit == range.offset)
    #expect(UInt64(directory.codeSlotCount) == (range.offset + 4095) / 4096)
    #expect(directory.flagNames == ["runtime"])
    #expect(signature.blobs.map(\.slotName) == ["CodeDirectory", "Requirements", "Entitlements", "DEREntitlements",
                                                 "CMSSignature"])
    #expect(!signature.hasCMSSignature)
    // The XML blob is the recipe's entitlements file byte for byte; the DER blob decodes to the same values.
    #expect(!Self.entitlementsSource.isEmpty)
    #expect(signature.entitlements == Self.entitlementsSource)
    let xml = try PropertyList(xml: try #require(signature.entitlements))
    let der = try PropertyList(der: try #require(signature.derEntitlements))
    #expect(der == xml.sortedKeys)
    #expect(try signature.decodedEntitlements() == xml)
    guard case .dictionary(let entries) = xml else { Issue.record("not a dictionary"); return }
    #expect(entries.first == .init(key: "application-identifier", value: .string("ABCDE12345.org.imagelog.fixture")))
    #expect(entries.contains(.init(key: "get-task-allow", value: .bool(false))))
    #expect(entries.contains(.init(key: "org.imagelog.fixture.level", value: .integer(3))))
  }

  @Test(.enabled(if: haveTool("llvm-objdump-14"), "llvm-objdump-14 is not installed; skipped"))
  func linkerAdHocSignature() throws {
    let name = "fixture-arm64-macos"
    let (_, signature) = try signature(name)
    let range = try #require(try otoolCodeSignature(name))
    let directory = try #require(signature.codeDirectory)
    // ld64.lld signs with the output file's name as identifier, ad hoc, no team.
    #expect(directory.identifier == name)
    #expect(directory.teamID == nil)
    #expect(directory.flagNames.contains("adhoc"))
    #expect(directory.flagNames.contains("linker-signed"))
    #expect(directory.codeLimit == range.offset)
    #expect(signature.entitlements == nil && signature.derEntitlements == nil)
    #expect(try signature.decodedEntitlements() == nil)
  }

  /// Our XML and DER readers against Foundation's property-list reader on the fixture's entitlements.
  @Test func entitlementsMatchFoundationsPlistReader() throws {
    let (_, signature) = try signature("fixture-arm64-ios-signed")
    let theirs = try PropertyListSerialization.propertyList(from: Data(Self.entitlementsSource.utf8), format: nil)
    func same(_ ours: PropertyList, _ theirs: Any) -> Bool {
      switch ours {
      case .dictionary(let entries):
        guard let dictionary = theirs as? [String: Any], dictionary.count == entries.count else { return false }
        return entries.allSatisfy { entry in dictionary[entry.key].map { same(entry.value, $0) } ?? false }
      case .array(let values):
        guard let array = theirs as? [Any], array.count == values.count else { return false }
        return zip(values, array).allSatisfy { same($0, $1) }
      case .string(let string): return theirs as? String == string
      case .bool(let bool): return (theirs as? Bool) == bool && !(theirs is String)
      case .integer(let integer): return (theirs as? NSNumber)?.int64Value == integer
      case .other: return false
      }
    }
    #expect(!same(.integer(4), 3) && !same(.bool(true), false) && !same(.string("a"), "b"))  // the comparison can fail
    #expect(same(try PropertyList(xml: try #require(signature.entitlements)), theirs))
    #expect(same(try PropertyList(der: try #require(signature.derEntitlements)), theirs))
  }

  @Test func xmlRoundTripAndJSON() throws {
    let value = try PropertyList(xml: Self.entitlementsSource)
    #expect(try PropertyList(xml: value.xmlDocument) == value)
    let json = value.json()
    #expect(json.hasPrefix("{\n  \"application-identifier\": \"ABCDE12345.org.imagelog.fixture\",\n"))
    #expect(json.contains("\"get-task-allow\": false"))
    #expect(json.contains("\"org.imagelog.fixture.level\": 3"))
    #expect(try PropertyList(xml: "<plist><dict><key>a&amp;b</key><string>&#x41;&lt;</string></dict></plist>")
            == .dictionary([.init(key: "a&b", value: .string("A<"))]))
  }

  // MARK: Malformed blobs

  static func be(_ values: [UInt32]) -> [UInt8] { values.flatMap { v in (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } } }

  static func parse(_ bytes: [UInt8]) throws(FormatError) -> CodeSignature {
    let result: Result<CodeSignature, FormatError> = bytes.withUnsafeBytes { raw in
      Result { () throws(FormatError) -> CodeSignature in try CodeSignature(ByteReader(raw)) }
    }
    return try result.get()
  }

  static let malformed: [(String, [UInt8], FormatError)] = [
    ("truncated", be([0xFADE_0CC0, 12]), .codeSignature("SuperBlob truncated: 12 bytes needed, 8 in LC_CODE_SIGNATURE's range")),
    ("bad magic", be([0xFADE_0CC1, 12, 0]), .codeSignature("SuperBlob magic 0xfade0cc1 is not 0xfade0cc0")),
    ("length past data", be([0xFADE_0CC0, 100, 0]), .codeSignature("SuperBlob length 100 outside 12...12 (LC_CODE_SIGNATURE datasize)")),
    ("absurd count", be([0xFADE_0CC0, 12, 0xFFFF_FFFF]),
     .codeSignature("SuperBlob count 4294967295 index entries extend past its length 12")),
    ("offset loops to the header", be([0xFADE_0CC0, 28, 1, 0, 0, 0xFADE_7171, 8]),
     .codeSignature("blob 0 offset 0 lies inside the SuperBlob header and index (20 bytes)")),
    ("offset out of range", be([0xFADE_0CC0, 28, 1, 5, 1000, 0xFADE_7171, 8]),
     .codeSignature("blob 0 offset 1000 leaves no room for a blob header in length 28")),
    ("blob length past the SuperBlob", be([0xFADE_0CC0, 28, 1, 5, 20, 0xFADE_7171, 64]),
     .codeSignature("blob 0 length 64 at offset 20 outside 8...8")),
    ("blob length under its header", be([0xFADE_0CC0, 28, 1, 5, 20, 0xFADE_7171, 4]),
     .codeSignature("blob 0 length 4 at offset 20 outside 8...8")),
    ("repeated slot", be([0xFADE_0CC0, 36, 2, 5, 28, 5, 28, 0xFADE_7171, 8]),
     .codeSignature("blob 1 repeats slot 0x5")),
    ("wrong magic in slot", be([0xFADE_0CC0, 28, 1, 5, 20, 0xFADE_7172, 8]),
     .codeSignature("blob 0 in slot Entitlements has magic 0xfade7172, not 0xfade7171")),
    ("truncated CodeDirectory", be([0xFADE_0CC0, 36, 1, 0, 20, 0xFADE_0C02, 16, 0x20400, 0]),
     .codeSignature("CodeDirectory length 16 is less than its 44-byte header")),
    ("CodeDirectory version needs more", be([0xFADE_0CC0, 64, 1, 0, 20, 0xFADE_0C02, 44, 0x20400] + [UInt32](repeating: 0, count: 9)),
     .codeSignature("CodeDirectory version 0x20400 needs 88 header bytes, length is 44")),
    ("identifier out of range", be([0xFADE_0CC0, 64, 1, 0, 20, 0xFADE_0C02, 44, 0x20001, 0, 0, 500] + [UInt32](repeating: 0, count: 5)),
     .codeSignature("CodeDirectory identOffset 500 outside its length 44")),
    ("identifier without NUL", be([0xFADE_0CC0, 64, 1, 0, 20, 0xFADE_0C02, 44, 0x20001, 0, 0, 40] + [UInt32](repeating: 0, count: 4) + [0x4142_4344]),
     .codeSignature("CodeDirectory identOffset 40: string has no NUL before the blob's end")),
  ]

  @Test(arguments: malformed.indices)
  func rejectsMalformedBlob(index: Int) {
    let (name, bytes, expected) = Self.malformed[index]
    #expect(throws: expected, "\(name)") { try Self.parse(bytes) }
  }

  @Test func malformedDEREntitlements() {
    #expect(throws: FormatError.codeSignature("DER entitlements: outer tag 0x30 is not [APPLICATION 16]")) {
      try PropertyList(der: [0x30, 0x00])
    }
    #expect(throws: FormatError.codeSignature("DER entitlements: length 127 at byte 2 runs past its container (3 left)")) {
      try PropertyList(der: [0x70, 0x7F, 0x02, 0x01, 0x01])
    }
    // 40 nested arrays inside the dictionary: refused by depth, not by the stack.
    var nested: [UInt8] = [0x01, 0x01, 0xFF]
    for _ in 0..<40 { nested = [0x30, UInt8(nested.count)] + nested }
    let entry: [UInt8] = [0x30, UInt8(nested.count + 3), 0x0C, 0x01, 0x6B] + nested
    let dict: [UInt8] = [0xB0, UInt8(entry.count)] + entry
    let body: [UInt8] = [0x02, 0x01, 0x01] + dict
    #expect(throws: FormatError.codeSignature("DER entitlements: nesting deeper than 32")) {
      try PropertyList(der: [0x70, UInt8(body.count)] + body)
    }
  }

  /// A broken signature does not hide the rest of the file: the slice still reads, the signature is a failure.
  @Test func brokenSignatureKeepsTheFile() throws {
    guard case .machO(let good) = try MachOFixtures.parse("fixture-arm64-macos"),
          let range = good.codeSignatureRange else { Issue.record("no signature"); return }
    var bytes = try MachOFixtures.bytes("fixture-arm64-macos")
    bytes[Int(range.dataOffset) + 3] ^= 0xFF
    guard case .machO(let file) = try BinaryFile.parse(bytes) else { Issue.record("not thin"); return }
    #expect(file.uuid == good.uuid)
    #expect(file.codeSignature == .failure(.codeSignature("SuperBlob magic 0xfade0c3f is not 0xfade0cc0")))
  }
}
