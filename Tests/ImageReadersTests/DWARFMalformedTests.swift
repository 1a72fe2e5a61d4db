import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Hand-made DWARF, each broken in one way, and what the reader must give: the exact error, or the
/// partial answer (LLVM's malformed-object tests in spirit). The unbroken unit must answer exactly what
/// was written.
@Suite struct DWARFMalformedTests {
  // MARK: Building sections

  static func uleb(_ value: UInt64) -> [UInt8] {
    var value = value
    var bytes: [UInt8] = []
    repeat {
      var byte = UInt8(value & 0x7F)
      value >>= 7
      if value != 0 { byte |= 0x80 }
      bytes.append(byte)
    } while value != 0
    return bytes
  }

  static func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    (0..<MemoryLayout<T>.size).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
  }

  /// Sections over copies of the arrays (kept alive by the result).
  static func sections(info: [UInt8], abbrev: [UInt8], line: [UInt8] = [], str: [UInt8] = []) -> DWARFSections {
    var result = DWARFSections(endian: .little)
    func section(_ bytes: [UInt8]) -> DWARFSection {
      let owned = DWARFOwnedBytes(count: bytes.count)
      _ = owned.buffer.initializeMemory(as: UInt8.self, from: bytes)
      return DWARFSection(bytes: UnsafeRawBufferPointer(rebasing: owned.buffer[0..<bytes.count]), owner: owned)
    }
    result.info = section(info)
    result.abbrev = section(abbrev)
    result.line = section(line)
    result.str = section(str)
    return result
  }

  /// A DWARF 4 unit (32-bit, 8-byte addresses, abbreviations at 0) around `dies`.
  static func unit(_ dies: [UInt8], version: UInt16 = 4) -> [UInt8] {
    let body = le(version) + le(UInt32(0)) + [8] + dies
    return le(UInt32(body.count)) + body
  }

  /// Abbreviations: 1 compile unit (children; low_pc addr, high_pc data4, stmt_list sec_offset),
  /// 2 subprogram (children; low_pc addr, high_pc data4, abstract_origin ref4), 3 subprogram (name
  /// string), 4 inlined subroutine (low_pc, high_pc data4, abstract_origin ref4,
  /// call_file data1, call_line data1, call_column data1), 5 subprogram (name strp).
  static let abbreviations: [UInt8] = [
    1, 0x11, 1, 0x11, 0x01, 0x12, 0x06, 0x10, 0x17, 0, 0,
    2, 0x2e, 1, 0x11, 0x01, 0x12, 0x06, 0x31, 0x13, 0, 0,
    3, 0x2e, 0, 0x03, 0x08, 0, 0,
    4, 0x1d, 0, 0x11, 0x01, 0x12, 0x06, 0x31, 0x13, 0x58, 0x0b, 0x59, 0x0b, 0x57, 0x0b, 0, 0,
    5, 0x2e, 0, 0x03, 0x0e, 0, 0,
    0,
  ]

  // Offsets in the unit built by `program`: the header takes 11 bytes.
  static let cuDIE = 11, subprogramDIE = 28, inlinedDIE = 45, outerNameDIE = 66, innerNameDIE = 73

  /// A unit with a compile-unit DIE covering [0x1000, 0x1100), a subprogram there whose name comes from
  /// `outerNameDIE` ("outer"), holding an inlined subroutine [0x1010, 0x1020) named by `innerNameDIE`
  /// ("inner") called from file 1 line 7 column 3; `origin` overrides the subprogram's abstract origin.
  static func program(origin: UInt32 = UInt32(outerNameDIE), innerOrigin: UInt32 = UInt32(innerNameDIE)) -> [UInt8] {
    var dies: [UInt8] = [1] + le(UInt64(0x1000)) + le(UInt32(0x100)) + le(UInt32(0))  // 11..<28
    dies += [2] + le(UInt64(0x1000)) + le(UInt32(0x80)) + le(origin)  // 28..<45
    dies += [4] + le(UInt64(0x1010)) + le(UInt32(0x10)) + le(innerOrigin) + [1, 7, 3]  // 45..<65
    dies += [0]  // 65: end of the subprogram's children
    dies += [3] + Array("outer".utf8) + [0]  // 66..<73
    dies += [3] + Array("inner".utf8) + [0]  // 73..<80
    dies += [0]  // end of the unit's children
    return unit(dies)
  }

  /// A DWARF 4 line table for file "a.c" in directory "/src": rows at 0x1000 (line 10), 0x1010 (line
  /// 20, column 5), end at 0x1100.
  static let lineTable: [UInt8] = {
    var header: [UInt8] = [1, 1, 1, 0xFB, 14, 13]  // min_inst 1, max_ops 1, default_is_stmt, line_base -5, line_range 14, opcode_base 13
    header += [0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]  // standard_opcode_lengths
    header += Array("/src".utf8) + [0, 0]
    header += Array("a.c".utf8) + [0, 1, 0, 0, 0]
    var program: [UInt8] = [0, 9, 2] + le(UInt64(0x1000))  // DW_LNE_set_address
    program += [3] + sleb(9) + [1]  // advance_line 9 -> 10, copy
    program += [2] + uleb(0x10) + [3] + sleb(10) + [5, 5, 1]  // advance_pc 0x10, line 20, column 5, copy
    program += [2] + uleb(0xF0) + [0, 1, 1]  // advance_pc to 0x1100, end_sequence
    let afterLength = le(UInt16(4)) + le(UInt32(header.count)) + header + program
    return le(UInt32(afterLength.count)) + afterLength
  }()

  static func sleb(_ value: Int64) -> [UInt8] {
    var value = value
    var bytes: [UInt8] = []
    while true {
      let byte = UInt8(value & 0x7F)
      value >>= 7
      if (value == 0 && byte & 0x40 == 0) || (value == -1 && byte & 0x40 != 0) { bytes.append(byte); return bytes }
      bytes.append(byte | 0x80)
    }
  }

  static func frames(_ sections: DWARFSections, _ address: UInt64) throws(FormatError) -> [DWARFFrame] {
    try DWARFReader(sections).frames(at: address)
  }

  // MARK: The unbroken unit

  @Test func handMadeUnitAnswers() throws {
    let sections = Self.sections(info: Self.program(), abbrev: Self.abbreviations, line: Self.lineTable)
    #expect(try Self.frames(sections, 0x1014) == [
      DWARFFrame(function: "inner", file: "/src/a.c", line: 20, column: 5, isInlined: true),
      DWARFFrame(function: "outer", file: "/src/a.c", line: 7, column: 3, isInlined: false),
    ])
    #expect(try Self.frames(sections, 0x1004) == [DWARFFrame(function: "outer", file: "/src/a.c", line: 10, column: 0, isInlined: false)])
    // In the unit but outside the subprogram: the line table alone.
    #expect(try Self.frames(sections, 0x10F0) == [DWARFFrame(function: nil, file: "/src/a.c", line: 20, column: 5, isInlined: false)])
    #expect(try Self.frames(sections, 0x1100) == [])
    #expect(try Self.frames(sections, 0x0FFF) == [])
  }

  // MARK: Errors

  static let firstUnitCases: [(String, [UInt8], FormatError)] = [
    // The unit claims 0x40 bytes; 7 follow its length.
    ("unit length past the end", le(UInt32(0x40)) + [4, 0, 0, 0, 0, 0, 8],
     .dwarf(section: ".debug_info", offset: 0, "unit length 64 runs past the section's end (7 bytes left)")),
    ("reserved unit length", le(UInt32(0xFFFF_FFF0)) + [4, 0],
     .dwarf(section: ".debug_info", offset: 0, "reserved unit length 0xfffffff0")),
    ("unit version 7", unit([0], version: 7), .dwarf(section: ".debug_info", offset: 0, "unsupported unit version 7")),
    ("64-bit length cut short", le(UInt32(0xFFFF_FFFF)) + [1, 2, 3], .truncated(at: 4, needed: 8, available: 3)),
  ]

  @Test(arguments: DWARFMalformedTests.firstUnitCases)
  func unreadableFirstUnitThrows(_ name: String, info: [UInt8], expected: FormatError) {
    #expect(throws: expected, "\(name)") { try DWARFReader(Self.sections(info: info, abbrev: Self.abbreviations)) }
  }

  @Test func lyingAbbreviationCodeIsAnErrorAtItsDIE() {
    // The subprogram's DIE uses code 9, which the table does not have.
    var info = Self.program()
    info[Self.subprogramDIE] = 9
    let sections = Self.sections(info: info, abbrev: Self.abbreviations, line: Self.lineTable)
    #expect(throws: FormatError.dwarf(section: ".debug_info", offset: Self.subprogramDIE, "abbreviation code 9 not in the table at 0x0")) {
      try Self.frames(sections, 0x1014)
    }
  }

  @Test func unknownFormIsAnError() {
    // Abbreviation 2's low_pc form becomes 0x7f; the DIE's attributes start after its code byte.
    var abbrev = Self.abbreviations
    abbrev[15] = 0x7F
    let sections = Self.sections(info: Self.program(), abbrev: abbrev, line: Self.lineTable)
    #expect(throws: FormatError.dwarf(section: ".debug_info", offset: Self.subprogramDIE + 1, "unknown form 0x7f")) {
      try Self.frames(sections, 0x1014)
    }
  }

  @Test func endlessLEB128InTheAbbreviationsLeavesTheUnitOut() throws {
    // The table's first attribute is a LEB128 with its continuation bit set to the section's end.
    let abbrev: [UInt8] = [1, 0x11, 1, 0x81, 0x81, 0x81]
    let reader = try DWARFReader(Self.sections(info: Self.program(), abbrev: abbrev))
    #expect(reader.problems == [FormatError.truncated(at: 3, needed: 4, available: 3)])
    #expect(try reader.frames(at: 0x1014) == [])
  }

  @Test func cyclesThroughAbstractOriginEnd() throws {
    // The subprogram names itself as its origin; the inlined one points at the subprogram, which points
    // back: no name anywhere, and the walk ends.
    let selfCycle = Self.sections(info: Self.program(origin: UInt32(Self.subprogramDIE)), abbrev: Self.abbreviations)
    #expect(try Self.frames(selfCycle, 0x1004) == [DWARFFrame(function: nil, file: "", line: 0, column: 0, isInlined: false)])
    let twoCycle = Self.sections(info: Self.program(origin: UInt32(Self.inlinedDIE), innerOrigin: UInt32(Self.subprogramDIE)),
                                 abbrev: Self.abbreviations)
    #expect(try Self.frames(twoCycle, 0x1014) == [
      DWARFFrame(function: nil, file: "", line: 0, column: 0, isInlined: true),
      DWARFFrame(function: nil, file: "", line: 7, column: 3, isInlined: false),
    ])
  }

  @Test func referenceOutsideTheUnitsIsAnError() {
    let sections = Self.sections(info: Self.program(origin: 0x7000), abbrev: Self.abbreviations)
    #expect(throws: FormatError.dwarf(section: ".debug_info", offset: 0x7000, "reference outside every unit's DIEs")) {
      try Self.frames(sections, 0x1004)
    }
  }

  @Test func stringOffsetOutsideDebugStrIsAnError() {
    // Abbreviation 3 (the name DIEs) takes its name as strp at offset 0x100 of a 4-byte .debug_str.
    var abbrev = Self.abbreviations
    abbrev[26] = 0x0e
    var dies: [UInt8] = [1] + Self.le(UInt64(0x1000)) + Self.le(UInt32(0x100)) + Self.le(UInt32(0))  // 11..<28
    dies += [2] + Self.le(UInt64(0x1000)) + Self.le(UInt32(0x80)) + Self.le(UInt32(46)) + [0]  // 28..<45, 45
    dies += [3] + Self.le(UInt32(0x100)) + [0]  // 46
    let sections = Self.sections(info: Self.unit(dies), abbrev: abbrev, str: Array("abc".utf8) + [0])
    #expect(throws: FormatError.outOfRange(start: 0x100, length: 1, limit: 4)) { try Self.frames(sections, 0x1004) }
  }

  static let lineCases: [(String, Int, [UInt8], FormatError)] = [
    // header_length says 0x400: past the unit.
    ("header length past the unit", 6, le(UInt32(0x400)),
     .dwarf(section: ".debug_line", offset: 0, "header length 1024 runs past the unit's end")),
    // line_range 0, then a special opcode (the expected offset is set in the test).
    ("line_range 0", 14, [0], .dwarf(section: ".debug_line", offset: 0, "special opcode with line_range 0")),
    // The first extended opcode's length (9) becomes 0x7f: past the unit.
    ("extended opcode past the unit", 0, [], .dwarf(section: ".debug_line", offset: 0, "extended opcode length 127 runs past the unit's end")),
    ("line table version 9", 4, le(UInt16(9)), .dwarf(section: ".debug_line", offset: 0, "unsupported line table version 9")),
  ]

  @Test(arguments: DWARFMalformedTests.lineCases)
  func brokenLineTableIsAnError(_ name: String, at position: Int, bytes: [UInt8], expected: FormatError) {
    var line = Self.lineTable
    let programStart = 10 + Int(line[6])  // unit_length, version, header_length, then the header
    var expected = expected
    if name == "line_range 0" {
      line[position] = 0
      // A special opcode right after the program's DW_LNE_set_address.
      line.insert(0x20, at: programStart + 11)
      line.replaceSubrange(0..<4, with: Self.le(UInt32(line.count - 4)))
      expected = .dwarf(section: ".debug_line", offset: programStart + 11, "special opcode with line_range 0")
    } else if name == "extended opcode past the unit" {
      line[programStart + 1] = 0x7F
      expected = .dwarf(section: ".debug_line", offset: programStart, "extended opcode length 127 runs past the unit's end")
    } else {
      line.replaceSubrange(position..<position + bytes.count, with: bytes)
    }
    let sections = Self.sections(info: Self.program(), abbrev: Self.abbreviations, line: line)
    #expect(throws: expected, "\(name)") { try Self.frames(sections, 0x1014) }
  }

  static func decompress(_ section: [UInt8], _ decompress: @escaping DWARFDecompressor) throws {
    try section.withUnsafeBytes { raw in
      _ = try DWARFSections.inflate(DWARFSections.compressedELF(ByteReader(raw), name: ".debug_info", is64Bit: true),
                                    decompress: decompress)
    }
  }

  static func uleb128(_ bytes: [UInt8]) throws -> UInt64 {
    try bytes.withUnsafeBytes { raw in
      var reader = ByteReader(raw)
      return try reader.readULEB128()
    }
  }

  @Test func compressedSectionClaimingATerabyteIsRefusedBeforeAllocating() {
    // Elf64_Chdr: ELFCOMPRESS_ZLIB, reserved, size 2^40, alignment 1; then 16 bytes of "stream".
    let section = Self.le(UInt32(1)) + Self.le(UInt32(0)) + Self.le(UInt64(1) << 40) + Self.le(UInt64(1))
      + [UInt8](repeating: 0x78, count: 16)
    var called = false
    let decompress: DWARFDecompressor = { (_, _, _) throws(FormatError) -> Int in called = true; return 0 }
    #expect(throws: FormatError.limitExceeded(".debug_info: uncompressed size", value: 1 << 40, limit: 16_512)) {
      try Self.decompress(section, decompress)
    }
    #expect(!called)
    // A zstd claim of 16 * 2000 bytes passes the check; the decompressor must then produce exactly that.
    let zstd = Self.le(UInt32(2)) + Self.le(UInt32(0)) + Self.le(UInt64(32_000)) + Self.le(UInt64(1)) + [UInt8](repeating: 0, count: 16)
    let short: DWARFDecompressor = { (_, _, output) throws(FormatError) -> Int in output.count - 1 }
    #expect(throws: FormatError.dwarf(section: ".debug_info", offset: 0, "decompressed to 31999 bytes, the header says 32000")) {
      try Self.decompress(zstd, short)
    }
    let unknown = Self.le(UInt32(3)) + Self.le(UInt32(0)) + Self.le(UInt64(10)) + Self.le(UInt64(1))
    #expect(throws: FormatError.dwarf(section: ".debug_info", offset: 0,
                                      "unknown compression type 3 (ELFCOMPRESS_ZLIB 1 and ELFCOMPRESS_ZSTD 2 are known)")) {
      try Self.decompress(unknown, short)
    }
  }

  @Test func leb128BeyondSixtyFourBitsIsAnError() throws {
    let bytes: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]
    #expect(throws: FormatError.leb128TooLong(at: 0)) {
      try Self.uleb128(bytes)
    }
    // The largest value that fits, and zero padding past 64 bits.
    let largest: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
    #expect(try Self.uleb128(largest) == .max)
    let padded: [UInt8] = [0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]
    #expect(try Self.uleb128(padded) == 1)
  }
}
