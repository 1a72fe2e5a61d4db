internal import Glibc

/// The few file-system questions symbolication asks, on Glibc directly (no Foundation).
enum FileSystem {
  enum Kind { case file, directory, other, missing }

  /// What `path` is, following symbolic links.
  static func kind(_ path: String) -> Kind {
    var info = stat()
    guard stat(path, &info) == 0 else { return .missing }
    switch info.st_mode & S_IFMT {
    case S_IFREG: return .file
    case S_IFDIR: return .directory
    default: return .other
    }
  }

  /// True when `path` is a symbolic link (walks do not follow linked directories, so cycles end).
  static func isSymbolicLink(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
  }

  /// The names in directory `path` (without `.` and `..`), or `[]` when it cannot be read.
  static func contents(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  /// Every regular file under `root` (or `root` itself when it is a file), depth-first, not following
  /// linked directories, at most `limit` files and `maximumDepth` levels.
  static func walk(_ root: String, limit: Int = 200_000, maximumDepth: Int = 24) -> [String] {
    var result: [String] = []
    var stack: [(String, Int)] = [(root, 0)]
    while let (path, depth) = stack.popLast(), result.count < limit {
      switch kind(path) {
      case .file: result.append(path)
      case .directory:
        guard depth == 0 || !isSymbolicLink(path), depth < maximumDepth else { continue }
        for name in contents(path).reversed() {
          stack.append((path.hasSuffix("/") ? path + name : path + "/" + name, depth + 1))
        }
      default: continue
      }
    }
    return result
  }

  /// The value of an environment variable.
  static func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
  }

  /// Reads a whole file (a report) as UTF-8 text with replacement; `-` reads standard input.
  static func readText(_ path: String, limit: Int) throws(ReportError) -> String {
    let descriptor = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw ReportError(String(cString: strerror(errno))) }
    defer { if descriptor != 0 { close(descriptor) } }
    var bytes: [UInt8] = []
    if path != "-" {
      var info = stat()
      if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { throw ReportError("is a directory") }
      // A regular file's size, as a hint only (it may change while read): bounded by the limit.
      if info.st_mode & S_IFMT == S_IFREG, info.st_size > 0 { bytes.reserveCapacity(Int(min(info.st_size, off_t(limit) + 1))) }
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
      if count < 0 { if errno == EINTR { continue }; throw ReportError(String(cString: strerror(errno))) }
      if count == 0 { break }
      bytes += buffer[0..<count]
      if bytes.count > limit { throw ReportError("too large for a crash report (over \(limit) bytes)") }
    }
    guard !bytes.isEmpty else { throw ReportError("empty file") }
    return String(decoding: bytes, as: UTF8.self)
  }
}
