import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Hand-made ELF bytes, each broken in one way, and the exact error the reader must give (LLVM's
/// malformed-object tests in spirit). The unbroken image must read back exactly what was written.
@Suite struct ELFMalformedTests {
  @Test(arguments: [(true, false), (true, true), (false, false), (false, true)])
  func handMadeImageReadsBack(is64Bit: Bool, bigEndian: Bool) throws {
    let image = ELFTestImage(is64Bit: is64Bit, bigEndian: bigEndian)
    guard case .elf(let file) = try BinaryFile.parse(image.bytes) else { Issue.record("not ELF"); return }
    #expect(file.header.is64Bit == is64Bit)
    #expect(file.header.endian == (bigEndian ? .big : .little))
    #expect(file.buildID?.bytes == ELFTestImage.buildID)
    #expect(file.soname == "libsoname.so.2")
    #expect(file.needed == ["libneeded.so.1"])
    #expect(file.interpreter == "/lib/ld-test.so.1")
    #expect(file.kind == .sharedObject)  // an interpreter, but a SONAME too (as glibc's libc.so.6)
    #expect(file.sections.map(\.name) == ["", ".dynstr", ".shstrtab", ".dynamic", ".note.gnu.build-id"])
    #expect(file.programHeaders.map(\.type) == [1, 2, 4, 3])
    #expect(file.textVMRange == 0..<UInt64(image.bytes.count))
  }

  @Test func extendedCountsComeFromSectionZero() throws {
    // PN_XNUM: e_phnum 0xffff, the real count in section 0's sh_info; e_shnum 0, the real count in
    // section 0's sh_size; SHN_XINDEX: e_shstrndx 0xffff, the real index in section 0's sh_link.
    var image = ELFTestImage()
    image.set16(image.phnumOffset, 0xFFFF)
    image.set32(image.sectionField(0, "info"), 4)
    image.set16(image.shnumOffset, 0)
    image.setWord(image.sectionField(0, "size"), 5)
    image.set16(image.shstrndxOffset, 0xFFFF)
    image.set32(image.sectionField(0, "link"), 2)
    guard case .elf(let file) = try BinaryFile.parse(image.bytes) else { Issue.record("not ELF"); return }
    #expect(file.programHeaders.count == 4)
    #expect(file.sections.count == 5)
    #expect(file.sections[3].name == ".dynamic")
    #expect(file.buildID?.bytes == ELFTestImage.buildID)
  }

  static let names = [
    "empty", "three bytes", "text file", "ident only", "bad class", "bad data", "absurd phnum",
    "small phentsize", "shoff past end", "small shentsize", "absurd shnum via section 0", "shstrndx out of range",
    "section past end", "section name past table", "section name unterminated", "note name too long",
    "note descriptor too long", "dynamic past end", "needed offset past strsz", "strtab past end",
    "dynstr unterminated", "load overflows", "interpreter past end", "debuglink without crc",
  ]

  /// The broken bytes and the error for case `name`.
  static func malformed(_ name: String) -> (bytes: [UInt8], error: FormatError) {
    var image = ELFTestImage()
    let size = image.bytes.count
    switch name {
    case "empty":
      return ([], .tooShort(count: 0))
    case "three bytes":
      return ([0x7F, 0x45, 0x4C], .tooShort(count: 3))
    case "text file":
      return (Array("hello, world\n".utf8), .notRecognized(magic: 0x6865_6C6C))
    case "ident only":
      return (Array(image.bytes[0..<16]), .truncated(at: 16, needed: 2, available: 0))
    case "bad class":
      image.bytes[4] = 3
      return (image.bytes, .elf("EI_CLASS 3 is neither ELFCLASS32 nor ELFCLASS64"))
    case "bad data":
      image.bytes[5] = 0
      return (image.bytes, .elf("EI_DATA 0 is neither ELFDATA2LSB nor ELFDATA2MSB"))
    case "absurd phnum":
      image.set16(image.phnumOffset, 0xFFFE)
      return (image.bytes, .fieldOutOfRange("program header table (65534 entries of 56 bytes)", offset: 64,
                                            size: 65534 * 56, limit: size))
    case "small phentsize":
      image.set16(image.phentsizeOffset, 16)
      return (image.bytes, .elf("e_phentsize 16 is smaller than 56, the ELF class's program header"))
    case "shoff past end":
      image.setWord(image.shoffOffset, UInt64(size))
      return (image.bytes, .fieldOutOfRange("section header table (e_shoff)", offset: UInt64(size), size: 64, limit: size))
    case "small shentsize":
      image.set16(image.shoffOffset + 18, 40)  // e_shentsize follows e_shoff, e_flags, e_ehsize, e_phentsize, e_phnum
      return (image.bytes, .elf("e_shentsize 40 is smaller than 64, the ELF class's section header"))
    case "absurd shnum via section 0":
      image.set16(image.shnumOffset, 0)
      image.setWord(image.sectionField(0, "size"), 1 << 60)
      return (image.bytes, .limitExceeded("section count", value: 1 << 60, limit: UInt64(size / 64)))
    case "shstrndx out of range":
      image.set16(image.shstrndxOffset, 9)
      return (image.bytes, .elf("e_shstrndx 9 is not a section (5 sections)"))
    case "section past end":
      image.setWord(image.sectionField(4, "size"), UInt64(size))
      return (image.bytes, .fieldOutOfRange("section 4 contents", offset: UInt64(image.noteOffset), size: UInt64(size),
                                            limit: size))
    case "section name past table":
      image.set32(image.sectionField(3, "name"), 200)
      return (image.bytes, .elf("section 3: sh_name 200 is past the section name table (\(ELFTestImage.sectionNames.count) bytes)"))
    case "section name unterminated":
      // The name table's last byte (the NUL ending ".note.gnu.build-id") becomes 'x'.
      image.bytes[image.sectionNamesOffset + ELFTestImage.sectionNames.count - 1] = 0x78
      return (image.bytes, .unterminatedString(at: 28))
    case "note name too long":
      image.set32(image.noteOffset, 1000)
      return (image.bytes, .elf("note at offset 0: name size 1000 runs past the note area (12 bytes left)"))
    case "note descriptor too long":
      image.set32(image.noteOffset + 4, 9)
      return (image.bytes, .elf("note at offset 0: descriptor size 9 runs past the note area (8 bytes left)"))
    case "dynamic past end":
      image.setWord(image.segmentField(1, "offset"), UInt64(size - 8))
      return (image.bytes, .fieldOutOfRange("PT_DYNAMIC", offset: UInt64(size - 8), size: 80, limit: size))
    case "needed offset past strsz":
      image.setWord(image.dynamicOffset + 8, 40)  // DT_NEEDED's value
      return (image.bytes, .elf("dynamic entry 0: string offset 0x28 is past the dynamic string table (\(ELFTestImage.dynamicStrings.count) bytes)"))
    case "strtab past end":
      image.setWord(image.dynamicOffset + 3 * 16 + 8, UInt64(size))  // DT_STRSZ
      return (image.bytes, .fieldOutOfRange("dynamic string table (DT_STRTAB 0x\(hexDigits(UInt64(image.dynamicStringsOffset))))",
                                            offset: UInt64(image.dynamicStringsOffset), size: UInt64(size), limit: size))
    case "dynstr unterminated":
      // DT_STRSZ ends the table inside "libsoname.so.2": its NUL is outside.
      image.setWord(image.dynamicOffset + 3 * 16 + 8, 20)
      return (image.bytes, .unterminatedString(at: 16))
    case "load overflows":
      image.setWord(image.segmentField(0, "vaddr"), UInt64.max - 10)
      return (image.bytes, .elf("PT_LOAD at 0x\(hexDigits(UInt64.max - 10)) with size 0x\(hexDigits(UInt64(size))) overflows"))
    case "interpreter past end":
      image.setWord(image.segmentField(3, "filesz"), UInt64.max)
      return (image.bytes, .fieldOutOfRange("PT_INTERP", offset: UInt64(image.interpreterOffset), size: UInt64.max, limit: size))
    case "debuglink without crc":
      // Section 4 (the note) becomes .gnu_debuglink: its name is rewritten in place (".gnu_debuglink"
      // fits where ".note.gnu.build-id" was), its type PROGBITS, its contents "x.debug\0" and its size
      // 8 bytes, which leaves no room for the CRC. PT_NOTE becomes PT_NULL so no note is read.
      let name = Array(".gnu_debuglink\0".utf8)
      let nameStart = image.sectionNamesOffset + 28
      image.bytes.replaceSubrange(nameStart..<nameStart + name.count, with: name)
      image.setWord(image.sectionField(4, "size"), 8)
      image.set32(image.sectionField(4, "type"), 1)
      image.set32(image.segmentField(2, "type"), 0)
      image.bytes.replaceSubrange(image.noteOffset..<image.noteOffset + 8, with: Array("x.debug\0".utf8))
      let patched = image
      return (patched.bytes, .elf("section 4 (.gnu_debuglink): no room for the CRC after \"x.debug\""))
    default:
      return ([], .tooShort(count: -1))
    }
  }

  @Test(arguments: names)
  func rejects(_ name: String) {
    let (bytes, expected) = Self.malformed(name)
    #expect(throws: expected) { try BinaryFile.parse(bytes) }
    if case .failure(let error) = Result(catching: { try BinaryFile.parse(bytes) }) {
      #expect(!"\(error)".isEmpty)
    }
  }
}

extension ELFMalformedTests {
  static func decode(_ bytes: [UInt8]) throws -> ELFFile {
    guard case .elf(let file) = try BinaryFile.parse(bytes) else { throw TestSupportError("not ELF") }
    return file
  }

  @Test func stringTableFallsBackToTheDynstrSection() throws {
    // DT_STRTAB names an address no PT_LOAD covers: the strings come from .dynamic's sh_link (.dynstr).
    var image = ELFTestImage()
    image.setWord(image.dynamicOffset + 2 * 16 + 8, 0x7000_0000)
    let file = try Self.decode(image.bytes)
    #expect(file.needed == ["libneeded.so.1"])
    #expect(file.soname == "libsoname.so.2")
  }

  @Test func dynamicArrayFallsBackToTheDynamicSection() throws {
    // No PT_DYNAMIC (it becomes PT_NULL): the .dynamic section is read instead.
    var image = ELFTestImage()
    image.set32(image.segmentField(1, "type"), 0)
    let file = try Self.decode(image.bytes)
    #expect(file.needed == ["libneeded.so.1"])
    #expect(file.soname == "libsoname.so.2")
  }

  @Test func buildIDFallsBackToTheNoteSection() throws {
    // Without PT_NOTE the .note.gnu.build-id section gives the build-id.
    var noSegment = ELFTestImage()
    noSegment.set32(noSegment.segmentField(2, "type"), 0)
    #expect(try Self.decode(noSegment.bytes).buildID?.bytes == ELFTestImage.buildID)

    // A PT_NOTE whose offset points at something else (as in separate debug files) is not fatal
    // when the section still holds the note.
    var stale = ELFTestImage()
    stale.setWord(stale.segmentField(2, "offset"), 0)
    #expect(try Self.decode(stale.bytes).buildID?.bytes == ELFTestImage.buildID)

    // With neither a good segment nor a section, the segment's error stands.
    stale.set32(stale.sectionField(4, "type"), 1)  // the note section becomes PROGBITS
    #expect(throws: FormatError.elf("note at offset 0: name size 1179403647 runs past the note area (12 bytes left)")) {
      try Self.decode(stale.bytes)
    }
  }

  @Test func noDynamicInformationInSeparateDebugFiles() throws {
    // A .dynamic section of type SHT_NOBITS (objcopy --only-keep-debug) means no dynamic array.
    var image = ELFTestImage()
    image.set32(image.sectionField(3, "type"), 8)
    let file = try Self.decode(image.bytes)
    #expect(file.needed.isEmpty && file.soname == nil)
  }
}

extension ELFMalformedTests {
  @Test func cutAwaySectionTableMeansNoSections() throws {
    // sstrip-style: e_shoff left behind, e_shnum and e_shentsize 0. The segments still give everything.
    var image = ELFTestImage()
    image.set16(image.shnumOffset, 0)
    image.set16(image.shoffOffset + 18, 0)  // e_shentsize
    image.set16(image.shstrndxOffset, 0)
    let file = try Self.decode(image.bytes)
    #expect(file.sections.isEmpty)
    #expect(file.buildID?.bytes == ELFTestImage.buildID)
    #expect(file.needed == ["libneeded.so.1"])
  }
}
