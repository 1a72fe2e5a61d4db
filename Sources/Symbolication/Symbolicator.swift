import ProcessInspection
import ImageReaders
public import Snapshot

/// What symbolication does beyond the report itself.
public struct SymbolicationOptions: Sendable {
  /// The lists a crash's signature is made with (`--signature-lists`); `nil`: imagelog's own.
  package var signatureLists: SignatureLists?
  /// Folders (and files) to search for binaries and debug files.
  public var searchPaths: [String] = []
  /// Also look in `/usr/lib/debug/.build-id` and the debuginfod client cache.
  public var systemDirectories = true
  /// Replace the system `.build-id` folders and debuginfod caches (tests; `nil`: the system's).
  package var buildIDDirectories: [String]? = nil
  /// Replace the debuginfod client caches searched (tests; `nil`: the user's).
  package var debuginfodCaches: [String]? = nil
  /// How symbol names are written.
  public var demangle: Demangler.Style = .simplified
  /// Read file:line:column and inlined frames from the DWARF of each image (or its debug file).
  public var lineInfo = true
  /// The architecture to pick universal slices by when neither the report nor the image says.
  public var architecture: String? = nil
  /// Images no file holds (the vDSO), as copied from the process's or the core's memory: used for an
  /// image with the same build-id when no file on disk has it.
  public var inMemoryImages: [InMemoryImage] = []
  /// The symbol cache to answer file:line from and to fill, for files with an identity; `nil`: none
  /// (the command line sets `SymbolCacheSettings.fromEnvironment()` unless `--no-cache`).
  package var symbolCache: SymbolCacheSettings? = nil
  /// Breakpad symbol stores (`STORE/NAME/DEBUGID/NAME.sym`) for images no file is found for.
  public var symbolStores: [String] = []

  /// The defaults: system debug folders, simplified names, lines from DWARF.
  public init() {}
}

/// Symbolication, the pipeline's one stage between sources and writers: each image a snapshot's frames
/// are in is found by identity (never by name), and each frame named from the symbol tables and the
/// DWARF of its file (file, line, column, inlined frames), names demangled. The answers go into the
/// snapshot: each frame's `symbols`, each image's `resolution`, and the `notes`.
public enum Symbolicator {
  /// Symbolicates every frame of `snapshot`: files are found and their DWARF indexed once per image.
  /// Threads its source left unwound (a minidump's, whose frames need the images' call frame
  /// information) are walked first, in the memory the snapshot carries, with the files found here.
  /// Never throws: what cannot be done is in each frame's status and the snapshot's `notes`.
  ///
  /// With a `cache` (made with the same `options`), files found and indexed for earlier snapshots are
  /// used again and kept for later ones: many reports over the same images read each file once.
  public static func symbolicate(_ snapshot: inout ProcessSnapshot, options: SymbolicationOptions = SymbolicationOptions(),
                                 cache: SymbolicationCache? = nil) {
    symbolicate(&snapshot, options: options, cache: cache, locator: nil)
  }

  /// The locator `symbolicate` makes for one snapshot: `locate` its images ahead (on another thread,
  /// while the snapshot is being made) and pass it to `symbolicate(_:options:locator:)`, which then finds
  /// the files it reads already read.
  package static func locator(forOneReport options: SymbolicationOptions) -> DebugFileLocator {
    let locator = DebugFileLocator(
      searchPaths: options.searchPaths, systemDirectories: options.systemDirectories,
      buildIDDirectories: options.buildIDDirectories, debuginfodCaches: options.debuginfodCaches)
    locator.inMemoryImages = options.inMemoryImages
    locator.symbolStore = SymbolStore(options.symbolStores)
    // One report looks up a few addresses per image: the chosen files' symbols are read for those
    // alone (below), not every candidate's whole table sorted.
    locator.symbolReading = .presence
    return locator
  }

  /// `symbolicate(_:options:cache:)` with the locator made by `locator(forOneReport:)` (no cache).
  package static func symbolicate(_ snapshot: inout ProcessSnapshot, options: SymbolicationOptions,
                                  locator: DebugFileLocator) {
    symbolicate(&snapshot, options: options, cache: nil, locator: locator)
  }

  /// The images' resolutions while symbolication runs: image index and status, in image order.
  typealias Resolutions = [(imageIndex: Int, status: ProcessSnapshot.Image.Resolution)]

