import ImageLog
import ImageReaders

/// What symbolication does beyond the report itself.
public struct SymbolicationOptions: Sendable {
  /// Folders (and files) to search for binaries and debug files.
  public var searchPaths: [String] = []
  /// Also look in `/usr/lib/debug/.build-id` and the debuginfod client cache.
  public var systemDirectories = true
  /// Replace the system `.build-id` folders and debuginfod caches (tests; `nil`: the system's).
  public var buildIDDirectories: [String]? = nil
  /// Replace the debuginfod client caches searched (tests; `nil`: the user's).
  public var debuginfodCaches: [String]? = nil
  /// How symbol names are written.
  public var demangle: Demangler.Style = .simplified
  /// Read file:line:column and inlined frames from the DWARF of each image (or its debug file).
  public var lineInfo = true
  /// The architecture to pick universal slices by when neither the report nor the image says.
  public var architecture: String? = nil
  /// Images no file holds (the vDSO), as copied from the process's or the core's memory: used for an
  /// image with the same build-id when no file on disk has it.
  public var inMemoryImages: [InMemoryImage] = []

  /// The defaults: system debug folders, simplified names, lines from DWARF.
  public init() {}
}

/// The answer for one frame.
public struct SymbolicatedFrame: Sendable, Equatable {
  /// One function the frame is in: the innermost inlined one first, the real function last.
  public struct Function: Sendable, Equatable {
    /// The name, demangled as asked; `nil` when unknown.
    public var name: String?
    /// The name as stored in the file.
    public var rawName: String?
    /// Bytes from the function's start to the frame's address (the real function only).
    public var offset: UInt64?
    /// The source file, when DWARF gives one.
    public var file: String?
    /// The source line (1-based), when known.
    public var line: Int?
    /// The source column (1-based; 0 when unknown).
    public var column: Int?
    /// True for a function inlined into the next one.
    public var isInlined: Bool
  }

  /// What became of the frame.
  public enum Status: Sendable, Equatable {
    /// Resolved to a symbol.
    case symbolicated
    /// The image was found, but no symbol covers the address.
    case noSymbol
    /// No image in the report contains the address.
    case noImage
    /// No file with the image's identity was found.
    case missingImage
    /// The only file found has another identity.
    case mismatch(reportID: String, fileID: String, path: String)
    /// Not looked up: symbolication was not asked for (`--no-symbolicate`); the image and offset stand.
    case notLookedUp
    /// The report's line names no module to look the frame up in (a sanitizer line it symbolized
    /// itself, `(<unknown module>)`, glibc's bare `[0x…]`): `functions` holds the report's own function
    /// and location, when it gives them.
    case noModule
    /// The file found by path alone is another build than the report's (`ImageResolution.Status.otherBuild`
    /// names it): nothing is taken from it, and `functions` holds the report's own names, when it gives
    /// them. No payload: a second case with one would make every frame's status a byte larger.
    case otherBuild
  }

  /// Index into the report's `frames`.
  public var frameIndex: Int
  /// What became of the frame.
  public var status: Status
  /// The image's name and the frame's offset in it.
  public var imageName: String?
  /// The frame's offset from the image's load address.
  public var imageOffset: UInt64?
  /// The link-time address looked up (after `- 1` for return addresses).
  public var lookupAddress: UInt64?
  /// The functions, innermost first; empty unless symbolicated.
  public var functions: [Function] {
    get { hasFunction ? inlinedFunctions + [realFunction] : inlinedFunctions }
    set {
      if let last = newValue.last { setFunction(last) } else { clearFunction() }
      inlinedFunctions = Array(newValue.dropLast())
    }
  }
  /// The real function (the last of `functions`), when symbolicated.
  public var function: Function? { hasFunction ? realFunction : nil }
  /// The functions inlined into `function`, innermost first (from DWARF; usually none).
  public private(set) var inlinedFunctions: [Function] = []
  // Stored in the frame itself, not optional: a report of 20,000 addresses costs no array per frame
  // to build and free, and its output reads the names in place, without copying whole functions.
  var realFunction = Function(name: nil, rawName: nil, offset: nil, file: nil, line: nil, column: nil, isInlined: false)
  var hasFunction = false

  init(frameIndex: Int, status: Status, imageName: String?, imageOffset: UInt64?, lookupAddress: UInt64?) {
    self.frameIndex = frameIndex
    self.status = status
    self.imageName = imageName
    self.imageOffset = imageOffset
    self.lookupAddress = lookupAddress
  }

