#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Symbolication
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources

/// `imagelog symbolicate`: names, files and lines for the addresses in a crash report.
struct SymbolicateCommand: Command {
  static let name = "symbolicate"
  static let abstract = "Symbolicate a crash report (imagelog, Apple .crash/.ips, Swift backtrace, sanitizer, coredump, tombstone, glibc) or bare addresses."
  static let usage = "imagelog symbolicate [--search <path> ...] [--symbols <dir> ...] [--image <path>@<load-address> ...] [--format <style>] "
    + "[--arch <name>] [--demangle <style>] [--no-demangle] [--no-lines] [--no-system-debug] [--no-cache] [--no-symbolicate] [--signature-lists <dir>] <report> | <address> ...\n"
    + "       imagelog symbolicate --output-dir <dir> [options] <report> ..."
  static let helpSections = """
    ARGUMENTS:
      <report>                A crash report file, an ELF core file (its threads are unwound in the
                              core's memory into imagelog's report, with the signal, the crashed
                              thread's registers and the images, then symbolicated) or a minidump;
                              - reads any of them from standard input (a FIFO is read too). The
                              kind of a report is detected:
                              imagelog's report, Apple .crash (also behind a JSON header line),
                              Apple .ips (bug_type 309), Swift backtracer output (symbolicate=off,
                              text or format=json), a list of addresses (with --image or image
                              lines as imagelog list writes them), or, also inside a longer log:
                              sanitizer reports (symbolize=0 or symbolized; every stack), systemd-coredump
                              and coredumpctl info, Android tombstones and logcat, glibc
                              backtrace_symbols lines. A file holding several .crash or backtracer
                              reports: each in turn, with its own summary. Frames found by path alone
                              (no build-id in the report) say "unverified: the report has no build-id";
                              a file whose names or size contradict the report's is another build
                              ("mismatch"). A frame line naming no module is kept as written.
      <address>               Addresses to look up (0x...): with --image, or after a file listing
                              images in imagelog's formats (imagelog list --format crash|logger|unstrip).
                              A file holding several .ips reports (header line, body, ...): each too.

    OPTIONS:
      --search <path>         A folder (searched recursively) or file holding binaries and debug files:
                              ELF, Mach-O, universal files, .dSYM bundles. Repeatable.
      --symbols <dir>         A Breakpad symbol store, DIR/NAME/DEBUGID/NAME.sym as dump_syms -s and
                              imagelog symbols --store write it: for an image no file is found for,
                              the .sym whose MODULE debug id is its identity gives names, file:line,
                              inlined frames and PUBLIC names, and for a minidump its STACK CFI
                              unwinds the image's frames. Repeatable; without it, the folders in
                              $IMAGELOG_SYMBOLS (colon-separated). A .sym with another debug id, or
                              one that does not read, is named in the summary's notes and not used.
      --image <path>@<addr>   The image at <path> was loaded at <addr> (hex): for bare addresses.
                              Repeatable.
      --format <style>        report (default: the report's own layout, frames symbolicated in place;
                              for .ips the JSON with symbol/symbolLocation filled in, for the
                              backtracer's JSON its symbolicate=full fields), json (one object per
                              frame, naming its thread; "threads" gives each thread's index, tid,
                              name, crashed, state where the report has them), stackwalk-json
                              (minidump-stackwalk --json's schema, for any crash), or crash (classic
                              .crash text, for the JSON kinds: .ips and the backtracer's JSON).
      --signature-lists <dir> The lists the crash's signature (Socorro's algorithm: "Signature:" in
                              the text, "signature" in JSON) is made with, in Mozilla siggen's files
                              and format (irrelevant_signature_re.txt, prefix_signature_re.txt,
                              signatures_with_line_numbers_re.txt, signature_sentinels.txt); without
                              it, imagelog's own lists for Linux, Swift and Apple code.
      --arch <name>           The architecture that picks universal slices when the report has none.
      --demangle <style>      simplified (default; as Swift's backtracer and Apple reports write names),
                              full (swift demangle style), or none.
      --no-demangle           Same as --demangle none.
      --no-lines              Symbol tables only: do not read DWARF for file:line.
      --no-system-debug       Do not look in /usr/lib/debug, the debuginfod cache or debuginfod servers.
      --no-cache              Neither read nor write the symbol cache (see LINES).
      --output-dir <dir>      Symbolicate each <report> given (any number; cores and minidumps too, in
                              imagelog's layout) and write it to <dir>/<its file
                              name> (the folder is made if missing; each file written beside its name
                              and renamed over it, mode 0600), printing one summary line per
                              report. One process reads, loads and indexes each binary and debug file
                              once for all the reports. A report that cannot be read or written is
                              named on standard error and the others still go; the status is then 1.
      --no-symbolicate        For a core file: print its report with addresses only (image + offset),
                              to symbolicate later or elsewhere (in json: each frame's status
                              "not-looked-up").
      -h, --help              Show help information.

    MATCHING:
      Files are matched by identity (GNU build-id or LC_UUID, in any form: full, 16-byte UUID prefix,
      dashed or compact, any case, Breakpad/Sentry debug-id), never by name. Candidates: the path the
      report recorded, a .dSYM beside it, its .gnu_debuglink file (beside it, in .debug/, under
      /usr/lib/debug; its CRC-32 checked), --search paths, /usr/lib/debug/.build-id/xx/yyyy.debug, the
      debuginfod client cache ($DEBUGINFOD_CACHE_PATH, ~/.cache/debuginfod_client), and last the servers
      in $DEBUGINFOD_URLS, asked through libdebuginfod.so.1 when it is installed. A dwz debug file's
      .gnu_debugaltlink file is found by its path or build-id. A file with another identity is never
      used: its frames say "UUID mismatch" and the summary at the end lists missing and mismatched images;
      a debug file refused for its build-id or CRC is named in the summary's notes.

    LIMITS:
      A report is read whole, up to 64 MiB, and may hold up to 2,000,000 frames (a longer list of
      addresses is refused before it is kept). Memory: twice the report's size, plus about 512 bytes
      a frame, plus the symbol tables of the images used. Addresses alone without any image are
      refused at once. The report and json styles are written as they are formatted.

    LINES:
      File, line, column and inlined frames come from the DWARF of the image or of its debug file (zlib or
      zstd compressed sections included), read by imagelog itself: no other program is run. Without
      DWARF, or with --no-lines, frames get function + offset from the symbol tables only.
      The first time a file with a build-id or UUID is read, a process in the background (imagelog
      cache-build) keeps every answer its DWARF gives in the symbol cache ($XDG_CACHE_HOME/imagelog,
      else ~/.cache/imagelog), a file later runs map and search instead of reading the DWARF. It is bounded by IMAGELOG_CACHE_SIZE (bytes, or with K, M
      or G; default 512M): the least recently used files go. A cache file that fails its checks
      (version, identity, size, checksum) is rebuilt; a folder that cannot be written costs only speed.
    """

