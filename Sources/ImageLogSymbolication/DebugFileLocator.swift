import ImageLog
import ImageReaders

/// Finds the file whose identity equals a report image's: the path the report recorded, the folders
/// given with `--search` (walked recursively: ELF, Mach-O, universal files, `.dSYM` bundles),
/// `/usr/lib/debug/.build-id/xx/yyyy.debug`, and the debuginfod client cache. Never by name: a file
/// named like the image but with another identity is only reported as a mismatch.
public final class DebugFileLocator {
  /// Folders (or single files) given with `--search`.
  public let searchPaths: [String]
  /// Folders holding `.build-id/xx/yyyy.debug` trees.
  public let buildIDDirectories: [String]
  /// debuginfod client caches (`BUILDID/debuginfo`, `BUILDID/executable`).
  public let debuginfodCaches: [String]

  private var index: [SymbolFile]?
  private var cache: [String: [SymbolFile]] = [:]
  /// Files under the search paths that could not be read, with why (shown once, in the summary).
  public private(set) var unreadable: [(path: String, problem: String)] = []

  /// `systemDirectories: false` leaves out `/usr/lib/debug` and the debuginfod cache; explicit
  /// `buildIDDirectories` and `debuginfodCaches` replace them.
  public init(searchPaths: [String], systemDirectories: Bool = true, buildIDDirectories: [String]? = nil,
              debuginfodCaches: [String]? = nil) {
    self.searchPaths = searchPaths
    if let buildIDDirectories, let debuginfodCaches {
      self.buildIDDirectories = buildIDDirectories
      self.debuginfodCaches = debuginfodCaches
    } else if systemDirectories {
      self.buildIDDirectories = ["/usr/lib/debug"]
      var caches: [String] = []
      if let explicit = FileSystem.environment("DEBUGINFOD_CACHE_PATH") { caches.append(explicit) }
      if let xdg = FileSystem.environment("XDG_CACHE_HOME") { caches.append(xdg + "/debuginfod_client") }
      if let home = FileSystem.environment("HOME") { caches.append(home + "/.cache/debuginfod_client") }
      self.debuginfodCaches = caches
    } else {
      self.buildIDDirectories = []
      self.debuginfodCaches = []
    }
  }

  /// What was found for one image.
  public enum Outcome: Sendable {
    /// A file with the same identity (`how` says where it came from).
    case found(SymbolFile, how: String)
    /// No identity in the report: the recorded path was used unverified.
    case unverified(SymbolFile)
    /// Files named like the image exist but their identity differs.
    case mismatch(reportID: String, fileID: String, path: String)
    case missing
  }

