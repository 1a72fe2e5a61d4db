/// One entry of an ELF note segment or section (`ElfN_Nhdr` plus name and descriptor).
public struct ELFNote: Sendable, Equatable {
  /// The owner, without its NUL: `GNU` for build-ids.
  public var name: String
  /// `n_type`: `NT_GNU_BUILD_ID` is 3 for the `GNU` owner.
  public var type: UInt32
  /// The descriptor bytes.
  public var descriptor: [UInt8]
  /// Where the descriptor starts, relative to the start of the note area it was read from.
  package var descriptorOffset: Int

  /// `NT_GNU_BUILD_ID`
  package static let gnuBuildIDType: UInt32 = 3

  /// Decodes every note in `area` (a PT_NOTE segment or SHT_NOTE section), laid out as glibc and
  /// readelf lay them out (see `walk`).
  public static func notes(in area: ByteReader, alignment: Int = 4) throws(FormatError) -> [ELFNote] {
    var result: [ELFNote] = []
    try walk(area, alignment: alignment) { (reader: inout ByteReader, note: NoteLayout) throws(FormatError) in
      let name = try reader.fixedString(at: note.nameStart, width: note.nameSize)
      let descriptor = try reader.readBytes(note.descriptorSize)
      result.append(ELFNote(name: name, type: note.type, descriptor: descriptor, descriptorOffset: note.descriptorStart))
    }
    return result
  }

  /// The GNU build-id note in `area`, or `nil` when there is none.
  /// Walks every note with `notes(in:alignment:)`'s checks and errors (a malformed note after the
  /// build-id still throws), but decodes only the first `GNU` note of type `NT_GNU_BUILD_ID`: no name
  /// strings or descriptor copies for the other notes.
  package static func buildIDNote(in area: ByteReader, alignment: Int = 4) throws(FormatError) -> ELFNote? {
    var found: NoteLayout?
    try walk(area, alignment: alignment) { (reader: inout ByteReader, note: NoteLayout) throws(FormatError) in
      if found == nil, note.type == gnuBuildIDType, try isGNU(reader, at: note.nameStart, width: note.nameSize) {
        found = note
      }
      try reader.skip(note.descriptorSize)
    }
    guard let found else { return nil }
    return ELFNote(name: "GNU", type: gnuBuildIDType,
                   descriptor: try area.bytes(at: found.descriptorStart, length: found.descriptorSize),
                   descriptorOffset: found.descriptorStart)
  }

  /// Where one note's parts lie in its area, checked to be inside it.
  private struct NoteLayout {
    var type: UInt32
    var nameStart: Int
    var nameSize: Int
    var descriptorStart: Int
    var descriptorSize: Int
  }

  /// Walks the notes in `area`: checks each header, name and descriptor against the area, calls `visit`
  /// with the reader at the descriptor (`visit` must move it past the descriptor), then moves to the
  /// next note. The descriptor starts at the first `alignment` boundary after the name, and the next
  /// note at the first boundary after the descriptor (4, or 8 for 8-aligned note segments such as
  /// `.note.gnu.property`), as glibc and readelf lay them out; positions are relative to the area,
  /// which the linker aligns. Every note consumes at least 12 bytes, so the loop is bounded by the
  /// area's size.
  private static func walk(_ area: ByteReader, alignment: Int,
                           _ visit: (inout ByteReader, NoteLayout) throws(FormatError) -> Void) throws(FormatError) {
    let align = alignment == 8 ? 8 : 4
    var reader = area
    while reader.remaining >= 12 {
      let noteStart = reader.offset
      let nameSize = Int(try reader.read(UInt32.self))  // UInt32 -> Int is exact on 64-bit
      let descriptorSize = Int(try reader.read(UInt32.self))
      let type = try reader.read(UInt32.self)
      let nameStart = reader.offset
      guard nameSize <= reader.remaining else {
        throw .elf("note at offset \(noteStart): name size \(nameSize) runs past the note area (\(reader.remaining) bytes left)")
      }
      // nameStart + nameSize <= area.count (checked above), so padding it cannot overflow Int.
      let descriptorStart = min(padded(nameStart + nameSize, align), reader.count)
      try reader.seek(to: descriptorStart)
      guard descriptorSize <= reader.remaining else {
        throw .elf("note at offset \(noteStart): descriptor size \(descriptorSize) runs past the note area (\(reader.remaining) bytes left)")
      }
      try visit(&reader, NoteLayout(type: type, nameStart: nameStart, nameSize: nameSize,
                                    descriptorStart: descriptorStart, descriptorSize: descriptorSize))
      try reader.seek(to: min(padded(reader.offset, align), reader.count))
    }
  }

  /// True when the name field of `width` bytes at `position` reads "GNU" up to its first NUL (as
  /// `fixedString(at:width:)` would decode it), compared in place.
  private static func isGNU(_ reader: ByteReader, at position: Int, width: Int) throws(FormatError) -> Bool {
    guard width >= 3 else { return false }
    let gnu: (UInt8, UInt8, UInt8) = (0x47, 0x4E, 0x55)  // "GNU"
    guard try reader.peek(UInt8.self, at: position) == gnu.0, try reader.peek(UInt8.self, at: position + 1) == gnu.1,
          try reader.peek(UInt8.self, at: position + 2) == gnu.2 else { return false }
    // position + width <= reader.count (checked by the caller), so position + 3 is inside the bytes.
    if width == 3 { return true }
    return try reader.peek(UInt8.self, at: position + 3) == 0
  }

  // Callers pass a position inside the area (<= its count < Int.max - 8), so the sum cannot overflow.
  private static func padded(_ size: Int, _ align: Int) -> Int { (size + align - 1) & ~(align - 1) }
}
