/// One entry of an ELF note segment or section (`ElfN_Nhdr` plus name and descriptor).
public struct ELFNote: Sendable, Equatable {
  /// The owner, without its NUL: `GNU` for build-ids.
  public var name: String
  /// `n_type`: `NT_GNU_BUILD_ID` is 3 for the `GNU` owner.
  public var type: UInt32
  /// The descriptor bytes.
  public var descriptor: [UInt8]
  /// Where the descriptor starts, relative to the start of the note area it was read from.
  public var descriptorOffset: Int

  /// `NT_GNU_BUILD_ID`
  public static let gnuBuildIDType: UInt32 = 3

  /// Decodes every note in `area` (a PT_NOTE segment or SHT_NOTE section). Name and descriptor are
  /// padded to `alignment` (4, or 8 for 8-aligned note segments). The loop ends when the area does,
  /// and every note consumes at least 12 bytes, so it is bounded by the area's size.
  public static func notes(in area: ByteReader, alignment: Int = 4) throws(FormatError) -> [ELFNote] {
    let align = alignment == 8 ? 8 : 4
    var reader = area
    var result: [ELFNote] = []
    while reader.remaining >= 12 {
      let nameSize = Int(try reader.read(UInt32.self))  // UInt32 -> Int is exact on 64-bit
      let descriptorSize = Int(try reader.read(UInt32.self))
      let type = try reader.read(UInt32.self)
      let nameStart = reader.offset
      guard nameSize <= reader.remaining else {
        throw .elf("note name size \(nameSize) at offset \(nameStart) runs past the note area (\(reader.remaining) left)")
      }
      let name = try reader.fixedString(at: nameStart, width: nameSize)
      try reader.skip(min(padded(nameSize, align), reader.remaining))
      let descriptorStart = reader.offset
      guard descriptorSize <= reader.remaining else {
        throw .elf("note descriptor size \(descriptorSize) at offset \(descriptorStart) runs past the note area (\(reader.remaining) left)")
      }
      let descriptor = try reader.readBytes(descriptorSize)
      try reader.skip(min(padded(descriptorSize, align) - descriptorSize, reader.remaining))
      result.append(ELFNote(name: name, type: type, descriptor: descriptor, descriptorOffset: descriptorStart))
    }
    return result
  }

  /// The GNU build-id note in `area`, or `nil` when there is none.
  public static func buildIDNote(in area: ByteReader, alignment: Int = 4) throws(FormatError) -> ELFNote? {
    try notes(in: area, alignment: alignment).first { $0.name == "GNU" && $0.type == gnuBuildIDType }
  }

  // size < 2^32 on every caller, so the sum cannot overflow Int.
  private static func padded(_ size: Int, _ align: Int) -> Int { (size + align - 1) & ~(align - 1) }
}
