internal import Glibc
import ProcessInspection
import Snapshot
import ImageReaders
import Symbolication

/// A Breakpad symbol file (`.sym`, Google's `docs/symbol_files.md`) for one binary, as Mozilla's
/// `dump_syms` writes it: `MODULE`, `INFO CODE_ID`, `FILE`, `INLINE_ORIGIN` (with inlines), `FUNC` with
/// its `INLINE` and line records, `PUBLIC`, `STACK CFI INIT` / `STACK CFI`.
///
/// For an ELF file without DWARF the debug file is found as `symbolicate` finds it (`DebugFileLocator`:
/// build-id, `.gnu_debuglink`, dwz supplementary files), and for a Mach-O file its dSYM; the two are
/// combined as `dump_syms BINARY DEBUGFILE` combines them. Where this differs from `dump_syms`, it is
/// on purpose and said where it happens (names: `BreakpadNames`; CFI: `BreakpadFrameRules`):
/// - a FUNC is marked `m` (several symbols at its address) only when it is: `dump_syms` marks every
///   FUNC of a merged debug file whose address the binary's symbol table also names, and every
///   PUBLIC that `.symtab` and `.dynsym` both hold under the same name;
/// - a DWARF 5 file name in directory 0 is not prefixed with the compilation directory twice (glibc's
///   `csu/init-first.c`, where `dump_syms` writes `csu/csu/init-first.c`);
/// - names in a dwz supplementary file are read (`dump_syms` cannot follow `DW_FORM_GNU_ref_alt`);
/// - the made-up `<.text ELF section in NAME>` publics name the binary, not its debug file;
/// - a Mach-O module's system is `mac`, as the format says (`dump_syms` writes `Mac`), and its name is
///   the binary's, not the dSYM bundle's;
/// - a line-table row that starts before a function and runs into it gives the function its first
///   line (`BreakpadFunctionBuilder.addLine`), and a function range another unit claims has that
///   unit's lines (`BreakpadUnitPreparer`), as `symbolicate` and llvm-symbolizer answer.
package final class BreakpadSymbols {
  /// What to write.
  package struct Options: Sendable {
    /// Write `INLINE_ORIGIN` and `INLINE` records (`dump_syms --inlines`); line records then give the
    /// innermost inlined function's lines.
    package var inlines: Bool
    /// The slice of a universal Mach-O file (`arm64`, `x86_64`, ...); a lone slice needs none.
    package var architecture: String?
    /// The `INFO GENERATOR` value; none when `nil`.
    package var generator: String?
    /// Only every `unitStride`-th DWARF unit is read (tests of the largest files compare a sample). A
    /// sample does not ask which unit claims an address (`DWARFUnitClaims`): the claiming unit is
    /// mostly one left out, whose own FUNC would have come first in a whole run.
    package var unitStride = 1

    /// Options with these values.
    package init(inlines: Bool = false, architecture: String? = nil, generator: String? = nil) {
      self.inlines = inlines
      self.architecture = architecture
      self.generator = generator
    }
  }

  /// `Linux` or `mac`.
  package let operatingSystem: String
  /// Breakpad's architecture name (`x86_64`, `x86`, `arm64`, `arm`, ...).
  package let architecture: String
  /// The MODULE id: the identity's first 16 bytes as Breakpad's debug id (the first three UUID fields
  /// byte-swapped for little-endian ELF) and an age of 0.
  package let debugID: String
  /// The build-id or UUID in uppercase hex, `nil` when the file has none.
  package let codeID: String?
  /// The MODULE name: the library's `DT_SONAME` or install name, else the file's name.
  package let name: String
  /// The files read: the binary, then its debug file and dwz supplementary file when used.
  package let sources: [String]
  /// What could not be read and was left out, one line each (the file named).
  package private(set) var notes: [String]

  private let options: Options
  private var object: BreakpadObject
  /// Each opened file's STACK CFI records, in runs.
  private let frameJobs: [BreakpadJobs<(text: [UInt8], notes: [String])>]
  private var sortedSymbols: [BreakpadSymbol]

  /// Reads `path` (an ELF file, a thin or universal Mach-O file, or a `.dSYM` bundle) and the debug
  /// file `locator` finds for it. Throws `ReportError` naming the file when it cannot be read or is
  /// neither ELF nor Mach-O, or when a universal file has no such slice.
  package init(path: String, options: Options, locator: DebugFileLocator) throws {
    self.options = options
    let inputPath = Self.dwarfFileOfBundle(path) ?? path
    let displayName = Self.lastComponent(inputPath)
    var primary = try Self.open(path: inputPath, options: options)
    // The files' identities and links are what the locator needs here, not their symbol tables.
    locator.symbolReading = .presence
    var sources = [inputPath]
    // The debug file, and the dwz file holding part of the DWARF, found as symbolicate finds them.
    var debugPath: String?
    var supplementaryPath: String?
    if let identity = primary.identity {
      let image = ProcessSnapshot.Image(name: displayName, path: inputPath, loadAddress: 0, endAddress: nil,
                                    identity: ImageIdentity(identity), architecture: primary.object.architecture)
      if case .found(let file, _) = locator.locate(image, architecture: options.architecture ?? primary.sliceArchitecture) {
        let candidate = file.debugInfoPath ?? file.path
        if file.hasDebugInfo, candidate != inputPath && !FileSystem.sameFile(candidate, inputPath) { debugPath = candidate }
        supplementaryPath = file.supplementaryPath
      }
      for (path, problem) in locator.refused { primary.object.notes.append("\(path): not used: \(problem)") }
    }
    var opened = [primary]
    if let debugPath {
      let debug = try Self.open(path: debugPath, options: options)
      opened.append(debug)
      sources.append(debugPath)
      if let supplementaryPath { sources.append(supplementaryPath) }
      Self.readDWARF(&opened[1], supplementaryPath: supplementaryPath)
    } else if primary.object.hasDebugInfo, let supplementaryPath {
      sources.append(supplementaryPath)
    }
    Self.readDWARF(&opened[0], supplementaryPath: debugPath == nil ? supplementaryPath : nil)
    let units = Self.prepareUnits(opened, options: options)
    // The CFI records are made by helper threads from here on, while the DWARF's records are collected,
    // numbered and written (the CFI comes last in the file). Not earlier: beside the units' workers they
    // took a processor from them (BENCHMARKS.md, figures behind design choices).
    let frameJobs = opened.map { Self.startFrames($0) }
    self.frameJobs = frameJobs.map(\.jobs)
    let names = BreakpadNames()
    var objects: [BreakpadObject] = []
    for (index, file) in opened.enumerated() {
      var object = file.object
      object.collect(file.source, units: units[index], names: names, sectionOwner: displayName)
      object.notes += frameJobs[index].notes
      object.frameFiles = [index]
      objects.append(object)
    }
    object = objects.count == 2 ? Self.merge(debug: objects[1], binary: objects[0]) : objects[0]
    operatingSystem = object.isMachO ? "mac" : "Linux"
    architecture = object.architecture
    debugID = object.debugID
    codeID = object.codeID
    name = object.moduleName
    self.sources = sources
    notes = object.notes
    sortedSymbols = object.symbols.sorted
  }

  /// How many threads the work is spread over: as many as the process may use, at most 4.
  static var threads: Int { min(4, WorkerThread.processorCount) }

  /// The files' DWARF units made ready on every thread, in chunks of about equal size (each thread with
  /// readers of its own); returned in file and unit order.
  private static func prepareUnits(_ files: [Opened], options: Options) -> [[BreakpadPreparedUnit]] {
    let threads = Self.threads
    var jobs: [(file: Int, units: Range<Int>)] = []
    for (index, file) in files.enumerated() {
      guard let dwarf = file.dwarf else { continue }
      let total = (0..<dwarf.unitCount).reduce(0) { $0 + dwarf.unitSize($1) }
      let target = max(1, total / (threads == 1 ? 1 : threads * 8))
      var start = 0, size = 0
      for unit in 0..<dwarf.unitCount {
        if options.unitStride > 1 && unit % options.unitStride != 0 {
          if size > 0 { jobs.append((index, start..<unit)) }
          start = unit + 1
          size = 0
          continue
        }
        size += dwarf.unitSize(unit)
        if size >= target || unit == dwarf.unitCount - 1 {
          jobs.append((index, start..<unit + 1))
          start = unit + 1
          size = 0
        }
      }
    }
    let shared = BreakpadShared(files)
    // Read here, on this thread, from the file's own reader (the workers' readers are their own).
    let claims = files.map { options.unitStride > 1 ? nil : $0.dwarf?.unitClaims() }
    let allJobs = jobs
    let work = BreakpadJobs<(file: Int, unit: BreakpadPreparedUnit)>(count: jobs.count) { state, index in
      let files = shared.value
      let (fileIndex, units) = allJobs[index]
      var preparers = state as? [Int: BreakpadUnitPreparer] ?? [:]
      defer { state = preparers }
      if preparers[fileIndex] == nil, let sections = files[fileIndex].dwarf?.sections,
         let reader = try? DWARFReader(sections, indexed: false) {
        let file = files[fileIndex]
        preparers[fileIndex] = BreakpadUnitPreparer(dwarf: reader, claims: claims[fileIndex], source: file.source,
                                                    inlines: options.inlines, isMachO: file.object.isMachO,
                                                    path: file.object.path)
      }
      guard let preparer = preparers[fileIndex] else {
        return (fileIndex, BreakpadPreparedUnit(notes: ["\(files[fileIndex].object.path): DWARF could not be read"]))
      }
      return (fileIndex, preparer.prepare(units: units))
    }
    work.start(threads: threads - 1)
    var units = [[BreakpadPreparedUnit]](repeating: [], count: files.count)
    for output in work.finish() { units[output.file].append(output.unit) }
    return units
  }

  /// The STACK CFI records of a file's call frame sections, made by helper threads while the caller
  /// goes on (the records come last in the file): the FDEs are found here, once, and converted a run
  /// at a time (the rows of an FDE are what takes the time).
  private static func startFrames(_ file: Opened) -> (jobs: BreakpadJobs<(text: [UInt8], notes: [String])>,
                                                      notes: [String]) {
    let threads = Self.threads
    var entries: [[CallFrameTable.Entry]] = []
    var notes: [String] = []
    var jobs: [(section: Int, entries: Range<Int>)] = []
    for (sectionIndex, section) in file.object.frames.enumerated() {
      let (found, problems) = BreakpadFrameRules.entries(section)
      notes += problems
      entries.append(found)
      let run = max(256, found.count / (threads * 2))
      for start in stride(from: 0, to: found.count, by: run) {
        jobs.append((sectionIndex, start..<min(start + run, found.count)))
      }
    }
    let shared = BreakpadShared((file.object, entries))
    let allJobs = jobs
    let work = BreakpadJobs<(text: [UInt8], notes: [String])>(count: jobs.count) { _, index in
      let (object, entries) = shared.value
      let job = allJobs[index]
      var output = UTF8Output(capacity: 1 << 16)
      var text: [UInt8] = []
      let notes = BreakpadFrameRules.write(entries[job.section][job.entries], of: object.frames[job.section],
                                           architecture: object.architecture, into: &output,
                                           sink: { text.append(contentsOf: $0) })
      output.drain(over: 0) { text.append(contentsOf: $0) }
      return (text, notes)
    }
    work.start(threads: max(1, threads - 1))
    return (work, notes)
  }

  /// Where `dump_syms -s STORE` puts the file in a symbol store: `NAME/DEBUGID/NAME.sym`.
  package var storePath: String { name + "/" + debugID + "/" + name + ".sym" }

  /// The number of FUNC records.
  package var functionCount: Int { sortedSymbols.count { !$0.isPublic } }

  /// Writes the file to `descriptor`, a block at a time. Returns false when a write failed (`errno`
  /// says why); the notes of CFI left out are added to `notes`.
  @discardableResult
  package func write(to descriptor: Int32) -> Bool {
    var failed = false
    let sink: (UnsafeRawBufferPointer) -> Void = { bytes in
      if !failed, !writeAll(to: descriptor, bytes) { failed = true }
    }
    var output = UTF8Output(capacity: 1 << 17)
    output.append("MODULE ")
    output.append(operatingSystem)
    output.append(byte: UInt8(ascii: " "))
    output.append(architecture)
    output.append(byte: UInt8(ascii: " "))
    output.append(debugID)
    output.append(byte: UInt8(ascii: " "))
    output.append(BreakpadNames.printable(name))
    output.append(byte: UInt8(ascii: "\n"))
    if let codeID {
      output.append("INFO CODE_ID ")
      output.append(codeID)
      output.append(byte: UInt8(ascii: "\n"))
    }
    if let generator = options.generator {
      output.append("INFO GENERATOR ")
      output.append(BreakpadNames.printable(generator))
      output.append(byte: UInt8(ascii: "\n"))
    }
    for (number, file) in object.files.names.enumerated() {
      output.append("FILE ")
      output.appendDecimal(UInt64(number))
      output.append(byte: UInt8(ascii: " "))
      output.append(file)
      output.append(byte: UInt8(ascii: "\n"))
      output.drain(over: 1 << 16, to: sink)
    }
    for (number, origin) in object.origins.names.enumerated() {
      output.append("INLINE_ORIGIN ")
      output.appendDecimal(UInt64(number))
      output.append(byte: UInt8(ascii: " "))
      output.append(origin.allSatisfy { $0 == " " } ? "<name omitted>" : origin)
      output.append(byte: UInt8(ascii: "\n"))
      output.drain(over: 1 << 16, to: sink)
    }
    for symbol in sortedSymbols {
      writeSymbol(symbol, into: &output)
      output.drain(over: 1 << 16, to: sink)
    }
    output.drain(over: 0, to: sink)
    for file in object.frameFiles {
      for part in frameJobs[file].finish() {
        part.text.withUnsafeBytes { sink($0) }
        notes += part.notes
      }
    }
    return !failed
  }

  private func writeSymbol(_ symbol: BreakpadSymbol, into output: inout UTF8Output) {
    output.append(symbol.isPublic ? "PUBLIC " : "FUNC ")
    if symbol.isMultiple { output.append("m ") }
    output.appendHex(symbol.address)
    output.append(byte: UInt8(ascii: " "))
    if !symbol.isPublic {
      output.appendHex(symbol.size)
      output.append(byte: UInt8(ascii: " "))
    }
    output.append("0 ")
    output.append(symbol.name)
    output.append(byte: UInt8(ascii: "\n"))
    let records = object.records
    for index in symbol.inlines {
      let inline = records.inlines[index]
      output.append("INLINE ")
      output.appendDecimal(UInt64(inline.depth))
      output.append(byte: UInt8(ascii: " "))
      output.appendDecimal(UInt64(inline.callLine))
      output.append(byte: UInt8(ascii: " "))
      output.appendDecimal(UInt64(inline.callFile))
      output.append(byte: UInt8(ascii: " "))
      output.appendDecimal(UInt64(inline.origin))
      for range in inline.ranges {
        output.append(byte: UInt8(ascii: " "))
        output.appendHex(records.inlineRanges[range].address)
        output.append(byte: UInt8(ascii: " "))
        output.appendHex(records.inlineRanges[range].size)
      }
      output.append(byte: UInt8(ascii: "\n"))
    }
    for index in symbol.lines {
      let line = records.lines[index]
      output.appendHex(line.address)
      output.append(byte: UInt8(ascii: " "))
      output.appendHex(line.size)
      output.append(byte: UInt8(ascii: " "))
      output.appendDecimal(UInt64(line.line))
      output.append(byte: UInt8(ascii: " "))
      output.appendDecimal(UInt64(line.file))
      output.append(byte: UInt8(ascii: "\n"))
    }
  }
}
