internal import Glibc
import ProcessInspection
import ImageReaders
import Snapshot

/// Where the symbol cache lives and how large it may grow. The cache keeps, per DWARF file with an
/// identity, every answer its DWARF gives (see `SymbolCacheFormat`): later runs map that file and
/// binary-search it instead of inflating and walking the DWARF.
package struct SymbolCacheSettings: Sendable {
  /// The folder holding the cache files (made when first written to).
  package var directory: String
  /// The most bytes the cache files may take together: after each write, the least recently used go
  /// (a file's modification time is set to the time of each use) until the rest fit.
  package var sizeLimit: UInt64
  /// How an entry the cache lacks is built. `nil`: by the run that needs it, which then answers from
  /// it. Otherwise that run answers from the DWARF and hands the work here, to be done elsewhere (the
  /// command line starts `imagelog cache-build` in the background: reading every unit of a large debug
  /// file takes several times as long as answering a report from it).
  package var buildElsewhere: (@Sendable (SymbolCacheRequest) -> Void)?

  /// The size limit when none is set: 512 MiB.
  package static let defaultSizeLimit: UInt64 = 512 << 20

  /// Settings with this folder and limit.
  package init(directory: String, sizeLimit: UInt64 = defaultSizeLimit) {
    self.directory = directory
    self.sizeLimit = sizeLimit
  }

  /// `$XDG_CACHE_HOME/imagelog`, else `$HOME/.cache/imagelog`, limited to `IMAGELOG_CACHE_SIZE` when
  /// set (see `size(_:)`). `nil` when neither variable names a folder. Throws `ReportError` for an
  /// `IMAGELOG_CACHE_SIZE` that is not a size.
  package static func fromEnvironment() throws -> SymbolCacheSettings? {
    let base: String
    if let cache = FileSystem.environment("XDG_CACHE_HOME"), cache.hasPrefix("/") {
      base = cache
    } else if let home = FileSystem.environment("HOME"), !home.isEmpty {
      base = home + "/.cache"
    } else {
      return nil
    }
    var settings = SymbolCacheSettings(directory: base + "/imagelog")
    if let text = FileSystem.environment("IMAGELOG_CACHE_SIZE"), !text.isEmpty {
      guard let limit = size(text) else {
        throw ReportError("IMAGELOG_CACHE_SIZE: '\(text)' is not a size (bytes, or a number with K, M or G)")
      }
      settings.sizeLimit = limit
    }
    return settings
  }

  /// A size in bytes: digits, optionally followed by `K`, `M` or `G` (powers of 1024). `nil` for
  /// anything else or a size past 2^64 - 1.
  package static func size(_ text: String) -> UInt64? {
    var digits = Substring(text)
    var shift: UInt64 = 0
    switch digits.last {
    case "K", "k": shift = 10
    case "M", "m": shift = 20
    case "G", "g": shift = 30
    default: break
    }
    if shift > 0 { digits = digits.dropLast() }
    guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = UInt64(digits) else { return nil }
    let (scaled, overflow) = value.multipliedReportingOverflow(by: 1 << shift)
    return overflow ? nil : scaled
  }
}

