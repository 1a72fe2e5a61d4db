internal import Glibc
import ImageReaders
import ProcessInspection
import Snapshot

/// Reading report files for the CLI (no Foundation): whole files, `-` for standard input.
public enum ReportReading {
  /// The text of the report at `path` (`-`: standard input), UTF-8 with replacement, at most
  /// `ReportText.maximumSize` bytes.
  public static func readText(_ path: String) throws(ReportError) -> String {
    try readText(path, limit: ReportText.maximumSize)
  }

  /// True when `path` names an existing file or folder.
  package static func exists(_ path: String) -> Bool { FileSystem.kind(path) != .missing }

  /// Reads a whole file (a report) as UTF-8 text, bytes that are not UTF-8 kept (`PathBytes`); `-` reads standard input.
  static func readText(_ path: String, limit: Int) throws(ReportError) -> String {
    let descriptor = path == "-" ? 0 : PathBytes.withCString(path) { open($0, O_RDONLY | O_CLOEXEC) }
    guard descriptor >= 0 else { throw ReportError(String(cString: strerror(errno))) }
    defer { if descriptor != 0 { close(descriptor) } }
    var bytes: [UInt8] = []
    if path != "-" {
      var info = stat()
      if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { throw ReportError("is a directory") }
      // A regular file's size, as a hint only (it may change while read): bounded by the limit.
      if info.st_mode & S_IFMT == S_IFREG, info.st_size > 0 { bytes.reserveCapacity(Int(min(info.st_size, off_t(limit) + 1))) }
    }
    do { _ = try read(descriptor, into: &bytes, past: limit) } catch { throw ReportError(error.reason) }
    if bytes.count > limit { throw tooLarge(limit: limit) }
    guard !bytes.isEmpty else { throw ReportError("empty file") }
    return PathBytes.string(bytes)  // a path or name written raw into a report keeps its bytes
  }

  /// Reads `descriptor` into `bytes` until its end or until `bytes` holds more than `limit` bytes,
  /// 64 KiB at a time; true when the end was reached.
  static func read(_ descriptor: Int32, into bytes: inout [UInt8], past limit: Int) throws(SystemError) -> Bool {
    var buffer = [UInt8](repeating: 0, count: 65536)
    while bytes.count <= limit {
      let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
      if count < 0 { if errno == EINTR { continue }; throw .current("cannot read") }
      if count == 0 { return true }
      bytes += buffer[0..<count]
    }
    return false
  }

  /// A text larger than a report may be (`limit` bytes).
  static func tooLarge(limit: Int) -> ReportError { ReportError("too large for a crash report (over \(limit) bytes)") }
}
