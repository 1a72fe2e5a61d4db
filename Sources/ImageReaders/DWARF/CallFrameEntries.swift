/// Which call frame section bytes come from: they differ in how a CIE is marked, how an FDE names
/// its CIE, how addresses are written and how the section ends.
public enum CallFrameSectionKind: Sendable, Equatable {
  /// `.eh_frame` (LSB's format, what the unwinder uses at run time): CIE id 0, FDE CIE pointers
  /// relative to themselves, `DW_EH_PE_*` encoded addresses, a zero length ends the section.
  case ehFrame
  /// `.debug_frame` (DWARF's): CIE id all ones, FDE CIE pointers as section offsets, plain addresses.
  case debugFrame

  var sectionName: String { self == .ehFrame ? ".eh_frame" : ".debug_frame" }
}

/// `DW_EH_PE_*`: how an `.eh_frame` / `.eh_frame_hdr` pointer is stored (low nibble) and what it is
/// relative to (bits 4-6); bit 7 (`DW_EH_PE_indirect`) says the value is the address of the pointer.
public enum PointerEncoding {
  /// `DW_EH_PE_omit`: no value.
  public static let omit: UInt8 = 0xFF
  /// `DW_EH_PE_absptr`: an address of the target's size, not relative to anything.
  public static let absolute: UInt8 = 0x00
  /// `DW_EH_PE_pcrel`: relative to the field's own address.
  public static let pcRelative: UInt8 = 0x10
  /// `DW_EH_PE_textrel`: relative to the start of `.text`.
  public static let textRelative: UInt8 = 0x20
  /// `DW_EH_PE_datarel`: relative to the data base (`.eh_frame_hdr`'s start there; the GOT on i386).
  public static let dataRelative: UInt8 = 0x30
  /// `DW_EH_PE_funcrel`: relative to the function's start.
  public static let functionRelative: UInt8 = 0x40
  /// `DW_EH_PE_aligned`: an absolute address aligned to the address size.
  public static let aligned: UInt8 = 0x50
  /// `DW_EH_PE_indirect`: the value is where the pointer is stored.
  public static let indirect: UInt8 = 0x80

  /// The size in bytes of a fixed-size encoding's value, `nil` for LEB128 (or an unknown format).
  static func fixedSize(_ encoding: UInt8, addressSize: Int) -> Int? {
    switch encoding & 0x0F {
    case 0x00, 0x08: addressSize  // absptr, signed absptr
    case 0x02, 0x0A: 2  // udata2, sdata2
    case 0x03, 0x0B: 4  // udata4, sdata4
    case 0x04, 0x0C: 8  // udata8, sdata8
    default: nil
    }
  }
}

/// The addresses `DW_EH_PE_*` encodings are relative to.
public struct PointerBases: Sendable, Equatable {
  /// The link-time (or run-time) address of the section's first byte (for `pcrel`).
  public var sectionVMAddress: UInt64
  /// The start of `.text` (`textrel`); 0 when unknown.
  public var textVMAddress: UInt64
  /// The data base (`datarel`): `.eh_frame_hdr`'s own address for its table, the GOT elsewhere.
  public var dataVMAddress: UInt64

  /// Bases for a section at `sectionVMAddress`; the others default to 0 (unknown).
  public init(sectionVMAddress: UInt64, textVMAddress: UInt64 = 0, dataVMAddress: UInt64 = 0) {
    self.sectionVMAddress = sectionVMAddress
    self.textVMAddress = textVMAddress
    self.dataVMAddress = dataVMAddress
  }
}

