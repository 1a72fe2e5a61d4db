import ProcessInspection
import ImageReaders

/// The symbol cache's file: what `DWARFReader.frames(at:)` answers for every address of one DWARF
/// file, laid out to be mapped and binary-searched (no inflating, no DIE walk). Little-endian:
///
///     header (64 bytes)
///       0 magic "ILSC"          4 format version     8 header size (64)   12 identity length
///      16 source fingerprint   24 checksum          32 file size
///      40 range count          44 subroutine count  48 string bytes      52 zero
///      56 base address
///     identity (ASCII: the build-id or UUID in hex)
///     range starts      UInt32 x ranges: offsets from the base address, ascending; each range runs to
///                       the next, the last to the end of the address space
///     range locations   16 bytes x ranges: the innermost frame's subroutine (or none: a line without a
///                       function), file (string), line, column; subroutine and file none: no answer
///     subroutines       24 bytes each: name (string or none), next subroutine out (or none; always a
///                       lower index), flags (bit 0: inlined), the next frame's file (string), line, column
///     strings           ULEB128 length, then UTF-8; referred to by their offset here
///
/// The checksum covers every byte but its own eight. A file is untrusted input: `SymbolCacheFile`
/// checks the header, the identity, the sizes and the checksum when it opens one, and every index and
/// offset when it answers; a file that fails is rebuilt.
package enum SymbolCacheFormat {
  /// "ILSC".
  static let magic: UInt32 = 0x4353_4C49
  /// Raised whenever the layout or the meaning of a field changes: older files are then rebuilt.
  package static let version: UInt32 = 1
  static let headerSize = 64
  static let checksumOffset = 24
  static let none: UInt32 = .max
  static let rangeSize = 16
  static let subroutineSize = 24
  static let maximumIdentityLength = 128

  /// The file's checksum: `WordHash` of every byte, the checksum field read as zero.
  static func checksum(_ file: ByteReader) throws(FormatError) -> UInt64 {
    WordHash.hash(file, skipping: checksumOffset)
  }
}

