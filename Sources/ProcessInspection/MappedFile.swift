internal import Glibc
import ImageReaders

/// A regular file mapped read-only into memory, so readers touch only the pages they parse.
/// Unmapped when the value's last copy goes away.
public final class MappedFile: @unchecked Sendable {
  /// The path the file was opened with.
  package let path: String
  private let base: UnsafeMutableRawPointer?
  /// The file's size in bytes.
  package let count: Int

  /// Why a path could not be mapped; `description` is one line without the path (the caller adds it).
  public enum OpenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A system call failed (`open`, `fstat`, `mmap`, `pread`).
    case system(SystemError)
    case notRegularFile(kind: String)
    case empty
    /// Fewer bytes could be read than the file had when it was opened (`FileBytes`).
    case shrank(size: Int)

    /// One line without the path (the caller adds it).
    public var description: String {
      switch self {
      case .system(let error): error.description
      case .notRegularFile(let kind): "is a \(kind), not a regular file"
      case .empty: "empty file"
      case .shrank(let size): "file shrank while being read (it had \(size) bytes)"
      }
    }
  }

  /// Opens and maps `path`. Directories, FIFOs, devices and sockets are refused before any read,
  /// so a FIFO cannot block the caller.
  package convenience init(path: String) throws(OpenError) {
    var info = stat()
    guard PathBytes.withCString(path, { stat($0, &info) }) == 0 else { throw .system(.current("cannot open")) }
    if let kind = Self.kindName(info.st_mode) { throw .notRegularFile(kind: kind) }
    let descriptor = PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
    guard descriptor >= 0 else { throw .system(.current("cannot open")) }
    defer { close(descriptor) }
    try self.init(descriptor: descriptor, path: path)
  }

  /// Maps the file open as `descriptor` (read; the caller keeps and closes it), opened as `path`.
  /// Anything but a regular file is refused.
  package init(descriptor: Int32, path: String) throws(OpenError) {
    self.path = path
    var info = stat()
    guard fstat(descriptor, &info) == 0 else { throw .system(.current("cannot stat")) }
    if let kind = Self.kindName(info.st_mode) { throw .notRegularFile(kind: kind) }
    guard info.st_size > 0 else { throw .empty }
    guard let size = Int(exactly: info.st_size) else { throw .system(SystemError("too large", errno: EFBIG)) }
    let mapping = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0)
    guard let mapping, mapping != MAP_FAILED else { throw .system(.current("cannot map")) }
    base = mapping
    count = size
  }

  deinit { if let base { munmap(base, count) } }

  /// Calls `body` with a reader over the whole file.
  package func withReader<R, E: Error>(_ body: (ByteReader) throws(E) -> R) throws(E) -> R {
    try body(ByteReader(UnsafeRawBufferPointer(start: base, count: count)))
  }

  /// Calls `body` with the whole file's bytes, at the same address while the mapping lives (a reader
  /// that comes back to them later keeps the `MappedFile`: `PinnedBytes`).
  package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
    try body(UnsafeRawBufferPointer(start: base, count: count))
  }

  /// What a file that is not regular is, in the words of the errors; nil for a regular file.
  static func kindName(_ mode: mode_t) -> String? {
    switch mode & S_IFMT {
    case S_IFREG: nil
    case S_IFDIR: "directory"
    case S_IFIFO: "FIFO"
    case S_IFCHR: "character device"
    case S_IFBLK: "block device"
    case S_IFSOCK: "socket"
    default: "special file"
    }
  }
}

extension MappedFile: PinnedBytes {}
