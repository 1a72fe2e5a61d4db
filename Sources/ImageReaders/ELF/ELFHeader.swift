/// The ELF file header (`ElfN_Ehdr`), decoded field by field.
public struct ELFHeader: Sendable, Equatable {
  /// `ELFCLASS64` when true, `ELFCLASS32` otherwise.
  public var is64Bit: Bool
  /// `ELFDATA2LSB` (little) or `ELFDATA2MSB` (big).
  public var endian: ByteReader.Endian
  /// `e_ident[EI_OSABI]`
  public var osABI: UInt8
  /// `e_type`: `ET_REL` 1, `ET_EXEC` 2, `ET_DYN` 3, `ET_CORE` 4.
  public var type: UInt16
  /// `e_machine`, e.g. `EM_X86_64` 62, `EM_AARCH64` 183.
  public var machine: UInt16
  /// `e_entry`
  public var entry: UInt64
  /// `e_phoff`
  package var programHeaderOffset: UInt64
  /// `e_shoff`
  package var sectionHeaderOffset: UInt64
  /// `e_flags`
  public var flags: UInt32
  /// `e_ehsize`
  package var headerSize: UInt16
  /// `e_phentsize`
  package var programHeaderEntrySize: UInt16
  /// `e_phnum` (`PN_XNUM` is resolved by the file reader from section 0).
  package var programHeaderCount: UInt16
  /// `e_shentsize`
  package var sectionHeaderEntrySize: UInt16
  /// `e_shnum`
  package var sectionHeaderCount: UInt16
  /// `e_shstrndx`
  package var sectionNameTableIndex: UInt16

  /// `\x7fELF` read as a little-endian `UInt32`.
  package static let magic: UInt32 = 0x464C_457F

  /// Decodes the header at the start of `bytes`.
  package init(_ bytes: ByteReader) throws(FormatError) {
    var reader = bytes
    try reader.seek(to: 0)
    // e_ident: read in place (readBytes(16)'s check and error, without copying it into an array).
    guard reader.count >= 16 else { throw .outOfRange(start: 0, length: 16, limit: reader.count) }
    reader.endian = .little  // the magic's bytes in file order, as `notRecognized` reports them
    let magic = reader.field(UInt32.self, at: 0)  // 16 bytes are present, checked above
    guard magic == Self.magic else { throw .notRecognized(magic: magic) }
    let elfClass = reader.field(UInt8.self, at: 4), data = reader.field(UInt8.self, at: 5)
    switch elfClass {
    case 1: is64Bit = false
    case 2: is64Bit = true
    default: throw .elf("EI_CLASS \(elfClass) is neither ELFCLASS32 nor ELFCLASS64")
    }
    switch data {
    case 1: endian = .little
    case 2: endian = .big
    default: throw .elf("EI_DATA \(data) is neither ELFDATA2LSB nor ELFDATA2MSB")
    }
    osABI = reader.field(UInt8.self, at: 7)
    try reader.skip(16)
    reader.endian = endian
    type = try reader.read(UInt16.self)
    machine = try reader.read(UInt16.self)
    _ = try reader.read(UInt32.self)  // e_version
    entry = try reader.readWord(is64Bit: is64Bit)
    programHeaderOffset = try reader.readWord(is64Bit: is64Bit)
    sectionHeaderOffset = try reader.readWord(is64Bit: is64Bit)
    flags = try reader.read(UInt32.self)
    headerSize = try reader.read(UInt16.self)
    programHeaderEntrySize = try reader.read(UInt16.self)
    programHeaderCount = try reader.read(UInt16.self)
    sectionHeaderEntrySize = try reader.read(UInt16.self)
    sectionHeaderCount = try reader.read(UInt16.self)
    sectionNameTableIndex = try reader.read(UInt16.self)
  }

  /// The size of one program header for this class.
  package var expectedProgramHeaderSize: Int { is64Bit ? 56 : 32 }
  /// The size of one section header for this class.
  var expectedSectionHeaderSize: Int { is64Bit ? 64 : 40 }
}

/// The architecture name crash tooling uses for an ELF `e_machine` (`x86_64`, `arm64`, `i386`, ...).
/// With `endian`, the names that differ by byte order say so as LLVM's triples do (`ppc64le`,
/// `mipsel`, `mips64el`, `aarch64_be`, `armeb`); without it they are the plain names.
package func elfArchitectureName(machine: UInt16, is64Bit: Bool, flags: UInt32 = 0,
                                endian: ByteReader.Endian? = nil) -> String {
  switch (machine, endian) {
  case (8, .little?): return is64Bit ? "mips64el" : "mipsel"
  case (21, .little?): return "ppc64le"
  case (20, .little?): return "ppcle"
  case (183, .big?): return "aarch64_be"
  case (40, .big?): return "armeb"
  default: break
  }
  return switch machine {
  case 3: "i386"
  case 62: "x86_64"
  case 183: "arm64"
  case 40: "arm"
  case 8: is64Bit ? "mips64" : "mips"
  case 20: "ppc"
  case 21: "ppc64"
  case 22: is64Bit ? "s390x" : "s390"
  case 243: is64Bit ? "riscv64" : "riscv32"
  case 258: "loongarch64"
  case 2: is64Bit ? "sparc64" : "sparc"
  case 43: "sparcv9"
  default: "elf-machine-\(machine)"
  }
}