/// One symbol cache file (see `SymbolCacheFormat`), checked whole when opened: answers as the DWARF
/// file it was built from answers `DWARFReader.frames(at:)`.
package final class SymbolCacheFile {
  private enum Storage {
    case mapped(MappedFile)
    case bytes([UInt8])
  }

  private struct Layout {
    var baseAddress: UInt64 = 0
    var rangeCount = 0
    var subroutineCount = 0
    var rangeStarts = 0
    var rangeLocations = 0
    var subroutines = 0
    var strings = 0
    var stringBytes = 0
  }

  private let storage: Storage
  private let layout: Layout
  /// The file's size in bytes.
  package let byteCount: Int

  /// Checks `mapped` as the cache of the DWARF with identity `identity` and source fingerprint
  /// `fingerprint` (see `SymbolCacheStore`). Throws `FormatError.symbolCache` (or a bounds error) for
  /// a file that is not that cache, whole and undamaged.
  package convenience init(mapped: MappedFile, identity: String, fingerprint: UInt64) throws(FormatError) {
    let layout = try mapped.withReader { (reader) throws(FormatError) -> Layout in
      try Self.layout(reader, identity: identity, fingerprint: fingerprint)
    }
    self.init(storage: .mapped(mapped), layout: layout, byteCount: mapped.count)
  }

  /// Checks `bytes` as `init(mapped:identity:fingerprint:)` checks a file.
  package convenience init(bytes: [UInt8], identity: String, fingerprint: UInt64) throws(FormatError) {
    let layout = try ByteReader.reading(bytes) { (reader) throws(FormatError) -> Layout in
      try Self.layout(reader, identity: identity, fingerprint: fingerprint)
    }
    self.init(storage: .bytes(bytes), layout: layout, byteCount: bytes.count)
  }

  private init(storage: Storage, layout: Layout, byteCount: Int) {
    self.storage = storage
    self.layout = layout
    self.byteCount = byteCount
  }

  private static func layout(_ file: ByteReader, identity: String, fingerprint: UInt64) throws(FormatError) -> Layout {
    guard file.count >= SymbolCacheFormat.headerSize else {
      throw .symbolCache("\(file.count) bytes: shorter than the header")
    }
    var header = try file.slice(at: 0, length: SymbolCacheFormat.headerSize)
    guard try header.read(UInt32.self) == SymbolCacheFormat.magic else { throw .symbolCache("no magic: not a symbol cache") }
    let version = try header.read(UInt32.self)
    guard version == SymbolCacheFormat.version else {
      throw .symbolCache("format version \(version), not \(SymbolCacheFormat.version)")
    }
    let headerSize = try header.read(UInt32.self)
    guard headerSize == UInt32(SymbolCacheFormat.headerSize) else { throw .symbolCache("header size \(headerSize)") }
    let identityLength = Int(try header.read(UInt32.self))  // UInt32 -> Int is exact on 64-bit
    guard try header.read(UInt64.self) == fingerprint else { throw .symbolCache("built from another file") }
    let checksum = try header.read(UInt64.self)
    let fileSize = try header.read(UInt64.self)
    guard fileSize == UInt64(file.count) else {
      throw .symbolCache("\(file.count) bytes, but the header says \(fileSize)")
    }
    var layout = Layout()
    layout.rangeCount = Int(try header.read(UInt32.self))
    layout.subroutineCount = Int(try header.read(UInt32.self))
    layout.stringBytes = Int(try header.read(UInt32.self))
    guard try header.read(UInt32.self) == 0 else { throw .symbolCache("reserved header field is not zero") }
    layout.baseAddress = try header.read(UInt64.self)
    guard identityLength <= SymbolCacheFormat.maximumIdentityLength,
          try file.bytes(at: SymbolCacheFormat.headerSize, length: identityLength) == Array(identity.utf8) else {
      throw .symbolCache("built for another identity")
    }
    // Each count is below 2^32 and each record at most 24 bytes: the sums below stay far from overflow.
    layout.rangeStarts = SymbolCacheFormat.headerSize + identityLength
    layout.rangeLocations = layout.rangeStarts + 4 * layout.rangeCount
    layout.subroutines = layout.rangeLocations + SymbolCacheFormat.rangeSize * layout.rangeCount
    layout.strings = layout.subroutines + SymbolCacheFormat.subroutineSize * layout.subroutineCount
    guard layout.stringBytes <= file.count, layout.strings == file.count - layout.stringBytes else {
      throw .symbolCache("its sections do not add up to its size")
    }
    guard try SymbolCacheFormat.checksum(file) == checksum else { throw .symbolCache("checksum mismatch") }
    return layout
  }

  private func withReader<R>(_ body: (ByteReader) throws(FormatError) -> R) throws(FormatError) -> R {
    switch storage {
    case .mapped(let mapped): try mapped.withReader(body)
    case .bytes(let bytes): try ByteReader.reading(bytes, body)
    }
  }

  /// The frames of link-time address `address`, innermost first, as `DWARFReader.frames(at:)` gives
  /// them. Throws for a file whose records point outside it or whose chain does not go outwards.
  package func frames(at address: UInt64) throws(FormatError) -> [DWARFFrame] {
    let layout = layout
    guard layout.rangeCount > 0, address >= layout.baseAddress else { return [] }
    // Past 2^32 - 1 from the base, the last range holds the address: the search finds it at the clamp.
    let target = UInt32(clamping: address - layout.baseAddress)
    return try withReader { (file) throws(FormatError) -> [DWARFFrame] in
      var low = 0, high = layout.rangeCount
      while low < high {
        let middle = (low + high) / 2
        if try file.peek(UInt32.self, at: layout.rangeStarts + 4 * middle) <= target { low = middle + 1 } else { high = middle }
      }
      guard low > 0 else { return [] }
      // low - 1 < rangeCount: within the checked table.
      var record = try file.slice(at: layout.rangeLocations + SymbolCacheFormat.rangeSize * (low - 1),
                                  length: SymbolCacheFormat.rangeSize)
      let first = try record.read(UInt32.self)
      let fileOffset = try record.read(UInt32.self)
      if first == SymbolCacheFormat.none && fileOffset == SymbolCacheFormat.none { return [] }
      var fileName = try string(file, fileOffset)
      var line = Int(try record.read(UInt32.self))
      var column = Int(try record.read(UInt32.self))
      guard first != SymbolCacheFormat.none else {
        return [DWARFFrame(function: nil, file: fileName, line: line, column: column, isInlined: false)]
      }
      var frames: [DWARFFrame] = []
      var index = first
      // Each step goes to a lower index: at most `subroutineCount` steps.
      while true {
        var subroutine = try Self.record(file, at: layout.subroutines, index: index, count: layout.subroutineCount,
                                         size: SymbolCacheFormat.subroutineSize, "subroutine")
        let name = try subroutine.read(UInt32.self)
        let next = try subroutine.read(UInt32.self)
        let flags = try subroutine.read(UInt32.self)
        frames.append(DWARFFrame(function: name == SymbolCacheFormat.none ? nil : try string(file, name), file: fileName,
                                 line: line, column: column, isInlined: flags & 1 != 0))
        guard next != SymbolCacheFormat.none else { break }
        guard next < index else {
          throw .symbolCache("subroutine \(index)'s next, \(next), does not go outwards")
        }
        fileName = try string(file, try subroutine.read(UInt32.self))
        line = Int(try subroutine.read(UInt32.self))
        column = Int(try subroutine.read(UInt32.self))
        index = next
      }
      return frames
    }
  }

  /// A reader over record `index` of a table of `count` records of `size` bytes at `offset`.
  private static func record(_ file: ByteReader, at offset: Int, index: UInt32, count: Int, size: Int,
                             _ what: String) throws(FormatError) -> ByteReader {
    guard Int(index) < count else {
      throw .symbolCache("\(what) \(index) of \(count)")
    }
    return try file.slice(at: offset + size * Int(index), length: size)  // within the checked table
  }

  /// The string at `offset` in the string section.
  private func string(_ file: ByteReader, _ offset: UInt32) throws(FormatError) -> String {
    let start = Int(offset)
    guard start < layout.stringBytes else {
      throw .symbolCache("string offset \(offset) of \(layout.stringBytes)")
    }
    var reader = try file.slice(at: layout.strings + start, length: layout.stringBytes - start)
    let length = try reader.readULEB128()
    guard let count = Int(exactly: length), count <= reader.remaining else {
      throw .symbolCache("string at \(offset) of length \(length) past the strings' end")
    }
    return String(decoding: try reader.readBytes(count), as: UTF8.self)
  }
}
