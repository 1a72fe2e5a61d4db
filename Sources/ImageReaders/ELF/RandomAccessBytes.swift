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
