internal import Glibc
import ImageReaders

/// The few file-system questions the readers of reports and symbolication ask, on Glibc directly (no
/// Foundation).
package enum FileSystem {
  package enum Kind { case file, directory, other, missing }

  /// What `path` is, following symbolic links.
  package static func kind(_ path: String) -> Kind {
    var info = stat()
    guard PathBytes.withCString(path, { stat($0, &info) }) == 0 else { return .missing }
    switch info.st_mode & S_IFMT {
    case S_IFREG: return .file
    case S_IFDIR: return .directory
    default: return .other
    }
  }

  /// True when `path` is a symbolic link (walks do not follow linked directories, so cycles end).
  package static func isSymbolicLink(_ path: String) -> Bool {
    var info = stat()
    return PathBytes.withCString(path, { lstat($0, &info) }) == 0 && info.st_mode & S_IFMT == S_IFLNK
  }

  /// The names in directory `path` (without `.` and `..`), or `[]` when it cannot be read.
  package static func contents(_ path: String) -> [String] {
    contents(path, limit: .max) ?? []
  }

  /// The names in directory `path` (without `.` and `..`), sorted; `nil` when it cannot be read or
  /// holds more than `limit` names (reading stops there).
  package static func contents(_ path: String, limit: Int) -> [String]? {
    guard let directory = PathBytes.withCString(path, opendir) else { return nil }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { raw in PathBytes.string(raw.prefix { $0 != 0 }) }
      if name != "." && name != ".." { names.append(name) }
      guard names.count <= limit else { return nil }
    }
    return names.sorted()
  }

  /// Every regular file under `root` (or `root` itself when it is a file), depth-first, not following
  /// linked directories, at most `limit` files and `maximumDepth` levels.
  package static func walk(_ root: String, limit: Int = 200_000, maximumDepth: Int = 24) -> [String] {
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

  /// `mkdir -p`: makes `path` and the folders above it that are missing, each with `mode` (less the
  /// umask). False when one cannot be made.
  package static func makeFolders(_ path: String, mode: UInt32 = 0o755) -> Bool {
    var built = path.hasPrefix("/") ? "" : "."
    for part in path.split(separator: "/") {
      built += "/" + part
      if PathBytes.withCString(built, { mkdir($0, mode_t(mode)) }) != 0 && errno != EEXIST { return false }
    }
    return true
  }

  /// `path` made absolute and free of symbolic links (`realpath(3)`), nil when it cannot be resolved.
  package static func realPath(_ path: String) -> String? {
    guard let resolved = PathBytes.withCString(path, { realpath($0, nil) }) else { return nil }
    defer { free(resolved) }
    return PathBytes.string(cString: resolved)
  }

  /// True when both paths name one existing file (same device and inode: a link to the other, say).
  package static func sameFile(_ first: String, _ second: String) -> Bool {
    var a = stat(), b = stat()
    return PathBytes.withCString(first, { stat($0, &a) }) == 0 && PathBytes.withCString(second, { stat($0, &b) }) == 0
      && a.st_dev == b.st_dev && a.st_ino == b.st_ino
  }

  /// The value of an environment variable.
  package static func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return PathBytes.string(cString: value)
  }
}
