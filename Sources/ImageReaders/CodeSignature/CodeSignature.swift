/// The code signature behind `LC_CODE_SIGNATURE`: an embedded-signature SuperBlob (big-endian,
/// `CSMAGIC_EMBEDDED_SIGNATURE` 0xfade0cc0) and the blobs an app's identity and capabilities are
/// checked from. Every index entry, blob header and blob length is checked against the SuperBlob.
public struct CodeSignature: Sendable, Equatable {
  /// `CSMAGIC_EMBEDDED_SIGNATURE`
  package static let superBlobMagic: UInt32 = 0xFADE_0CC0
  /// `CSMAGIC_CODEDIRECTORY`
  package static let codeDirectoryMagic: UInt32 = 0xFADE_0C02
  /// `CSMAGIC_REQUIREMENTS`
  package static let requirementsMagic: UInt32 = 0xFADE_0C01
  /// `CSMAGIC_EMBEDDED_ENTITLEMENTS` (an XML property list)
  package static let entitlementsMagic: UInt32 = 0xFADE_7171
  /// `CSMAGIC_EMBEDDED_DER_ENTITLEMENTS`
  package static let derEntitlementsMagic: UInt32 = 0xFADE_7172
  /// `CSMAGIC_BLOBWRAPPER` (the CMS signature)
  package static let blobWrapperMagic: UInt32 = 0xFADE_0B01

  /// One entry of the SuperBlob's index.
  package struct BlobIndex: Sendable, Equatable {
    /// The slot (`CSSLOT_CODEDIRECTORY` 0, `CSSLOT_REQUIREMENTS` 2, `CSSLOT_ENTITLEMENTS` 5,
    /// `CSSLOT_DER_ENTITLEMENTS` 7, `CSSLOT_ALTERNATE_CODEDIRECTORIES` 0x1000..., `CSSLOT_SIGNATURESLOT` 0x10000).
    package var slot: UInt32
    /// The blob's offset from the start of the SuperBlob.
    package var offset: UInt32
    /// The blob's own magic.
    package var magic: UInt32
    /// The blob's own length, header included.
    package var length: UInt32

    /// A short name for the slot (`CodeDirectory`, `Entitlements`, ...).
    package var slotName: String {
      switch slot {
      case 0: "CodeDirectory"
      case 1: "Info"
      case 2: "Requirements"
      case 3: "ResourceDir"
      case 4: "Application"
      case 5: "Entitlements"
      case 7: "DEREntitlements"
      case 0x1000...0x1004: "AlternateCodeDirectory\(slot - 0x1000)"
      case 0x10000: "CMSSignature"
      case 0x10001: "Identification"
      case 0x10002: "Ticket"
      default: "slot-0x\(hexDigits(UInt64(slot)))"
      }
    }
  }

  /// The SuperBlob's `length`, in bytes.
  package var length: UInt32
  /// The index, in stored order.
  package var blobs: [BlobIndex]
  /// The CodeDirectory in slot 0; `nil` when the SuperBlob has none.
  public var codeDirectory: CodeDirectory?
  /// The alternate CodeDirectories (other hash types), in slot order.
  public var alternateCodeDirectories: [CodeDirectory]
  /// The XML entitlements property list exactly as stored (slot 5), without the blob header.
  public var entitlements: String?
  /// The DER-encoded entitlements exactly as stored (slot 7), without the blob header.
  public var derEntitlements: [UInt8]?
  /// True when a CMS signature wrapper is present with content (not ad-hoc).
  public var hasCMSSignature: Bool

