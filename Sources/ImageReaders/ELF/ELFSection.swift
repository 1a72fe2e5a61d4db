/// One ELF section header (`ElfN_Shdr`) with its name resolved from the section name table.
///
/// A value: it keeps the header's numbers, not the bytes. Get the contents with
/// `ELFFile.contents(of:in:)` (or slice `fileRange` out of the file yourself); the reader has already
/// checked that `fileRange` lies inside the file for every section that occupies file space.
public struct ELFSection: Sendable, Equatable {
  /// The section's index in the section header table (`st_shndx` of symbols refers to it).
  public var index: Int
  /// The name from the section name table (`e_shstrndx`); "" when the file has no name table.
  public var name: String
  /// `sh_name`: the name's offset in the section name table.
  public var nameOffset: UInt32
  /// `sh_type`: `SHT_PROGBITS` 1, `SHT_SYMTAB` 2, `SHT_STRTAB` 3, `SHT_NOTE` 7, `SHT_NOBITS` 8, ...
  public var type: UInt32
  /// `sh_flags`: `SHF_WRITE` 1, `SHF_ALLOC` 2, `SHF_EXECINSTR` 4, ...
  public var flags: UInt64
  /// `sh_addr`: the link-time address (0 for sections that are not loaded).
  public var vmAddress: UInt64
  /// `sh_offset`: where the contents start in the file.
  public var fileOffset: UInt64
  /// `sh_size`: the contents' size in bytes (no file space for `SHT_NOBITS`).
  public var size: UInt64
  /// `sh_link`: a related section's index (a symbol table's string table, `.dynamic`'s `.dynstr`).
  public var link: UInt32
  /// `sh_info`: extra information whose meaning depends on the type.
  public var info: UInt32
  /// `sh_addralign`
  public var alignment: UInt64
  /// `sh_entsize`: the size of one entry for table sections (symbols, relocations, dynamic), else 0.
  public var entrySize: UInt64

  /// `SHT_NULL`
  public static let nullType: UInt32 = 0
  /// `SHT_SYMTAB`
  public static let symbolTableType: UInt32 = 2
  /// `SHT_STRTAB`
  public static let stringTableType: UInt32 = 3
  /// `SHT_DYNAMIC`
  public static let dynamicType: UInt32 = 6
  /// `SHT_NOTE`
  public static let noteType: UInt32 = 7
  /// `SHT_NOBITS`
  public static let noBitsType: UInt32 = 8
  /// `SHT_DYNSYM`
  public static let dynamicSymbolTableType: UInt32 = 11
  /// `SHF_ALLOC`
  public static let allocFlag: UInt64 = 2
  /// `SHF_EXECINSTR`
  public static let executableFlag: UInt64 = 4

  /// True when the section takes space in the file (not `SHT_NULL` or `SHT_NOBITS`, size above 0).
  public var occupiesFile: Bool { type != Self.noBitsType && type != Self.nullType && size > 0 }

  /// The contents' byte range in the file, or `nil` for a section without file space. Validated
  /// against the file's size when the file was read, so slicing with it cannot fail for that file.
  public var fileRange: Range<Int>? {
    guard occupiesFile, let lower = Int(exactly: fileOffset), let length = Int(exactly: size),
          length <= Int.max - lower else { return nil }
    return lower..<lower + length  // length <= Int.max - lower, checked above
  }

  /// A section with the given header fields (tests and hand-built tables; files use `ELFFile`).
  public init(index: Int, name: String, nameOffset: UInt32, type: UInt32, flags: UInt64, vmAddress: UInt64,
              fileOffset: UInt64, size: UInt64, link: UInt32, info: UInt32, alignment: UInt64,
              entrySize: UInt64) {
    self.index = index; self.name = name; self.nameOffset = nameOffset; self.type = type
    self.flags = flags; self.vmAddress = vmAddress; self.fileOffset = fileOffset; self.size = size
    self.link = link; self.info = info; self.alignment = alignment; self.entrySize = entrySize
  }

  /// Decodes one section header at the reader's offset; `name` is filled in later from the name table.
  init(_ reader: inout ByteReader, index: Int, is64Bit: Bool) throws(FormatError) {
    self.index = index
    name = ""
    nameOffset = try reader.read(UInt32.self)
    type = try reader.read(UInt32.self)
    flags = try reader.readWord(is64Bit: is64Bit)
    vmAddress = try reader.readWord(is64Bit: is64Bit)
    fileOffset = try reader.readWord(is64Bit: is64Bit)
    size = try reader.readWord(is64Bit: is64Bit)
    link = try reader.read(UInt32.self)
    info = try reader.read(UInt32.self)
    alignment = try reader.readWord(is64Bit: is64Bit)
    entrySize = try reader.readWord(is64Bit: is64Bit)
  }
}