  var reportPath: String?
  var addresses: [String] = []
  var images: [String] = []
  var style: ReportStyle = .report
  /// `--no-symbolicate`: a core's report as built, not symbolicated.
  var noSymbolicate = false
  var options = SymbolicationOptions()
  var outputDirectory: String?
  var reportPaths: [String] = []

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    options = try parseSymbolicationOptions(&scanner)
    images = try scanner.options("--image")
    if let format = try scanner.option("--format") {
      guard let chosen = ReportStyle(rawValue: format) else {
        throw scanner.usageError("Unknown format '\(format)' (report, json, stackwalk-json or crash)")
      }
      style = chosen
    }
    options.architecture = try scanner.option("--arch")
    outputDirectory = try scanner.option("--output-dir")
    noSymbolicate = scanner.flag("--no-symbolicate")
    let rest = try scanner.positionals()
    addresses = rest.filter { $0.hasPrefix("0x") || $0.hasPrefix("0X") }
    let files = rest.filter { !($0.hasPrefix("0x") || $0.hasPrefix("0X")) }
    if outputDirectory != nil {
      guard addresses.isEmpty, images.isEmpty else {
        throw scanner.usageError("--output-dir takes report files, not addresses or --image")
      }
      guard !files.isEmpty else {
        throw scanner.usageError("Missing a crash report for --output-dir")
      }
      guard !files.contains("-") else {
        throw scanner.usageError("--output-dir writes files named after the reports: standard input has no name")
      }
      reportPaths = files
      return
    }
    guard files.count <= 1 else {
      throw scanner.usageError("Give one report at a time (got \(files.count))")
    }
    guard !files.isEmpty || (!addresses.isEmpty && !images.isEmpty) else {
      throw scanner.usageError("Missing a crash report (or --image and addresses)")
    }
    reportPath = files.first
    for image in images where Self.imageSpec(image) == nil {
      throw scanner.usageError("--image '\(image)' is not <path>@<hex load address>")
    }
  }

  /// `PATH@0xADDRESS` (the last `@` splits, so paths may contain one).
  static func imageSpec(_ text: String) -> (path: String, loadAddress: UInt64)? {
    guard let at = text.lastIndex(of: "@") else { return nil }
    var digits = text[text.index(after: at)...]
    if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits = digits.dropFirst(2) }
    guard !digits.isEmpty, let address = UInt64(digits, radix: 16), at > text.startIndex else { return nil }
    return (String(text[..<at]), address)
  }

  func run() throws -> ExitStatus {
    if let outputDirectory { return runToDirectory(outputDirectory) }
    var options = options
    var status = ExitStatus.success
    var reportImages: [ProcessSnapshot.Image] = []
    for spec in images {
      guard let (path, loadAddress) = Self.imageSpec(spec) else { continue }
      var identity: ImageIdentity?
      var end: UInt64?
      do {
        let slices = try SymbolFile.load(path: path, withSymbols: false)
        if let file = SymbolFile.slice(slices, architecture: options.architecture) {
          identity = file.buildID.map(ImageIdentity.init)
          end = file.loadSize.map { loadAddress &+ $0 &- 1 }
        } else {
          // Bare addresses name no architecture: a universal file needs --arch to say which slice ran.
          let names = slices.map(\.architecture).joined(separator: ", ")
          printError("imagelog: \(path): " + (options.architecture.map { "no \($0) slice in this universal file (it has \(names))" }
            ?? "a universal file (\(names)): give --arch <name> to pick the slice that was loaded"))
          status = .failure
        }
      } catch {
        printError("imagelog: \(path): \(error)")
        status = .failure
      }
      reportImages.append(ProcessSnapshot.Image(name: Image.shortName(of: path), path: path, loadAddress: loadAddress,
                                                endAddress: end, identity: identity, architecture: options.architecture))
    }
    let source = reportPath ?? "<arguments>"
    let opened: CrashFile
    do {
      if let reportPath {
        opened = try CrashFile.open(reportPath, images: reportImages, addresses: addresses)
      } else {
        opened = try CrashFile.addresses(addresses, images: reportImages)
      }
    } catch {
      if noSymbolicate, error.kind == .text, let reportPath {
        printError("imagelog: \(reportPath): not a core file (--no-symbolicate prints a core's report as built)")
      } else {
        printError("imagelog: \(error)")
      }
      return .failure
    }
    var reports: [Result<ProcessSnapshot, ReportError>]
    // Consumed: a copy of the reports left in `opened` would double what symbolication fills in.
    switch consume opened {
    case .core(let dump):
      return runCore(dump, options: options)
    case .minidump(var snapshot):
      return runMinidump(&snapshot, path: source, options: options)
    case .reports(let all):
      if noSymbolicate, let reportPath {
        printError("imagelog: \(reportPath): not a core file (--no-symbolicate prints a core's report as built)")
        return .failure
      }
      // A file may hold several reports (a collector's dump): each is symbolicated and written in
      // turn, with its own summary.
      reports = all
    }
    let namesInMemoryImage = reports.contains { parsed in
      guard case .success(let report) = parsed else { return false }
      return report.images.contains { $0.path?.hasPrefix("[") == true || $0.name.hasPrefix("[") }
    }
    if options.inMemoryImages.isEmpty, namesInMemoryImage, !noSymbolicate { options.inMemoryImages = Self.ownInMemoryImages() }
    for path in options.searchPaths + options.symbolStores where !ReportReading.exists(path) {
      printError("imagelog: \(path): no such file or directory")
      status = .failure
    }
    // The reports are taken out of their results before any is symbolicated, so that symbolication
    // fills in the only copy of each one's frames, in place: a copy left in `reports` doubled the memory
    // a long report takes.
    var snapshots: [ProcessSnapshot?] = []
    var errors: [ReportError?] = []
    for parsed in reports {
      switch parsed {
      case .success(let report):
        snapshots.append(report)
        errors.append(nil)
      case .failure(let error):
        snapshots.append(nil)
        errors.append(error)
      }
    }
    reports = []
    for index in snapshots.indices {
      if let error = errors[index] {
        printError("imagelog: \(source): \(error)")
        status = .failure
      } else if snapshots[index] != nil {
        writeSnapshot(&snapshots[index]!, style: style, symbolicate: !noSymbolicate, options: options)
      }
    }
    return status
  }

  /// Our own vDSO, as our memory has it: a report written on this machine (same kernel, same ABI) has
  /// the same one, which its build-id shows; its frames are then named as the process's own would be.
  static func ownInMemoryImages() -> [InMemoryImage] {
    InMemoryImage.copies(of: LoadedImages.snapshot(), in: ProcessMemory(pid: getpid()))
  }

  /// `--output-dir`: each report to `directory/<its file name>`, one summary line each on standard
  /// output, every file found and indexed once for all of them (`SymbolicationCache`).
  func runToDirectory(_ directory: String) -> ExitStatus {
    var status = ExitStatus.success
    if !ReportReading.exists(directory), PathBytes.withCString(directory, { mkdir($0, 0o777) }) != 0, errno != EEXIST {
      printError("imagelog: \(directory): cannot make the folder: \(String(cString: strerror(errno)))")
      return .failure
    }
    for path in options.searchPaths + options.symbolStores where !ReportReading.exists(path) {
      printError("imagelog: \(path): no such file or directory")
      status = .failure
    }
    var options = options
    options.inMemoryImages = Self.ownInMemoryImages()
    let cache = SymbolicationCache(options: options)
    var written: [String: String] = [:]  // output name -> the report written there
    for reportPath in reportPaths {
      let name = Image.shortName(of: reportPath)
      let outputPath = directory + "/" + name
      if let earlier = written[name] {
        printError("imagelog: \(reportPath): \(outputPath) is already written for \(earlier)")
        status = .failure
        continue
      }
      if FileSystem.sameFile(reportPath, outputPath) {
        printError("imagelog: \(reportPath): --output-dir would write over the report itself")
        status = .failure
        continue
      }
      let reports: [Result<ProcessSnapshot, ReportError>]
      do {
        reports = try Self.symbolicatedReports(reportPath, options: options, cache: cache, signing: style != .stackwalkJSON)
      } catch {
        printError("imagelog: \(error)")
        status = .failure
        continue
      }
      var output: [UInt8] = []
      var lines: [String] = []
      for (index, parsed) in reports.enumerated() {
        let label = TextEscaping.escaped(reportPath) + (reports.count > 1 ? " (report \(index + 1) of \(reports.count))" : "")
        var report: ProcessSnapshot
        switch parsed {
        case .success(let value): report = value
        case .failure(let error):
          printError("imagelog: \(reportPath): \(error)")
          status = .failure
          continue
        }
        report.write(style, chunkSize: .max) { output.append(contentsOf: $0) }
        if output.last != UInt8(ascii: "\n") { output.append(UInt8(ascii: "\n")) }
        // The summary's first line without its `-- symbolicated by imagelog: ` lead.
        let summary = report.summary().split(separator: "\n").first.map { String($0.dropFirst("-- symbolicated by imagelog: ".count)) } ?? ""
        lines.append("\(label): \(summary) -> \(TextEscaping.escaped(outputPath))")
      }
      guard !lines.isEmpty else { continue }
      written[name] = reportPath
      // The one file writer: a new file renamed into place (never through a link planted at the name),
      // mode 0600: a report holds registers and what was read from a process's memory.
      do { try writeFileAtomically(outputPath, output, permissions: 0o600) } catch {
        printError("imagelog: \(outputPath): \(error)")
        status = .failure
        continue
      }
      for line in lines { writeOutput(line + "\n") }
    }
    return status
  }
}

