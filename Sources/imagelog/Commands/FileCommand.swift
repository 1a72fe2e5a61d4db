import ImageLog
import ImageReaders

/// `imagelog file PATH...`: what crash tooling asks of binaries that are not running — per slice the
/// text range, architecture and build-id/UUID (the crash line), a detailed view, JSON, or the
/// `llvm-dwarfdump --uuid` line. Every path is read on its own: a bad one prints one line on stderr
/// and the rest are still read.
struct FileCommand: Command {
  static let name = "file"
  static let abstract = "Describe ELF and Mach-O files: build-id/UUID, architecture, text range, dependencies."
  static let usage = "imagelog file [--format <style>] [--uuid] [--arch <name>] [--entitlements] [-r] <path> ..."
  static let helpSections = """
    ARGUMENTS:
      <path>                  ELF or Mach-O files (thin or universal), .dSYM bundles (their DWARF files);
                              with -r, folders too.

    OPTIONS:
      --format <style>        crash (default), detailed or json.
                              crash: one Binary Images line per slice,
                                0xSTART - 0xEND name arch  <uuid> path
                              (link-time text range, END inclusive; 32 zeros without a build-id).
                              The text range starts where the image starts, as Mach-O's __TEXT
                              does (it maps the header): for ELF the first PT_LOAD, so JSON's
                              textStart equals loadStart there; it ends after the last executable
                              segment. Where code itself starts: the R-X segment in the detailed
                              view, elf.segments or machO.segments in JSON.
      --uuid                  Print 'UUID: XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX (arch) path' per slice,
                              as llvm-dwarfdump --uuid does (ELF: the build-id's first 16 bytes).
      --arch <name>           Only the slice for this architecture (x86_64, arm64, i386, ...; aarch64,
                              amd64, i686, powerpc64 are accepted too).
      --entitlements          Print a Mach-O slice's entitlements (as stored; JSON with --format json).
      -r, --recursive         Walk folders; files that are not ELF or Mach-O are skipped silently.
      -h, --help              Show help information.

    EXIT STATUS:
      0 when every file was read, 1 when any failed (each failure is one line on standard error), 64 for usage errors.
    """

  /// How many files are read ahead of the one being printed, at most.
  static let batchSize = 1024

  /// How each slice is printed.
  enum Style: String, CaseIterable {
    case crash, detailed, json
  }

