internal import Glibc
import ImageReaders

/// A `.dSYM` bundle: the folder Apple's `dsymutil` writes beside a binary, whose DWARF companions
/// (Mach-O `MH_DSYM` files, one per binary, each carrying the binary's `LC_UUID`s) are in
/// `Contents/Resources/DWARF/`. Mirrors what `dwarfdump --uuid Foo.dSYM` reads.
package enum DSYMBundle {
  /// Why a bundle could not be listed; `description` is one line without the path.
  package enum ListError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bundle has no `Contents/Resources/DWARF` folder.
    case noDWARFFolder
    /// The DWARF folder could not be opened.
    case system(SystemError)

    package var description: String {
      switch self {
      case .noDWARFFolder: "not a dSYM bundle (no Contents/Resources/DWARF folder)"
      case .system(let error): error.description
      }
    }
  }

  /// True when `path` names a folder whose name ends in `.dSYM` (a trailing `/` allowed).
  package static func isBundle(_ path: String) -> Bool {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard trimmed.lowercased().hasSuffix(".dsym") else { return false }
    var info = stat()
    return PathBytes.withCString(String(trimmed), { stat($0, &info) }) == 0 && info.st_mode & S_IFMT == S_IFDIR
  }

  /// The regular files in the bundle's `Contents/Resources/DWARF/`, by name (dot-files skipped).
  package static func dwarfFiles(inBundle path: String) throws(ListError) -> [String] {
    var base = path
    while base.count > 1, base.hasSuffix("/") { base.removeLast() }
    let folder = base + "/Contents/Resources/DWARF"
    var info = stat()
    guard PathBytes.withCString(folder, { stat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFDIR else { throw .noDWARFFolder }
    guard let directory = PathBytes.withCString(folder, opendir) else { throw .system(.current("cannot open \(folder)")) }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { raw in PathBytes.string(raw.prefix { $0 != 0 }) }
      guard !name.hasPrefix(".") else { continue }
      var entryInfo = stat()
      if PathBytes.withCString(folder + "/" + name, { stat($0, &entryInfo) }) == 0, entryInfo.st_mode & S_IFMT == S_IFREG { names.append(name) }
    }
    return names.sorted().map { folder + "/" + $0 }
  }
}