  /// Sets the real function alone (no inlined ones).
  mutating func setFunction(_ function: consuming Function) {
    realFunction = function
    hasFunction = true
    inlinedFunctions = []
  }

  private mutating func clearFunction() {
    realFunction = Function(name: nil, rawName: nil, offset: nil, file: nil, line: nil, column: nil, isInlined: false)
    hasFunction = false
  }
}

/// How each image with frames was resolved.
public struct ImageResolution: Sendable, Equatable {
  /// Where the image's file was found, or why not.
  public enum Status: Sendable, Equatable {
    case found(path: String, how: String)
    case unverified(path: String)
    case mismatch(reportID: String, fileID: String, path: String)
    /// The report has no build-id, and what it says contradicts the file at its path (`reason`): the
    /// report's function names disagree with the file's at those offsets, or an offset lies past the
    /// end of the file's mapped segments. Another build: none of its names are used.
    case otherBuild(path: String, reason: String)
    case missing
    /// No file was looked for: symbolication was not asked for.
    case notSearched
  }
  /// Index into the report's `images`.
  public var imageIndex: Int
  /// Where the image's file was found, or why not.
  public var status: Status
}

/// A report with its answers.
public struct SymbolicatedReport: Sendable {
  /// The report as read.
  public var report: CrashReport
  /// One per report frame, in the report's order.
  public var frames: [SymbolicatedFrame]
  /// One per image that frames point into, in image order.
  public var images: [ImageResolution]
  /// Notes on what could not be done (unreadable debug files or search paths).
  public var notes: [String]
  /// For images whose DWARF came from another file than their symbols: image index to that file.
  public var debugFiles: [Int: String] = [:]
}

/// Resolves a report's frames: each image by identity, each address through the symbol table and the
/// image's DWARF (file, line, column, inlined frames), names demangled.
public enum Symbolicator {
  /// Symbolicates every frame of `report`: files are found and their DWARF indexed once per image. Never
  /// throws: what cannot be done is in each frame's status and `notes`.
  ///
  /// With a `cache` (made with the same `options`), files found and indexed for earlier reports are
  /// used again and kept for later ones: many reports over the same images read each file once.
  public static func symbolicate(_ report: CrashReport, options: SymbolicationOptions = SymbolicationOptions(),
                                 cache: SymbolicationCache? = nil) -> SymbolicatedReport {
    symbolicate(report, options: options, cache: cache, locator: nil)
  }

  /// The locator `symbolicate` makes for one report: `locate` its images ahead (on another thread,
  /// while the report is being made) and pass it to `symbolicate(_:options:locator:)`, which then finds
  /// the files it reads already read.
  package static func locator(forOneReport options: SymbolicationOptions) -> DebugFileLocator {
    let locator = DebugFileLocator(
      searchPaths: options.searchPaths, systemDirectories: options.systemDirectories,
      buildIDDirectories: options.buildIDDirectories, debuginfodCaches: options.debuginfodCaches)
    locator.inMemoryImages = options.inMemoryImages
    // One report looks up a few addresses per image: the chosen files' symbols are read for those
    // alone (below), not every candidate's whole table sorted.
    locator.symbolReading = .presence
    return locator
  }

  /// `symbolicate(_:options:cache:)` with the locator made by `locator(forOneReport:)` (no cache).
  package static func symbolicate(_ report: CrashReport, options: SymbolicationOptions,
                                  locator: DebugFileLocator) -> SymbolicatedReport {
    symbolicate(report, options: options, cache: nil, locator: locator)
  }

