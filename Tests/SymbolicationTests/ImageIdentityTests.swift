import Testing
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication
import ImageReaders

/// Every form of an id users meet matches the file's bytes; other ids do not.
@Suite struct ImageIdentityTests {
  static let buildID = BuildID([0x16, 0x7d, 0xdc, 0x45, 0xf2, 0xbb, 0xbc, 0x48, 0x54, 0x34, 0x07, 0x7c, 0xf7, 0x0e,
                                0x87, 0x91, 0x75, 0x00, 0x8f, 0x62])

  @Test func everyFormMatches() throws {
    let id = Self.buildID
    let forms = [id.hex, id.hex.uppercased(), id.uuid, id.uuid.lowercased(), id.compactUUID, "<\(id.compactUUID)>",
                 id.compactUUID.uppercased()]
    for form in forms {
      let identity = try #require(ImageIdentity(form), "\(form)")
      #expect(identity.match(id) == .same, "\(form)")
    }
    for form in [id.debugID, id.debugID.lowercased(), id.debugID.filter { $0 != "-" } + "0"] {
      let identity = try #require(ImageIdentity(form), "\(form)")
      #expect(identity.match(id) == .debugID, "\(form)")
    }
    // A Mach-O LC_UUID is 16 bytes: every form of it matches too.
    let uuid = BuildID(Array(id.bytes.prefix(16)))
    for form in [uuid.uuid, uuid.compactUUID, uuid.hex] { #expect(ImageIdentity(form)?.match(uuid) == .same) }
  }

  /// An 8-byte build-id (lld's `--build-id=fast`, Breakpad's linux_inline.dmp) and the 16 bytes a
  /// Breakpad debug id pads it to (`dump_syms`: `BBA6FA10B8AAB33D0000…0`) are one build; another
  /// short build-id, or padding that is not zeros, is not.
  @Test func shortBuildIDMatchesItsPaddedForm() throws {
    let short = try #require(ImageIdentity("10faa6bbaab83db3"))
    let padded = BuildID(short.bytes + [UInt8](repeating: 0, count: 8))
    #expect(short.match(padded) == .same)
    #expect(try #require(ImageIdentity(padded.hex)).match(BuildID(short.bytes)) == .same)
    #expect(short.match(BuildID(short.bytes.dropLast() + [0] + [UInt8](repeating: 0, count: 8))) == .different)
    #expect(short.match(BuildID(short.bytes + [UInt8](repeating: 0, count: 7) + [1])) == .different)
  }

  @Test func otherIDsDoNotMatch() throws {
    let id = Self.buildID
    var other = id.bytes
    other[19] ^= 1  // only the tail beyond the UUID prefix differs: a full build-id compares fully
    #expect(ImageIdentity(BuildID(other).hex)?.match(id) == .different)
    other = id.bytes
    other[3] ^= 1
    #expect(ImageIdentity(BuildID(other).compactUUID)?.match(id) == .different)
    #expect(ImageIdentity("00000000-0000-0000-0000-000000000000") == nil)
    #expect(ImageIdentity("not hex at all") == nil)
    #expect(ImageIdentity("1234") == nil)
  }
}
