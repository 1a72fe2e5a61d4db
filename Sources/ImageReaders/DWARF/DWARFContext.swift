/// The DWARF of one file: its sections as readers, its units (headers read up front, everything else on
/// first need) and the decoders that need more than one section (strings, `.debug_addr`, range lists).
final class DWARFContext {
  let sections: DWARFSections  // keeps the bytes the readers below point into alive
  let info: ByteReader, abbrev: ByteReader, line: ByteReader, str: ByteReader, lineStr: ByteReader
  let strOffsets: ByteReader, addr: ByteReader, ranges: ByteReader, rnglists: ByteReader, aranges: ByteReader
  let isSupplementary: Bool
  let supplementary: DWARFContext?
  private(set) var units: [DWARFUnit] = []
  /// Why reading unit headers stopped before the end of `.debug_info`; the units before it are kept.
  private(set) var unitsProblem: FormatError?
  private var abbreviationCache: [AbbreviationKey: DWARFAbbreviations] = [:]

  private struct AbbreviationKey: Hashable {
    var offset: Int
    var addressSize: Int
    var offsetSize: Int
    var version: UInt16
  }

  init(_ sections: DWARFSections, isSupplementary: Bool = false) throws(FormatError) {
    self.sections = sections
    info = sections.reader(sections.info)
    abbrev = sections.reader(sections.abbrev)
    line = sections.reader(sections.line)
    str = sections.reader(sections.str)
    lineStr = sections.reader(sections.lineStr)
    strOffsets = sections.reader(sections.strOffsets)
    addr = sections.reader(sections.addr)
    ranges = sections.reader(sections.ranges)
    rnglists = sections.reader(sections.rnglists)
    aranges = sections.reader(sections.aranges)
    self.isSupplementary = isSupplementary
    if !isSupplementary, let sup = sections.supplementary {
      supplementary = try DWARFContext(sup, isSupplementary: true)
    } else {
      supplementary = nil
    }
    var offset = 0
    // Each unit ends past its start (its length covers at least its version): the loop ends.
    while offset < info.count {
      do {
        let unit = try DWARFUnit(info, at: offset)
        units.append(unit)
        offset = unit.end
      } catch {
        if units.isEmpty { throw error }
        unitsProblem = error
        break
      }
    }
  }

  /// The unit whose bytes hold `offset` in `.debug_info`.
  func unit(containing offset: Int) -> DWARFUnit? {
    var low = 0, high = units.count
    while low < high {
      let middle = (low + high) / 2
      if units[middle].offset <= offset { low = middle + 1 } else { high = middle }
    }
    guard low > 0, offset < units[low - 1].end else { return nil }
    return units[low - 1]
  }

  /// The unit whose header is at `offset` exactly (as `.debug_aranges` names them).
  func unitIndex(at offset: Int) -> Int? {
    var low = 0, high = units.count
    while low < high {
      let middle = (low + high) / 2
      if units[middle].offset < offset { low = middle + 1 } else { high = middle }
    }
    return low < units.count && units[low].offset == offset ? low : nil
  }

  /// The abbreviation table of `unit`, decoded once per offset and unit shape.
  func abbreviations(_ unit: DWARFUnit) throws(FormatError) -> DWARFAbbreviations {
    let key = AbbreviationKey(offset: unit.abbrevOffset, addressSize: unit.addressSize, offsetSize: unit.offsetSize,
                              version: unit.version)
    if let cached = abbreviationCache[key] { return cached }
    let table = try DWARFAbbreviations(abbrev, at: unit.abbrevOffset, unit: unit)
    abbreviationCache[key] = table
    return table
  }

  /// The text of a string attribute of a DIE in `unit`; `nil` when it lives in a supplementary file we
  /// were not given.
  func string(_ value: DWARFDIE.StringValue, unit: DWARFUnit) throws(FormatError) -> String? {
    switch value {
    case .inline(let text): return text
    case .strp(let offset): return try str.cString(at: offset)
    case .lineStrp(let offset): return try lineStr.cString(at: offset)
    case .supplementaryStrp(let offset): return try supplementary?.str.cString(at: offset)
    case .strx(let index):
      guard let base = unit.strOffsetsBase else {
        throw .dwarf(section: ".debug_info", offset: unit.offset, "DW_FORM_strx without DW_AT_str_offsets_base")
      }
      let offset = try DWARFForm.indexedOffset(strOffsets, base: base, index: index, size: unit.offsetSize,
                                               section: ".debug_str_offsets")
      return try str.cString(at: offset)
    }
  }

  /// An address attribute's value: itself, or entry `index` of the unit's `.debug_addr` table.
  func address(_ value: DWARFDIE.Value, unit: DWARFUnit) throws(FormatError) -> UInt64? {
    switch value {
    case .address(let address): return address
    case .addressIndex(let index): return try indexedAddress(index, unit: unit)
    default: return nil
    }
  }

