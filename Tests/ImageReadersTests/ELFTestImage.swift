/// A hand-made, minimal but complete ELF file (either class, either byte order) for the malformed-input
/// table: header, PT_LOAD/PT_DYNAMIC/PT_NOTE/PT_INTERP, a build-id note, an interpreter, `.dynstr`,
/// `.dynamic` (NEEDED, SONAME, STRTAB, STRSZ), `.shstrtab` and five section headers. The offsets of
/// every part are kept so a test can break exactly one field.
struct ELFTestImage {
  var is64Bit: Bool
  var bigEndian: Bool
  var bytes: [UInt8] = []

  // Where each part starts.
  var programHeaderOffset = 0
  var noteOffset = 0
  var interpreterOffset = 0
  var dynamicStringsOffset = 0
  var dynamicOffset = 0
  var sectionNamesOffset = 0
  var sectionHeaderOffset = 0

  static let buildID: [UInt8] = [0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04]
  static let dynamicStrings: [UInt8] = Array("\0libneeded.so.1\0libsoname.so.2\0".utf8)
  static let sectionNames: [UInt8] = Array("\0.dynstr\0.shstrtab\0.dynamic\0.note.gnu.build-id\0".utf8)
  static let interpreter: [UInt8] = Array("/lib/ld-test.so.1\0".utf8)

  var wordSize: Int { is64Bit ? 8 : 4 }
  var headerSize: Int { is64Bit ? 64 : 52 }
  var programHeaderSize: Int { is64Bit ? 56 : 32 }
  var sectionHeaderSize: Int { is64Bit ? 64 : 40 }
  var dynamicEntrySize: Int { is64Bit ? 16 : 8 }

  /// `strings` is the dynamic string table; DT_NEEDED and DT_SONAME name its offsets `neededOffset`
  /// and `sonameOffset` (the defaults: `dynamicStrings`, "libneeded.so.1", "libsoname.so.2").
  init(is64Bit: Bool = true, bigEndian: Bool = false, strings: [UInt8] = ELFTestImage.dynamicStrings,
       neededOffset: Int = 1, sonameOffset: Int = 16) {
    self.is64Bit = is64Bit
    self.bigEndian = bigEndian
    programHeaderOffset = headerSize
    noteOffset = programHeaderOffset + 4 * programHeaderSize
    interpreterOffset = noteOffset + 12 + 4 + Self.buildID.count
    dynamicStringsOffset = align(interpreterOffset + Self.interpreter.count, 8)
    dynamicOffset = align(dynamicStringsOffset + strings.count, 8)
    sectionNamesOffset = dynamicOffset + 5 * dynamicEntrySize
    sectionHeaderOffset = align(sectionNamesOffset + Self.sectionNames.count, 8)
    let total = sectionHeaderOffset + 5 * sectionHeaderSize
    bytes = [UInt8](repeating: 0, count: total)

    // e_ident, then the header fields.
    bytes.replaceSubrange(0..<8, with: [0x7F, 0x45, 0x4C, 0x46, is64Bit ? 2 : 1, bigEndian ? 2 : 1, 1, 0])
    var at = 16
    put16(&at, 3)                       // e_type ET_DYN
    put16(&at, 62)                      // e_machine EM_X86_64
    put32(&at, 1)                       // e_version
    putWord(&at, 0x100)                 // e_entry
    putWord(&at, UInt64(programHeaderOffset))
    putWord(&at, UInt64(sectionHeaderOffset))
    put32(&at, 0)                       // e_flags
    put16(&at, UInt16(headerSize))
    put16(&at, UInt16(programHeaderSize))
    put16(&at, 4)                       // e_phnum
    put16(&at, UInt16(sectionHeaderSize))
    put16(&at, 5)                       // e_shnum
    put16(&at, 2)                       // e_shstrndx

    // Program headers: LOAD (R+X, the whole file), DYNAMIC, NOTE, INTERP.
    at = programHeaderOffset
    putSegment(&at, type: 1, flags: 5, offset: 0, size: total, alignment: 0x1000)
    putSegment(&at, type: 2, flags: 6, offset: dynamicOffset, size: 5 * dynamicEntrySize, alignment: 8)
    putSegment(&at, type: 4, flags: 4, offset: noteOffset, size: 12 + 4 + Self.buildID.count, alignment: 4)
    putSegment(&at, type: 3, flags: 4, offset: interpreterOffset, size: Self.interpreter.count, alignment: 1)

    // The build-id note, the interpreter and the string tables.
    at = noteOffset
    put32(&at, 4)
    put32(&at, UInt32(Self.buildID.count))
    put32(&at, 3)
    bytes.replaceSubrange(at..<at + 4, with: Array("GNU\0".utf8))
    bytes.replaceSubrange(at + 4..<at + 4 + Self.buildID.count, with: Self.buildID)
    bytes.replaceSubrange(interpreterOffset..<interpreterOffset + Self.interpreter.count, with: Self.interpreter)
    bytes.replaceSubrange(dynamicStringsOffset..<dynamicStringsOffset + strings.count, with: strings)
    bytes.replaceSubrange(sectionNamesOffset..<sectionNamesOffset + Self.sectionNames.count, with: Self.sectionNames)

    // The dynamic array: NEEDED libneeded.so.1, SONAME libsoname.so.2, STRTAB, STRSZ, NULL.
    at = dynamicOffset
    for (tag, value) in [(1, neededOffset), (14, sonameOffset), (5, dynamicStringsOffset), (10, strings.count), (0, 0)] {
      putWord(&at, UInt64(tag))
      putWord(&at, UInt64(value))
    }

    // Sections: null, .dynstr, .shstrtab, .dynamic (linked to .dynstr), .note.gnu.build-id.
    at = sectionHeaderOffset + sectionHeaderSize
    putSection(&at, name: 1, type: 3, offset: dynamicStringsOffset, size: strings.count, link: 0)
    putSection(&at, name: 9, type: 3, offset: sectionNamesOffset, size: Self.sectionNames.count, link: 0)
    putSection(&at, name: 19, type: 6, offset: dynamicOffset, size: 5 * dynamicEntrySize, link: 1)
    putSection(&at, name: 28, type: 7, offset: noteOffset, size: 12 + 4 + Self.buildID.count, link: 0)
  }