/// A Common Information Entry: what every FDE that names it shares.
public struct CommonInformationEntry: Sendable, Equatable {
  /// Where the entry starts (its length field) in its section.
  public var offset: Int
  /// 1 (GCC's `.eh_frame`), 3 (DWARF 3) or 4 (DWARF 4/5 `.debug_frame`).
  public var version: UInt8
  /// The augmentation string (`zR`, `zPLR`, `zRS`, `eh`, or empty).
  public var augmentation: String
  /// The size of a target address (version 4 says; otherwise the file's).
  public var addressSize: Int
  /// Multiplies `DW_CFA_advance_loc*` deltas.
  public var codeAlignmentFactor: UInt64
  /// Multiplies the `DW_CFA_offset*` family's factored offsets.
  public var dataAlignmentFactor: Int64
  /// The column holding the return address (x86-64: 16, aarch64: 30).
  public var returnAddressRegister: UInt64
  /// `R`: how the FDEs' addresses are encoded (`DW_EH_PE_absptr` without `R`).
  public var addressEncoding: UInt8
  /// `L`: how the FDEs' LSDA pointers are encoded; `nil` without `L`.
  public var lsdaEncoding: UInt8?
  /// `P`: the personality routine's address as stored (with `DW_EH_PE_indirect`, where it is stored).
  public var personality: UInt64?
  /// `P`: the personality pointer's encoding.
  public var personalityEncoding: UInt8?
  /// `S`: frames of this CIE are signal frames (the PC is not a return address: no `- 1` on lookup).
  public var isSignalFrame: Bool
  /// True with `z`: FDEs carry an augmentation data length.
  public var hasAugmentationData: Bool
  /// The initial instructions' range in the section.
  public var instructions: Range<Int>
}

/// A Frame Description Entry: one function's (or PLT's) address range and its CFA program.
public struct FrameDescriptionEntry: Sendable, Equatable {
  /// Where the entry starts (its length field) in its section.
  public var offset: Int
  /// The offset of its CIE in the same section.
  public var cieOffset: Int
  /// The first address it covers.
  public var initialLocation: UInt64
  /// The number of bytes it covers.
  public var addressRange: UInt64
  /// The LSDA pointer (`L`), as decoded; `nil` when absent or 0.
  public var lsda: UInt64?
  /// The instructions' range in the section.
  public var instructions: Range<Int>

  /// The addresses covered; the end saturates at the top of the address space.
  public var pcRange: Range<UInt64> {
    let (end, overflow) = initialLocation.addingReportingOverflow(addressRange)
    return initialLocation..<(overflow ? UInt64.max : end)
  }
}

/// One entry of a call frame section.
public enum CallFrameEntry: Sendable, Equatable {
  /// A CIE.
  case cie(CommonInformationEntry)
  /// An FDE with the CIE it names.
  case fde(FrameDescriptionEntry, CommonInformationEntry)
}

/// A call frame section (`.eh_frame` or `.debug_frame`) and how to decode its pointers.
public struct CallFrameSection {
  /// The section's bytes (offsets are section offsets).
  public var bytes: ByteReader
  /// `.eh_frame` or `.debug_frame` rules.
  public var kind: CallFrameSectionKind
  /// What `DW_EH_PE_*` pointers are relative to.
  public var bases: PointerBases
  /// The target's address size in bytes (4 or 8), for `DW_EH_PE_absptr` and CIEs before version 4.
  public var addressSize: Int

  /// A section to decode; `addressSize` must be 4 or 8 (a programmer error otherwise).
  public init(bytes: ByteReader, kind: CallFrameSectionKind, bases: PointerBases, addressSize: Int) {
    precondition(addressSize == 4 || addressSize == 8, "address size must be 4 or 8")
    self.bytes = bytes
    self.kind = kind
    self.bases = bases
    self.addressSize = addressSize
  }

  func error(_ offset: Int, _ what: String) -> FormatError {
    .dwarf(section: kind.sectionName, offset: offset, what)
  }

  /// The entry header at `offset`: where its body starts and ends, whether it is 64-bit DWARF, and
  /// the CIE id / CIE pointer field's value and position. `nil` at a zero terminator.
  struct Header {
    var offset: Int
    var end: Int
    var is64Bit: Bool
    var idPosition: Int
    var id: UInt64
    var bodyStart: Int
  }

  func header(at offset: Int) throws(FormatError) -> Header? {
    var reader = bytes
    try reader.seek(to: offset)
    var length = UInt64(try reader.read(UInt32.self))
    var is64Bit = false
    if length == 0xFFFF_FFFF {
      length = try reader.read(UInt64.self)
      is64Bit = true
    } else if length >= 0xFFFF_FFF0 {
      throw error(offset, "reserved initial length 0x\(hexDigits(length))")
    }
    if length == 0 { return nil }
    let start = reader.offset
    guard let size = Int(exactly: length), size <= reader.remaining else {
      throw error(offset, "length \(length) runs past the section end (\(reader.remaining) bytes left)")
    }
    let end = start + size  // size <= remaining: end <= count
    let idPosition = reader.offset
    guard (is64Bit ? 8 : 4) <= size else { throw error(offset, "length \(length) leaves no room for the CIE id") }
    let id = try reader.readWord(is64Bit: is64Bit)
    return Header(offset: offset, end: end, is64Bit: is64Bit, idPosition: idPosition, id: id, bodyStart: reader.offset)
  }

