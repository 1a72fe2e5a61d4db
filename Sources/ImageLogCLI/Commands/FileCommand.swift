import ImageLog
import ImageReaders
import Snapshot
import SnapshotSources

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
                              unstrip: for core files, eu-unstrip -n --core's lines
                                0xSTART+0xSIZE build-id@0xADDRESS path - path
      A core file (ELF ET_CORE) lists the images the dead process had mapped (NT_FILE), each
      with the build-id its headers in the core's memory hold (for a file whose headers the core
      left out: the file on disk, when it maps as the core shows). A file on disk whose build-id
      differs from the core's is reported on standard error (the file changed since the core was
      written). A core without NT_FILE (QEMU's, some dumpers', older kernels') lists the images
      the dynamic linker's link_map list names in the core's memory, as eu-unstrip does; detailed
      says which list was used. crash and unstrip print one line per image, json one object per
      image (as imagelog pid prints them), detailed the core's process, signal and threads, then
      the images.
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
    /// `eu-unstrip -n` lines; for core files only (`eu-unstrip -n --core`).
    case unstrip
  }

  var paths: [String]
  var style: Style
  var printUUIDs: Bool
  var architecture: String?
  var printEntitlements: Bool
  var recursive: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    let formatName = try scanner.option("--format")
    if let formatName {
      guard let style = Style(rawValue: formatName) else {
        throw scanner.usageError("The value '\(formatName)' is invalid for '--format <style>' (crash, detailed, json, unstrip)")
      }
      self.style = style
    } else {
      style = .crash
    }
    architecture = try scanner.option("--arch")
    printUUIDs = scanner.flag("--uuid")
    printEntitlements = scanner.flag("--entitlements")
    recursive = scanner.flag("-r", "--recursive")
    paths = try scanner.positionals()
    guard !paths.isEmpty else {
      throw scanner.usageError("Missing expected argument '<path> ...'")
    }
    if printUUIDs && printEntitlements {
      throw scanner.usageError("--uuid and --entitlements cannot be combined")
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
    /// A core or a minidump that could not be read (always said, in a walk too).
    case crashFile(CrashFileError.Problem)

    var description: String {
      switch self {
      case .open(let error): error.description
      case .format(let error): error.description
      case .crashFile(let problem): problem.description
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
    do {
      switch try CrashFile.capture(in: file) {
      case .core(let dump)?: return .core(dump)
      case .minidump(let snapshot)?: return .minidump(snapshot)
      case .reports?, nil: break  // neither: a binary, read below
      }
    } catch {
      return .problem(.crashFile(error.problem))
    }
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
    /// An ELF core (`ET_CORE`), opened: `reportCore` lists the images it holds.
    case core(CoreDump)
    /// A minidump (`MDMP`), read: `reportMinidump` lists its modules.
    case minidump(ProcessSnapshot)
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
    case .core(let dump):
      return reportCore(dump, path: input.path)
    case .minidump(let snapshot):
      return reportMinidump(snapshot, path: input.path)
    }
  }

  /// Renders one file's selected slices in the chosen style.
  func report(_ binary: BinaryFile, path: String) -> FileReport {
    var report = FileReport()
    if case .fat(let universal) = binary {
      // Slices that could not be read: one line each; the others are still shown.
      for line in BinaryFormatter.universalFailures(universal, path: path) { report.fail(line) }
    }
    if printUUIDs {
      // The architecture and build-id/UUID of each slice are all this prints: no summaries (segments,
      // dependencies, install names) are made.
      let identities = binary.sliceIdentities
      guard let indices = selectedSlices(identities.map(\.architecture), path: path, into: &report) else { return report }
      for index in indices {
        // llvm-dwarfdump --uuid prints nothing for a file without a UUID; so do we.
        guard let buildID = identities[index].buildID else { continue }
        report.lines.append(.output(BinaryFormatter.uuidLine(buildID, architecture: identities[index].architecture, path: path)))
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
    let wanted = Architecture(commandLine: architecture)
    let indices = architectures.indices.filter { Architecture(commandLine: architectures[$0]) == wanted }
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
      report.lines.append(.outputBytes(BinaryFormatter.crashLine(slice, path: path)))
    case .detailed:
      report.lines.append(.output(BinaryFormatter.detailedText(binary, slice: index, summary: slice, sliceCount: sliceCount,
                                                               path: path)))
    case .json:
      var writer = JSONWriter()
      BinaryFormatter.writeJSON(binary, slice: index, summary: slice, path: path, into: &writer)
      report.lines.append(.jsonElement(writer.bytes))
    case .unstrip:
      // eu-unstrip -n lists the modules of a process or a core; a file on its own is neither.
      if index == 0 {
        report.fail("imagelog: \(path): not a core file (--format unstrip lists a core's images)")
      }
    }
  }

  func reportEntitlements(_ binary: BinaryFile, path: String, indices: [Int], into report: inout FileReport) {
    guard BinaryFormatter.storesEntitlements(binary) else {
      report.fail("imagelog: \(path): entitlements are stored only in Mach-O code signatures")
      return
    }
    for index in indices {
      do {
        // A document as stored (as `codesign -d --entitlements -` prints it), for plutil and diff: not escaped.
        if let text = try BinaryFormatter.entitlements(binary, slice: index, json: style == .json) {
          report.lines.append(.output(text))
        }
      } catch {
        report.fail("imagelog: \(path): \(error)")
      }
    }
  }
}
