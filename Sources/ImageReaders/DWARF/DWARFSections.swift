/// How a compressed debug section is compressed.
package enum DWARFCompression: Sendable, Equatable {
  /// `ELFCOMPRESS_ZLIB` (1), and the older `.zdebug_*` sections ("ZLIB" + 8-byte big-endian size).
  case zlib
  /// `ELFCOMPRESS_ZSTD` (2).
  case zstd
}

/// Inflates one compressed section into `output`, whose size is the uncompressed size the section's
/// header claims (already checked against `DWARFSections.maximumUncompressedSize`, and with the file's
/// other claims against `DWARFSections.maximumInflatedTotal`); returns the number
/// of bytes written, which the caller requires to equal `output.count`.
///
/// The readers stay pure Swift and take the decompressor as an argument: ImageLogSymbolication passes one
/// that `dlopen`s the system's `libz.so.1` and `libzstd.so.1` on first need. Those are fuzzed upstream,
/// fast, and on every Debian system (zlib1g is essential, dpkg needs libzstd1), while an inflater of our
/// own would be new, unfuzzed parsing of hostile bytes; loading them lazily keeps them out of the
/// `imagelog` executable's start-up, which loads only libc and libm.
package typealias DWARFDecompressor =
  (DWARFCompression, UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws(FormatError) -> Int

/// Starts `work` on another thread and returns the function that waits for it to end (or runs `work`
/// at once and returns one that does nothing). The readers have no threads of their own: ImageLog's
/// worker threads are passed in, as the decompressor is.
package typealias DWARFBackgroundRunner = (@escaping @Sendable () -> Void) -> () -> Void

/// Bytes allocated for a decompressed section; freed with the last reference.
package final class DWARFOwnedBytes: @unchecked Sendable {
  /// The bytes (never written after the section is decompressed into them).
  package let buffer: UnsafeMutableRawBufferPointer

  /// Allocates `count` uninitialised bytes.
  package init(count: Int) {
    buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
  }

  deinit { buffer.deallocate() }
}

/// The bytes of one debug section, kept alive by `owner` (a mapped file or `DWARFOwnedBytes`).
package struct DWARFSection: @unchecked Sendable {
  /// The section's contents (decompressed).
  package let bytes: UnsafeRawBufferPointer
  // Immutable bytes that live as long as this reference: what makes the type Sendable.
  let owner: AnyObject?

  /// A section over `bytes`, which `owner` keeps alive.
  package init(bytes: UnsafeRawBufferPointer, owner: AnyObject?) {
    self.bytes = bytes
    self.owner = owner
  }

  /// No section.
  package static var empty: DWARFSection { DWARFSection(bytes: UnsafeRawBufferPointer(start: nil, count: 0), owner: nil) }

  /// True when the file had no such section (or an empty one).
  package var isEmpty: Bool { bytes.isEmpty }
}

/// The DWARF sections of one file (or one Mach-O slice), decompressed, and of its supplementary file
/// (dwz's `.gnu_debugaltlink`, DWARF 5's `DW_UT_supplementary`) when there is one.
package struct DWARFSections: Sendable {
  /// The byte order of every section.
  package var endian: ByteReader.Endian
  /// `.debug_info`
  package var info = DWARFSection.empty
  /// `.debug_abbrev`
  package var abbrev = DWARFSection.empty
  /// `.debug_line`
  package var line = DWARFSection.empty
  /// `.debug_str`
  package var str = DWARFSection.empty
  /// `.debug_line_str`
  var lineStr = DWARFSection.empty
  /// `.debug_str_offsets`
  var strOffsets = DWARFSection.empty
  /// `.debug_addr`
  package var addr = DWARFSection.empty
  /// `.debug_ranges` (DWARF 2–4)
  package var ranges = DWARFSection.empty
  /// `.debug_rnglists` (DWARF 5)
  var rnglists = DWARFSection.empty
  /// `.debug_aranges`
  var aranges = DWARFSection.empty
  /// `.debug_frame`
  package var frame = DWARFSection.empty
  /// `.eh_frame` (`__TEXT,__eh_frame` in Mach-O); its pointers are relative to `ehFrameVMAddress`.
  package var ehFrame = DWARFSection.empty
  /// The link-time address of `.eh_frame`'s first byte.
  package var ehFrameVMAddress: UInt64 = 0
  /// `.eh_frame_hdr`
  package var ehFrameHeader = DWARFSection.empty
  /// The link-time address of `.eh_frame_hdr`'s first byte.
  package var ehFrameHeaderVMAddress: UInt64 = 0
  /// The bytes this file's compressed sections were inflated to (not its supplementary file's).
  package internal(set) var inflatedByteCount: UInt64 = 0

  private var supplementaryBox: [DWARFSections] = []  // an array, because a struct cannot hold itself

  /// The supplementary file's sections (`DW_FORM_GNU_ref_alt`, `DW_FORM_GNU_strp_alt`,
  /// `DW_FORM_strp_sup`, `DW_FORM_ref_sup4/8` point into them); `nil` when none was given.
  package var supplementary: DWARFSections? {
    get { supplementaryBox.first }
    set { supplementaryBox = newValue.map { [$0] } ?? [] }
  }

  /// No sections yet, in byte order `endian`.
  package init(endian: ByteReader.Endian) { self.endian = endian }

  /// True when there is a `.debug_info` to read functions and inlined frames from, or a line table.
  package var hasDebugInfo: Bool { !info.isEmpty || !line.isEmpty }

  /// The largest uncompressed size a compressed section may claim: 1 GiB. The largest DWARF sections of
  /// real programs are a few hundred MB; a claim beyond this is hostile, and the buffer is allocated
  /// before decompression starts.
  package static let maximumUncompressedSize: UInt64 = 1 << 30

  /// The most that one file's compressed sections may claim together, with its supplementary file's:
  /// 1 GiB, the same as one section may. Each claim is checked on its own first, so this bounds what a
  /// file of many sections, or of many headers over the same bytes, costs: every claim is summed before
  /// anything is allocated or inflated, and a file over the limit inflates nothing. Inflating is linear
  /// in its output, so this bounds the time too. Real debug files stay far below it: libc6-dbg's
  /// largest (libc's) inflates to 8.6 MB, and libstdc++6-12-dbg's library (7.3 MB of DWARF) is not
  /// compressed at all.
  ///
  /// What one symbolication holds: `Symbolicator` reads one file's DWARF at a time, letting it go before
  /// the next image's is read, so at most this much is inflated at once; `SymbolicationCache` (many
  /// reports, `--output-dir`) keeps the DWARF of files read for earlier reports within this much in all,
  /// so at most twice this while another file is read beside it.
  package static let maximumInflatedTotal: UInt64 = 1 << 30

  /// The largest uncompressed/compressed ratio a section may claim. Deflate cannot exceed 1032:1 (a
  /// 258-byte match per 2 bits at best), so a zlib claim above is a lie whatever the data; zstd can go
  /// further on runs, but real debug sections compress 3–20x, so 2000x leaves two orders of margin while
  /// refusing a few bytes that claim a gigabyte.
  static func maximumRatio(_ compression: DWARFCompression) -> UInt64 {
    compression == .zlib ? 1032 : 2000
  }

  /// The section named `name` (ELF's `.debug_info`, or `.zdebug_info`), `nil` when not one we keep.
  mutating func assign(_ name: Substring, _ section: DWARFSection) {
    switch name {
    case "info": info = section
    case "abbrev": abbrev = section
    case "line": line = section
    case "str": str = section
    case "line_str": lineStr = section
    case "str_offsets", "str_offs": strOffsets = section
    case "addr": addr = section
    case "ranges": ranges = section
    case "rnglists": rnglists = section
    case "aranges": aranges = section
    case "frame": frame = section
    default: break
    }
  }

  static func wanted(_ name: Substring) -> Bool {
    switch name {
    case "info", "abbrev", "line", "str", "line_str", "str_offsets", "str_offs", "addr", "ranges", "rnglists",
         "aranges", "frame": true
    default: false
    }
  }

  // MARK: ELF

  /// `SHF_COMPRESSED`
  package static let compressedFlag: UInt64 = 0x800

  /// The debug sections of an ELF file: `.debug_*` (compressed with `SHF_COMPRESSED` or not) and
  /// `.zdebug_*`, plus `.eh_frame`/`.eh_frame_hdr`. `bytes` is the whole file `file` was decoded from;
  /// `owner` keeps those bytes alive. Compressed sections are inflated with `decompress` into memory the
  /// result owns, once the sizes they claim are known to fit together with `inflatedBefore` (what the
  /// file this one supplements inflated) in `maximumInflatedTotal`. A section that cannot be read or
  /// inflated is an error naming it.
  package static func elf(_ file: ELFFile, bytes: ByteReader, owner: AnyObject?, decompress: DWARFDecompressor?,
                         inflatedBefore: UInt64 = 0, background: DWARFBackgroundRunner? = nil) throws(FormatError) -> DWARFSections {
    var result = DWARFSections(endian: file.header.endian)
    var compressed: [(short: Substring, section: CompressedSection)] = []
    var claimed = inflatedBefore
    for section in file.sections where section.occupiesFile {
      let name = section.name[...]
      if name == ".eh_frame" || name == ".eh_frame_hdr" {
        let contents = try file.contents(of: section, in: bytes)
        let value = contents.withUnsafeBytes { DWARFSection(bytes: $0, owner: owner) }
        if name == ".eh_frame" { result.ehFrame = value; result.ehFrameVMAddress = section.vmAddress }
        else { result.ehFrameHeader = value; result.ehFrameHeaderVMAddress = section.vmAddress }
        continue
      }
      let short: Substring
      let zdebug: Bool
      if name.hasPrefix(".debug_") { short = name.dropFirst(7); zdebug = false }
      else if name.hasPrefix(".zdebug_") { short = name.dropFirst(8); zdebug = true }
      else { continue }
      guard wanted(short) else { continue }
      let contents = try file.contents(of: section, in: bytes)
      let header: CompressedSection
      if section.flags & compressedFlag != 0 {
        header = try compressedELF(contents, name: section.name, is64Bit: file.header.is64Bit)
      } else if zdebug {
        header = try compressedZdebug(contents, name: section.name)
      } else {
        result.assign(short, contents.withUnsafeBytes { DWARFSection(bytes: $0, owner: owner) })
        continue
      }
      // Saturating: a sum past UInt64 is past the limit all the same.
      let (sum, overflow) = claimed.addingReportingOverflow(UInt64(header.size))
      claimed = overflow ? .max : sum
      compressed.append((short, header))
    }
    guard claimed <= maximumInflatedTotal else {
      throw .limitExceeded("compressed debug sections: uncompressed total" + (inflatedBefore > 0 ? " with the main file's" : ""),
                           value: claimed, limit: maximumInflatedTotal)
    }
    for (index, section) in try inflateAll(compressed.map(\.section), decompress: decompress, background: background).enumerated() {
      result.assign(compressed[index].short, section)
    }
    result.inflatedByteCount = claimed - inflatedBefore  // claimed started at inflatedBefore and only grew
    return result
  }

  /// Each of `sections` inflated, in order. With a `background` runner, the largest stream (`.debug_info`,
  /// most of the work) is inflated on another thread while this one inflates the others: zlib's
  /// streams cannot be split, but the sections are independent (what it saves: BENCHMARKS.md, figures
  /// behind design choices).
  static func inflateAll(_ sections: [CompressedSection], decompress: DWARFDecompressor?,
                         background: DWARFBackgroundRunner?) throws(FormatError) -> [DWARFSection] {
    guard let background, sections.count > 1,
          let largest = sections.indices.max(by: { sections[$0].stream.count < sections[$1].stream.count }) else {
      var inflated: [DWARFSection] = []
      for section in sections { inflated.append(try inflate(section, decompress: decompress)) }
      return inflated
    }
    let aside = BackgroundInflation(sections[largest], decompress: decompress)
    let wait = background { aside.run() }
    // Every other section is inflated before any error is thrown: the helper reads the file's bytes,
    // which must outlive it, so it is always waited for.
    let here = sections.indices.map { index in
      index == largest ? nil : Result { () throws(FormatError) in try inflate(sections[index], decompress: decompress) }
    }
    wait()
    var inflated: [DWARFSection] = []
    for (index, result) in here.enumerated() {
      inflated.append(try (index == largest ? aside.result : result!).get())  // nil only at `largest`
    }
    return inflated
  }

  /// One section inflated on another thread: written there once, read here after the wait.
  final class BackgroundInflation: @unchecked Sendable {
    private let section: CompressedSection
    private let decompress: DWARFDecompressor?
    private(set) var result: Result<DWARFSection, FormatError> = .failure(.dwarf(section: "", offset: 0, "not inflated"))

    init(_ section: CompressedSection, decompress: DWARFDecompressor?) {
      self.section = section
      self.decompress = decompress
    }

    func run() {
      result = Result { () throws(FormatError) in try DWARFSections.inflate(section, decompress: decompress) }
    }
  }

  /// A compressed section whose header has been read and its claim checked, not yet inflated.
  struct CompressedSection {
    var name: String
    var compression: DWARFCompression
    /// The uncompressed size the header claims, within the per-section limits.
    var size: Int
    /// The compressed stream.
    var stream: ByteReader
  }

  /// An `SHF_COMPRESSED` section: `Elf64_Chdr` (type, reserved, size, alignment) or `Elf32_Chdr`
  /// (type, size, alignment), then the stream.
  static func compressedELF(_ contents: ByteReader, name: String, is64Bit: Bool) throws(FormatError) -> CompressedSection {
    var header = contents
    let type = try header.read(UInt32.self)
    if is64Bit { _ = try header.read(UInt32.self) }
    let size = try header.readWord(is64Bit: is64Bit)
    _ = try header.readWord(is64Bit: is64Bit)
    let compression: DWARFCompression
    switch type {
    case 1: compression = .zlib
    case 2: compression = .zstd
    default: throw .dwarf(section: name, offset: 0, "unknown compression type \(type) (ELFCOMPRESS_ZLIB 1 and ELFCOMPRESS_ZSTD 2 are known)")
    }
    let stream = try contents.slice(at: header.offset, length: header.remaining)
    return try checkedClaim(stream, compression: compression, size: size, name: name)
  }

  /// A `.zdebug_*` section: "ZLIB", the uncompressed size as 8 big-endian bytes, a zlib stream.
  static func compressedZdebug(_ contents: ByteReader, name: String) throws(FormatError) -> CompressedSection {
    guard contents.hasBytes("ZLIB", at: 0) else {
      throw .dwarf(section: name, offset: 0, "does not start with \"ZLIB\"")
    }
    var header = try contents.slice(at: 4, length: 8)
    header.endian = .big
    let size = try header.read(UInt64.self)
    let stream = try contents.slice(at: 12, length: contents.count - 12)  // slice(at: 4, length: 8) proved count >= 12
    return try checkedClaim(stream, compression: .zlib, size: size, name: name)
  }

  /// The section, once its claim is within `maximumUncompressedSize` and the compression's ratio.
  static func checkedClaim(_ stream: ByteReader, compression: DWARFCompression, size: UInt64,
                           name: String) throws(FormatError) -> CompressedSection {
    let (ratioLimit, overflow) = UInt64(stream.count).multipliedReportingOverflow(by: maximumRatio(compression))
    let limit = overflow ? maximumUncompressedSize : min(maximumUncompressedSize, max(ratioLimit, 4096))
    guard size <= limit, let count = Int(exactly: size) else {
      throw .limitExceeded("\(name): uncompressed size", value: size, limit: limit)
    }
    return CompressedSection(name: name, compression: compression, size: count, stream: stream)
  }

  /// Inflates `section` into memory the result owns.
  static func inflate(_ section: CompressedSection, decompress: DWARFDecompressor?) throws(FormatError) -> DWARFSection {
    guard let decompress else {
      throw .dwarf(section: section.name, offset: 0, "is compressed and no decompressor was given")
    }
    let count = section.size
    let owned = DWARFOwnedBytes(count: count)
    let output = UnsafeMutableRawBufferPointer(rebasing: owned.buffer[0..<count])
    let produced = try section.stream.withUnsafeBytes { input throws(FormatError) in
      try decompress(section.compression, input, output)
    }
    guard produced == count else {
      throw .dwarf(section: section.name, offset: 0, "decompressed to \(produced) bytes, the header says \(count)")
    }
    return DWARFSection(bytes: UnsafeRawBufferPointer(output), owner: owned)
  }

  // MARK: Mach-O

  /// The debug sections of a Mach-O slice: `__DWARF,__debug_*` (a dSYM's or an object file's) and
  /// `__TEXT,__eh_frame`. `slice` is the slice's bytes (offsets from its start); `owner` keeps them alive.
  package static func machO(_ file: MachOFile, slice: ByteReader, owner: AnyObject?) throws(FormatError) -> DWARFSections {
    var result = DWARFSections(endian: file.header.endian)
    for segment in file.segments {
      for section in segment.sections {
        let isDWARF = section.segmentName == "__DWARF" || (segment.name.isEmpty && section.name.hasPrefix("__debug_"))
        let isEHFrame = section.segmentName == "__TEXT" && section.name == "__eh_frame"
        guard isDWARF || isEHFrame else { continue }
        let range = try ByteReader.checkedRange(offset: UInt64(section.fileOffset), size: section.size, limit: slice.count,
                                                "section \(section.segmentName),\(section.name)")
        var contents = try slice.slice(at: range.lowerBound, length: range.count)
        contents.endian = file.header.endian
        let value = contents.withUnsafeBytes { DWARFSection(bytes: $0, owner: owner) }
        if isEHFrame {
          result.ehFrame = value
          result.ehFrameVMAddress = section.address
        } else if section.name.hasPrefix("__debug_") {
          let short = section.name.dropFirst(8)
          if wanted(short) { result.assign(short, value) }
        }
      }
    }
    return result
  }

  /// A reader over `section` in this file's byte order.
  @inline(__always)
  func reader(_ section: DWARFSection) -> ByteReader { ByteReader(section.bytes, endian: endian) }
}
