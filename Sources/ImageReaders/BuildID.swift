/// A binary's identity: an ELF GNU build-id (usually 20 bytes) or a Mach-O `LC_UUID` (16 bytes).
///
/// Three printed forms are in use and all come from the same bytes:
/// - `hex`: every byte, lowercase, as `readelf -n`, `eu-unstrip` and debuginfod write it.
/// - `uuid`: the first 16 bytes in order as a dashed uppercase UUID (zero-padded when shorter), as
///   Apple tools write `LC_UUID` and as crash reporters show an ELF image's identity.
/// - `debugID`: Breakpad's and Sentry's form: the same 16 bytes with the first three UUID fields
///   byte-swapped (4, 2 and 2 bytes), because Breakpad read them as little-endian integers.
public struct BuildID: Hashable, Sendable, CustomStringConvertible {
  /// The identity bytes exactly as stored in the note or load command.
  public let bytes: [UInt8]

  /// The identity `bytes`, as stored.
  public init(_ bytes: [UInt8]) { self.bytes = bytes }

  /// Every byte as lowercase hex, no separators.
  public var hex: String { HexText.bytes(bytes) }

  /// The first 16 bytes (zero-padded), the part a UUID form carries.
  package var uuidBytes: [UInt8] {
    bytes.count >= 16 ? Array(bytes.prefix(16)) : bytes + [UInt8](repeating: 0, count: 16 - bytes.count)
  }

  /// The first 16 bytes as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX`, uppercase.
  public var uuid: String { HexText.uuid(bytes) }

  /// The first 16 bytes as 32 lowercase hex digits, as Apple's legacy "Binary Images" lines write UUIDs.
  package var compactUUID: String { bytes.count >= 16 ? HexText.bytes(bytes.prefix(16)) : HexText.bytes(uuidBytes) }

  /// Breakpad/Sentry debug-id: the UUID with its first three fields byte-swapped, uppercase and dashed.
  package var debugID: String { HexText.uuid(Self.swappingGUIDFields(uuidBytes)) }

  /// Breakpad's debug identifier as `dump_syms` writes it on a `MODULE` line and `minidump-stackwalk`
  /// as `debug_id`: `debugID`'s 32 hex digits without dashes, then `age` in hex without leading zeros
  /// (an ELF build-id's age is always 0, so 33 characters).
  package func breakpadDebugID(age: UInt32 = 0) -> String {
    // By UTF-8 byte (the text is ASCII): a Character walk cost more than the rest of a module's reading.
    String(decoding: debugID.utf8.filter { $0 != UInt8(ascii: "-") }, as: UTF8.self) + hexDigits(UInt64(age))  // the age in lowercase, as Breakpad's processor prints it (%x)
  }

  /// `bytes` (16 of them, zero-padded) with the first three GUID fields reversed: a GUID stored as
  /// little-endian `data1`, `data2`, `data3` (a minidump's, a PDB's) turned into the order it is printed
  /// in, and back.
  package static func swappingGUIDFields(_ bytes: [UInt8]) -> [UInt8] {
    var swapped = bytes.count >= 16 ? Array(bytes.prefix(16)) : bytes + [UInt8](repeating: 0, count: 16 - bytes.count)
    swapped[0..<4].reverse()
    swapped[4..<6].reverse()
    swapped[6..<8].reverse()
    return swapped
  }

  /// The bytes in lowercase hex (`hex`).
  public var description: String { hex }
}
