/// One ELF section header (`ElfN_Shdr`) with its name resolved from the section name table.
///
/// A value: it keeps the header's numbers, not the bytes. Get the contents with
/// `ELFFile.contents(of:in:)` (or slice `fileRange` out of the file yourself); the reader has already
/// checked that `fileRange` lies inside the file for every section that occupies file space
/// (`fileRange` is `nil` for a section that is not loaded and whose header puts it past the end:
/// `contentsInFile`).
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
  /// False for a section `ELFFile` kept though its header puts its contents (partly) past the end of
  /// the file: one without `SHF_ALLOC` (debug sections, `.symtab`, `.comment`), which nothing loads.
  /// Its contents cannot be had (`fileRange` is `nil`, `ELFFile.contents(of:in:)` throws the bounds
  /// error); the rest of the file can.
  public var contentsInFile = true

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
    guard occupiesFile, contentsInFile, let lower = Int(exactly: fileOffset), let length = Int(exactly: size),
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

  /// Decodes the section header at `position` in `table`: one bounds check for the whole entry
  /// (64 bytes, 40 for ELFCLASS32), then its fields; `name` is filled in later from the name table.
  init(_ table: ByteReader, at position: Int, index: Int, is64Bit: Bool) throws(FormatError) {
    let size = is64Bit ? 64 : 40
    guard position >= 0, position <= table.count, size <= table.count - position else {
      throw .truncated(at: max(position, 0), needed: size, available: max(0, table.count - max(position, 0)))
    }
    // The entry's `size` bytes are inside `table`: every field below lies in them, and no offset
    // below can overflow (position <= table.count - size).
    self.index = index
    name = ""
    nameOffset = table.field(UInt32.self, at: position)
    type = table.field(UInt32.self, at: position &+ 4)
    if is64Bit {
      flags = table.field(UInt64.self, at: position &+ 8)
      vmAddress = table.field(UInt64.self, at: position &+ 16)
      fileOffset = table.field(UInt64.self, at: position &+ 24)
      self.size = table.field(UInt64.self, at: position &+ 32)
      link = table.field(UInt32.self, at: position &+ 40)
      info = table.field(UInt32.self, at: position &+ 44)
      alignment = table.field(UInt64.self, at: position &+ 48)
      entrySize = table.field(UInt64.self, at: position &+ 56)
    } else {
      flags = UInt64(table.field(UInt32.self, at: position &+ 8))
      vmAddress = UInt64(table.field(UInt32.self, at: position &+ 12))
      fileOffset = UInt64(table.field(UInt32.self, at: position &+ 16))
      self.size = UInt64(table.field(UInt32.self, at: position &+ 20))
      link = table.field(UInt32.self, at: position &+ 24)
      info = table.field(UInt32.self, at: position &+ 28)
      alignment = UInt64(table.field(UInt32.self, at: position &+ 32))
      entrySize = UInt64(table.field(UInt32.self, at: position &+ 36))
    }
  }
}