  /// Decodes the SuperBlob that `bytes` covers (exactly `LC_CODE_SIGNATURE`'s dataoff/datasize).
  package init(_ bytes: ByteReader) throws(FormatError) {
    var reader = bytes
    reader.endian = .big
    guard reader.count >= 12 else {
      throw .codeSignature("SuperBlob truncated: 12 bytes needed, \(reader.count) in LC_CODE_SIGNATURE's range")
    }
    let magic = try reader.read(UInt32.self)
    guard magic == Self.superBlobMagic else {
      throw .codeSignature("SuperBlob magic 0x\(hexDigits(UInt64(magic), width: 8)) is not 0xfade0cc0")
    }
    length = try reader.read(UInt32.self)
    let count = try reader.read(UInt32.self)
    guard length >= 12, Int(length) <= reader.count else {
      throw .codeSignature("SuperBlob length \(length) outside 12...\(reader.count) (LC_CODE_SIGNATURE datasize)")
    }
    let superBlob = try reader.slice(at: 0, length: Int(length))
    // count is UInt32: 12 + 8 * count fits UInt64.
    let indexEnd = 12 + 8 * UInt64(count)
    guard indexEnd <= UInt64(length) else {
      throw .codeSignature("SuperBlob count \(count) index entries extend past its length \(length)")
    }
    var blobs: [BlobIndex] = []
    blobs.reserveCapacity(Int(count))  // at most (length - 12) / 8, checked above
    var directory: CodeDirectory?
    var alternates: [CodeDirectory] = []
    var entitlements: String?
    var der: [UInt8]?
    var cms = false
    for index in 0..<Int(count) {
      let slot = try reader.read(UInt32.self)
      let offset = try reader.read(UInt32.self)
      guard UInt64(offset) >= indexEnd else {
        throw .codeSignature("blob \(index) offset \(offset) lies inside the SuperBlob header and index (\(indexEnd) bytes)")
      }
      guard UInt64(offset) + 8 <= UInt64(length) else {
        throw .codeSignature("blob \(index) offset \(offset) leaves no room for a blob header in length \(length)")
      }
      let blobMagic = try superBlob.peek(UInt32.self, at: Int(offset))
      let blobLength = try superBlob.peek(UInt32.self, at: Int(offset) + 4)
      guard blobLength >= 8, UInt64(blobLength) <= UInt64(length) - UInt64(offset) else {
        throw .codeSignature("blob \(index) length \(blobLength) at offset \(offset) outside 8...\(length - offset)")
      }
      if blobs.contains(where: { $0.slot == slot }) {
        throw .codeSignature("blob \(index) repeats slot 0x\(hexDigits(UInt64(slot)))")
      }
      let entry = BlobIndex(slot: slot, offset: offset, magic: blobMagic, length: blobLength)
      blobs.append(entry)
      let blob = try superBlob.slice(at: Int(offset), length: Int(blobLength))
      let payloadLength = Int(blobLength) - 8  // blobLength >= 8
      switch slot {
      case 0, 0x1000...0x1004:
        guard blobMagic == Self.codeDirectoryMagic else {
          throw .codeSignature("blob \(index) in slot \(entry.slotName) has magic 0x\(hexDigits(UInt64(blobMagic), width: 8)), "
                               + "not a CodeDirectory (0xfade0c02)")
        }
        let decoded = try CodeDirectory(blob)
        if slot == 0 { directory = decoded } else { alternates.append(decoded) }
      case 5:
        guard blobMagic == Self.entitlementsMagic else {
          throw .codeSignature("blob \(index) in slot Entitlements has magic 0x\(hexDigits(UInt64(blobMagic), width: 8)), "
                               + "not 0xfade7171")
        }
        entitlements = String(decoding: try blob.bytes(at: 8, length: payloadLength), as: UTF8.self)
      case 7:
        guard blobMagic == Self.derEntitlementsMagic else {
          throw .codeSignature("blob \(index) in slot DEREntitlements has magic 0x\(hexDigits(UInt64(blobMagic), width: 8)), "
                               + "not 0xfade7172")
        }
        der = try blob.bytes(at: 8, length: payloadLength)
      case 0x10000:
        cms = blobMagic == Self.blobWrapperMagic && payloadLength > 0
      default:
        break
      }
    }
    self.blobs = blobs
    codeDirectory = directory
    alternateCodeDirectories = alternates
    self.entitlements = entitlements
    derEntitlements = der
    hasCMSSignature = cms
  }

  /// Every CodeDirectory, the primary first.
  public var allCodeDirectories: [CodeDirectory] { (codeDirectory.map { [$0] } ?? []) + alternateCodeDirectories }
}

/// A CodeDirectory blob (`CSMAGIC_CODEDIRECTORY` 0xfade0c02): what was signed and how it is hashed.
public struct CodeDirectory: Sendable, Equatable {
  /// `version` (0x20001 ... 0x20600); later fields exist only from their version on.
  public var version: UInt32
  /// `flags` (`CS_ADHOC` 0x2, `CS_RUNTIME` 0x10000, `CS_LINKER_SIGNED` 0x20000, ...).
  public var flags: UInt32
  /// `hashType` (`CS_HASHTYPE_SHA1` 1, `SHA256` 2, `SHA256_TRUNCATED` 3, `SHA384` 4).
  public var hashType: UInt8
  /// `hashSize`, in bytes.
  public var hashSize: UInt8
  /// `pageSize` as log2 (12 = 4096 bytes per hashed page; 0 = one hash for everything).
  public var pageSizeLog2: UInt8
  /// `platform` (non-zero for platform binaries).
  public var platform: UInt8
  /// `nSpecialSlots`
  public var specialSlotCount: UInt32
  /// `nCodeSlots`
  public var codeSlotCount: UInt32
  /// `codeLimit`, or `codeLimit64` when set (version ≥ 0x20300): the number of bytes the hashes cover.
  public var codeLimit: UInt64
  /// The signing identifier (`identOffset`): the bundle ID, or the file name for ad-hoc linker signatures.
  public var identifier: String
  /// The team identifier (`teamOffset`, version ≥ 0x20200); `nil` when absent (ad-hoc signatures).
  public var teamID: String?
  /// `execSegBase`, `execSegLimit`, `execSegFlags` (version ≥ 0x20400).
  public var executableSegment: (base: UInt64, limit: UInt64, flags: UInt64)?

