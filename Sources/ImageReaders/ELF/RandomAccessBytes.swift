/// A file's bytes reached by offset: either all of them in memory (`ByteReader`), or a source that
/// fetches the ranges a parser asks for (`FileBytes` in ImageLog reads them with `pread`).
///
/// The ELF reader decodes from any conforming source with the same checked code: it asks only for
/// ranges it has already checked against `count`, and parses each range through the `ByteReader`
/// that `slice` returns.
public protocol RandomAccessBytes {
  /// The size of the whole file in bytes: the limit every file offset is checked against.
  var count: Int { get }
  /// The byte order of the readers `slice` returns.
  var endian: ByteReader.Endian { get set }
  /// A reader over `length` bytes at `start`, offsets restarting at 0, decoding with `endian`.
  /// Throws `FormatError.outOfRange(start:length:limit:)` (limit `count`) unless
  /// `0 <= start`, `0 <= length` and `start + length <= count`, as `ByteReader.slice` does;
  /// a source that reads on demand throws `FormatError.truncated` when fewer bytes come back (a
  /// file that shrank). The reader stays valid as long as the source's owner keeps it alive.
  func slice(at start: Int, length: Int) throws(FormatError) -> ByteReader
}

extension ByteReader: RandomAccessBytes {}

/// `length` bytes of another source starting at `start` (a universal file's slice), offsets
/// restarting at 0: each `slice` is checked against this view's `count`, then fetched from the base.
struct RandomAccessSlice<Base: RandomAccessBytes>: RandomAccessBytes {
  private var base: Base
  private let start: Int
  /// The view's size in bytes.
  package let count: Int
  /// The byte order of the readers `slice` returns (the base's).
  package var endian: ByteReader.Endian {
    get { base.endian }
    set { base.endian = newValue }
  }

  /// The view of `base`'s `length` bytes at `start`; throws `outOfRange` (limit `base.count`) unless
  /// they lie inside `base`, as `ByteReader.slice` does.
  package init(_ base: Base, at start: Int, length: Int) throws(FormatError) {
    guard start >= 0, length >= 0, start <= base.count, length <= base.count - start else {
      throw .outOfRange(start: start, length: length, limit: base.count)
    }
    self.base = base
    self.start = start
    count = length
  }

  package func slice(at offset: Int, length: Int) throws(FormatError) -> ByteReader {
    guard offset >= 0, length >= 0, offset <= count, length <= count - offset else {
      throw .outOfRange(start: offset, length: length, limit: count)
    }
    // start + count <= base.count (init), so start + offset cannot overflow and the range is inside base.
    return try base.slice(at: start + offset, length: length)
  }
}
