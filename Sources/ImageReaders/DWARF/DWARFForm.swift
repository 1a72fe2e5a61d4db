/// DWARF attribute forms (`DW_FORM_*`): their codes, how many bytes each takes, and the decoders the
/// unit and line readers share.
enum DWARFForm {
  static let addr: UInt64 = 0x01, block2: UInt64 = 0x03, block4: UInt64 = 0x04, data2: UInt64 = 0x05
  static let data4: UInt64 = 0x06, data8: UInt64 = 0x07, string: UInt64 = 0x08, block: UInt64 = 0x09
  static let block1: UInt64 = 0x0a, data1: UInt64 = 0x0b, flag: UInt64 = 0x0c, sdata: UInt64 = 0x0d
  static let strp: UInt64 = 0x0e, udata: UInt64 = 0x0f, refAddr: UInt64 = 0x10, ref1: UInt64 = 0x11
  static let ref2: UInt64 = 0x12, ref4: UInt64 = 0x13, ref8: UInt64 = 0x14, refUdata: UInt64 = 0x15
  static let indirect: UInt64 = 0x16, secOffset: UInt64 = 0x17, exprloc: UInt64 = 0x18
  static let flagPresent: UInt64 = 0x19, strx: UInt64 = 0x1a, addrx: UInt64 = 0x1b, refSup4: UInt64 = 0x1c
  static let strpSup: UInt64 = 0x1d, data16: UInt64 = 0x1e, lineStrp: UInt64 = 0x1f, refSig8: UInt64 = 0x20
  static let implicitConst: UInt64 = 0x21, loclistx: UInt64 = 0x22, rnglistx: UInt64 = 0x23
  static let refSup8: UInt64 = 0x24, strx1: UInt64 = 0x25, strx2: UInt64 = 0x26, strx3: UInt64 = 0x27
  static let strx4: UInt64 = 0x28, addrx1: UInt64 = 0x29, addrx2: UInt64 = 0x2a, addrx3: UInt64 = 0x2b
  static let addrx4: UInt64 = 0x2c
  static let gnuAddrIndex: UInt64 = 0x1f01, gnuStrIndex: UInt64 = 0x1f02
  static let gnuRefAlt: UInt64 = 0x1f20, gnuStrpAlt: UInt64 = 0x1f21

  /// The size of a value of `form` when it does not depend on the bytes (0 for `flag_present` and
  /// `implicit_const`), `nil` when it does (LEB128, strings, blocks, `indirect`) or the form is unknown.
  static func fixedSize(_ form: UInt64, addressSize: Int, offsetSize: Int, version: UInt16) -> Int? {
    switch form {
    case addr: addressSize
    case data1, ref1, flag, strx1, addrx1: 1
    case data2, ref2, strx2, addrx2: 2
    case strx3, addrx3: 3
    case data4, ref4, refSup4, strx4, addrx4: 4
    case data8, ref8, refSig8, refSup8: 8
    case data16: 16
    case strp, secOffset, lineStrp, strpSup, gnuRefAlt, gnuStrpAlt: offsetSize
    case refAddr: version <= 2 ? addressSize : offsetSize
    case flagPresent, implicitConst: 0
    default: nil
    }
  }

  /// Skips one value of `form`. Unknown forms are an error: nothing after them can be found.
  @inline(__always)
  static func skip(_ reader: inout ByteReader, form: UInt64, addressSize: Int, offsetSize: Int,
                   version: UInt16) throws(FormatError) {
    if let size = fixedSize(form, addressSize: addressSize, offsetSize: offsetSize, version: version) {
      try reader.skip(size)
      return
    }
    try skipVariable(&reader, form: form, addressSize: addressSize, offsetSize: offsetSize, version: version)
  }