  /// Where field `field` of program header `index` is (64-bit layout offsets; use `segmentField`).
  func segmentField(_ index: Int, _ name: String) -> Int {
    let fields64 = ["type": 0, "flags": 4, "offset": 8, "vaddr": 16, "filesz": 32, "memsz": 40, "align": 48]
    let fields32 = ["type": 0, "offset": 4, "vaddr": 8, "filesz": 16, "memsz": 20, "flags": 24, "align": 28]
    return programHeaderOffset + index * programHeaderSize + (is64Bit ? fields64 : fields32)[name]!
  }

  /// Where field `name` of section header `index` is.
  func sectionField(_ index: Int, _ name: String) -> Int {
    let fields64 = ["name": 0, "type": 4, "offset": 24, "size": 32, "link": 40, "info": 44]
    let fields32 = ["name": 0, "type": 4, "offset": 16, "size": 20, "link": 24, "info": 28]
    return sectionHeaderOffset + index * sectionHeaderSize + (is64Bit ? fields64 : fields32)[name]!
  }

  /// Offsets of header fields.
  var phnumOffset: Int { is64Bit ? 56 : 44 }
  var phentsizeOffset: Int { is64Bit ? 54 : 42 }
  var shoffOffset: Int { is64Bit ? 40 : 32 }
  var shnumOffset: Int { is64Bit ? 60 : 48 }
  var shstrndxOffset: Int { is64Bit ? 62 : 50 }

  mutating func set16(_ offset: Int, _ value: UInt16) { var at = offset; put16(&at, value) }
  mutating func set32(_ offset: Int, _ value: UInt32) { var at = offset; put32(&at, value) }
  mutating func setWord(_ offset: Int, _ value: UInt64) { var at = offset; putWord(&at, value) }

  private mutating func put(_ at: inout Int, _ value: UInt64, size: Int) {
    for index in 0..<size {
      let shift = bigEndian ? (size - 1 - index) * 8 : index * 8
      bytes[at + index] = UInt8(truncatingIfNeeded: value >> UInt64(shift))
    }
    at += size
  }
  private mutating func put16(_ at: inout Int, _ value: UInt16) { put(&at, UInt64(value), size: 2) }
  private mutating func put32(_ at: inout Int, _ value: UInt32) { put(&at, UInt64(value), size: 4) }
  private mutating func putWord(_ at: inout Int, _ value: UInt64) { put(&at, value, size: wordSize) }

  private mutating func putSegment(_ at: inout Int, type: UInt32, flags: UInt32, offset: Int, size: Int, alignment: Int) {
    put32(&at, type)
    if is64Bit { put32(&at, flags) }
    putWord(&at, UInt64(offset))    // p_offset
    putWord(&at, UInt64(offset))    // p_vaddr: identity-mapped
    putWord(&at, UInt64(offset))    // p_paddr
    putWord(&at, UInt64(size))      // p_filesz
    putWord(&at, UInt64(size))      // p_memsz
    if !is64Bit { put32(&at, flags) }
    putWord(&at, UInt64(alignment))
  }

  private mutating func putSection(_ at: inout Int, name: UInt32, type: UInt32, offset: Int, size: Int, link: UInt32) {
    put32(&at, name)
    put32(&at, type)
    putWord(&at, 2)                          // sh_flags SHF_ALLOC
    putWord(&at, UInt64(offset))             // sh_addr: identity-mapped
    putWord(&at, UInt64(offset))
    putWord(&at, UInt64(size))
    put32(&at, link)
    put32(&at, 0)
    putWord(&at, 1)                          // sh_addralign
    putWord(&at, type == 6 ? UInt64(dynamicEntrySize) : 0)
  }

  private func align(_ value: Int, _ alignment: Int) -> Int { (value + alignment - 1) / alignment * alignment }
}