  func isCIE(_ header: Header) -> Bool {
    switch kind {
    case .ehFrame: header.id == 0
    case .debugFrame: header.id == (header.is64Bit ? UInt64.max : 0xFFFF_FFFF)
    }
  }

  /// Every entry in section order, at most `limit` (a data-independent bound: each takes at least
  /// 4 bytes anyway). One broken entry ends the walk with its error.
  public func entries(limit: Int = 1 << 22) throws(FormatError) -> [CallFrameEntry] {
    var result: [CallFrameEntry] = []
    result.reserveCapacity(min(bytes.count / 16, 1 << 16))
    var offset = 0
    var cies: [Int: CommonInformationEntry] = [:]
    while offset < bytes.count, result.count < limit {
      guard let header = try header(at: offset) else {
        // A zero length: .eh_frame's terminator; in .debug_frame, padding readelf steps over.
        if kind == .ehFrame { break }
        offset += 4  // header(at:) read 4 bytes there
        continue
      }
      if isCIE(header) {
        let cie = try commonInformationEntry(header)
        cies[offset] = cie
        result.append(.cie(cie))
      } else {
        let cieOffset = try cieOffset(header)
        let cie: CommonInformationEntry
        if let known = cies[cieOffset] { cie = known } else {
          cie = try commonInformationEntry(at: cieOffset, for: offset)
          cies[cieOffset] = cie
        }
        result.append(.fde(try frameDescriptionEntry(header, cie: cie), cie))
      }
      offset = header.end
    }
    return result
  }

  /// The CIE offset an FDE names.
  func cieOffset(_ header: Header) throws(FormatError) -> Int {
    switch kind {
    case .ehFrame:
      // Relative to the pointer field itself, pointing backwards.
      guard let pointer = Int(exactly: header.id), pointer <= header.idPosition else {
        throw error(header.offset, "CIE pointer 0x\(hexDigits(header.id)) points before the section")
      }
      return header.idPosition - pointer
    case .debugFrame:
      guard let offset = Int(exactly: header.id), offset < bytes.count else {
        throw error(header.offset, "CIE pointer 0x\(hexDigits(header.id)) outside the section")
      }
      return offset
    }
  }

  /// The CIE at `offset`, named by the FDE at `fdeOffset`: it must be a CIE (an FDE there is an error,
  /// so a chain of pointers is never followed).
  func commonInformationEntry(at offset: Int, for fdeOffset: Int) throws(FormatError) -> CommonInformationEntry {
    guard let header = try header(at: offset), isCIE(header) else {
      throw error(fdeOffset, "CIE pointer leads to offset 0x\(hexDigits(UInt64(offset))), which is not a CIE")
    }
    return try commonInformationEntry(header)
  }