  static func skipVariable(_ reader: inout ByteReader, form: UInt64, addressSize: Int, offsetSize: Int,
                           version: UInt16) throws(FormatError) {
    switch form {
    case sdata, udata, refUdata, strx, addrx, loclistx, rnglistx, gnuAddrIndex, gnuStrIndex:
      try reader.skipLEB128()
    case string: try reader.skipCString()
    case block, exprloc: try reader.skip(try length(try reader.readULEB128(), reader))
    case block1: try reader.skip(Int(try reader.read(UInt8.self)))
    case block2: try reader.skip(Int(try reader.read(UInt16.self)))
    case block4: try reader.skip(Int(try reader.read(UInt32.self)))  // UInt32 -> Int is exact on 64-bit
    case indirect:
      let actual = try reader.readULEB128()
      // DW_FORM_indirect naming itself again is legal but pointless: one level is all we follow.
      guard actual != indirect, actual != implicitConst else {
        throw .dwarf(section: ".debug_info", offset: reader.offset, "DW_FORM_indirect to form 0x\(hexDigits(actual))")
      }
      try skip(&reader, form: actual, addressSize: addressSize, offsetSize: offsetSize, version: version)
    default:
      throw .dwarf(section: ".debug_info", offset: reader.offset, "unknown form 0x\(hexDigits(form))")
    }
  }

  /// A unit's initial length (`.debug_info`, `.debug_line`, `.debug_aranges`): 32 bits, or 0xffffffff
  /// then 64 bits for 64-bit DWARF. Returns the unit's size after the length, checked to fit in what is
  /// left, and the offset size (4 or 8) its fields use.
  static func unitLength(_ reader: inout ByteReader, section: String, offset: Int) throws(FormatError)
    -> (count: Int, offsetSize: Int) {
    var length = UInt64(try reader.read(UInt32.self))
    var offsetSize = 4
    if length == 0xFFFF_FFFF {
      length = try reader.read(UInt64.self)
      offsetSize = 8
    } else if length >= 0xFFFF_FFF0 {
      throw .dwarf(section: section, offset: offset, "reserved unit length 0x\(hexDigits(length))")
    }
    guard let count = Int(exactly: length), count <= reader.remaining else {
      throw .dwarf(section: section, offset: offset,
                   "unit length \(length) runs past the section's end (\(reader.remaining) bytes left)")
    }
    return (count, offsetSize)
  }

  /// A block length that fits in what is left.
  private static func length(_ value: UInt64, _ reader: ByteReader) throws(FormatError) -> Int {
    guard let count = Int(exactly: value), count <= reader.remaining else {
      throw .truncated(at: reader.offset, needed: Int(clamping: value), available: reader.remaining)
    }
    return count
  }

  /// An offset-sized section offset (`DW_FORM_strp`, `sec_offset`, ...), as `Int`.
  @inline(__always)
  static func sectionOffset(_ reader: inout ByteReader, _ offsetSize: Int) throws(FormatError) -> Int {
    let value = offsetSize == 8 ? try reader.read(UInt64.self) : UInt64(try reader.read(UInt32.self))
    return Int(clamping: value)  // a huge offset stays huge and fails its section's bounds check
  }

  /// A constant-class value (`data1/2/4/8`, `udata`, `sdata`, `implicit_const` handled by the caller).
  static func constant(_ reader: inout ByteReader, form: UInt64, offset: Int) throws(FormatError) -> UInt64 {
    switch form {
    case data1: UInt64(try reader.read(UInt8.self))
    case data2: UInt64(try reader.read(UInt16.self))
    case data4: UInt64(try reader.read(UInt32.self))
    case data8: try reader.read(UInt64.self)
    case udata: try reader.readULEB128()
    case sdata: UInt64(bitPattern: try reader.readSLEB128())
    default: throw .dwarf(section: ".debug_line", offset: offset + reader.offset, "form 0x\(hexDigits(form)) for a constant")
    }
  }

  /// Entry `index` of an offsets table (`.debug_str_offsets`, `.debug_addr`, `.debug_rnglists`' offsets)
  /// whose entries of `size` bytes start at `base`.
  @inline(__always)
  static func indexedOffset(_ table: ByteReader, base: Int, index: UInt64, size: Int,
                            section: String) throws(FormatError) -> Int {
    let (product, overflow) = index.multipliedReportingOverflow(by: UInt64(size))
    guard !overflow, let position = Int(exactly: product), base >= 0, position <= Int.max - base else {
      throw .dwarf(section: section, offset: base, "index \(index) out of range")
    }
    let entry = size == 8 ? try table.peek(UInt64.self, at: base + position)
      : UInt64(try table.peek(UInt32.self, at: base + position))  // position <= Int.max - base
    return Int(clamping: entry)
  }
}