  var paths: [String]
  var style: Style
  var printUUIDs: Bool
  var architecture: String?
  var printEntitlements: Bool
  var recursive: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    let formatName = try scanner.option("--format", command: Self.name, usage: Self.usage)
    if let formatName {
      guard let style = Style(rawValue: formatName) else {
        throw UsageError(message: "The value '\(formatName)' is invalid for '--format <style>' (crash, detailed, json)",
                         commandName: Self.name, usage: Self.usage)
      }
      self.style = style
    } else {
      style = .crash
    }
    architecture = try scanner.option("--arch", command: Self.name, usage: Self.usage)
    printUUIDs = scanner.flag("--uuid")
    printEntitlements = scanner.flag("--entitlements")
    recursive = scanner.flag("-r", "--recursive")
    paths = try scanner.positionals(command: Self.name, usage: Self.usage)
    guard !paths.isEmpty else {
      throw UsageError(message: "Missing expected argument '<path> ...'", commandName: Self.name, usage: Self.usage)
    }
    if printUUIDs && printEntitlements {
      throw UsageError(message: "--uuid and --entitlements cannot be combined", commandName: Self.name, usage: Self.usage)
    }
  }

  func run() throws -> ExitStatus {
    var failed = false
    let inputs = FileWalker.expand(paths, recursive: recursive) { path, problem in
      printError("imagelog: \(path): \(problem)")
      failed = true
    }
    var progress = ProgressLine(total: inputs.count)
    var json = JSONArrayPrinter()
    let jsonArray = style == .json && !printUUIDs && !printEntitlements  // entitlements print their own JSON
    var output = OutputLines()
    if jsonArray { json.begin(&output) }
    // Files are read and rendered here, and on more threads when they are slow to read
    // (`readerThreads`), and printed here, in order. A batch at a time, so a long walk whose output
    // is read slowly holds at most one batch of reports.
    let command = self
    let threads = Self.readerThreads(for: inputs.count)
    var batchStart = 0
    while batchStart < inputs.count {
      let batch = Array(inputs[batchStart..<min(batchStart + Self.batchSize, inputs.count)])
      batchStart += batch.count
      forEachInOrder(count: batch.count, threads: threads.count, atOnce: threads.atOnce,
                     work: { index in command.report(batch[index]) }) { index, report in
        progress.tick(batch[index].path)
        for line in report.lines {
          switch line {
          case .output(let text): output.line(text)
          case .outputBytes(let bytes): output.line(bytes)
          case .jsonElement(let bytes): json.element(bytes, &output)
          case .error(let text):
            progress.clear()
            printError(text)
          }
        }
        if report.failed { failed = true }
      }
    }
    progress.clear()
    if jsonArray { json.end(&output) }
    output.flush()
    return failed ? .failure : .success
  }

  /// Why a path could not be read: the file could not be opened or read, or its bytes are not a binary we read.
  enum Problem: Error, Sendable, CustomStringConvertible {
    case open(MappedFile.OpenError)
    case format(FormatError)

    var description: String {
      switch self {
      case .open(let error): error.description
      case .format(let error): error.description
      }
    }

    /// True for files a folder walk skips silently: not ELF or Mach-O at all.
    var meansNotABinary: Bool {
      switch self {
      case .open(.empty), .open(.notRegularFile), .format(.notRecognized), .format(.tooShort): true
      default: false
      }
    }
  }

  /// Reads and decodes `path` from the ranges its parser asks for (`FileBytes`: a few `pread` calls):
  /// an ELF file's headers, tables, notes and dynamic strings; a Mach-O file's (or each universal
  /// slice's) header, load commands and code signature. The bytes are released before this returns:
  /// the decoded value keeps no reference to them.
  static func read(_ path: String) -> ReadOutcome {
    let file: FileBytes
    do { file = try FileBytes(path: path) } catch { return .problem(.open(error)) }
    return file.withRanges { ranges in
      do throws(FormatError) {
        let head = try ranges.slice(at: 0, length: min(ranges.count, 4))
        if head.count == 4, try head.peek(UInt32.self, at: 0) == ELFHeader.magic {
          // No style prints section names (only their count): the others are checked, not made into Strings.
          return .binary(.elf(try ELFFile(source: ranges, names: .lookedFor)))
        }
        if isJavaClassFile(try ranges.slice(at: 0, length: min(ranges.count, 8))) {
          return .problem(.format(.notRecognized(magic: 0xCAFE_BABE)))
        }
        return .binary(try BinaryFile.parse(source: ranges))
      } catch {
        // A read that failed or came back short (the file shrank) is the system's problem, not the bytes'.
        if let readError = file.readError { return .problem(.open(readError)) }
        return .problem(.format(error))
      }
    }
  }

  /// What `read` found: a decoded binary or why there is none. Not a `Result`: a generic type with an
  /// `Error` requirement costs a conformance lookup at run time the first time it is used, which a run
  /// over a few files notices.
  enum ReadOutcome {
    case binary(BinaryFile)
    case problem(Problem)
  }

  /// Java class files share `FAT_MAGIC` (0xcafebabe); like LLVM's `identify_magic` and file(1), a
  /// fourth header byte of 43 or more (a class file's major version) means "not universal", so folder
  /// walks skip them silently.
  static func isJavaClassFile(_ reader: ByteReader) -> Bool {
    guard reader.count >= 8, let magic = try? reader.peek(UInt32.self, at: 0), let version = try? reader.peek(UInt8.self, at: 7)
    else { return false }
    return magic == 0xBEBA_FECA && version >= 43  // 0xcafebabe read little-endian
  }

  /// What one file prints, in order, and whether anything about it failed: made on a reader thread,
  /// printed by the thread that reports files in order.
  struct FileReport: Sendable {
    enum Line: Sendable {
      /// A line (or lines) for standard output.
      case output(String)
      /// A line for standard output, as UTF-8 without its newline (crash lines, written as bytes).
      case outputBytes([UInt8])
      /// One compact JSON value, an element of the `--format json` array.
      case jsonElement([UInt8])
      /// A one-line diagnostic for standard error.
      case error(String)
    }

    var lines: [Line] = []
    var failed = false

    mutating func fail(_ message: String) {
      lines.append(.error(message))
      failed = true
    }
  }

  /// Reads `input` and renders what it prints.
  func report(_ input: FileWalker.Input) -> FileReport {
    switch Self.read(input.path) {
    case .problem(let problem):
      var report = FileReport()
      // A walk only reports files that look like binaries; named paths report every problem.
      if !(input.fromWalk && problem.meansNotABinary) { report.fail("imagelog: \(input.path): \(problem)") }
      return report
    case .binary(let binary):
      return report(binary, path: input.path)
    }
  }

  /// Renders one file's selected slices in the chosen style.
  func report(_ binary: BinaryFile, path: String) -> FileReport {
    var report = FileReport()
    if case .fat(let universal) = binary {
      // Slices that could not be read: one line each; the others are still shown.
      for line in renderUniversalFailures(universal, path: path) { report.fail(line) }
    }
    if printUUIDs {
      // The architecture and build-id/UUID of each slice are all this prints: no summaries (segments,
      // dependencies, install names) are made.
      let identities = binary.sliceIdentities
      guard let indices = selectedSlices(identities.map(\.architecture), path: path, into: &report) else { return report }
      for index in indices {
        // llvm-dwarfdump --uuid prints nothing for a file without a UUID; so do we.
        guard let buildID = identities[index].buildID else { continue }
        report.lines.append(.output("UUID: \(buildID.uuid) (\(identities[index].architecture)) \(TextEscaping.escaped(path))"))
      }
      return report
    }
    // An ELF file is one slice: its summary without the array `BinaryFile.slices` makes.
    let slices: [SliceSummary]
    if case .elf(let file) = binary, architecture == nil, !printEntitlements {
      addSlice(file.summary, of: binary, index: 0, sliceCount: 1, path: path, to: &report)
      return report
    } else {
      slices = binary.slices
    }
    guard let indices = selectedSlices(slices.map(\.architecture), path: path, into: &report) else { return report }
    if printEntitlements {
      reportEntitlements(binary, path: path, indices: indices, into: &report)
      return report
    }
    for index in indices {
      addSlice(slices[index], of: binary, index: index, sliceCount: slices.count, path: path, to: &report)
    }
    return report
  }

  /// The indices of the slices `--arch` selects among `architectures` (all without it); `nil` after
  /// adding the error line when none matches.
  func selectedSlices(_ architectures: [String], path: String, into report: inout FileReport) -> [Int]? {
    guard let architecture else { return Array(architectures.indices) }
    let wanted = Self.canonicalArchitecture(architecture)
    let indices = architectures.indices.filter { Self.canonicalArchitecture(architectures[$0]) == wanted }
    if indices.isEmpty {
      let present = architectures.joined(separator: ", ")
      report.fail("imagelog: \(path): no slice for architecture \(architecture) (has \(present.isEmpty ? "none" : present))")
      return nil
    }
    return indices
  }

  /// Adds slice `index` of `binary` (summarized by `slice`) to `report` in the chosen style.
  func addSlice(_ slice: SliceSummary, of binary: BinaryFile, index: Int, sliceCount: Int, path: String,
                to report: inout FileReport) {
    switch style {
    case .crash:
      report.lines.append(.outputBytes(Self.crashLineBytes(slice, path: path)))
    case .detailed:
      var lines = Self.commonDetailedLines(slice, path: path, sliceCount: sliceCount)
      lines += (binary.detailRenderer?.detailedLines(slice: index) ?? []).map { "  " + $0 }
      // Names, paths and strings from the file are data: escaped, so none can forge a line or drive the terminal.
      report.lines.append(.output(lines.map(TextEscaping.escaped).joined(separator: "\n") + "\n"))
    case .json:
      var writer = JSONWriter()
      writer.beginObject()
      Self.writeCommonJSONMembers(slice, path: path, into: &writer)
      if case .elf(let file) = binary {
        // ELF's members written in place: what `jsonMembers` returns, without the tree in between.
        writer.key("elf")
        file.writeJSON(into: &writer)
      } else {
        binary.detailRenderer?.writeJSONMembers(slice: index, into: &writer)
      }
      writer.endObject()
      report.lines.append(.jsonElement(writer.bytes))
    }
  }

  func reportEntitlements(_ binary: BinaryFile, path: String, indices: [Int], into report: inout FileReport) {
    guard let source = binary.formatRenderer as? EntitlementsRendering else {
      report.fail("imagelog: \(path): entitlements are stored only in Mach-O code signatures")
      return
    }
    for index in indices {
      do {
        // A document as stored (as `codesign -d --entitlements -` prints it), for plutil and diff: not escaped.
        if let text = try source.entitlements(slice: index, json: style == .json) { report.lines.append(.output(text)) }
      } catch {
        report.fail("imagelog: \(path): \(error)")
      }
    }
  }

  /// `--arch` accepts the names other tools use for the same architecture (LLVM triples, Debian).
  static func canonicalArchitecture(_ name: String) -> String {
    switch name.lowercased() {
    case "aarch64": "arm64"
    case "amd64", "x86-64": "x86_64"
    case "i486", "i586", "i686", "x86": "i386"
    case "powerpc": "ppc"
    case "powerpc64": "ppc64"
    case "powerpc64le": "ppc64le"
    default: name
    }
  }

  /// `0xSTART - 0xEND name arch  <uuid> path`: Apple's Binary Images line for a slice, from its link-time
  /// text range (END is the last byte, inclusive), as UTF-8 without the newline: the text
  /// `ImageFormatter(style: .crash)` writes for `imagelog list` (32 zeros when the slice has no
  /// build-id or UUID), written straight into one array — no `Image`, no interpolated Strings, for
  /// thousands of files per run. `FileCommandTests` compares it with `ImageFormatter`'s line.
  static func crashLineBytes(_ slice: SliceSummary, path: String) -> [UInt8] {
    var path = path
    // Paths are data (`TextEscaping`): escaping is byte-local and keeps every "/", so the name taken
    // from the escaped path below is the escaped name.
    if !path.withUTF8({ TextEscaping.isPlain(UnsafeRawBufferPointer($0)) }) { path = TextEscaping.escaped(path) }
    var architecture = slice.architecture
    return path.withUTF8 { pathBytes in
      architecture.withUTF8 { architectureBytes in
        // ImageFormatter names the image by `Image.shortName(of:)`, the Characters after the last "/".
        // For an ASCII path that is the bytes after the last "/" byte; otherwise ask it.
        var nameStart = pathBytes.count
        while nameStart > 0 && pathBytes[nameStart - 1] != UInt8(ascii: "/") { nameStart -= 1 }
        var highBits: UInt8 = 0
        for byte in pathBytes { highBits |= byte }  // one pass, no branch per byte
        let ascii = highBits < 0x80
        var nonASCIIName: [UInt8] = []
        if !ascii { nonASCIIName = Array(Image.shortName(of: String(decoding: pathBytes, as: UTF8.self)).utf8) }
        let nameLength = ascii ? pathBytes.count - nameStart : nonASCIIName.count
        let start = slice.textVMRange.lowerBound
        // END is inclusive; an empty text range prints START as END.
        let end = slice.textVMRange.isEmpty ? start : slice.textVMRange.upperBound - 1
        let id = slice.buildID?.bytes ?? []
        // "0x" + 16 digits, " - ", the same, " ", name, " ", arch, "  <", 32 digits, "> ", path.
        let capacity = 2 * 18 + 3 + 1 + nameLength + 1 + architectureBytes.count + 3 + 32 + 2 + pathBytes.count
        return [UInt8](unsafeUninitializedCapacity: capacity) { line, count in
          var out = 0
          out = writeHex(start, into: line, at: out)
          out = write(" - ", into: line, at: out)
          out = writeHex(end, into: line, at: out)
          out = write(" ", into: line, at: out)
          if ascii {
            out = write(UnsafeBufferPointer(rebasing: pathBytes[nameStart...]), into: line, at: out)
          } else {
            out = nonASCIIName.withUnsafeBufferPointer { write($0, into: line, at: out) }
          }
          out = write(" ", into: line, at: out)
          out = write(architectureBytes, into: line, at: out)
          out = write("  <", into: line, at: out)
          // BuildID.compactUUID: the first 16 bytes (zero-padded) as 32 lowercase hex digits.
          for index in 0..<16 {
            let byte = index < id.count ? id[index] : 0
            line[out] = HexText.digit(Int(byte >> 4))
            line[out + 1] = HexText.digit(Int(byte & 0xF))
            out += 2
          }
          out = write("> ", into: line, at: out)
          out = write(pathBytes, into: line, at: out)
          count = out
        }
      }
    }
  }

  /// Copies `bytes` into `line` at `position`; returns the position after them. The caller sized `line`.
  @inline(__always)
  private static func write(_ bytes: UnsafeBufferPointer<UInt8>, into line: UnsafeMutableBufferPointer<UInt8>,
                            at position: Int) -> Int {
    guard let source = bytes.baseAddress, let target = line.baseAddress, !bytes.isEmpty else { return position }
    precondition(bytes.count <= line.count - position, "crash line buffer too small")
    (target + position).update(from: source, count: bytes.count)
    return position + bytes.count
  }

  @inline(__always)
  private static func write(_ text: StaticString, into line: UnsafeMutableBufferPointer<UInt8>, at position: Int) -> Int {
    write(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount), into: line, at: position)
  }

  /// `0x` and `value` in lowercase hex without leading zeros (`hexDigits`), at `position`.
  @inline(__always)
  private static func writeHex(_ value: UInt64, into line: UnsafeMutableBufferPointer<UInt8>, at position: Int) -> Int {
    precondition(position >= 0 && 18 <= line.count - position, "crash line buffer too small")
    guard let base = line.baseAddress else { return position }  // not reached: line has room for 18
    base[position] = UInt8(ascii: "0")
    base[position + 1] = UInt8(ascii: "x")
    return JSONWriter.writeHex(value, to: base, at: position + 2)
  }

  /// The detailed view's lines that every format has (from `SliceSummary`).
  static func commonDetailedLines(_ slice: SliceSummary, path: String, sliceCount: Int) -> [String] {
    var lines = [sliceCount > 1 ? "\(path) (\(slice.architecture)):" : "\(path):"]
    func add(_ label: String, _ value: String) { lines.append("  " + detailLine(label, value)) }
    add("architecture", slice.architecture)
    add("type", slice.fileType)
    if let buildID = slice.buildID {
      add(buildID.bytes.count == 16 ? "uuid" : "build-id", buildID.bytes.count == 16 ? buildID.uuid : buildID.hex)
      if buildID.bytes.count != 16 { add("uuid", buildID.uuid) }
    } else {
      add("build-id", "none")
    }
    add("text", rangeText(slice.textVMRange))
    add("load extent", rangeText(slice.loadVMRange))
    if slice.fileOffset != 0 { add("file offset", "0x" + hexDigits(slice.fileOffset)) }
    if let installName = slice.installName { add("install name", installName) }
    for (index, dependency) in slice.dependencies.enumerated() { add(index == 0 ? "needs" : "", dependency) }
    return lines
  }

  static func rangeText(_ range: Range<UInt64>) -> String {
    "0x\(hexDigits(range.lowerBound)) - 0x\(hexDigits(range.upperBound)) (0x\(hexDigits(range.upperBound - range.lowerBound)) bytes)"
  }

  /// The JSON members every format has (from `SliceSummary`); addresses as hex strings, sizes as numbers.
  static func writeCommonJSONMembers(_ slice: SliceSummary, path: String, into json: inout JSONWriter) {
    json.key("path")
    json.string(path)
    json.key("architecture")
    json.string(slice.architecture)
    json.key("fileType")
    json.string(slice.fileType)
    json.key("buildID")
    if let buildID = slice.buildID { json.hexString(buildID.bytes) } else { json.null() }
    json.key("uuid")
    if let buildID = slice.buildID { json.uuidString(buildID.bytes) } else { json.null() }
    json.key("textStart")
    json.address(slice.textVMRange.lowerBound)
    json.key("textEnd")
    json.address(slice.textVMRange.upperBound)
    json.key("textSize")
    json.number(slice.textVMRange.upperBound - slice.textVMRange.lowerBound)
    json.key("loadStart")
    json.address(slice.loadVMRange.lowerBound)
    json.key("loadEnd")
    json.address(slice.loadVMRange.upperBound)
    json.key("installName")
    json.string(slice.installName)
    json.key("dependencies")
    json.beginArray()
    for dependency in slice.dependencies { json.string(dependency) }
    json.endArray()
    json.key("fileOffset")
    json.number(slice.fileOffset)
  }
}