  static func symbolicate(_ snapshot: inout ProcessSnapshot, options: SymbolicationOptions, cache: SymbolicationCache?,
                          locator given: DebugFileLocator?) {
    let locator = cache?.locator ?? given ?? Self.locator(forOneReport: options)
    // Threads the source left unwound (a minidump's) are walked first, with the files found here.
    walkStacks(&snapshot, locator: locator)
    // The images the snapshot's source copied from memory (the vDSO), beside any the options name.
    for image in snapshot.inMemoryImages where !locator.inMemoryImages.contains(where: { $0.buildID == image.buildID }) {
      locator.inMemoryImages.append(image)
    }
    let demangler = Demangler(style: options.demangle)
    var notes: [String] = []
    // By image index, not a dictionary: the first `[Int: ...]` of a run costs the runtime a search of
    // every conformance record for `Int: Hashable` (BENCHMARKS.md, "Figures behind design choices").
    var files = [SymbolFile?](repeating: nil, count: snapshot.images.count)
    var resolutions: Resolutions = []
    var debugFiles = [String?](repeating: nil, count: snapshot.images.count)
    var stored = [BreakpadSymbolFile?](repeating: nil, count: snapshot.images.count)
    for imageIndex in snapshot.usedImageIndices {
      let image = snapshot.images[imageIndex]
      let architecture = snapshot.process.architecture ?? options.architecture
      let outcome: DebugFileLocator.Outcome
      if let cache {
        let located = cache.locate(image, architecture: architecture)
        outcome = located.outcome
        for note in located.notes where !notes.contains(note) { notes.append(note) }
      } else {
        outcome = locator.locate(image, architecture: architecture)
      }
      switch storeOutcome(outcome, image: image, store: locator.symbolStore, notes: &notes) {
      case .found(let file, let how):
        files[imageIndex] = file
        debugFiles[imageIndex] = file.debugInfoPath
        resolutions.append((imageIndex, .found(path: locator.shownPath(file.path), how: how)))
      case .unverified(let file) where snapshot.format == .minidump:
        // A dump's module comes from another machine: a file found here by its path alone, with no
        // identity to check it against, is as likely another build as the one that ran. It names nothing.
        notes.append("\(image.name): \(file.path) found by path alone (the dump gives no identity to check it "
                     + "against): not used")
        resolutions.append((imageIndex, .missing))
      case .unverified(let file):
        files[imageIndex] = file
        resolutions.append((imageIndex, .unverified(path: file.path)))
      case let .mismatch(reportID, fileID, path):
        resolutions.append((imageIndex, .mismatch(reportID: reportID, fileID: fileID, path: path)))
      case .missing:
        resolutions.append((imageIndex, .missing))
      case .stored(let symbols, let path):
        stored[imageIndex] = symbols
        resolutions.append((imageIndex, .found(path: path, how: "symbol store")))
      }
    }
    if let cache {
      notes = cache.unreadableNotes + notes
    } else {
      for (path, problem) in locator.unreadable { notes.append("\(path): \(problem)") }
      for (path, problem) in locator.refused { notes.append("\(path): not used: \(problem)") }
    }
    // Placing an image by a frame's symbol name needs the whole table.
    for imageIndex in files.indices
    where snapshot.images[imageIndex].loadAddressFromSymbols && files[imageIndex]?.presentSymbols != nil {
      readSymbols(of: &files[imageIndex]!, for: nil, notes: &notes)
    }
    let unplaced = snapshot.images
    notes += placeImagesBySymbols(&snapshot, files: files)

    let refs = snapshot.frameRefs
    // Each frame's answer goes into the frame itself, not an array beside the frames: a long list's
    // peak would hold both.
    // Frames to look up, by image: each image's symbol table is then walked with no per-frame copy.
    // Fields are read in place: a copy of a frame or image per frame would retain each of its strings.
    var lookups = [[(frame: Int, lookup: UInt64)]](repeating: [], count: snapshot.images.count)
    var bases = [UInt64?](repeating: nil, count: snapshot.images.count)
    // Linux logs: where each file's mapped segments end (link-time), and the first lookup past it. No
    // function is there; a file it falls outside of is another build (`checkReportedNames`).
    var mappedEnds = [UInt64?](repeating: nil, count: snapshot.images.count)
    var pastEnd = [(lookup: UInt64, end: UInt64)?](repeating: nil, count: snapshot.images.count)
    for (imageIndex, file) in files.enumerated() {
      guard let file else { continue }
      // Offsets from the load bias are link-time addresses already.
      bases[imageIndex] = snapshot.images[imageIndex].offsetsFromLoadBias ? 0 : file.imageBaseVMAddress
      if snapshot.format.isLinuxLog, let size = file.loadSize {
        let (end, overflow) = file.imageBaseVMAddress.addingReportingOverflow(size)
        if !overflow { mappedEnds[imageIndex] = end }
      }
    }
    // A frame of an image found in another build says so: by image index, not a scan of the images per frame.
    var mismatches = [FrameSymbols.Status?](repeating: nil, count: snapshot.images.count)
    for (imageIndex, status) in resolutions.reversed() {  // the first resolution of an image wins
      mismatches[imageIndex] = if case .mismatch(let reportID, let fileID, let path) = status {
        .mismatch(reportID: reportID, fileID: fileID, path: path)
      } else {
        nil
      }
    }
    for (position, ref) in refs.enumerated() {
      var result = FrameSymbols()
      defer { snapshot[ref].symbols = result }
      result.status = .noImage
      let frame = snapshot[ref]
      guard let imageIndex = frame.imageIndex, snapshot.images.indices.contains(imageIndex) else {
        if frame.namesNoModule {
          result.status = .noModule
          if let reported = reportedFunction(frame, in: snapshot) { result.setFunction(reported) }
        }
        continue
      }
      result.imageName = snapshot.images[imageIndex].name
      let (offset, below) = frame.address.subtractingReportingOverflow(snapshot.images[imageIndex].loadAddress)
      if !below { result.imageOffset = offset }
      guard let base = bases[imageIndex] else {
        if let symbols = stored[imageIndex] {
          result.status = .noSymbol
          if !below {
            lookUp(frame, offset: offset, in: symbols, measuredAs: snapshot.format, result: &result, demangler: demangler,
                   lineInfo: options.lineInfo)
          }
          continue
        }
        result.status = mismatches[imageIndex] ?? .missingImage
        continue
      }
      result.status = .noSymbol
      guard !below else { continue }
      // Return addresses point after the call: look up the call itself.
      let adjusted = frame.isReturnAddress && offset > 0 ? offset - 1 : offset
      let (lookup, overflow) = base.addingReportingOverflow(adjusted)
      guard !overflow else { continue }
      if let end = mappedEnds[imageIndex], lookup >= end {
        if pastEnd[imageIndex] == nil { pastEnd[imageIndex] = (lookup, end) }
        continue
      }
      result.lookupAddress = lookup
      result.linkAddress = base &+ offset  // lookup = base + offset (less one) did not overflow, nor does this
      lookups[imageIndex].append((position, lookup))
    }

    for (imageIndex, frameLookups) in lookups.enumerated() where !frameLookups.isEmpty {
      guard files[imageIndex] != nil else { continue }
      readSymbols(of: &files[imageIndex]!, for: frameLookups.map(\.lookup), notes: &notes)
      guard let file = files[imageIndex] else { continue }
      let table = file.symbols
      var debugInfo: DebugInfoFile?
      if options.lineInfo && file.hasDebugInfo {
        let universal = file.debugInfoPath == nil ? file.isUniversalSlice : file.debugInfoIsUniversal
        do {
          let (path, architecture) = (file.debugInfoPath ?? file.path, universal ? file.architecture : nil)
          debugInfo = try cache?.debugInfo(path: path, architecture: architecture, supplementaryPath: file.supplementaryPath,
                                           identity: file.buildID)
            ?? DebugInfoFile.open(path: path, architecture: architecture, supplementaryPath: file.supplementaryPath,
                                  identity: file.buildID, symbolCache: options.symbolCache)
        } catch {
          notes.append("no file:line information: \(error)")
        }
      }
      // First in address order: the binary searches walk the table forwards, and frames in the same
      // function are neighbours, so each distinct function is found, decoded and demangled once.
      // Then in frame order, so the results are written front to back.
      var order = frameLookups.enumerated().map { (lookup: $0.element.lookup, position: $0.offset) }
      order.sort { $0.lookup < $1.lookup }
      var symbols: [Int] = []
      var starts: [UInt64] = []
      var uses: [Int] = []  // frames left to fill with each function
      var functionOfLookup = [Int](repeating: -1, count: frameLookups.count)
      for (lookup, position) in order {
        guard let symbolIndex = table.index(containing: lookup) else { continue }
        if symbols.last != symbolIndex {
          symbols.append(symbolIndex)
          starts.append(table.address(at: symbolIndex))
          uses.append(0)
        }
        uses[uses.count - 1] += 1
        functionOfLookup[position] = symbols.count - 1
      }
      var names = Self.names(of: symbols, in: table, demangler: demangler)
      for (position, (frameIndex, lookup)) in frameLookups.enumerated() where functionOfLookup[position] >= 0 {
        let function = functionOfLookup[position]
        // The last frame in a function takes its names over instead of sharing them: no reference
        // counting for the usual one frame per function.
        var raw = "", name = ""
        uses[function] -= 1
        if uses[function] == 0 {
          swap(&raw, &names[function].raw)
          swap(&name, &names[function].name)
        } else {
          (raw, name) = names[function]
        }
        let ref = refs[frameIndex]
        let start = starts[function]
        snapshot[ref].symbols.status = .symbolicated
        snapshot[ref].symbols.setFunction(FrameSymbols.Function(
          name: consume name, rawName: consume raw, offset: snapshot[ref].symbols.offset(from: start, measuredAs: snapshot.format),
          file: nil, line: nil, column: nil, isInlined: false, startAddress: start))
        if let debugInfo {
          do {
            addLines(try debugInfo.frames(at: lookup), to: &snapshot[ref].symbols, demangler: demangler)
          } catch {
            notes.append("no file:line information for 0x\(hexDigits(lookup)): \(error)")
          }
        }
      }
    }
    if snapshot.format.isLinuxLog {
      checkReportedNames(&snapshot, refs: refs, unplaced: unplaced, files: files, pastEnd: pastEnd,
                         resolutions: &resolutions)
      for resolution in resolutions { if case .otherBuild = resolution.status { debugFiles[resolution.imageIndex] = nil } }
    }
    for index in snapshot.images.indices {
      snapshot.images[index].resolution = nil
      snapshot.images[index].debugFile = debugFiles[index]
    }
    for (imageIndex, status) in resolutions { snapshot.images[imageIndex].resolution = status }
    snapshot.notes = notes
    symbolicateUnloaded(&snapshot, options: options, cache: cache, locator: given)
  }