/// The symbol cache's files: one per DWARF file with an identity, named by identity, source
/// fingerprint and format version. A file is written whole under a temporary name in the same folder
/// and renamed into place, so a reader never sees half of one and two processes writing the same entry
/// leave one whole file. Nothing here fails a symbolication: a folder that cannot be made or written
/// costs only the time to read the DWARF again next run.
///
/// Only a folder and entries no other user controls are used: owned by the effective user (or by
/// root: a cache an administrator prepared, read-only for the others) and writable by no group and
/// no other user (a shared or pre-made `XDG_CACHE_HOME/imagelog`, or an entry another user put there,
/// would let that user choose the answers). Another folder is neither read nor written, another entry
/// not read; the run answers from the DWARF, as with `--no-cache`.
package enum SymbolCacheStore {
  static let suffix = ".ilsc"
  /// Temporary files older than this are a crashed writer's and are removed while evicting.
  static let abandonedAfterSeconds = 3600

  /// The entry's file name; `nil` for an identity that is empty, longer than
  /// `SymbolCacheFormat.maximumIdentityLength` or not hexadecimal (it becomes part of a path).
  package static func entryName(identity: String, fingerprint: UInt64) -> String? {
    guard !identity.isEmpty, identity.utf8.count <= SymbolCacheFormat.maximumIdentityLength,
          identity.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
    return "\(identity)-\(hexDigits(fingerprint, width: 16)).v\(SymbolCacheFormat.version)\(suffix)"
  }

  /// What, besides the identity, tells one DWARF source from another with the same identity (a
  /// stripped binary and its debug file; a dwz-compressed file and its supplementary file; a copy
  /// changed behind its build-id, even to the same size and time: git checks files out within one
  /// tick of the file-time clock): the device, inode, size and modification time of the file and of
  /// the supplementary file, and the slice's architecture. FNV-1a; `nil` when a file cannot be examined.
  package static func fingerprint(path: String, architecture: String?, supplementaryPath: String?) -> UInt64? {
    guard let source = describe(path) else { return nil }
    var text = source + "\u{0}" + (architecture ?? "")
    if let supplementaryPath {
      guard let supplementary = describe(supplementaryPath) else { return nil }
      text += "\u{0}" + supplementary
    }
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    return hash
  }

  /// A regular file's device, inode, size and modification time, as text.
  private static func describe(_ path: String) -> String? {
    var info = stat()
    guard PathBytes.withCString(path, { stat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
    return "\(info.st_dev) \(info.st_ino) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
  }

  /// True when `info` is of a file or folder owned by the effective user or root that neither its
  /// group nor other users may write.
  static func isPrivate(_ info: stat) -> Bool {
    (info.st_uid == geteuid() || info.st_uid == 0) && info.st_mode & 0o022 == 0
  }

  /// The cache folder opened (close-on-exec) when it is private (`isPrivate`); `nil` otherwise. What
  /// is read is then looked up from this descriptor, so the folder checked is the folder read.
  static func openFolder(_ directory: String) -> Int32? {
    let descriptor = PathBytes.withCString(directory) { Glibc.open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    guard descriptor >= 0 else { return nil }
    var info = stat()
    guard fstat(descriptor, &info) == 0, isPrivate(info) else {
      close(descriptor)
      return nil
    }
    return descriptor
  }

  /// The entry `name` when it exists, is private (`isPrivate`) in a private folder, and checks as the
  /// cache of that identity and fingerprint; its time of use set to now. `nil` otherwise (the caller
  /// rebuilds it).
  package static func open(_ settings: SymbolCacheSettings, name: String, identity: String,
                           fingerprint: UInt64) -> SymbolCacheFile? {
    guard let folder = openFolder(settings.directory) else { return nil }
    defer { close(folder) }
    // Not through a link: the entry itself is checked.
    let descriptor = PathBytes.withCString(name) { openat(folder, $0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var info = stat()
    guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, isPrivate(info),
          let mapped = try? MappedFile(descriptor: descriptor, path: settings.directory + "/" + name),
          let file = try? SymbolCacheFile(mapped: mapped, identity: identity, fingerprint: fingerprint) else { return nil }
    _ = futimens(descriptor, nil)  // a read-only file system keeps the old time: no harm
    return file
  }

  /// Writes `bytes` as entry `name` (atomically), then removes the least recently used entries until
  /// the folder is within the limit. False when it could not be written.
  @discardableResult
  package static func save(_ bytes: [UInt8], _ settings: SymbolCacheSettings, name: String) -> Bool {
    // Folders only the user can read: what was symbolicated is private. One made by someone else, or
    // that others may write, is not written to (nor read from).
    guard FileSystem.makeFolders(settings.directory, mode: 0o700), let folder = openFolder(settings.directory) else { return false }
    close(folder)
    let path = settings.directory + "/" + name
    // Each writer its own temporary file (mkstemp), renamed over the entry: two writers never share one.
    do { try writeFileAtomically(path, bytes, permissions: 0o600) } catch { return false }
    evict(settings, keeping: name)
    return true
  }

  /// Removes the least recently used entries (by modification time, then name) until the others take
  /// at most `settings.sizeLimit` bytes, never `keeping`; and abandoned temporary files.
  static func evict(_ settings: SymbolCacheSettings, keeping: String) {
    var entries: [(name: String, size: UInt64, used: Int)] = []
    var total: UInt64 = 0
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    for name in FileSystem.contents(settings.directory) {
      let path = settings.directory + "/" + name
      var info = stat()
      guard PathBytes.withCString(path, { stat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
      if name.hasPrefix("."), name.contains(suffix + ".") {  // writeFileAtomically's `.NAME.XXXXXX`
        if now.tv_sec - info.st_mtim.tv_sec > abandonedAfterSeconds { _ = PathBytes.withCString(path, unlink) }
        continue
      }
      guard name.hasSuffix(suffix) else { continue }
      let size = UInt64(max(0, info.st_size))
      entries.append((name, size, info.st_mtim.tv_sec))
      total &+= size
    }
    guard total > settings.sizeLimit else { return }
    entries.sort { ($0.used, $0.name) < ($1.used, $1.name) }
    for entry in entries where total > settings.sizeLimit && entry.name != keeping {
      if PathBytes.withCString(settings.directory + "/" + entry.name, unlink) == 0 || errno == ENOENT { total -= entry.size }
    }
  }
}

/// A cache entry to build: the DWARF file it is built from, and its identity.
package struct SymbolCacheRequest: Sendable, Equatable {
  /// The file whose DWARF is read.
  package var path: String
  /// The slice of a universal file (`nil` for a thin one).
  package var architecture: String?
  /// dwz's supplementary file.
  package var supplementaryPath: String?
  /// The build-id or UUID, in lowercase hex.
  package var identity: String

  /// A request with these fields.
  package init(path: String, architecture: String?, supplementaryPath: String?, identity: String) {
    self.path = path
    self.architecture = architecture
    self.supplementaryPath = supplementaryPath
    self.identity = identity
  }

  /// The entry's source fingerprint and name; `nil` when the file cannot be examined or the identity
  /// cannot name an entry.
  var entry: (fingerprint: UInt64, name: String)? {
    guard let fingerprint = SymbolCacheStore.fingerprint(path: path, architecture: architecture, supplementaryPath: supplementaryPath),
          let name = SymbolCacheStore.entryName(identity: identity, fingerprint: fingerprint) else { return nil }
    return (fingerprint, name)
  }

  /// Builds the entry from the DWARF and writes it into `settings`' folder (unless one that checks is
  /// already there). Throws `ReportError` when the file cannot be read or the entry not written.
  package func build(into settings: SymbolCacheSettings) throws {
    guard let (fingerprint, name) = entry else { throw ReportError("\(path): cannot be examined, or identity '\(identity)' cannot name an entry") }
    if SymbolCacheStore.open(settings, name: name, identity: identity, fingerprint: fingerprint) != nil { return }
    let dwarf = try DebugInfoFile(path: path, architecture: architecture, supplementaryPath: supplementaryPath)
    guard let bytes = try dwarf.symbolCacheBytes(identity: identity, fingerprint: fingerprint) else {
      throw ReportError("\(path): its answers do not fit a symbol cache file")
    }
    guard SymbolCacheStore.save(bytes, settings, name: name) else {
      throw ReportError("\(settings.directory): cannot write \(name)")
    }
  }
}

extension DebugInfoFile {
  /// The DWARF of `path` as `init(path:architecture:supplementaryPath:)` reads it, answered from the
  /// symbol cache in `settings` when the file has an identity: an entry that checks is used. Without
  /// one, the DWARF answers; and the entry is built, by `settings.buildElsewhere` when set, else here
  /// (every answer the DWARF gives, written for the next run, and this run answered from it). Throws
  /// as `init(path:architecture:supplementaryPath:)` does.
  static func open(path: String, architecture: String?, supplementaryPath: String?, identity: BuildID?,
                   symbolCache settings: SymbolCacheSettings?) throws -> DebugInfoFile {
    guard let settings, let identity = identity?.hex else {
      return try DebugInfoFile(path: path, architecture: architecture, supplementaryPath: supplementaryPath)
    }
    let request = SymbolCacheRequest(path: path, architecture: architecture, supplementaryPath: supplementaryPath,
                                     identity: identity)
    guard let (fingerprint, name) = request.entry else {
      return try DebugInfoFile(path: path, architecture: architecture, supplementaryPath: supplementaryPath)
    }
    if let file = SymbolCacheStore.open(settings, name: name, identity: identity, fingerprint: fingerprint) {
      return DebugInfoFile(path: path, architecture: architecture, supplementaryPath: supplementaryPath, symbolCache: file)
    }
    let dwarf = try DebugInfoFile(path: path, architecture: architecture, supplementaryPath: supplementaryPath)
    if let buildElsewhere = settings.buildElsewhere {
      buildElsewhere(request)
      return dwarf
    }
    // DWARF broken somewhere, or too large for the format: answered from the DWARF, as without a cache.
    guard let bytes = try? dwarf.symbolCacheBytes(identity: identity, fingerprint: fingerprint),
          let file = try? SymbolCacheFile(bytes: bytes, identity: identity, fingerprint: fingerprint) else { return dwarf }
    SymbolCacheStore.save(bytes, settings, name: name)
    return DebugInfoFile(path: path, architecture: architecture, supplementaryPath: supplementaryPath, symbolCache: file)
  }

  /// The symbol cache file of this file's DWARF; `nil` when it does not fit the format. Throws for
  /// DWARF broken somewhere (`frames(at:)` would throw there).
  func symbolCacheBytes(identity: String, fingerprint: UInt64) throws -> [UInt8]? {
    guard case .dwarf(let reader) = answers else { return nil }
    let table: DWARFAnswerTable
    do { table = try reader.answerTable() } catch { throw ReportError("\(path): \(error)") }
    return SymbolCacheFormat.bytes(of: table, identity: identity, fingerprint: fingerprint)
  }
}