/// `--search`, `--symbols` (or `IMAGELOG_SYMBOLS`), `--demangle`, `--no-demangle`, `--no-lines`,
/// `--no-system-debug`, `--no-cache`: how symbolicate and pid --threads find and name symbols (and the
/// symbol cache from the environment).
func parseSymbolicationOptions(_ scanner: inout ArgumentScanner) throws(UsageError) -> SymbolicationOptions {
  var options = SymbolicationOptions()
  options.searchPaths = try scanner.options("--search")
  options.symbolStores = try scanner.options("--symbols")
  if options.symbolStores.isEmpty, let stores = FileSystem.environment("IMAGELOG_SYMBOLS") {
    // A folder the variable names that is not there is no store, not an error in every run.
    options.symbolStores = stores.split(separator: ":").map(String.init).filter { ReportReading.exists($0) }
  }
  if let demangle = try scanner.option("--demangle") {
    guard let chosen = Demangler.Style(rawValue: demangle) else {
      throw scanner.usageError("Unknown demangle style '\(demangle)' (simplified, full or none)")
    }
    options.demangle = chosen
  }
  if scanner.flag("--no-demangle") { options.demangle = .none }
  if scanner.flag("--no-lines") { options.lineInfo = false }
  if scanner.flag("--no-system-debug") { options.systemDirectories = false }
  if let directory = try scanner.option("--signature-lists") {
    do {
      options.signatureLists = try SignatureLists(directory: directory)
    } catch {
      throw scanner.usageError("--signature-lists: \(error)")
    }
  }
  if !scanner.flag("--no-cache") {
    do {
      options.symbolCache = try SymbolCacheSettings.fromEnvironment()
      options.symbolCache?.buildElsewhere = CacheBuildCommand.startInBackground
    } catch {
      throw scanner.usageError("\(error)")
    }
  }
  return options
}
