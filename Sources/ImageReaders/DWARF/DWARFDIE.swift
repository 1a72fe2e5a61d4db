/// Decoding one DIE's attributes: only those a lookup needs are decoded, the others skipped by form.
enum DWARFDIE {
  static let compileUnitTag: UInt64 = 0x11, partialUnitTag: UInt64 = 0x3c, skeletonUnitTag: UInt64 = 0x4a
  static let subprogramTag: UInt64 = 0x2e, inlinedSubroutineTag: UInt64 = 0x1d

  static let nameAttribute: UInt64 = 0x03, statementListAttribute: UInt64 = 0x10, lowPCAttribute: UInt64 = 0x11
  static let languageAttribute: UInt64 = 0x13
  static let highPCAttribute: UInt64 = 0x12, compilationDirectoryAttribute: UInt64 = 0x1b
  static let abstractOriginAttribute: UInt64 = 0x31, specificationAttribute: UInt64 = 0x47
  static let rangesAttribute: UInt64 = 0x55, callColumnAttribute: UInt64 = 0x57, callFileAttribute: UInt64 = 0x58
  static let callLineAttribute: UInt64 = 0x59, linkageNameAttribute: UInt64 = 0x6e
  static let strOffsetsBaseAttribute: UInt64 = 0x72, addrBaseAttribute: UInt64 = 0x73
  static let rnglistsBaseAttribute: UInt64 = 0x74, mipsLinkageNameAttribute: UInt64 = 0x2007
  static let gnuRangesBaseAttribute: UInt64 = 0x2132, gnuAddrBaseAttribute: UInt64 = 0x2133

  /// Which attributes to decode.
  enum Want { case unit, subroutine, names, function }

  /// A string attribute, resolved only when asked for.
  enum StringValue {
    case inline(String)
    case strp(Int)
    case lineStrp(Int)
    case strx(UInt64)
    case supplementaryStrp(Int)
  }

  /// A DIE a reference attribute points at: an offset in `.debug_info` of this file or of the
  /// supplementary file.
  struct Reference: Hashable {
    var inSupplementary: Bool
    var offset: Int
  }

  /// A form's value, classified.
  enum Value {
    case constant(UInt64)
    case address(UInt64)
    case addressIndex(UInt64)
    case string(StringValue)
    case reference(Reference)
    case sectionOffset(Int)
    case rangeListIndex(UInt64)
    case none
  }

  /// The decoded attributes of one DIE.
  struct Values {
    var tag: UInt64 = 0
    var low: Value = .none
    var high: Value = .none
    var ranges: Value = .none
    var callFile: UInt64 = 0
    /// Whether `DW_AT_call_file` was there (DWARF 5's file 0 is a file).
    var hasCallFile = false
    var callLine: UInt64 = 0
    var callColumn: UInt64 = 0
    var name: StringValue?
    var linkageName: StringValue?
    var abstractOrigin: Reference?
    var specification: Reference?
    var compilationDirectory: StringValue?
    var statementList: Int?
    var strOffsetsBase: Int?
    var addrBase: Int?
    var rnglistsBase: Int?
    /// `DW_AT_language` (read for `.unit`).
    var language: UInt64?

    /// `DW_AT_low_pc` as an address.
    func lowPC(_ unit: DWARFUnit, _ context: DWARFContext) throws(FormatError) -> UInt64? {
      try context.address(low, unit: unit)
    }

    /// The DIE's address ranges: `DW_AT_ranges`, else `[low_pc, high_pc)` (`high_pc` an address or, as
    /// a constant, a size).
    func ranges(_ unit: DWARFUnit, _ context: DWARFContext) throws(FormatError) -> [(UInt64, UInt64)] {
      var result: [(UInt64, UInt64)] = []
      try appendRanges(to: &result, unit, context)
      return result
    }

    func appendRanges(to result: inout [(UInt64, UInt64)], _ unit: DWARFUnit, _ context: DWARFContext) throws(FormatError) {
      switch ranges {
      case .sectionOffset(let offset):
        try context.appendRangeList(at: offset, unit: unit, to: &result)
        return
      case .constant(let offset):  // DWARF 2 and 3 give the offset as data4/data8
        try context.appendRangeList(at: Int(clamping: offset), unit: unit, to: &result)
        return
      case .rangeListIndex(let index):
        guard let base = unit.rnglistsBase else {
          throw .dwarf(section: ".debug_info", offset: unit.offset, "DW_FORM_rnglistx without DW_AT_rnglists_base")
        }
        let entry = try DWARFForm.indexedOffset(context.rnglists, base: base, index: index, size: unit.offsetSize,
                                                section: ".debug_rnglists")
        let (offset, overflow) = base.addingReportingOverflow(entry)
        guard !overflow else { throw .dwarf(section: ".debug_rnglists", offset: base, "offset \(entry) out of range") }
        try context.appendRangeList(at: offset, unit: unit, to: &result)
        return
      default: break
      }
      guard let low = try context.address(low, unit: unit) else { return }
      switch high {
      case .address(let value), .addressIndex(let value):
        let highAddress = if case .addressIndex = high { try context.address(.addressIndex(value), unit: unit) ?? low } else { value }
        result.append((low, highAddress))
      case .constant(let size):
        let (end, overflow) = low.addingReportingOverflow(size)
        result.append((low, overflow ? UInt64.max : end))
      default: break
      }
    }
  }

