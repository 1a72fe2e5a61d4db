internal import Glibc
public import ImageReaders

/// A regular file read in ranges on demand: `pread` for the small ranges a header parser asks for, a
/// private read-only mapping for large ones. Reading a library's build-id, SONAME and NEEDED touches
/// three or four small ranges, and a few `pread` calls cost far less than mapping and unmapping the
/// whole file (no page faults, no TLB shootdowns when several threads read files).
///
/// Ranges are fetched through `withRanges`; the readers it hands out are valid until the
/// `FileBytes` goes away. The descriptor is closed and the buffers freed when the last reference
/// goes away. Not for concurrent use: one thread reads one file.
public final class FileBytes {
  /// The path the file was opened with.
  public let path: String
  /// The file's size in bytes when it was opened.
  public let count: Int
  // `@exclusivity(unchecked)`: one thread uses a FileBytes (see above), and the run-time exclusivity
  // check on every access to these was a measurable part of reading a file's few ranges.
  /// Why the last fetch failed, when it was the system rather than the bytes: a read error, or
  /// fewer bytes than the size said (the file shrank). `FormatError.truncated` is what the parser saw.
  @exclusivity(unchecked) public private(set) var readError: MappedFile.OpenError?
  /// How many `pread` calls and mappings fetched ranges (benchmarks and tests).
  @exclusivity(unchecked) package private(set) var fetchCount = 0

  private let descriptor: Int32
  @exclusivity(unchecked) private var chunks: [Chunk] = []

  /// Bytes fetched from file offset `offset`: allocated and read, or mapped (`mapping` is then the
  /// whole mapping, to unmap).
  private struct Chunk {
    var offset: Int
    var bytes: UnsafeMutableRawBufferPointer
    var mapping: UnsafeMutableRawBufferPointer?
  }

  // For typical files 4 KiB at the start holds the header, program headers and notes; 4 KiB at the
  // end the section headers, their names and `.gnu_debuglink`; PT_DYNAMIC and the dynamic string
  // table are one read each (reads per file: BENCHMARKS.md). Larger first reads cost more in copying
  // than the reads they save.
  /// Reads start and end on multiples of this.
  static let readUnit = 1024
  /// The first read: the ELF header, program headers and notes of typical files.
  static let headReadSize = 4096
  /// A read that ends this close to the end of the file reads the rest of it, and at least this much.
  static let tailReadSize = 4096
  /// Ranges larger than this are mapped instead of copied (a big library's `.dynstr` of megabytes
  /// of which a few names are read).
  static let largestRead = 32 * 1024

  /// Opens `path` for reading. Directories, FIFOs, devices and sockets are refused before any read:
  /// the open does not block (`O_NONBLOCK`) and `fstat` of the descriptor says what it is.
  /// The same errors as `MappedFile`: a missing file is "cannot open", a 0-byte file `.empty`.
  public init(path: String) throws(MappedFile.OpenError) {
    self.path = path
    let descriptor = PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
    guard descriptor >= 0 else { throw .system(.current("cannot open")) }
    var info = stat()
    guard fstat(descriptor, &info) == 0 else {
      let code = errno
      close(descriptor)
      throw .system(SystemError("cannot stat", errno: code))
    }
    if let kind = MappedFile.kindName(info.st_mode) {
      close(descriptor)
      throw .notRegularFile(kind: kind)
    }
    guard info.st_size > 0 else {
      close(descriptor)
      throw .empty
    }
    guard let size = Int(exactly: info.st_size) else {
      close(descriptor)
      throw .system(SystemError("too large", errno: EFBIG))
    }
    self.descriptor = descriptor
    count = size
    chunks.reserveCapacity(4)  // an ELF file takes 2 to 4 fetches: one allocation, not one per growth
  }

  /// The parts of a file that were kept as they went by (a core read once from a pipe): `count` is the
  /// size of the whole, and a range outside `held` reads as missing (`FormatError.truncated`, with no
  /// `readError`: nothing failed, the bytes were not kept). Takes ownership of each buffer (allocated
  /// with `UnsafeMutableRawBufferPointer.allocate`); the ranges must not overlap.
  package init(path: String, count: Int, held: [(offset: Int, bytes: UnsafeMutableRawBufferPointer)]) {
    self.path = path
    self.count = count
    descriptor = -1
    chunks = held.map { Chunk(offset: $0.offset, bytes: $0.bytes, mapping: nil) }
  }

  deinit {
    for chunk in chunks {
      if let mapping = chunk.mapping { munmap(mapping.baseAddress, mapping.count) } else { chunk.bytes.deallocate() }
    }
    if descriptor >= 0 { close(descriptor) }
  }

  /// Calls `body` with a source over the whole file (little-endian until the parser says otherwise).
  /// The readers it returns must not escape `body`.
  public func withRanges<R, E: Error>(_ body: (FileRanges) throws(E) -> R) throws(E) -> R {
    try withExtendedLifetime(self) { () throws(E) -> R in try body(FileRanges(file: self)) }
  }

