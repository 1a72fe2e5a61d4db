#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders

/// The committed fixture files, found from this source file's path (no Bundle, no Foundation).
/// `Fixtures/elf` comes from Scripts/make-elf-fixtures; other formats add their own folders.
enum Fixtures {
  /// The absolute path of the Fixtures folder next to this file.
  static let directory: String = {
    let file = "\(#filePath)"
    let folder = file.lastIndex(of: "/").map { String(file[..<$0]) } ?? "."
    return folder + "/Fixtures"
  }()

  /// The absolute path of a fixture named relative to the Fixtures folder (`elf/libdep-x86_64.so`).
  static func path(_ name: String) -> String { directory + "/" + name }

  /// The bytes of a fixture (or of any file when `name` is absolute).
  static func bytes(_ name: String) throws -> [UInt8] {
    let file = name.hasPrefix("/") ? name : path(name)
    guard let bytes = readFileBytes(file) else { throw TestSupportError("cannot read \(file)") }
    return bytes
  }

  /// Every fixture file, recursively, as names relative to the Fixtures folder, sorted.
  static var all: [String] { files(under: directory, relativeTo: directory + "/").sorted() }

  /// The fixtures in one subfolder (`elf`), as names relative to the Fixtures folder, sorted.
  static func all(in folder: String) -> [String] {
    files(under: path(folder), relativeTo: directory + "/").sorted()
  }

  private static func files(under folder: String, relativeTo prefix: String) -> [String] {
    var result: [String] = []
    for name in directoryNames(folder) where !name.hasPrefix(".") {
      let full = folder + "/" + name
      var info = stat()
      guard lstat(full, &info) == 0 else { continue }
      if info.st_mode & S_IFMT == S_IFDIR {
        result += files(under: full, relativeTo: prefix)
      } else if info.st_mode & S_IFMT == S_IFREG {
        result.append(String(full.dropFirst(prefix.count)))
      }
    }
    return result
  }
}

/// Maps `path` read-only and calls `body` with a reader over it (large system libraries are not
/// copied into arrays). Throws when the file cannot be opened or is empty.
func withMappedFile<R>(_ path: String, _ body: (ByteReader) throws -> R) throws -> R {
  let descriptor = open(path, O_RDONLY | O_CLOEXEC)
  guard descriptor >= 0 else { throw TestSupportError("cannot open \(path)") }
  defer { close(descriptor) }
  var info = stat()
  guard fstat(descriptor, &info) == 0, info.st_size > 0 else { throw TestSupportError("empty \(path)") }
  let size = Int(info.st_size)
  guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0), base != MAP_FAILED else {
    throw TestSupportError("cannot map \(path)")
  }
  defer { munmap(base, size) }
  return try body(ByteReader(UnsafeRawBufferPointer(start: base, count: size)))
}