/// One `label:  value` line of the detailed view, values aligned in one column (label "" continues
/// the previous line's list). Every format's renderer uses the same column (15, as
/// `renderMachODetails` does) so the lines agree.
func detailLine(_ label: String, _ value: String) -> String {
  let head = label.isEmpty ? "" : label + ":"
  return head + String(repeating: " ", count: max(1, 15 - head.count)) + value
}

/// A format's own part of `imagelog file`'s detailed and JSON views: ELF's is in FileCommand+ELF.swift,
/// Mach-O's and universal files' in FileCommand+MachO.swift. A format without one gets the
/// `SliceSummary` view only. `index` is the slice's index in `BinaryFile.slices`.
protocol FileDetailRendering {
  /// Lines after the common ones in the detailed view (the caller indents them by two spaces).
  func detailedLines(slice index: Int) -> [String]
  /// Writes the members after the common ones in the slice's JSON object.
  func writeJSONMembers(slice index: Int, into json: inout JSONWriter)
}

/// `--entitlements`: formats that store entitlements (Mach-O code signatures) conform.
protocol EntitlementsRendering {
  /// Slice `index`'s entitlements as stored (the XML plist), or as JSON when `json`; `nil` when it has none.
  func entitlements(slice index: Int, json: Bool) throws -> String?
}