  /// Reads the DIE at `reader`'s offset; `nil` for a null entry (code 0).
  static func read(_ reader: inout ByteReader, unit: DWARFUnit, table: DWARFAbbreviations, context: DWARFContext,
                   want: Want) throws(FormatError) -> Values? {
    let start = reader.offset
    let code = try reader.readULEB128()
    if code == 0 { return nil }
    guard let declaration = table.declaration(code) else {
      throw .dwarf(section: ".debug_info", offset: start,
                   "abbreviation code \(code) not in the table at 0x\(hexDigits(UInt64(unit.abbrevOffset)))")
    }
    return try readAttributes(&reader, declaration: declaration, dieOffset: start, unit: unit, table: table,
                              context: context, want: want)
  }

  /// Skips every attribute of a DIE whose code has been read.
  @inline(__always)
  static func skipAttributes(_ reader: inout ByteReader, declaration: DWARFAbbreviations.Declaration, unit: DWARFUnit,
                             table: DWARFAbbreviations) throws(FormatError) {
    if declaration.fixedSize >= 0 {
      try reader.skip(declaration.fixedSize)
      return
    }
    let specifications = table.specifications
    var index = declaration.firstSpecification
    let end = index + declaration.specificationCount  // both from the table's own arrays
    while index < end {
      try DWARFForm.skip(&reader, form: specifications[index].form, addressSize: unit.addressSize,
                         offsetSize: unit.offsetSize, version: unit.version)
      index += 1
    }
  }

  /// Decodes the attributes `want` asks for of a DIE whose code has been read; skips the others.
  static func readAttributes(_ reader: inout ByteReader, declaration: DWARFAbbreviations.Declaration, dieOffset: Int,
                             unit: DWARFUnit, table: DWARFAbbreviations, context: DWARFContext,
                             want: Want) throws(FormatError) -> Values {
    var values = Values()
    values.tag = declaration.tag
    let specifications = table.specifications
    var index = declaration.firstSpecification
    let end = index + declaration.specificationCount  // both from the table's own arrays
    while index < end {
      let specification = specifications[index]
      index += 1
      var form = specification.form
      if form == DWARFForm.indirect {
        form = try reader.readULEB128()
        guard form != DWARFForm.indirect, form != DWARFForm.implicitConst else {
          throw .dwarf(section: ".debug_info", offset: reader.offset, "DW_FORM_indirect to form 0x\(hexDigits(form))")
        }
      }
      let attribute = specification.attribute
      let wanted: Bool
      switch want {
      case .subroutine:
        wanted = attribute == lowPCAttribute || attribute == highPCAttribute || attribute == rangesAttribute
          || attribute == callFileAttribute || attribute == callLineAttribute || attribute == callColumnAttribute
      case .function:
        wanted = attribute == lowPCAttribute || attribute == highPCAttribute || attribute == rangesAttribute
          || attribute == callFileAttribute || attribute == callLineAttribute
          || attribute == abstractOriginAttribute || attribute == specificationAttribute
      case .names:
        wanted = attribute == nameAttribute || attribute == linkageNameAttribute || attribute == mipsLinkageNameAttribute
          || attribute == abstractOriginAttribute || attribute == specificationAttribute
      case .unit:
        wanted = attribute == lowPCAttribute || attribute == highPCAttribute || attribute == rangesAttribute
          || attribute == compilationDirectoryAttribute || attribute == statementListAttribute
          || attribute == strOffsetsBaseAttribute || attribute == addrBaseAttribute || attribute == rnglistsBaseAttribute
          || attribute == gnuAddrBaseAttribute || attribute == nameAttribute || attribute == languageAttribute
      }
      guard wanted else {
        try DWARFForm.skip(&reader, form: form, addressSize: unit.addressSize, offsetSize: unit.offsetSize,
                           version: unit.version)
        continue
      }
      let value = try readValue(&reader, form: form, implicitConstant: specification.implicitConstant, unit: unit,
                                inSupplementary: context.isSupplementary)
      switch attribute {
      case lowPCAttribute: values.low = value
      case highPCAttribute: values.high = value
      case rangesAttribute: values.ranges = value
      case callFileAttribute: if case .constant(let v) = value { values.callFile = v; values.hasCallFile = true }
      case callLineAttribute: if case .constant(let v) = value { values.callLine = v }
      case callColumnAttribute: if case .constant(let v) = value { values.callColumn = v }
      case nameAttribute: if case .string(let s) = value { values.name = s }
      case linkageNameAttribute, mipsLinkageNameAttribute: if case .string(let s) = value { values.linkageName = s }
      case abstractOriginAttribute: if case .reference(let r) = value { values.abstractOrigin = r }
      case specificationAttribute: if case .reference(let r) = value { values.specification = r }
      case compilationDirectoryAttribute: if case .string(let s) = value { values.compilationDirectory = s }
      case statementListAttribute: values.statementList = offset(value)
      case strOffsetsBaseAttribute: values.strOffsetsBase = offset(value)
      case addrBaseAttribute, gnuAddrBaseAttribute: values.addrBase = offset(value)
      case rnglistsBaseAttribute: values.rnglistsBase = offset(value)
      case languageAttribute: if case .constant(let v) = value { values.language = v }
      default: break
      }
    }
    _ = dieOffset
    return values
  }