  /// Finds the best file for `image`: of all the files with its identity, one with DWARF and a full
  /// symbol table beats one with exported symbols only.
  public func locate(_ image: CrashReport.Image, architecture: String?) -> Outcome {
    let architecture = image.architecture ?? architecture
    guard let identity = image.identity else {
      if let path = image.path, let file = slices(path).flatMap({ SymbolFile.slice($0, architecture: architecture) }) {
        return .unverified(file)
      }
      return .missing
    }
    var matches: [(SymbolFile, String)] = []
    var mismatch: (String, String)?
    if let path = image.path, let files = slices(path) {
      let candidates = SymbolFile.slice(files, architecture: architecture).map { [$0] } ?? files
      if let file = candidates.first(where: { $0.buildID.map { identity.match($0) != .different } ?? false }) {
        matches.append((file, "recorded path"))
      } else if let file = candidates.first {
        mismatch = (file.buildID?.hex ?? "none", path)
      }
    }
    // `.gnu_debuglink`, where GDB looks: beside the binary, in its .debug/ folder, and under each
    // debug root with the binary's folder appended. Used only when the build-id matches too.
    for (file, _) in matches {
      guard let link = file.debugLink, !link.contains("/") else { continue }
      let folder = file.path.contains("/") ? String(file.path[..<(file.path.lastIndex(of: "/") ?? file.path.endIndex)]) : "."
      var places = [folder + "/" + link, folder + "/.debug/" + link]
      places += buildIDDirectories.map { $0 + (folder.hasPrefix("/") ? "" : "/") + folder + "/" + link }
      for place in places where place != file.path {
        for candidate in slices(place) ?? [] where candidate.buildID.map({ identity.match($0) != .different }) ?? false {
          matches.append((candidate, ".gnu_debuglink"))
        }
      }
    }
    for directory in buildIDDirectories {
      for path in buildIDTreeCandidates(directory, identity) {
        for file in slices(path) ?? [] where file.buildID.map({ identity.match($0) != .different }) ?? false {
          matches.append((file, directory + "/.build-id"))
        }
      }
    }
    for cacheDirectory in debuginfodCaches {
      for path in debuginfodCandidates(cacheDirectory, identity) {
        for file in slices(path) ?? [] where file.buildID.map({ identity.match($0) != .different }) ?? false {
          matches.append((file, "debuginfod cache"))
        }
      }
    }
    // A match with DWARF and a full symbol table needs nothing more; otherwise keep looking.
    let complete = matches.contains { $0.0.hasDebugInfo && $0.0.hasFullSymbolTable }
    if !searchPaths.isEmpty && !complete {
      for file in searchIndex() {
        guard let id = file.buildID else { continue }
        if identity.match(id) != .different {
          if let full = slices(file.path)?.first(where: { $0.architecture == file.architecture }) { matches.append((full, "--search")) }
        } else if mismatch == nil, Image.shortName(of: file.path) == image.name || file.path.hasSuffix("/\(image.name)") {
          mismatch = (id.hex, file.path)
        }
      }
    }
    // Names from the file with the fullest symbol table, lines from one with DWARF (they may differ:
    // a stripped binary and its .debug file, a binary and a dSYM without symbols).
    if var best = matches.max(by: { symbolScore($0.0) < symbolScore($1.0) }) {
      if !best.0.hasDebugInfo, let debug = matches.first(where: { $0.0.hasDebugInfo }) {
        best.0.debugInfoPath = debug.0.path
        best.0.debugInfoIsUniversal = debug.0.isUniversalSlice
        best.0.hasDebugInfo = true
      }
      return .found(best.0, how: best.1)
    }
    if let (fileID, path) = mismatch { return .mismatch(reportID: identity.text, fileID: fileID, path: path) }
    return .missing
  }

  private func symbolScore(_ file: SymbolFile) -> Int {
    (file.symbols.count > 0 ? 4 : 0) + (file.hasFullSymbolTable ? 2 : 0) + (file.hasDebugInfo ? 1 : 0)
  }

  /// The slices of the file at `path`, read once and cached; `nil` when it is not a readable binary.
  func slices(_ path: String) -> [SymbolFile]? {
    if let cached = cache[path] { return cached.isEmpty ? nil : cached }
    guard FileSystem.kind(path) == .file, let files = try? SymbolFile.load(path: path) else {
      cache[path] = []
      return nil
    }
    cache[path] = files
    return files
  }

  /// `DIR/.build-id/xx/yyyy.debug` for a full build-id; for a 16-byte prefix, every file in `xx/`
  /// whose name starts with the rest of the prefix.
  func buildIDTreeCandidates(_ directory: String, _ identity: ImageIdentity) -> [String] {
    let hex = identity.hex
    guard hex.count > 2 else { return [] }
    let folder = directory + "/.build-id/" + hex.prefix(2)
    let rest = String(hex.dropFirst(2))
    let exact = folder + "/" + rest + ".debug"
    if FileSystem.kind(exact) == .file { return [exact] }
    return FileSystem.contents(folder).filter { $0.hasPrefix(rest) && $0.hasSuffix(".debug") }.map { folder + "/" + $0 }
  }

  /// `CACHE/BUILDID/debuginfo` (then `executable`), by full build-id or its prefix.
  func debuginfodCandidates(_ cacheDirectory: String, _ identity: ImageIdentity) -> [String] {
    let hex = identity.hex
    var folders: [String] = []
    if FileSystem.kind(cacheDirectory + "/" + hex) == .directory { folders = [cacheDirectory + "/" + hex] }
    else { folders = FileSystem.contents(cacheDirectory).filter { $0.hasPrefix(hex) }.map { cacheDirectory + "/" + $0 } }
    return folders.flatMap { [$0 + "/debuginfo", $0 + "/executable"] }.filter { FileSystem.kind($0) == .file }
  }

  /// Every binary slice under the search paths, read once (identities only; symbols on demand).
  func searchIndex() -> [SymbolFile] {
    if let index { return index }
    var result: [SymbolFile] = []
    for root in searchPaths {
      if FileSystem.kind(root) == .missing { unreadable.append((root, "no such file or directory")); continue }
      for path in FileSystem.walk(root) {
        guard let files = try? SymbolFile.load(path: path, withSymbols: false) else { continue }
        result += files
      }
    }
    index = result
    return result
  }
}
