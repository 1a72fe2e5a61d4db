import ProcessInspection
import ImageReaders
import Snapshot

/// Files found and read for earlier reports, kept for the next: a process that symbolicates many
/// reports (`imagelog symbolicate --output-dir`, a crash collector) finds, loads and indexes each
/// binary and debug file once, however many reports name it.
///
/// What is kept: each image's search outcome (by identity, recorded path, name and architecture,
/// with the notes the search made), each file's symbol table, and each DWARF index. Memory grows with
/// the number of distinct files, not of reports, except for inflated compressed sections: those of the
/// DWARF kept are held to `DWARFSections.maximumInflatedTotal` in all, the least recently used file's
/// DWARF let go (and read again when asked for again) to make room. Not thread-safe: use one cache per
/// thread.
public final class SymbolicationCache {
  /// The locator every report's images are searched with (its own caches hold the `--search` index).
  package let locator: DebugFileLocator
  private var outcomes: [String: (outcome: DebugFileLocator.Outcome, notes: [String])] = [:]
  private var debugInfoFiles: [String: Result<DebugInfoFile, ReportError>] = [:]
  /// The keys of `debugInfoFiles` read with inflated sections, least recently used first.
  private var inflatedKeys: [String] = []
  private var inflatedBytes: UInt64 = 0
  /// The most inflated bytes the DWARF kept may hold together.
  let inflatedLimit: UInt64
  /// The symbol cache each DWARF file is answered from when it has an identity.
  let symbolCache: SymbolCacheSettings?

  /// A cache for symbolicating with `options` (pass the same options to each `Symbolicator.symbolicate`).
  public convenience init(options: SymbolicationOptions) {
    self.init(options: options, inflatedLimit: DWARFSections.maximumInflatedTotal)
  }

  /// `inflatedLimit`: the most inflated bytes kept (tests make it small).
  init(options: SymbolicationOptions, inflatedLimit: UInt64) {
    locator = DebugFileLocator(searchPaths: options.searchPaths, systemDirectories: options.systemDirectories,
                               buildIDDirectories: options.buildIDDirectories, debuginfodCaches: options.debuginfodCaches)
    locator.inMemoryImages = options.inMemoryImages
    locator.symbolStore = SymbolStore(options.symbolStores)
    self.inflatedLimit = inflatedLimit
    symbolCache = options.symbolCache
  }

  /// How many files' outcomes and DWARF indexes are held (tests and benchmarks check files are read once).
  package var counts: (images: Int, debugInfoFiles: Int) { (outcomes.count, debugInfoFiles.count) }

  /// Search paths that could not be read, as each report's notes name them.
  var unreadableNotes: [String] { locator.unreadable.map { "\($0.path): \($0.problem)" } }

  /// The locator's outcome for `image`, found once; `notes` are the files refused while finding it.
  func locate(_ image: ProcessSnapshot.Image, architecture: String?) -> (outcome: DebugFileLocator.Outcome, notes: [String]) {
    let key = DebugFileLocator.outcomeKey(image, architecture: architecture)
    if let known = outcomes[key] { return known }
    let refusedBefore = locator.refused.count
    let outcome = locator.locate(image, architecture: architecture)
    let notes = locator.refused.dropFirst(refusedBefore).map { "\($0.path): not used: \($0.problem)" }
    outcomes[key] = (outcome, notes)
    return (outcome, notes)
  }

  /// The DWARF of `path` (that slice, with that supplementary file), indexed once (unless let go to
  /// keep the inflated sections within `inflatedLimit`); a file that could not be read throws the same
  /// error each time.
  func debugInfo(path: String, architecture: String?, supplementaryPath: String?, identity: BuildID? = nil) throws -> DebugInfoFile {
    let key = [path, architecture ?? "", supplementaryPath ?? ""].joined(separator: "\u{0}")
    if let known = debugInfoFiles[key] {
      if let position = inflatedKeys.firstIndex(of: key) { inflatedKeys.append(inflatedKeys.remove(at: position)) }
      return try known.get()
    }
    let result: Result<DebugInfoFile, ReportError>
    do {
      result = .success(try DebugInfoFile.open(path: path, architecture: architecture, supplementaryPath: supplementaryPath,
                                               identity: identity, symbolCache: symbolCache))
    } catch let error as ReportError {
      result = .failure(error)
    } catch {
      result = .failure(ReportError("\(error)"))
    }
    debugInfoFiles[key] = result
    if case .success(let file) = result, file.inflatedByteCount > 0 { keep(file.inflatedByteCount, of: key) }
    return try result.get()
  }

  /// Counts `count` inflated bytes for the DWARF at `key`, letting the least recently used others go
  /// until all fit in `inflatedLimit` (the newest is kept whatever its size: it is within the limit).
  private func keep(_ count: UInt64, of key: String) {
    inflatedBytes += count  // each is at most maximumInflatedTotal, and the sum is kept within the limit
    inflatedKeys.append(key)
    while inflatedBytes > inflatedLimit, inflatedKeys.count > 1 {
      let oldest = inflatedKeys.removeFirst()
      if case .success(let file)? = debugInfoFiles.removeValue(forKey: oldest) { inflatedBytes -= file.inflatedByteCount }
    }
  }
}
