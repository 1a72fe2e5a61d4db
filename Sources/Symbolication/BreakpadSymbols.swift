internal import Glibc
import ImageLog
import Snapshot
import ImageReaders

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
///   the binary's, not the dSYM bundle's.
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
    /// Only every `unitStride`-th DWARF unit is read (tests of the largest files compare a sample).
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
    // The CFI records are made by helper threads from here on, while the DWARF is read, its records
    // are made, numbered and written.
    var frameJobs = [Self.startFrames(primary)]
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
        if file.hasDebugInfo, !Self.sameFile(candidate, inputPath) { debugPath = candidate }
        supplementaryPath = file.supplementaryPath
      }
      for (path, problem) in locator.refused { primary.object.notes.append("\(path): not used: \(problem)") }
    }
    var opened = [primary]
    if let debugPath {
      let debug = try Self.open(path: debugPath, options: options)
      frameJobs.append(Self.startFrames(debug))
      opened.append(debug)
      sources.append(debugPath)
      if let supplementaryPath { sources.append(supplementaryPath) }
      Self.readDWARF(&opened[1], supplementaryPath: supplementaryPath)
    } else if primary.object.hasDebugInfo, let supplementaryPath {
      sources.append(supplementaryPath)
    }
    Self.readDWARF(&opened[0], supplementaryPath: debugPath == nil ? supplementaryPath : nil)
    let units = Self.prepareUnits(opened, options: options)
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
    let allJobs = jobs
    let work = BreakpadJobs<(file: Int, unit: BreakpadPreparedUnit)>(count: jobs.count) { state, index in
      let files = shared.value
      let (fileIndex, units) = allJobs[index]
      var preparers = state as? [Int: BreakpadUnitPreparer] ?? [:]
      defer { state = preparers }
      if preparers[fileIndex] == nil, let sections = files[fileIndex].dwarf?.sections,
         let reader = try? DWARFReader(sections, indexed: false) {
        let file = files[fileIndex]
        preparers[fileIndex] = BreakpadUnitPreparer(dwarf: reader, source: file.source, inlines: options.inlines,
                                                    isMachO: file.object.isMachO, path: file.object.path)
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

  // MARK: Reading one file

  /// One file opened: its module facts, symbols, call frame sections and DWARF, before its records
  /// are made; with what locating its debug file needs.
  private struct Opened {
    var object: BreakpadObject
    var source: BreakpadObjectSource
    /// A reader over its DWARF (its unit sizes and sections; each worker thread reads with its own).
    var dwarf: DWARFReader?
    var identity: BuildID?
    var sliceArchitecture: String?
    /// A slice of a universal file (its DWARF is read from that slice).
    var universal = false
  }

  /// Reads the DWARF of `file` when it has any (`readDWARF` is apart from `open` so that the CFI
  /// threads start before compressed sections are inflated).
  private static func readDWARF(_ file: inout Opened, supplementaryPath: String?) {
    guard file.object.hasDebugInfo else { return }
    file.dwarf = reader(path: file.object.path, architecture: file.universal ? file.sliceArchitecture : nil,
                        supplementaryPath: supplementaryPath, notes: &file.object.notes)
  }

  private static func open(path: String, options: Options) throws -> Opened {
    let mapped: MappedFile
    do { mapped = try MappedFile(path: path) } catch { throw ReportError("\(path): \(error)") }
    let result = mapped.withReader { bytes -> Result<Opened, ReportError> in
      do {
        switch try BinaryFile.parse(bytes) {
        case .elf(let file):
          return .success(try elfObject(file, bytes: bytes, mapped: mapped))
        case .machO(let file):
          return .success(try machOObject(file, slice: bytes, path: path, mapped: mapped, universal: false))
        case .fat(let fat):
          let wanted = options.architecture
          let candidates = fat.members.filter { wanted == nil || $0.architecture == wanted }
          guard let member = candidates.count == 1 ? candidates.first : nil, let file = member.decoded else {
            let all = fat.members.map(\.architecture).joined(separator: ", ")
            return .failure(ReportError("\(path): " + (wanted.map { "no \($0) slice (slices: \(all))" }
              ?? "several slices (\(all)): name one with --arch")))
          }
          let range = try ByteReader.checkedRange(offset: member.fileOffset, size: member.size, limit: bytes.count,
                                                  "slice \(member.architecture)")
          return .success(try machOObject(file, slice: try bytes.slice(at: range.lowerBound, length: range.count),
                                          path: path, mapped: mapped, universal: true))
        }
      } catch let error as ReportError {
        return .failure(error)
      } catch {
        return .failure(ReportError("\(path): \(error)"))
      }
    }
    return try result.get()
  }

  private static func elfObject(_ file: ELFFile, bytes: ByteReader, mapped: MappedFile) throws -> Opened {
    let path = mapped.path
    // symbolic's load address: the first PT_LOAD's p_vaddr, as it is (0 for libraries and PIE).
    let loadAddress = file.programHeaders.first { $0.type == ProgramHeader.load }?.vmAddress ?? 0
    let identityBytes = file.buildID?.bytes.isEmpty == false ? file.buildID?.bytes : nil
    var debugBytes = identityBytes ?? textHash(file, bytes: bytes)
    debugBytes += [UInt8](repeating: 0, count: max(0, 16 - debugBytes.count))
    debugBytes = Array(debugBytes.prefix(16))
    if file.header.endian == .little {
      debugBytes[0..<4].reverse()
      debugBytes[4..<6].reverse()
      debugBytes[6..<8].reverse()
    }
    var object = BreakpadObject(path: path, moduleName: lastComponent(file.soname ?? path), isMachO: false,
                                hasDebugInfo: file.debugInfo.hasDebugInfo,
                                debugID: HexText.bytes(debugBytes).uppercased() + "0",
                                codeID: identityBytes.map { HexText.bytes($0).uppercased() },
                                architecture: elfArchitecture(file.header.machine))
    // symbolic's symbols: STT_FUNC entries of executable sections at or above the load address,
    // `.symtab`'s then `.dynsym`'s.
    var symbols: [(name: String, address: UInt64, size: UInt64)] = []
    for tableType in [ELFSection.symbolTableType, ELFSection.dynamicSymbolTableType] {
      guard let table = file.sections.first(where: { $0.type == tableType && $0.occupiesFile }) else { continue }
      guard let strings = file.sections.first(where: { $0.index == Int(table.link) }), strings.occupiesFile,
            let entrySize = Int(exactly: table.entrySize) else {
        object.notes.append("\(path): symbol table section \(table.index) has no string table")
        continue
      }
      let entries = try SymbolEntry.elf(symbols: try file.contents(of: table, in: bytes),
                                        strings: try file.contents(of: strings, in: bytes), entrySize: entrySize,
                                        is64Bit: file.header.is64Bit) { type, section, address in
        type == SymbolEntry.functionType && address >= loadAddress && section > 0 && section < file.sections.count
          && file.sections[section].flags & ELFSection.executableFlag != 0
      }
      symbols += entries.map { ($0.name, $0.address - loadAddress, $0.size) }
    }
    let executable = file.sections.filter { $0.flags & ELFSection.executableFlag != 0 }
      .map { (name: $0.name.isEmpty ? "unknown" : $0.name, vmAddress: $0.vmAddress) }
    let source = BreakpadObjectSource(symbols: symbols, loadAddress: loadAddress, executableSections: executable)
    // `.debug_frame` first, then `.eh_frame`, as symbolic reads them.
    for sectionName in [".debug_frame", ".eh_frame"] {
      guard let section = file.sections.first(where: { $0.name == sectionName && $0.occupiesFile && $0.fileOffset != 0 }),
            section.flags & DWARFSections.compressedFlag == 0 else { continue }
      let contents = try file.contents(of: section, in: bytes)
      contents.withUnsafeBytes { raw in
        object.frames.append(BreakpadFrameSection(bytes: raw, owner: mapped, vmAddress: section.vmAddress,
                                                  isEHFrame: sectionName == ".eh_frame", loadAddress: loadAddress,
                                                  addressSize: file.header.is64Bit ? 8 : 4, path: path))
      }
    }
    return Opened(object: object, source: source, dwarf: nil, identity: file.buildID, sliceArchitecture: nil)
  }

  private static func machOObject(_ file: MachOFile, slice bytes: ByteReader, path: String, mapped: MappedFile,
                                  universal: Bool) throws -> Opened {
    var slice = bytes
    slice.endian = file.header.endian
    let loadAddress = file.segment(named: "__TEXT")?.vmAddress ?? 0
    let uuid = file.uuid.map { HexText.bytes($0.uuidBytes).uppercased() }
    let architecture = file.architecture == "i386" ? "x86" : file.architecture
    var object = BreakpadObject(path: path, moduleName: lastComponent(file.dylibID?.name ?? path), isMachO: true,
                                hasDebugInfo: file.segment(named: "__DWARF") != nil,
                                debugID: (uuid ?? String(repeating: "0", count: 32)) + "0", codeID: uuid,
                                architecture: architecture)
    // symbolic's symbols: section-defined entries of __TEXT,__text and __TEXT,__stubs at or above
    // __TEXT's address, one leading `_` dropped (not from Swift's `__hidden#` names).
    var codeSections = Set<Int>()
    var ordinal = 0
    for segment in file.segments {
      for section in segment.sections {
        ordinal += 1
        if segment.name == "__TEXT", section.name == "__text" || section.name == "__stubs" { codeSections.insert(ordinal) }
      }
    }
    var symbols: [(name: String, address: UInt64, size: UInt64)] = []
    if let table = try file.symbolTableBytes(in: slice) {
      let entries = try SymbolEntry.machO(symbols: table.symbols, count: table.count, strings: table.strings,
                                          is64Bit: file.header.is64Bit) { type, section, address in
        // N_STAB 0xe0, N_TYPE 0x0e, N_SECT 0x0e
        type & 0xE0 == 0 && type & 0x0E == 0x0E && codeSections.contains(section) && address >= loadAddress
      }
      for entry in entries {
        var name = entry.name
        if name.hasPrefix("_"), !name.hasPrefix("__hidden#") { name.removeFirst() }
        symbols.append((name, entry.address - loadAddress, 0))
      }
    }
    let source = BreakpadObjectSource(symbols: symbols, loadAddress: loadAddress, executableSections: [])
    // `__unwind_info` (compact unwinding) is not turned into STACK CFI; `__eh_frame` and a dSYM's
    // `__debug_frame` are.
    for segment in file.segments {
      for section in segment.sections where section.name == "__eh_frame" || section.name == "__debug_frame" {
        guard section.fileOffset != 0, section.size > 0,
              let range = try? ByteReader.checkedRange(offset: UInt64(section.fileOffset), size: section.size,
                                                       limit: slice.count, section.name) else { continue }
        let contents = try slice.slice(at: range.lowerBound, length: range.count)
        contents.withUnsafeBytes { raw in
          object.frames.append(BreakpadFrameSection(bytes: raw, owner: mapped, vmAddress: section.address,
                                                    isEHFrame: section.name == "__eh_frame", loadAddress: loadAddress,
                                                    addressSize: file.header.is64Bit ? 8 : 4, path: path))
        }
      }
    }
    return Opened(object: object, source: source, dwarf: nil, identity: file.uuid, sliceArchitecture: file.architecture,
                  universal: universal)
  }

  /// A reader over the file's DWARF (unit headers only: the workers walk it), or `nil` with a note
  /// when it cannot be read.
  private static func reader(path: String, architecture: String?, supplementaryPath: String?,
                             notes: inout [String]) -> DWARFReader? {
    do {
      let sections = try DebugInfoFile.dwarfSections(path: path, architecture: architecture,
                                                     supplementaryPath: supplementaryPath)
      let reader = try DWARFReader(sections, indexed: false)
      notes += reader.problems.map { "\(path): \($0)" }
      return reader
    } catch {
      notes.append("\(path): \(error)")
      return nil
    }
  }

  /// symbolic's debug id for an ELF file without a build-id: the first page of `.text` folded into 16
  /// bytes by XOR.
  private static func textHash(_ file: ELFFile, bytes: ByteReader) -> [UInt8] {
    guard let text = file.sections.first(where: { $0.name == ".text" && $0.occupiesFile }),
          let contents = try? file.contents(of: text, in: bytes) else { return [] }
    var hash = [UInt8](repeating: 0, count: 16)
    contents.withUnsafeBytes { raw in
      for index in 0..<min(raw.count, 4096) { hash[index % 16] ^= raw[index] }
    }
    return hash
  }

  /// symbolic's architecture names for `e_machine`.
  static func elfArchitecture(_ machine: UInt16) -> String {
    switch machine {
    case 3: "x86"
    case 62: "x86_64"
    case 183: "arm64"
    case 40: "arm"
    case 20: "ppc"
    case 21: "ppc64"
    case 8, 10: "mips"
    default: "unknown"
    }
  }

  /// `dump_syms`' merge of a binary and its debug file (`ObjectInfo::merge`): the one with more
  /// records receives the other's; the binary names the module. Where the two name one address: a
  /// package of the other file is dropped (a made-up one replaced by it), and a FUNC replaces a PUBLIC;
  /// two different names mark the record `m`.
  static func merge(debug: BreakpadObject, binary: BreakpadObject) -> BreakpadObject {
    var (left, right) = debug.symbols.count > binary.symbols.count ? (debug, binary) : (binary, debug)
    left.frames += right.frames
    left.frameFiles += right.frameFiles
    left.notes += right.notes
    let fileNumbers = left.files.merge(right.files)
    let originNumbers = left.origins.merge(right.origins)
    var predecessors = BreakpadPredecessors(candidates: left.symbols.symbols.map(\.address)
                                              + right.symbols.symbols.map(\.address))
    for symbol in left.symbols.symbols { predecessors.add(symbol.address, end: BreakpadObject.end(symbol.address, symbol.size)) }
    for var symbol in right.symbols.sorted {
      if !symbol.isPublic {
        // The FUNC's records, renumbered, follow the left file's.
        let lines = right.records.lines[symbol.lines].map {
          BreakpadLineRecord(address: $0.address, size: $0.size, line: $0.line, file: fileNumbers[Int($0.file)])
        }
        let lineStart = left.records.lines.count
        left.records.lines += lines
        let inlineStart = left.records.inlines.count
        for inline in right.records.inlines[symbol.inlines] {
          let rangeStart = left.records.inlineRanges.count
          left.records.inlineRanges += right.records.inlineRanges[inline.ranges]
          left.records.inlines.append(BreakpadInlineRecord(depth: inline.depth, callLine: inline.callLine,
                                                           callFile: fileNumbers[Int(inline.callFile)],
                                                           origin: originNumbers[Int(inline.origin)],
                                                           ranges: rangeStart..<left.records.inlineRanges.count))
        }
        symbol.lines = lineStart..<left.records.lines.count
        symbol.inlines = inlineStart..<left.records.inlines.count
      }
      if symbol.isPublic, predecessors.isInside(symbol.address) { continue }
      if let index = left.symbols.index(at: symbol.address) {
        let existing = left.symbols[index]
        if symbol.isPublic {
          if symbol.isSynthetic { continue }
          if existing.isSynthetic {
            left.symbols[index] = symbol
          } else if existing.name != symbol.name {
            left.symbols[index].isMultiple = true
          }
        } else if existing.isPublic {
          symbol.isMultiple = existing.name != symbol.name || existing.isMultiple
          left.symbols[index] = symbol
          predecessors.add(symbol.address, end: BreakpadObject.end(symbol.address, symbol.size))
        } else {
          left.symbols[index].isMultiple = true
        }
        continue
      }
      left.symbols.insert(symbol)
      predecessors.add(symbol.address, end: BreakpadObject.end(symbol.address, symbol.size))
    }
    if left.codeID == nil { left.codeID = right.codeID }
    left.moduleName = binary.moduleName
    left.path = binary.path
    return left
  }

  /// For a `.dSYM` bundle, its one DWARF file (`Contents/Resources/DWARF/NAME`); `nil` otherwise.
  static func dwarfFileOfBundle(_ path: String) -> String? {
    guard FileSystem.kind(path) == .directory else { return nil }
    let folder = (path.hasSuffix("/") ? String(path.dropLast()) : path) + "/Contents/Resources/DWARF"
    let names = FileSystem.contents(folder)
    return names.count == 1 ? folder + "/" + names[0] : nil
  }

  static func lastComponent(_ path: String) -> String {
    path.split(separator: "/").last.map(String.init) ?? path
  }

  /// True when both paths name one file (a symbolic link to the other, say).
  static func sameFile(_ a: String, _ b: String) -> Bool {
    var first = stat(), second = stat()
    guard stat(a, &first) == 0, stat(b, &second) == 0 else { return a == b }
    return first.st_dev == second.st_dev && first.st_ino == second.st_ino
  }
}