  /// The hash algorithm's name (`sha256`, ...).
  public var hashTypeName: String {
    switch hashType {
    case 1: "sha1"
    case 2: "sha256"
    case 3: "sha256-truncated"
    case 4: "sha384"
    default: "hashtype-\(hashType)"
    }
  }

  /// The names of the set flags as `codesign -d` prints them (`adhoc`, `runtime`, `linker-signed`, ...).
  public var flagNames: [String] {
    let table: [(UInt32, String)] = [
      (0x1, "host"), (0x2, "adhoc"), (0x4, "get-task-allow"), (0x100, "hard"), (0x200, "kill"),
      (0x400, "expires"), (0x800, "restrict"), (0x1000, "enforcement"), (0x2000, "library-validation"),
      (0x10000, "runtime"), (0x20000, "linker-signed"),
    ]
    var names = table.filter { flags & $0.0 != 0 }.map(\.1)
    let known = table.reduce(UInt32(0)) { $0 | $1.0 }
    if flags & ~known != 0 { names.append("0x" + hexDigits(UInt64(flags & ~known))) }
    return names
  }

  /// Decodes the CodeDirectory `blob` covers (header included, big-endian).
  package init(_ blob: ByteReader) throws(FormatError) {
    var reader = blob
    reader.endian = .big
    guard reader.count >= 44 else {
      throw .codeSignature("CodeDirectory length \(reader.count) is less than its 44-byte header")
    }
    try reader.skip(8)
    version = try reader.read(UInt32.self)
    flags = try reader.read(UInt32.self)
    _ = try reader.read(UInt32.self)  // hashOffset: the hashes themselves are not needed here
    let identOffset = try reader.read(UInt32.self)
    specialSlotCount = try reader.read(UInt32.self)
    codeSlotCount = try reader.read(UInt32.self)
    let limit32 = try reader.read(UInt32.self)
    hashSize = try reader.read(UInt8.self)
    hashType = try reader.read(UInt8.self)
    platform = try reader.read(UInt8.self)
    pageSizeLog2 = try reader.read(UInt8.self)
    let needed = version >= 0x20400 ? 88 : version >= 0x20300 ? 64 : version >= 0x20200 ? 52 : version >= 0x20100 ? 48 : 44
    guard reader.count >= needed else {
      throw .codeSignature("CodeDirectory version 0x\(hexDigits(UInt64(version))) needs \(needed) header bytes, "
                           + "length is \(reader.count)")
    }
    identifier = try Self.string(in: blob, at: identOffset, field: "identOffset")
    teamID = nil
    codeLimit = UInt64(limit32)
    executableSegment = nil
    if version >= 0x20200 {
      let teamOffset = try reader.peek(UInt32.self, at: 48)
      if teamOffset != 0 { teamID = try Self.string(in: blob, at: teamOffset, field: "teamOffset") }
    }
    if version >= 0x20300 {
      let limit64 = try reader.peek(UInt64.self, at: 56)
      if limit64 != 0 { codeLimit = limit64 }
    }
    if version >= 0x20400 {
      executableSegment = (try reader.peek(UInt64.self, at: 64), try reader.peek(UInt64.self, at: 72),
                           try reader.peek(UInt64.self, at: 80))
    }
  }

  static func string(in blob: ByteReader, at offset: UInt32, field: String) throws(FormatError) -> String {
    guard Int(offset) < blob.count else {
      throw .codeSignature("CodeDirectory \(field) \(offset) outside its length \(blob.count)")
    }
    do { return try blob.cString(at: Int(offset)) } catch {
      throw .codeSignature("CodeDirectory \(field) \(offset): string has no NUL before the blob's end")
    }
  }

  /// True when the decoded fields are equal.
  public static func == (lhs: CodeDirectory, rhs: CodeDirectory) -> Bool {
    lhs.version == rhs.version && lhs.flags == rhs.flags && lhs.hashType == rhs.hashType
      && lhs.hashSize == rhs.hashSize && lhs.pageSizeLog2 == rhs.pageSizeLog2 && lhs.platform == rhs.platform
      && lhs.specialSlotCount == rhs.specialSlotCount && lhs.codeSlotCount == rhs.codeSlotCount
      && lhs.codeLimit == rhs.codeLimit && lhs.identifier == rhs.identifier && lhs.teamID == rhs.teamID
      && lhs.executableSegment?.base == rhs.executableSegment?.base
      && lhs.executableSegment?.limit == rhs.executableSegment?.limit
      && lhs.executableSegment?.flags == rhs.executableSegment?.flags
  }
}