/// One slice's architecture and build-id/UUID (what `--uuid` prints).
struct SliceIdentity {
  var architecture: String
  var buildID: BuildID?
}

extension BinaryFile {
  /// Each slice's architecture and build-id/UUID, in the order and with the slices of `slices`,
  /// without making the summaries.
  var sliceIdentities: [SliceIdentity] {
    switch self {
    case .elf(let file): [SliceIdentity(architecture: file.architecture, buildID: file.buildID)]
    case .machO(let file): [SliceIdentity(architecture: file.architecture, buildID: file.uuid)]
    case .fat(let file):
      file.members.compactMap { member in
        guard let slice = member.decoded else { return nil }
        return SliceIdentity(architecture: slice.architecture, buildID: slice.uuid)
      }
    }
  }

  /// The decoded file's own part of the detailed and JSON views (a plain conversion: no dynamic cast
  /// per file).
  var detailRenderer: (any FileDetailRendering)? {
    switch self {
    case .elf(let file): file
    case .machO(let file): file
    case .fat(let file): file
    }
  }

  /// The decoded file as a value the per-format views can be asked of (`as? EntitlementsRendering`).
  var formatRenderer: Any {
    switch self {
    case .elf(let file): file
    case .machO(let file): file
    case .fat(let file): file
    }
  }
}
