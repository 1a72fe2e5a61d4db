/// A binary read from bytes: which format it is, decoded. Sniffs the magic number and hands the
/// bytes to the format's reader; the fuzz target and the mutation tests call exactly this.
public enum BinaryFile {
  /// An ELF file (any class, either byte order).
  case elf(ELFFile)
  /// A thin Mach-O file (32 or 64-bit, either byte order).
  case machO(MachOFile)
  /// A universal file (`FAT_MAGIC` or `FAT_MAGIC_64`) and its slices.
  case fat(FatFile)

  /// Decodes `bytes`, throwing `FormatError.notRecognized` for anything that is not ELF or Mach-O.
  public static func parse(_ bytes: ByteReader) throws(FormatError) -> BinaryFile {
    try parse(source: bytes)
  }

  /// Decodes the binary whose bytes `source` fetches: the same values and errors as `parse(_:)` over
  /// the bytes in memory, reading only the ranges the format's reader asks for.
  public static func parse<Source: RandomAccessBytes>(source: Source) throws(FormatError) -> BinaryFile {
    guard source.count >= 4 else { throw .tooShort(count: source.count) }
    let bytes = try source.slice(at: 0, length: 4)
    let little = try bytes.peek(UInt32.self, at: 0)
    var big = bytes
    big.endian = .big
    let bigMagic = try big.peek(UInt32.self, at: 0)
    if little == ELFHeader.magic { return .elf(try ELFFile(source: source)) }
    if MachOFile.isMagic(little) || MachOFile.isMagic(bigMagic) { return .machO(try MachOFile(source: source)) }
    if FatFile.isMagic(bigMagic) { return .fat(try FatFile(source: source)) }
    throw .notRecognized(magic: bigMagic)
  }

  /// Decodes bytes already in memory, with the values and errors of `parse(source:)`.
  public static func parse(_ bytes: [UInt8]) throws(FormatError) -> BinaryFile {
    try ByteReader.reading(bytes) { reader throws(FormatError) in try parse(reader) }
  }
}