  func commonInformationEntry(_ header: Header) throws(FormatError) -> CommonInformationEntry {
    var reader = try bytes.slice(at: 0, length: header.end)
    try reader.seek(to: header.bodyStart)
    let version = try reader.read(UInt8.self)
    guard version == 1 || version == 3 || version == 4 else {
      throw error(header.offset, "CIE version \(version) (1, 3 or 4 expected)")
    }
    let augmentationLength = try reader.cStringLength(at: reader.offset)
    guard augmentationLength <= 16 else {
      throw error(header.offset, "augmentation string of \(augmentationLength) bytes")
    }
    let augmentation = Array(try reader.readBytes(augmentationLength))
    try reader.skip(1)
    var addressSize = self.addressSize
    if augmentation.starts(with: Array("eh".utf8)) {
      try reader.skip(addressSize)  // GCC 2's eh_ptr
    }
    if version == 4 {
      let size = Int(try reader.read(UInt8.self))
      guard size == 4 || size == 8 else { throw error(header.offset, "CIE address size \(size) (4 or 8 expected)") }
      addressSize = size
      let segmentSize = try reader.read(UInt8.self)
      guard segmentSize == 0 else { throw error(header.offset, "CIE segment selector size \(segmentSize) (0 expected)") }
    }
    let codeAlignment = try reader.readULEB128()
    let dataAlignment = try reader.readSLEB128()
    let returnAddress = version == 1 ? UInt64(try reader.read(UInt8.self)) : try reader.readULEB128()
    var cie = CommonInformationEntry(
      offset: header.offset, version: version, augmentation: String(decoding: augmentation, as: UTF8.self),
      addressSize: addressSize, codeAlignmentFactor: codeAlignment, dataAlignmentFactor: dataAlignment,
      returnAddressRegister: returnAddress, addressEncoding: PointerEncoding.absolute, lsdaEncoding: nil,
      personality: nil, personalityEncoding: nil, isSignalFrame: false, hasAugmentationData: false,
      instructions: 0..<0)
    if augmentation.first == UInt8(ascii: "z") {
      cie.hasAugmentationData = true
      let length = try reader.readULEB128()
      guard let size = Int(exactly: length), size <= reader.remaining else {
        throw error(header.offset, "augmentation data length \(length) runs past the CIE")
      }
      let dataEnd = reader.offset + size  // size <= remaining
      var data = try reader.slice(at: 0, length: dataEnd)
      try data.seek(to: reader.offset)
      letters: for letter in augmentation.dropFirst() {
        switch letter {
        case UInt8(ascii: "R"): cie.addressEncoding = try data.read(UInt8.self)
        case UInt8(ascii: "L"): cie.lsdaEncoding = try data.read(UInt8.self)
        case UInt8(ascii: "P"):
          let encoding = try data.read(UInt8.self)
          cie.personalityEncoding = encoding
          cie.personality = try readPointer(&data, encoding: encoding, addressSize: addressSize, functionStart: 0)
        case UInt8(ascii: "S"): cie.isSignalFrame = true
        case UInt8(ascii: "B"), UInt8(ascii: "G"): continue  // aarch64 BTI / MTE: no data, no effect on rules
        default: break letters  // unknown: the length still says where the data ends
        }
      }
      try reader.seek(to: dataEnd)
    } else if augmentation == Array("S".utf8) {
      cie.isSignalFrame = true  // GAS writes .cfi_signal_frame so in .debug_frame, where there is no "z"
    } else if !augmentation.isEmpty && augmentation != Array("eh".utf8) {
      throw error(header.offset, "unknown augmentation \"\(cie.augmentation)\"")
    }
    cie.instructions = reader.offset..<header.end
    return cie
  }

  func frameDescriptionEntry(_ header: Header, cie: CommonInformationEntry) throws(FormatError) -> FrameDescriptionEntry {
    var reader = try bytes.slice(at: 0, length: header.end)
    try reader.seek(to: header.bodyStart)
    let initial: UInt64
    let range: UInt64
    switch kind {
    case .ehFrame:
      initial = try readPointer(&reader, encoding: cie.addressEncoding, addressSize: cie.addressSize, functionStart: 0)
      // The range is a size: the same format, no base applied.
      range = try readPointer(&reader, encoding: cie.addressEncoding & 0x0F, addressSize: cie.addressSize, functionStart: 0)
    case .debugFrame:
      initial = try reader.readWord(is64Bit: cie.addressSize == 8)
      range = try reader.readWord(is64Bit: cie.addressSize == 8)
    }
    var lsda: UInt64?
    if cie.hasAugmentationData {
      let length = try reader.readULEB128()
      guard let size = Int(exactly: length), size <= reader.remaining else {
        throw error(header.offset, "augmentation data length \(length) runs past the FDE")
      }
      let dataEnd = reader.offset + size  // size <= remaining
      if let encoding = cie.lsdaEncoding, encoding != PointerEncoding.omit {
        var data = try reader.slice(at: 0, length: dataEnd)
        try data.seek(to: reader.offset)
        let value = try readPointer(&data, encoding: encoding, addressSize: cie.addressSize, functionStart: initial)
        lsda = value == 0 ? nil : value
      }
      try reader.seek(to: dataEnd)
    }
    return FrameDescriptionEntry(offset: header.offset, cieOffset: cie.offset, initialLocation: initial,
                                 addressRange: range, lsda: lsda, instructions: reader.offset..<header.end)
  }

