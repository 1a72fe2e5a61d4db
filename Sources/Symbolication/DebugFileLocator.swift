import ProcessInspection
import ImageReaders
import Snapshot

/// Finds the file whose identity equals a report image's: the path the report recorded, its
/// `.gnu_debuglink` (beside it, in its `.debug/` folder, under `/usr/lib/debug` with its folder; the
/// CRC-32 checked), the folders given with `--search` (walked recursively: ELF, Mach-O, universal
/// files, `.dSYM` bundles), `/usr/lib/debug/.build-id/xx/yyyy.debug`, the debuginfod client cache,
/// and the debuginfod servers in `DEBUGINFOD_URLS` (through `libdebuginfod.so.1` when installed).
/// For a dwz-compressed debug file, its `.gnu_debugaltlink` supplementary file too. Never by name: a
/// file named like the image but with another identity, or a CRC that differs, is only reported.
public final class DebugFileLocator {
  /// Folders (or single files) given with `--search`.
  package let searchPaths: [String]
  /// Folders holding `.build-id/xx/yyyy.debug` trees.
  package let buildIDDirectories: [String]
  /// debuginfod client caches (`BUILDID/debuginfo`, `BUILDID/executable`).
  package let debuginfodCaches: [String]

  private var index: [SymbolFile]?
  private var cache: [String: [SymbolFile]] = [:]
  /// Files under the search paths that could not be read, with why (shown once, in the summary).
  package private(set) var unreadable: [(path: String, problem: String)] = []
  /// Debug files found but not used, with why: a build-id or `.gnu_debuglink` CRC that differs, a
  /// dwz supplementary file that is missing or another; and debuginfod failures other than "not found".
  package private(set) var refused: [(path: String, problem: String)] = []
  /// The debuginfod client, made on first use (`nil` inside when no server is named or the library is absent).
  private var debuginfod: DebuginfodClient??
  /// Whether servers in `DEBUGINFOD_URLS` are asked.
  package let asksDebuginfodServers: Bool
  private var checksums: [String: UInt32?] = [:]
  /// How much of each file's symbol table is read: `.presence` when the caller reads the symbols of the
  /// file chosen itself (`SymbolFile.readSymbols`), for one report's addresses.
  package var symbolReading = SymbolFile.SymbolReading.table
  /// Images read from memory (the vDSO): one with an image's build-id serves when no file does.
  package var inMemoryImages: [InMemoryImage] = [] {
    didSet { outcomes = [:] }  // an image none was found for may be one of these
  }
  /// Breakpad symbol stores, for images no file is found for (`Symbolicator` and `walkStacks` ask it).
  package var symbolStore: SymbolStore?
  /// `locate`'s answers, by `outcomeKey`: an image is searched for once (its files' stats, folder
  /// listings and debuginfod caches), however many times it is asked for.
  private var outcomes: [String: Outcome] = [:]

  /// `systemDirectories: false` leaves out `/usr/lib/debug` and the debuginfod cache; explicit
  /// `buildIDDirectories` and `debuginfodCaches` replace them.
  /// `debuginfodServers` (default: `systemDirectories`) lets the servers in `DEBUGINFOD_URLS` be asked.
  public init(searchPaths: [String], systemDirectories: Bool = true, buildIDDirectories: [String]? = nil,
              debuginfodCaches: [String]? = nil, debuginfodServers: Bool? = nil) {
    self.searchPaths = searchPaths
    asksDebuginfodServers = debuginfodServers ?? systemDirectories
    if let buildIDDirectories, let debuginfodCaches {
      self.buildIDDirectories = buildIDDirectories
      self.debuginfodCaches = debuginfodCaches
    } else if systemDirectories {
      self.buildIDDirectories = ["/usr/lib/debug"]
      // The one cache libdebuginfod itself uses: DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client,
      // else ~/.cache/debuginfod_client. Reading the others too would answer from a cache the client the user
      // configured never reads (a test's children, given a cache folder of their own, found the user's).
      // An empty variable counts as unset, as there.
      func variable(_ name: String) -> String? { FileSystem.environment(name).flatMap { $0.isEmpty ? nil : $0 } }
      if let explicit = variable("DEBUGINFOD_CACHE_PATH") {
        self.debuginfodCaches = [explicit]
      } else if let xdg = variable("XDG_CACHE_HOME") {
        self.debuginfodCaches = [xdg + "/debuginfod_client"]
      } else if let home = variable("HOME") {
        self.debuginfodCaches = [home + "/.cache/debuginfod_client"]
      } else {
        self.debuginfodCaches = []
      }
    } else {
      self.buildIDDirectories = []
      self.debuginfodCaches = []
    }
  }