  /// A reader over `start..<start + length`, fetched unless an earlier fetch holds it.
  /// `start` and `length` are checked against `count` by the caller (`FileRanges.slice`).
  fileprivate func bytes(at start: Int, length: Int) throws(FormatError) -> UnsafeRawBufferPointer {
    // Callers proved 0 <= start, 0 <= length <= count - start.
    let end = start + length
    for chunk in chunks where chunk.offset <= start && end - chunk.offset <= chunk.bytes.count {
      let from = start - chunk.offset
      return UnsafeRawBufferPointer(rebasing: chunk.bytes[from..<from + length])
    }
    // Held parts only (`init(path:count:held:)`): what was not kept is not there.
    guard descriptor >= 0 else { throw .truncated(at: start, needed: length, available: 0) }
    let chunk = length > Self.largestRead ? try map(start, length) : try read(start, length)
    chunks.append(chunk)
    let from = start - chunk.offset
    return UnsafeRawBufferPointer(rebasing: chunk.bytes[from..<from + length])
  }

  /// Reads whole `readUnit`s around the range, clipped to the file: at least `headReadSize` for the
  /// first read, and through the end of the file for a range in its last `tailReadSize` bytes (where
  /// the section header table, the section names and `.gnu_debuglink` usually are, read at once).
  /// A short read means the file shrank since it was opened: `.truncated`.
  private func read(_ start: Int, _ length: Int) throws(FormatError) -> Chunk {
    let unit = Self.readUnit
    // The caller proved 0 <= start <= start + length <= count. Every bound below is moved up by at
    // most the room left before `count`, so no sum can overflow, whatever size fstat reported.
    var lower = start - start % unit
    var upper = start + length
    upper += min((unit - upper % unit) % unit, count - upper)
    upper = max(upper, min(count, chunks.isEmpty ? Self.headReadSize : 0))
    if count - upper < Self.tailReadSize && upper - lower <= Self.largestRead - Self.tailReadSize {
      let tail = max(0, min(lower, count - Self.tailReadSize))
      lower = tail - tail % unit
      upper = count
    }
    let size = upper - lower
    // Byte alignment: the readers load unaligned, and malloc serves it without posix_memalign.
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, 1), alignment: 1)
    var filled = 0
    while filled < size {
      fetchCount += 1
      let got = pread(descriptor, buffer.baseAddress.map { $0 + filled }, size - filled, off_t(lower + filled))
      if got < 0 && errno == EINTR { continue }
      if got <= 0 {
        if got < 0 { readError = .system(.current("cannot read")) }
        break
      }
      filled += got
    }
    // The file may have shrunk: only the bytes read exist, and the range must lie inside them.
    guard start + length <= lower + filled else {
      buffer.deallocate()
      if readError == nil { readError = .shrank(size: count) }
      throw .truncated(at: start, needed: length, available: max(0, lower + filled - start))
    }
    return Chunk(offset: lower, bytes: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<filled]), mapping: nil)
  }

  /// Maps the pages holding the range (large ranges: only the pages the parser touches are read).
  private func map(_ start: Int, _ length: Int) throws(FormatError) -> Chunk {
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let lower = start - start % max(page, 1)
    let size = start + length - lower  // start + length <= count
    let mapping = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, off_t(lower))
    guard let mapping, mapping != MAP_FAILED else {
      readError = .system(.current("cannot map"))
      throw .truncated(at: start, needed: length, available: 0)
    }
    fetchCount += 1
    let whole = UnsafeMutableRawBufferPointer(start: mapping, count: size)
    return Chunk(offset: lower, bytes: whole, mapping: whole)
  }
}

/// The `RandomAccessBytes` view of a `FileBytes`: what the ELF reader decodes from.
/// One thread reads one file: neither a FileBytes nor the readers it lends may cross threads.
@available(*, unavailable)
extension FileBytes: Sendable {}

/// The bytes of a `FileBytes` as the readers see them, lent by `withRanges`: each `slice` fetches
/// only its range (one `pread`, or a mapping for a large one).
public struct FileRanges: RandomAccessBytes {
  // Strong: a FileRanges kept past `withRanges` keeps its file (and every reader it lent) alive.
  private let file: FileBytes
  /// The byte order of the readers `slice` returns.
  public var endian: ByteReader.Endian = .little
  /// The file's size when it was opened.
  public var count: Int { file.count }

  init(file: FileBytes) { self.file = file }

  /// A reader over `length` bytes at `start`, with `ByteReader.slice`'s checks and errors.
  public func slice(at start: Int, length: Int) throws(FormatError) -> ByteReader {
    guard start >= 0, length >= 0, start <= count, length <= count - start else {
      throw .outOfRange(start: start, length: length, limit: count)
    }
    guard length > 0 else { return ByteReader(UnsafeRawBufferPointer(start: nil, count: 0), endian: endian) }
    return ByteReader(try file.bytes(at: start, length: length), endian: endian)
  }
}