  /// The function and location a source's frame line gives itself, when it names one.
  static func reportedFunction(_ frame: ProcessSnapshot.Frame, in snapshot: ProcessSnapshot) -> FrameSymbols.Function? {
    guard let reported = snapshot.reportedFunction(of: frame) else { return nil }
    return FrameSymbols.Function(name: reported.name, rawName: nil, offset: reported.offset, file: reported.file,
                                 line: reported.line, column: reported.column, isInlined: false)
  }

  /// `snapshot` with its frames placed in their images (image and offset) and nothing looked up: what
  /// `--no-symbolicate` keeps for later, in the shape `symbolicate` answers in (each frame
  /// `.notLookedUp`, each image with frames `.notSearched`).
  public static func placeWithoutLookingUp(_ snapshot: inout ProcessSnapshot) {
    for threadIndex in snapshot.threads.indices {
      for frameIndex in snapshot.threads[threadIndex].frames.indices {
        let frame = snapshot.threads[threadIndex].frames[frameIndex]
        var result = FrameSymbols()
        result.status = .noImage
        if let imageIndex = frame.imageIndex, snapshot.images.indices.contains(imageIndex) {
          let image = snapshot.images[imageIndex]
          result.status = .notLookedUp
          result.imageName = image.name
          let (offset, below) = frame.address.subtractingReportingOverflow(image.loadAddress)
          if !below { result.imageOffset = offset }
        } else if frame.namesNoModule {
          result.status = .noModule
          if let reported = reportedFunction(frame, in: snapshot) { result.setFunction(reported) }
        }
        snapshot.threads[threadIndex].frames[frameIndex].symbols = result
      }
    }
    let used = snapshot.usedImageIndices
    for index in snapshot.images.indices { snapshot.images[index].resolution = nil }
    for index in used { snapshot.images[index].resolution = .notSearched }
    snapshot.notes = []
  }