  /// What was found for one image.
  package enum Outcome: Sendable {
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
  package func locate(_ image: ProcessSnapshot.Image, architecture: String?) -> Outcome {
    let key = Self.outcomeKey(image, architecture: architecture)
    if let known = outcomes[key] { return known }
    let outcome = search(image, architecture: image.architecture ?? architecture)
    outcomes[key] = outcome
    return outcome
  }

  /// What `locate`'s answer depends on: the image's identity, path and name, and the architecture.
  /// NUL cannot occur in a path or a name read from a report line or JSON string we keep whole.
  static func outcomeKey(_ image: ProcessSnapshot.Image, architecture: String?) -> String {
    // Concatenated, not `joined`: the generic join's first use costs more than the key.
    (image.identity?.text ?? "") + "\u{0}" + (image.path ?? "") + "\u{0}" + image.name + "\u{0}"
      + (image.architecture ?? architecture ?? "")
  }

  private func search(_ image: ProcessSnapshot.Image, architecture: String?) -> Outcome {
    guard let identity = image.identity else {
      if let path = image.path, let file = slices(path).flatMap({ SymbolFile.slice($0, architecture: architecture) }) {
        return .unverified(withDebugFile(file, image: image, architecture: architecture))
      }
      // A report that names a module without its folder (TSan's `(race+0x…)`): a file of that name
      // directly in a --search folder, unverified like any file found without an identity.
      if image.path == nil, image.name != "???" {
        for folder in searchPaths where FileSystem.kind(folder) == .directory {
          if let file = slices(folder + "/" + image.name).flatMap({ SymbolFile.slice($0, architecture: architecture) }) {
            return .unverified(withDebugFile(file, image: image, architecture: architecture))
          }
        }
      }
      return .missing
    }
    var matches: [(SymbolFile, String)] = []
    var mismatch: (String, String)?
    // A file deleted or replaced since it was loaded: its path names the file as it was, and whatever
    // is there now is only another candidate (a package upgrade's new build is checked and refused).
    let recorded = image.path.map(Image.withoutDeletedMark)
    if let path = recorded?.path, let files = slices(path) {
      let candidates = SymbolFile.slice(files, architecture: architecture).map { [$0] } ?? files
      if let file = candidates.first(where: { $0.buildID.map { identity.match($0) != .different } ?? false }) {
        matches.append((file, "recorded path"))
      } else if let file = candidates.first {
        mismatch = (file.buildID?.hex ?? "none", path)
      }
    }
    // A dSYM bundle beside the binary, where lldb and Xcode look first: `X.dSYM/Contents/Resources/DWARF/X`.
    // A universal dSYM serves every slice: the one with the image's UUID is taken.
    if let path = recorded?.path, !path.hasSuffix("/") {
      let dsym = path + ".dSYM/Contents/Resources/DWARF/" + (path.split(separator: "/").last.map(String.init) ?? path)
      if let candidates = slices(dsym) {
        if let file = candidates.first(where: { $0.buildID.map { identity.match($0) != .different } ?? false }) {
          matches.append((file, "dSYM beside the binary"))
        } else {
          refuse(dsym, "UUID \(candidates.compactMap { $0.buildID?.uuid }.joined(separator: ", ")) differs from \(identity.text)")
        }
      }
    }
    // The loaded file itself, held through the live process's mapping, whatever lies at its path now.
    for held in inMemoryImages where identity.match(held.buildID) != .different {
      guard let mapping = held.mapping else { continue }
      for file in slices(mapping.path) ?? [] { accept(file, identity, "the mapping", into: &matches) }
    }
    // `.gnu_debuglink`, where GDB looks: beside the binary, in its .debug/ folder, and under each
    // debug root with the binary's folder appended. Used only when the CRC-32 and build-id match too.
    for (file, _) in matches {
      guard let link = file.debugLink, !link.contains("/") else { continue }
      for place in debugLinkCandidates(binaryPath: file.path, link: link) where place != file.path {
        guard let candidates = slices(place) else { continue }
        if let expected = file.debugLinkCRC, let actual = checksum(place), actual != expected {
          refuse(place, "CRC-32 0x\(hexDigits(UInt64(actual), width: 8)) differs from 0x\(hexDigits(UInt64(expected), width: 8)) in the .gnu_debuglink of \(file.path)")
          continue
        }
        for candidate in candidates {
          if let id = candidate.buildID, identity.match(id) == .different {
            refuse(place, "build-id \(id.hex) differs from \(identity.hex) (.gnu_debuglink of \(file.path))")
            continue
          }
          matches.append((candidate, ".gnu_debuglink"))
        }
      }
    }
    for directory in buildIDDirectories {
      for path in buildIDTreeCandidates(directory, identity) {
        for file in slices(path) ?? [] { accept(file, identity, directory + "/.build-id", into: &matches) }
      }
    }
    for cacheDirectory in debuginfodCaches {
      for path in debuginfodCandidates(cacheDirectory, identity) {
        for file in slices(path) ?? [] { accept(file, identity, "debuginfod cache", into: &matches) }
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
    // An image no file holds (the vDSO), as eu-stack names it: from its bytes in memory, by build-id.
    if matches.isEmpty, let file = inMemoryFile(identity) { return .found(file, how: "memory") }
    // Last, as gdb and elfutils do: the debuginfod servers, which download into the client cache.
    if !matches.contains(where: { $0.0.hasDebugInfo }), let path = askDebuginfod(identity.hex) {
      for file in slices(path) ?? [] { accept(file, identity, "debuginfod", into: &matches) }
    }
    // Names from the file with the fullest symbol table, lines from one with DWARF (they may differ:
    // a stripped binary and its .debug file, a binary and a dSYM without symbols).
    if var best = matches.max(by: { symbolScore($0.0) < symbolScore($1.0) }) {
      var dwarf = best.0.hasDebugInfo ? best.0 : nil
      if !best.0.hasDebugInfo, let debug = matches.first(where: { $0.0.hasDebugInfo }) {
        best.0.debugInfoPath = debug.0.path
        best.0.debugInfoIsUniversal = debug.0.isUniversalSlice
        best.0.hasDebugInfo = true
        dwarf = debug.0
      }
      if let dwarf { best.0.supplementaryPath = supplementaryFile(of: dwarf) }
      if let recorded, recorded.deleted { noteGone(recorded.path, identity: identity, diskID: mismatch, found: best) }
      return .found(best.0, how: best.1)
    }
    if let recorded, recorded.deleted { noteGone(recorded.path, identity: identity, diskID: mismatch, found: nil) }
    if let (fileID, path) = mismatch { return .mismatch(reportID: identity.text, fileID: fileID, path: path) }
    return .missing
  }

  /// Says, among the files not used, that the file an image was loaded from at `path` was deleted or
  /// replaced by another build (`diskID`: the build-id and path of the file there now) after it was
  /// loaded, and where its symbols came from instead: the mapping, or a file elsewhere with its identity.
  private func noteGone(_ path: String, identity: ImageIdentity, diskID: (String, String)?,
                        found: (file: SymbolFile, how: String)?) {
    var what = diskID.map { "replaced after it was loaded by another build (build-id \($0.0)); the loaded one has \(found?.file.buildID?.hex ?? identity.hex)" }
      ?? "deleted after it was loaded"
    if found?.how == "recorded path" { what = "replaced after it was loaded by a file of the same build" }
    let source: String
    if let found {
      source = found.how == "the mapping" ? "symbols from the mapping (\(shownPath(found.file.path)))"
        : "symbols from \(found.file.path) (\(found.how))"
    } else {
      source = "no file with its identity found"
    }
    // The mapping that could not be opened, when the file was not read through it.
    let problem = found?.how == "the mapping" ? nil
      : inMemoryImages.first { $0.mappingProblem != nil && identity.match($0.buildID) != .different }?.mappingProblem
    refuse(path, what + ": " + source + (problem.map { "; the mapping: \($0)" } ?? ""))
  }

  /// `path` as a report names it: for a file held through a process's mapping (`/proc/self/fd/N`), the
  /// mapping it was opened through (`/proc/PID/map_files/START-END`).
  package func shownPath(_ path: String) -> String {
    inMemoryImages.lazy.compactMap(\.mapping).first { $0.path == path }?.origin ?? path
  }

  /// Adds `file` to `matches` when its identity is the image's; a file with another build-id where
  /// only this image's could be (a `.build-id` tree, a cache folder named by it) is refused.
  private func accept(_ file: SymbolFile, _ identity: ImageIdentity, _ how: String, into matches: inout [(SymbolFile, String)]) {
    guard let id = file.buildID else { return }
    if identity.match(id) != .different {
      matches.append((file, how))
    } else {
      refuse(file.path, "build-id \(id.hex) differs from \(identity.hex) (\(how))")
    }
  }

  private func refuse(_ path: String, _ problem: String) {
    guard !refused.contains(where: { $0.path == path && $0.problem == problem }) else { return }
    refused.append((path, problem))
  }

  /// Where gdb looks for a `.gnu_debuglink` name: the binary's folder, its `.debug/` subfolder, and
  /// each debug root with the binary's (absolute) folder appended.
  func debugLinkCandidates(binaryPath: String, link: String) -> [String] {
    let folder = Self.folder(of: binaryPath)
    var places = [folder + "/" + link, folder + "/.debug/" + link]
    places += buildIDDirectories.map { $0 + (folder.hasPrefix("/") ? "" : "/") + folder + "/" + link }
    return places
  }

  static func folder(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "" : String(path[..<slash])
  }

  /// The CRC-32 of the whole file at `path` (gdb's `gnu_debuglink_crc32`), once per path; `nil` when
  /// it cannot be mapped.
  func checksum(_ path: String) -> UInt32? {
    if let known = checksums[path] { return known }
    let value = try? MappedFile(path: path).withReader { CRC32.checksum($0) }
    checksums[path] = value
    return value
  }

  /// The dwz supplementary file of `debugFile`'s `.gnu_debugaltlink`: the path it records (relative
  /// to the debug file's folder), then by its build-id in each `.build-id` tree, the debuginfod
  /// cache and servers. Its build-id must be the one recorded; one that differs is refused.
  func supplementaryFile(of debugFile: SymbolFile) -> String? {
    if let problem = debugFile.debugAltLinkProblem { refuse(debugFile.path, problem); return nil }
    guard let link = debugFile.debugAltLink else { return nil }
    let hex = link.buildID.hex
    var places = [link.path.hasPrefix("/") ? link.path : Self.folder(of: debugFile.path) + "/" + link.path]
    if hex.count > 2 {
      places += buildIDDirectories.map { $0 + "/.build-id/" + hex.prefix(2) + "/" + hex.dropFirst(2) + ".debug" }
    }
    places += debuginfodCaches.map { $0 + "/" + hex + "/debuginfo" }
    for place in places where FileSystem.kind(place) == .file {
      guard let file = slices(place)?.first else { continue }
      if file.buildID == link.buildID { return place }
      refuse(place, "build-id \(file.buildID?.hex ?? "none") differs from \(hex) in the .gnu_debugaltlink of \(debugFile.path)")
    }
    if let path = askDebuginfod(hex), slices(path)?.first?.buildID == link.buildID { return path }
    refuse(link.path, "dwz supplementary file with build-id \(hex) (.gnu_debugaltlink of \(debugFile.path)) not found")
    return nil
  }

  /// The debug file for build-id `hex` from the debuginfod servers, or `nil`.
  private func askDebuginfod(_ hex: String) -> String? {
    guard asksDebuginfodServers else { return nil }
    if debuginfod == nil { debuginfod = .some(DebuginfodClient()) }
    guard let client = debuginfod ?? nil else { return nil }
    switch client.findDebugInfo(buildIDHex: hex) {
    case .found(let path): return path
    case .notFound: return nil
    case .failed(let problem):
      refuse("debuginfod", "\(hex): \(problem)")
      return nil
    }
  }

  /// A file found without an identity to check, completed by the files that match its own build-id
  /// (a stripped library's `.debug` file): the file itself is still unverified, its debug file is not.
  private func withDebugFile(_ file: SymbolFile, image: ProcessSnapshot.Image, architecture: String?) -> SymbolFile {
    guard let buildID = file.buildID, !(file.hasDebugInfo && file.hasFullSymbolTable) else { return file }
    var identified = image
    identified.identity = ImageIdentity(buildID)
    identified.path = file.path
    guard case .found(let better, _) = locate(identified, architecture: architecture) else { return file }
    return better
  }

  /// The in-memory image with `identity`, decoded with its whole symbol table (a vDSO's is tiny, and
  /// there is no file to read it from later); `nil` when none has it. Bytes that do not decode, or
  /// decode to another build-id, are refused.
  private func inMemoryFile(_ identity: ImageIdentity) -> SymbolFile? {
    for image in inMemoryImages where !image.bytes.isEmpty && identity.match(image.buildID) != .different {
      let files: [SymbolFile]
      do {
        files = try ByteReader.reading(image.bytes) { reader throws(FormatError) in
          try SymbolFile.load(reader, path: image.path, reading: .table)
        }
      } catch {
        refuse(image.path, "its bytes in memory: \(error)")
        continue
      }
      guard var file = files.first, let id = file.buildID, identity.match(id) != .different else {
        refuse(image.path, "its bytes in memory have build-id \(files.first?.buildID?.hex ?? "none"), not \(identity.hex)")
        continue
      }
      // Only its symbols are used: DWARF and linked files are read by path, and it has none.
      file.hasDebugInfo = false
      file.debugLink = nil
      file.debugAltLink = nil
      file.debugAltLinkProblem = nil
      return file
    }
    return nil
  }

  private func symbolScore(_ file: SymbolFile) -> Int {
    (file.hasSymbols ? 4 : 0) + (file.hasFullSymbolTable ? 2 : 0) + (file.hasDebugInfo ? 1 : 0)
  }

  /// Locates `image` and reads, in the file found, the symbols of the addresses at `offsets` from the
  /// image's load address (return addresses already less 1): a later `locate` gives the file with
  /// them read, and `SymbolFile.readSymbols` reads again only for other addresses. For a caller that
  /// knows a report's frames before the report is read (`pid --threads`, on another thread). With no
  /// `offsets`, only locates the file.
  package func prepareSymbols(_ image: ProcessSnapshot.Image, architecture: String?, offsets: [UInt64]) {
    let outcome = locate(image, architecture: architecture)
    guard !offsets.isEmpty else { return }
    let key = Self.outcomeKey(image, architecture: architecture)
    switch outcome {
    case .found(var file, let how) where file.presentSymbols != nil:
      try? file.readSymbols(for: offsets.map { file.imageBaseVMAddress &+ $0 })
      outcomes[key] = .found(file, how: how)
    case .unverified(var file) where file.presentSymbols != nil:
      try? file.readSymbols(for: offsets.map { file.imageBaseVMAddress &+ $0 })
      outcomes[key] = .unverified(file)
    default: return
    }
  }

  /// The slices of the file at `path`, read once and cached; `nil` when it is not a readable binary.
  func slices(_ path: String) -> [SymbolFile]? {
    if let cached = cache[path] { return cached.isEmpty ? nil : cached }
    guard FileSystem.kind(path) == .file, let files = try? SymbolFile.load(path: path, reading: symbolReading) else {
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
    let folder = directory + "/.build-id/" + String(hex.prefix(2))
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