  /// Reads a `DW_EH_PE_*` encoded pointer at `reader.offset` (a section offset). Bases are added modulo
  /// 2^64, then cut to the address size, as the run-time unwinder computes them. `DW_EH_PE_indirect`
  /// is left to the caller: the value returned is where the pointer is stored.
  func readPointer(_ reader: inout ByteReader, encoding: UInt8, addressSize: Int,
                   functionStart: UInt64) throws(FormatError) -> UInt64 {
    let position = reader.offset
    if encoding & 0x70 == PointerEncoding.aligned {
      let aligned = (position + addressSize - 1) & ~(addressSize - 1)  // position <= count, addressSize <= 8
      try reader.seek(to: min(aligned, reader.count))
    }
    let fieldPosition = reader.offset
    let raw: UInt64
    switch encoding & 0x0F {
    case 0x00: raw = try reader.readWord(is64Bit: addressSize == 8)
    case 0x01: raw = try reader.readULEB128()
    case 0x02: raw = UInt64(try reader.read(UInt16.self))
    case 0x03: raw = UInt64(try reader.read(UInt32.self))
    case 0x04: raw = try reader.read(UInt64.self)
    case 0x08: raw = addressSize == 8 ? try reader.read(UInt64.self) : UInt64(bitPattern: Int64(try reader.read(Int32.self)))
    case 0x09: raw = UInt64(bitPattern: try reader.readSLEB128())
    case 0x0A: raw = UInt64(bitPattern: Int64(try reader.read(Int16.self)))
    case 0x0B: raw = UInt64(bitPattern: Int64(try reader.read(Int32.self)))
    case 0x0C: raw = try reader.read(UInt64.self)
    default: throw error(position, "pointer encoding 0x\(hexDigits(UInt64(encoding))) has an unknown format")
    }
    let base: UInt64
    switch encoding & 0x70 {
    case PointerEncoding.absolute, PointerEncoding.aligned: base = 0
    // fieldPosition <= count, which fits in UInt64.
    case PointerEncoding.pcRelative: base = bases.sectionVMAddress &+ UInt64(fieldPosition)
    case PointerEncoding.textRelative: base = bases.textVMAddress
    case PointerEncoding.dataRelative: base = bases.dataVMAddress
    case PointerEncoding.functionRelative: base = functionStart
    default: throw error(position, "pointer encoding 0x\(hexDigits(UInt64(encoding))) has an unknown base")
    }
    let value = base &+ raw  // modular, as the unwinder adds them
    return addressSize == 4 ? value & 0xFFFF_FFFF : value
  }

  /// The FDE whose range holds `pc`, by walking every entry (no index); `nil` when none does.
  func linearSearch(_ pc: UInt64) throws(FormatError) -> (FrameDescriptionEntry, CommonInformationEntry)? {
    var offset = 0
    var cies: [Int: CommonInformationEntry] = [:]
    while offset < bytes.count {
      guard let header = try header(at: offset) else {
        if kind == .ehFrame { break }
        offset += 4  // header(at:) read 4 bytes there
        continue
      }
      if !isCIE(header) {
        let cieOffset = try cieOffset(header)
        let cie: CommonInformationEntry
        if let known = cies[cieOffset] { cie = known } else {
          cie = try commonInformationEntry(at: cieOffset, for: offset)
          cies[cieOffset] = cie
        }
        let fde = try frameDescriptionEntry(header, cie: cie)
        if fde.pcRange.contains(pc) { return (fde, cie) }
      }
      offset = header.end  // > offset: every entry has at least its length field
    }
    return nil
  }

  /// The FDE at `offset` with its CIE.
  func entry(at offset: Int) throws(FormatError) -> (FrameDescriptionEntry, CommonInformationEntry) {
    guard let header = try header(at: offset), !isCIE(header) else {
      throw error(offset, "no FDE at offset 0x\(hexDigits(UInt64(max(offset, 0))))")
    }
    let cie = try commonInformationEntry(at: try cieOffset(header), for: offset)
    return (try frameDescriptionEntry(header, cie: cie), cie)
  }
}