  /// Reads the symbols a locator left unread in `file`: those `addresses` need, or all. A table that
  /// does not decode leaves the file without symbols, and a note says why; so does a full symbol table
  /// that could not be read (the names are then the exported ones).
  static func readSymbols(of file: inout SymbolFile, for addresses: [UInt64]?, notes: inout [String]) {
    if let problem = file.symbolTableProblem, !notes.contains("\(file.path): \(problem)") {
      notes.append("\(file.path): \(problem)")
    }
    do {
      try file.readSymbols(for: addresses)
    } catch {
      file.symbols = SymbolTable()  // nothing more to be had
      file.symbolsRead = .all
      notes.append("\(file.path): no symbols: \(error)")
    }
  }

  /// Gives `frame`'s real function the location of DWARF's outermost frame and puts the inlined ones
  /// before it, innermost first. A frame whose file DWARF does not name keeps no file (line 0 stays, as
  /// `llvm-symbolizer` shows it).
  static func addLines(_ locations: [DWARFFrame], to frame: inout FrameSymbols, demangler: Demangler) {
    guard let outer = locations.last, var real = frame.function else { return }
    if !outer.file.isEmpty {
      real.file = outer.file
      real.line = outer.line
      real.column = outer.column
    }
    guard locations.count > 1 else {
      frame.setFunction(real)
      return
    }
    var functions: [FrameSymbols.Function] = []
    functions.reserveCapacity(locations.count)
    for inlined in locations.dropLast() {
      functions.append(FrameSymbols.Function(
        name: inlined.function.map { demangler.demangle($0) }, rawName: inlined.function, offset: nil,
        file: inlined.file.isEmpty ? nil : inlined.file, line: inlined.file.isEmpty ? nil : inlined.line,
        column: inlined.file.isEmpty ? nil : inlined.column, isInlined: true))
    }
    functions.append(real)
    frame.functions = functions
  }
}