  private static func offset(_ value: Value) -> Int? {
    switch value {
    case .sectionOffset(let offset): offset
    case .constant(let value): Int(clamping: value)
    default: nil
    }
  }

  /// Decodes one value of `form`.
  static func readValue(_ reader: inout ByteReader, form: UInt64, implicitConstant: Int64, unit: DWARFUnit,
                        inSupplementary: Bool) throws(FormatError) -> Value {
    switch form {
    case DWARFForm.addr: return .address(try reader.readUnsigned(size: unit.addressSize))
    case DWARFForm.addrx, DWARFForm.gnuAddrIndex: return .addressIndex(try reader.readULEB128())
    case DWARFForm.addrx1, DWARFForm.addrx2, DWARFForm.addrx3, DWARFForm.addrx4:
      return .addressIndex(try reader.readUnsigned(size: Int(form - DWARFForm.addrx1) + 1))
    case DWARFForm.data1, DWARFForm.flag: return .constant(UInt64(try reader.read(UInt8.self)))
    case DWARFForm.data2: return .constant(UInt64(try reader.read(UInt16.self)))
    case DWARFForm.data4: return .constant(UInt64(try reader.read(UInt32.self)))
    case DWARFForm.data8: return .constant(try reader.read(UInt64.self))
    case DWARFForm.udata: return .constant(try reader.readULEB128())
    case DWARFForm.sdata: return .constant(UInt64(bitPattern: try reader.readSLEB128()))
    case DWARFForm.implicitConst: return .constant(UInt64(bitPattern: implicitConstant))
    case DWARFForm.flagPresent: return .constant(1)
    case DWARFForm.string: return .string(.inline(try reader.readCString()))
    case DWARFForm.strp: return .string(.strp(try DWARFForm.sectionOffset(&reader, unit.offsetSize)))
    case DWARFForm.lineStrp: return .string(.lineStrp(try DWARFForm.sectionOffset(&reader, unit.offsetSize)))
    case DWARFForm.strpSup, DWARFForm.gnuStrpAlt:
      let offset = try DWARFForm.sectionOffset(&reader, unit.offsetSize)
      return inSupplementary ? .none : .string(.supplementaryStrp(offset))
    case DWARFForm.strx, DWARFForm.gnuStrIndex: return .string(.strx(try reader.readULEB128()))
    case DWARFForm.strx1, DWARFForm.strx2, DWARFForm.strx3, DWARFForm.strx4:
      return .string(.strx(try reader.readUnsigned(size: Int(form - DWARFForm.strx1) + 1)))
    case DWARFForm.ref1, DWARFForm.ref2, DWARFForm.ref4, DWARFForm.ref8, DWARFForm.refUdata:
      let relative = form == DWARFForm.refUdata ? try reader.readULEB128()
        : try reader.readUnsigned(size: form == DWARFForm.ref1 ? 1 : form == DWARFForm.ref2 ? 2 : form == DWARFForm.ref4 ? 4 : 8)
      let (target, overflow) = UInt64(unit.offset).addingReportingOverflow(relative)
      return .reference(Reference(inSupplementary: inSupplementary, offset: overflow ? Int.max : Int(clamping: target)))
    case DWARFForm.refAddr:
      let target = unit.version <= 2 ? Int(clamping: try reader.readUnsigned(size: unit.addressSize))
        : try DWARFForm.sectionOffset(&reader, unit.offsetSize)
      return .reference(Reference(inSupplementary: inSupplementary, offset: target))
    case DWARFForm.gnuRefAlt:
      let target = try DWARFForm.sectionOffset(&reader, unit.offsetSize)
      return inSupplementary ? .none : .reference(Reference(inSupplementary: true, offset: target))
    case DWARFForm.refSup4, DWARFForm.refSup8:
      let target = Int(clamping: try reader.readUnsigned(size: form == DWARFForm.refSup4 ? 4 : 8))
      return inSupplementary ? .none : .reference(Reference(inSupplementary: true, offset: target))
    case DWARFForm.secOffset: return .sectionOffset(try DWARFForm.sectionOffset(&reader, unit.offsetSize))
    case DWARFForm.rnglistx: return .rangeListIndex(try reader.readULEB128())
    default:
      try DWARFForm.skip(&reader, form: form, addressSize: unit.addressSize, offsetSize: unit.offsetSize, version: unit.version)
      return .none
    }
  }
}
