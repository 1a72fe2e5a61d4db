/// A universal (fat) file decoded from bytes: the big-endian `fat_header`, its `fat_arch` (or
/// `fat_arch_64`) table, and each slice parsed on its own. A slice whose range or contents are bad is
/// a failure for that slice only; the others still read.
public struct FatFile: Sendable, Equatable {
  /// `FAT_MAGIC`
  package static let magic32: UInt32 = 0xCAFE_BABE
  /// `FAT_MAGIC_64`
  package static let magic64: UInt32 = 0xCAFE_BABF

  /// One `fat_arch` / `fat_arch_64` entry and what its slice decoded to.
  public struct Slice: Sendable, Equatable {
    /// `cputype`
    public var cpuType: UInt32
    /// `cpusubtype`, capability bits kept.
    public var cpuSubtype: UInt32
    /// `offset` of the slice in the file.
    public var fileOffset: UInt64
    /// `size` of the slice, in bytes.
    public var size: UInt64
    /// `align` as a power of two.
    public var alignment: UInt32
    /// The decoded Mach-O, or why this slice could not be read (its range or its contents).
    public var file: Result<MachOFile, FormatError> {
      get {
        switch state {
        case .decoded(let file): .success(file)
        case .failed(let error): .failure(error)
        }
      }
      set {
        switch newValue {
        case .success(let file): state = .decoded(file)
        case .failure(let error): state = .failed(error)
        }
      }
    }

    /// The decoded Mach-O, or `nil` when this slice could not be read (`file` without a `Result`).
    package var decoded: MachOFile? {
      if case .decoded(let file) = state { file } else { nil }
    }

    /// Why this slice could not be read, or `nil` when it decoded.
    package var failure: FormatError? {
      if case .failed(let error) = state { error } else { nil }
    }

    /// `file`, stored without `Result` (see `MachOFile.signature`: a generic type with an `Error`
    /// requirement costs a conformance scan the first time a value is copied or destroyed).
    private var state: State

    enum State: Sendable, Equatable {
      case decoded(MachOFile)
      case failed(FormatError)
    }

    init(cpuType: UInt32, cpuSubtype: UInt32, fileOffset: UInt64, size: UInt64, alignment: UInt32, state: State) {
      self.cpuType = cpuType
      self.cpuSubtype = cpuSubtype
      self.fileOffset = fileOffset
      self.size = size
      self.alignment = alignment
      self.state = state
    }

    /// The architecture name the header claims for this slice (`arm64`, `x86_64`, ...).
    public var architecture: String { machOArchitectureName(cpuType: cpuType, cpuSubtype: cpuSubtype) }
  }

  /// True for `FAT_MAGIC_64` (64-bit offsets and sizes).
  public var is64Bit: Bool
  /// The slices in header order.
  public var members: [Slice]

  /// True for `FAT_MAGIC` and `FAT_MAGIC_64` read big-endian.
  package static func isMagic(_ magic: UInt32) -> Bool {
    magic == magic32 || magic == magic64
  }

  /// Decodes the universal header at the start of `bytes` and every slice it names.
  package init(_ bytes: ByteReader) throws(FormatError) {
    try self.init(source: bytes)
  }