  func indexedAddress(_ index: UInt64, unit: DWARFUnit) throws(FormatError) -> UInt64 {
    guard let base = unit.addrBase else {
      throw .dwarf(section: ".debug_info", offset: unit.offset, "DW_FORM_addrx without DW_AT_addr_base")
    }
    let (product, overflow) = index.multipliedReportingOverflow(by: UInt64(unit.addressSize))
    guard !overflow, let position = Int(exactly: product), position <= Int.max - base else {
      throw .dwarf(section: ".debug_addr", offset: base, "index \(index) out of range")
    }
    var reader = addr
    try reader.seek(to: base + position)  // position <= Int.max - base
    return try reader.readUnsigned(size: unit.addressSize)
  }

  /// Appends the ranges of the range list at `offset`: `.debug_rnglists` for DWARF 5, `.debug_ranges`
  /// before. Offsets are relative to the unit's base address (its `DW_AT_low_pc`) until a base entry.
  func appendRangeList(at offset: Int, unit: DWARFUnit, to result: inout [(UInt64, UInt64)]) throws(FormatError) {
    var base = unit.baseAddress
    if unit.version < 5 {
      var reader = ranges
      try reader.seek(to: offset)
      let size = unit.addressSize
      let selection: UInt64 = size == 8 ? .max : (1 << (UInt64(size) * 8)) - 1
      // Each entry takes 2 * address size bytes: the loop ends at the section's end.
      while true {
        let start = try reader.readUnsigned(size: size)
        let end = try reader.readUnsigned(size: size)
        if start == 0 && end == 0 { return }
        if start == selection { base = end; continue }
        result.append((base &+ start, base &+ end))
      }
    }
    var reader = rnglists
    try reader.seek(to: offset)
    // Each entry takes at least one byte: the loop ends at the section's end.
    while true {
      let kind = try reader.read(UInt8.self)
      switch kind {
      case 0: return  // DW_RLE_end_of_list
      case 1: base = try indexedAddress(try reader.readULEB128(), unit: unit)  // DW_RLE_base_addressx
      case 2:  // DW_RLE_startx_endx
        let start = try indexedAddress(try reader.readULEB128(), unit: unit)
        result.append((start, try indexedAddress(try reader.readULEB128(), unit: unit)))
      case 3:  // DW_RLE_startx_length
        let start = try indexedAddress(try reader.readULEB128(), unit: unit)
        result.append((start, start &+ (try reader.readULEB128())))
      case 4:  // DW_RLE_offset_pair
        let start = try reader.readULEB128()
        result.append((base &+ start, base &+ (try reader.readULEB128())))
      case 5: base = try reader.readUnsigned(size: unit.addressSize)  // DW_RLE_base_address
      case 6:  // DW_RLE_start_end
        let start = try reader.readUnsigned(size: unit.addressSize)
        result.append((start, try reader.readUnsigned(size: unit.addressSize)))
      case 7:  // DW_RLE_start_length
        let start = try reader.readUnsigned(size: unit.addressSize)
        result.append((start, start &+ (try reader.readULEB128())))
      default:
        throw .dwarf(section: ".debug_rnglists", offset: reader.offset - 1, "unknown range list entry kind \(kind)")
      }
    }
  }

  /// `.debug_aranges`: every set's `(unit offset, [low, high))` tuples; stops at the first broken set.
  func arangeSets() -> [(unit: Int, low: UInt64, high: UInt64)] {
    var result: [(unit: Int, low: UInt64, high: UInt64)] = []
    var offset = 0
    // Each set ends past its start: the loop ends.
    while offset < aranges.count {
      do {
        var reader = aranges
        try reader.seek(to: offset)
        let (count, offsetSize) = try DWARFForm.unitLength(&reader, section: ".debug_aranges", offset: offset)
        guard count > 0 else { break }
        let setStart = offset
        let end = reader.offset + count  // count <= remaining
        var set = try aranges.slice(at: 0, length: end)
        try set.seek(to: reader.offset)
        _ = try set.read(UInt16.self)  // version 2
        let unitOffset = try DWARFForm.sectionOffset(&set, offsetSize)
        let addressSize = Int(try set.read(UInt8.self))
        _ = try set.read(UInt8.self)  // segment selector size
        guard [1, 2, 4, 8].contains(addressSize) else { break }
        // Tuples start at a multiple of twice the address size from the set's start.
        let tupleSize = 2 * addressSize
        let headerSize = set.offset - setStart
        try set.seek(to: setStart + (headerSize + tupleSize - 1) / tupleSize * tupleSize)
        while set.remaining >= tupleSize {
          let low = try set.readUnsigned(size: addressSize)
          let length = try set.readUnsigned(size: addressSize)
          if low == 0 && length == 0 { break }
          let (high, overflow) = low.addingReportingOverflow(length)
          if length > 0 { result.append((unitOffset, low, overflow ? .max : high)) }
        }
        offset = end
      } catch {
        break
      }
    }
    return result
  }
}