  static func symbolicate(_ report: CrashReport, options: SymbolicationOptions, cache: SymbolicationCache?,
                          locator given: DebugFileLocator?) -> SymbolicatedReport {
    var report = report
    let locator = cache?.locator ?? given ?? Self.locator(forOneReport: options)
    let demangler = Demangler(style: options.demangle)
    var notes: [String] = []
    // By image index, not a dictionary: the first `[Int: ...]` of a run costs the runtime a search of
    // every conformance record for `Int: Hashable` (BENCHMARKS.md, "Figures behind design choices").
    var files = [SymbolFile?](repeating: nil, count: report.images.count)
    var resolutions: [ImageResolution] = []
    var debugFiles: [Int: String] = [:]
    let usedImages = usedImageIndices(report)
    for imageIndex in usedImages {
      let image = report.images[imageIndex]
      let architecture = report.architecture ?? options.architecture
      let outcome: DebugFileLocator.Outcome
      if let cache {
        let located = cache.locate(image, architecture: architecture)
        outcome = located.outcome
        for note in located.notes where !notes.contains(note) { notes.append(note) }
      } else {
        outcome = locator.locate(image, architecture: architecture)
      }
      switch outcome {
      case .found(let file, let how):
        files[imageIndex] = file
        if let debug = file.debugInfoPath { debugFiles[imageIndex] = debug }
        resolutions.append(ImageResolution(imageIndex: imageIndex, status: .found(path: file.path, how: how)))
      case .unverified(let file):
        files[imageIndex] = file
        resolutions.append(ImageResolution(imageIndex: imageIndex, status: .unverified(path: file.path)))
      case let .mismatch(reportID, fileID, path):
        resolutions.append(ImageResolution(imageIndex: imageIndex, status: .mismatch(reportID: reportID, fileID: fileID, path: path)))
      case .missing:
        resolutions.append(ImageResolution(imageIndex: imageIndex, status: .missing))
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
    where report.images[imageIndex].loadAddressFromSymbols && files[imageIndex]?.presentSymbols != nil {
      readSymbols(of: &files[imageIndex]!, for: nil, notes: &notes)
    }
    let unplaced = report.images
    notes += placeImagesBySymbols(&report, files: files)

    var results: [SymbolicatedFrame] = []
    results.reserveCapacity(report.frames.count)
    // Frames to look up, by image: each image's symbol table is then walked with no per-frame copy.
    // Fields are read in place: a copy of a frame or image per frame would retain each of its strings.
    var lookups = [[(frame: Int, offset: UInt64, lookup: UInt64)]](repeating: [], count: report.images.count)
    var bases = [UInt64?](repeating: nil, count: report.images.count)
    // Linux logs: where each file's mapped segments end (link-time), and the first lookup past it. No
    // function is there; a file it falls outside of is another build (`checkReportedNames`).
    var mappedEnds = [UInt64?](repeating: nil, count: report.images.count)
    var pastEnd = [(lookup: UInt64, end: UInt64)?](repeating: nil, count: report.images.count)
    for (imageIndex, file) in files.enumerated() {
      guard let file else { continue }
      // Offsets from the load bias are link-time addresses already.
      bases[imageIndex] = report.images[imageIndex].offsetsFromLoadBias ? 0 : file.imageBaseVMAddress
      if report.format.isLinuxLog, let size = file.loadSize {
        let (end, overflow) = file.imageBaseVMAddress.addingReportingOverflow(size)
        if !overflow { mappedEnds[imageIndex] = end }
      }
    }
    for frameIndex in report.frames.indices {
      var result = SymbolicatedFrame(frameIndex: frameIndex, status: .noImage, imageName: nil, imageOffset: nil,
                                     lookupAddress: nil)
      guard let imageIndex = report.frames[frameIndex].imageIndex, report.images.indices.contains(imageIndex) else {
        if report.frames[frameIndex].namesNoModule {
          result.status = .noModule
          if let reported = reportedFunction(report.frames[frameIndex]) { result.setFunction(reported) }
        }
        results.append(result)
        continue
      }
      result.imageName = report.images[imageIndex].name
      let (offset, below) = report.frames[frameIndex].address.subtractingReportingOverflow(report.images[imageIndex].loadAddress)
      if !below { result.imageOffset = offset }
      guard let base = bases[imageIndex] else {
        if case .mismatch(let reportID, let fileID, let path)? = resolutions.first(where: { $0.imageIndex == imageIndex })?.status {
          result.status = .mismatch(reportID: reportID, fileID: fileID, path: path)
        } else {
          result.status = .missingImage
        }
        results.append(result)
        continue
      }
      result.status = .noSymbol
      guard !below else { results.append(result); continue }
      // Return addresses point after the call: look up the call itself.
      let adjusted = report.frames[frameIndex].isReturnAddress && offset > 0 ? offset - 1 : offset
      let (lookup, overflow) = base.addingReportingOverflow(adjusted)
      guard !overflow else { results.append(result); continue }
      if let end = mappedEnds[imageIndex], lookup >= end {
        if pastEnd[imageIndex] == nil { pastEnd[imageIndex] = (lookup, end) }
        results.append(result)
        continue
      }
      result.lookupAddress = lookup
      lookups[imageIndex].append((results.count, offset, lookup))
      results.append(result)
    }

    // Swift's backtracer measures a return address's offset from the call (address - 1); Apple's
    // reports from the address itself.
    let offsetFromLookup = report.format == .swiftBacktrace || report.format == .swiftBacktraceJSON
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
          debugInfo = try cache?.debugInfo(path: path, architecture: architecture, supplementaryPath: file.supplementaryPath)
            ?? DebugInfoFile(path: path, architecture: architecture, supplementaryPath: file.supplementaryPath)
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
      for (position, (frameIndex, offset, lookup)) in frameLookups.enumerated() where functionOfLookup[position] >= 0 {
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
        let displayAddress = offsetFromLookup ? lookup : (bases[imageIndex] ?? file.imageBaseVMAddress) &+ offset
        results[frameIndex].status = .symbolicated
        results[frameIndex].setFunction(SymbolicatedFrame.Function(
          name: consume name, rawName: consume raw, offset: displayAddress &- starts[function], file: nil, line: nil,
          column: nil, isInlined: false))
        if let debugInfo {
          do {
            addLines(try debugInfo.frames(at: lookup), to: &results[frameIndex], demangler: demangler)
          } catch {
            notes.append("no file:line information for 0x\(hexDigits(lookup)): \(error)")
          }
        }
      }
    }
    if report.format.isLinuxLog {
      checkReportedNames(&report, unplaced: unplaced, files: files, pastEnd: pastEnd, results: &results,
                         resolutions: &resolutions)
      for resolution in resolutions { if case .otherBuild = resolution.status { debugFiles[resolution.imageIndex] = nil } }
    }
    return SymbolicatedReport(report: report, frames: results, images: resolutions, notes: notes, debugFiles: debugFiles)
  }

  /// The function and location a report's frame line gives itself, when it names one.
  static func reportedFunction(_ frame: CrashReport.Frame) -> SymbolicatedFrame.Function? {
    guard let reported = frame.reportedFunction else { return nil }
    return SymbolicatedFrame.Function(name: reported.name, rawName: nil, offset: nil, file: reported.file,
                                      line: reported.line, column: reported.column, isInlined: false)
  }

  /// `report` with its frames placed in their images (image and offset) and nothing looked up: what
  /// `--no-symbolicate` keeps for later, in the shape `symbolicate` answers in (each frame
  /// `.notLookedUp`, each image with frames `.notSearched`).
  package static func unsymbolicated(_ report: CrashReport) -> SymbolicatedReport {
    var frames: [SymbolicatedFrame] = []
    frames.reserveCapacity(report.frames.count)
    for (frameIndex, frame) in report.frames.enumerated() {
      var result = SymbolicatedFrame(frameIndex: frameIndex, status: .noImage, imageName: nil, imageOffset: nil,
                                     lookupAddress: nil)
      if let imageIndex = frame.imageIndex, report.images.indices.contains(imageIndex) {
        let image = report.images[imageIndex]
        result.status = .notLookedUp
        result.imageName = image.name
        let (offset, below) = frame.address.subtractingReportingOverflow(image.loadAddress)
        if !below { result.imageOffset = offset }
      } else if frame.namesNoModule {
        result.status = .noModule
        if let reported = reportedFunction(frame) { result.setFunction(reported) }
      }
      frames.append(result)
    }
    let used = usedImageIndices(report)
    return SymbolicatedReport(report: report, frames: frames,
                              images: used.map { ImageResolution(imageIndex: $0, status: .notSearched) }, notes: [])
  }

  /// The indices of the images frames are in, in order, each once.
  static func usedImageIndices(_ report: CrashReport) -> [Int] {
    var used = [Bool](repeating: false, count: report.images.count)
    for frame in report.frames {
      if let index = frame.imageIndex, used.indices.contains(index) { used[index] = true }
    }
    return used.indices.filter { used[$0] }
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
  static func addLines(_ locations: [DWARFFrame], to frame: inout SymbolicatedFrame, demangler: Demangler) {
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
    var functions: [SymbolicatedFrame.Function] = []
    functions.reserveCapacity(locations.count)
    for inlined in locations.dropLast() {
      functions.append(SymbolicatedFrame.Function(
        name: inlined.function.map { demangler.demangle($0) }, rawName: inlined.function, offset: nil,
        file: inlined.file.isEmpty ? nil : inlined.file, line: inlined.file.isEmpty ? nil : inlined.line,
        column: inlined.file.isEmpty ? nil : inlined.column, isInlined: true))
    }
    functions.append(real)
    frame.functions = functions
  }
}