  /// Decodes the universal file whose bytes `source` fetches: the same checks and the same values or
  /// errors as `init(_:)` over the bytes in memory, reading only the header, its table and what each
  /// slice's `MachOFile(source:)` reads.
  package init<Source: RandomAccessBytes>(source bytes: Source) throws(FormatError) {
    guard bytes.count >= 8 else { throw .fat("truncated: 8 bytes needed, \(bytes.count) in the file") }
    var start = try bytes.slice(at: 0, length: 8)
    start.endian = .big
    let magic = try start.read(UInt32.self)
    guard Self.isMagic(magic) else { throw .notRecognized(magic: magic) }
    is64Bit = magic == Self.magic64
    let count = try start.read(UInt32.self)
    // lipo and dyld reject an empty universal file; accepting it printed nothing and exited 0.
    guard count > 0 else { throw .fat("lists no architectures (nfat_arch 0)") }
    let entrySize: UInt64 = is64Bit ? 32 : 20
    // count is UInt32: 8 + count * 32 fits UInt64.
    let headerEnd = 8 + UInt64(count) * entrySize
    guard headerEnd <= UInt64(bytes.count) else {
      throw .fat("nfat_arch \(count) needs \(headerEnd) header bytes, the file has \(bytes.count)")
    }
    // headerEnd <= bytes.count (an Int): the table is inside the file.
    var reader = try bytes.slice(at: 0, length: Int(headerEnd))
    reader.endian = .big
    try reader.skip(8)
    var members: [Slice] = []
    members.reserveCapacity(Int(count))  // at most file size / 20, checked above
    // Bounds rather than a Range<UInt64>: a tuple holding a Range makes the runtime look up
    // Comparable conformances the first time one is stored (start-up time counts for a few files).
    var claimed: [(index: Int, lower: UInt64, upper: UInt64)] = []
    var seenArchitectures: [(index: Int, cpuType: UInt32, cpuSubtype: UInt32)] = []
    for index in 0..<Int(count) {
      let cpuType = try reader.read(UInt32.self)
      let cpuSubtype = try reader.read(UInt32.self)
      let offset = is64Bit ? try reader.read(UInt64.self) : UInt64(try reader.read(UInt32.self))
      let size = is64Bit ? try reader.read(UInt64.self) : UInt64(try reader.read(UInt32.self))
      let alignment = try reader.read(UInt32.self)
      if is64Bit { try reader.skip(4) }  // reserved
      func decodeSlice() throws(FormatError) -> MachOFile {
        let (end, overflow) = offset.addingReportingOverflow(size)
        guard !overflow else {
          throw .fat("slice \(index) offset 0x\(hexDigits(offset)) + size 0x\(hexDigits(size)) overflows")
        }
        guard end <= UInt64(bytes.count) else {
          throw .fat("slice \(index) offset \(offset) + size \(size) extends past the end of the file (\(bytes.count) bytes)")
        }
        guard offset >= headerEnd else {
          throw .fat("slice \(index) offset \(offset) overlaps the universal header (\(headerEnd) bytes)")
        }
        guard alignment <= 15 else { throw .fat("slice \(index) alignment 2^\(alignment) is too large (at most 2^15)") }
        guard offset % (UInt64(1) << alignment) == 0 else {
          throw .fat("slice \(index) offset \(offset) is not aligned to 2^\(alignment)")
        }
        if let twin = seenArchitectures.first(where: { $0.cpuType == cpuType && $0.cpuSubtype & 0x00FF_FFFF == cpuSubtype & 0x00FF_FFFF }) {
          throw .fat("slice \(index) repeats the architecture of slice \(twin.index) (cputype \(cpuType) cpusubtype \(cpuSubtype & 0x00FF_FFFF))")
        }
        // Range.overlaps: an element in common (an empty range overlaps nothing).
        if let other = claimed.first(where: { $0.lower < end && offset < $0.upper && $0.lower < $0.upper && offset < end }) {
          throw .fat("slice \(index) overlaps slice \(other.index)")
        }
        claimed.append((index, offset, end))
        seenArchitectures.append((index, cpuType, cpuSubtype))
        // end <= bytes.count (an Int), so both conversions are exact.
        let slice = try RandomAccessSlice(bytes, at: Int(offset), length: Int(size))
        guard slice.count >= 4 else { throw .fat("slice \(index) is \(size) bytes, too short for a Mach-O header") }
        let sliceMagic = try slice.slice(at: 0, length: 4).peek(UInt32.self, at: 0)
        guard MachOFile.isMagic(sliceMagic) || MachOFile.isMagic(sliceMagic.byteSwapped) else {
          throw .fat("slice \(index) is not a Mach-O file (magic 0x\(hexDigits(UInt64(sliceMagic.byteSwapped), width: 8)))")
        }
        return try MachOFile(source: slice)
      }
      let state: Slice.State
      do { state = .decoded(try decodeSlice()) } catch { state = .failed(error) }
      members.append(Slice(cpuType: cpuType, cpuSubtype: cpuSubtype, fileOffset: offset, size: size,
                           alignment: alignment, state: state))
    }
    self.members = members
  }

  /// One summary per slice that decoded, in header order, with its `fileOffset` set.
  public var slices: [SliceSummary] {
    members.compactMap { member in
      guard let file = member.decoded else { return nil }
      var summary = file.summary
      summary.fileOffset = member.fileOffset
      return summary
    }
  }

  /// The slices that failed, with the architecture their header entry claims and why.
  public var failures: [(index: Int, architecture: String, error: FormatError)] {
    members.enumerated().compactMap { index, member in
      member.failure.map { (index, member.architecture, $0) }
    }
  }
}
