#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication

/// `imagelog triage`: many crashes grouped by signature.
struct TriageCommand: Command {
  static let name = "triage"
  static let abstract = "Group many crashes (reports, cores, minidumps, folders of them) by signature: counts, dates, builds, examples."
  static let usage = "imagelog triage [--format table|json|html] [-o <file>] [--state <file>] [--search <path> ...] "
    + "[--symbols <dir> ...] [--signature-lists <dir>] [--no-lines] [--no-system-debug] [--no-cache] <report-or-dir> ..."
  static let helpSections = """
    ARGUMENTS:
      <report-or-dir>         A crash of any kind symbolicate reads (a report or a file of several, a
                              core, a minidump, imagelog's JSON document), or a folder: every file
                              under it, recursively (links to folders not followed, names starting
                              with '.' skipped). In a crash folder as run --crash-dir and core-handler
                              fill it, the files of one crash (PROGRAM.PID.TIME.crash, .dmp, .core.zst,
                              .upload) are one crash: its .crash is read, else its .dmp, else its
                              .core.zst.

    OPTIONS:
      --format <style>        table (default: one line per group, most crashes first, at most 100
                              columns), json (each group with its files and example), or html (one
                              self-contained page: no script, no style or font fetched; per group a
                              chart of crashes over time and one of builds, and the example's frames
                              with file:line under it).
      -o, --output <file>     Write the table, JSON or page to <file> (made whole, then renamed into
                              place; a stream such as /dev/stdout is written in place) instead of
                              standard output.
      --state <file>          Keep what was read in <file> (each file's path, size and modification
                              time, with its crashes' signatures, times, builds and the examples): a
                              later run with the same file reads only files that are new or changed.
                              Made when missing; a file that is not a triage state is refused.
      --search, --symbols, --signature-lists, --demangle, --no-demangle, --no-lines,
      --no-system-debug, --no-cache
                              As for symbolicate: where binaries and debug files are found, the lists
                              signatures are made with.
      -h, --help              Show help information.

    GROUPS:
      Crashes are grouped by their signature (Socorro's algorithm, as symbolicate's "Signature:"
      line). A group counts its crashes, its share of all, the first and last crash (the time the
      report states, else the time in a crash folder's file name, else the file's modification
      time), the builds (main executable and build-id), systems and crash reasons, and keeps one
      example: the first crash read, with its crashing thread. Each binary and debug file is found
      and indexed once for all the crashes (as symbolicate --output-dir). A file that is no crash
      imagelog reads is counted as unreadable and named, the others still read; the status is
      then 1.
    """

  enum Style: String { case table, json, html }

  var inputs: [String] = []
  var style = Style.table
  var outputPath: String?
  var statePath: String?
  var options = SymbolicationOptions()

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    options = try parseSymbolicationOptions(&scanner)
    if let format = try scanner.option("--format") {
      guard let chosen = Style(rawValue: format) else { throw scanner.usageError("Unknown format '\(format)' (table, json or html)") }
      style = chosen
    }
    outputPath = try scanner.option("-o", "--output")
    statePath = try scanner.option("--state")
    inputs = try scanner.positionals()
    guard !inputs.isEmpty else { throw scanner.usageError("Missing a crash report or a folder of them") }
    guard !inputs.contains("-") else { throw scanner.usageError("triage reads files and folders, not standard input") }
    if let statePath, FileSystem.kind(statePath) == .directory { throw scanner.usageError("--state \(statePath) is a folder") }
    if let outputPath, FileSystem.kind(outputPath) == .directory { throw scanner.usageError("-o \(outputPath) is a folder") }
  }

  func run() throws -> ExitStatus {
    var status = ExitStatus.success
    var state = CrashTriageStateParser.State()
    if let statePath, ReportReading.exists(statePath) {
      do {
        state = try CrashTriageStateParser.parse(try ReportReading.readText(statePath))
      } catch {
        printError("imagelog: \(statePath): \(error)")
        return .failure
      }
    }
    var files: [String] = []
    for input in inputs {
      guard ReportReading.exists(input) else {
        printError("imagelog: \(input): no such file or directory")
        status = .failure
        continue
      }
      files += Self.crashFiles(FileSystem.walk(input), given: input)
    }
    let own = [statePath, outputPath].compactMap { $0 }
    files.removeAll { path in own.contains { FileSystem.sameFile(path, $0) } }
    var options = options
    options.inMemoryImages = SymbolicateCommand.ownInMemoryImages()
    let reader = TriageReader(options: options, state: state, keepsRecords: statePath != nil)
    reader.read(files)
    let triage = reader.triage
    if !triage.unreadable.isEmpty { status = .failure }
    for file in triage.unreadable { printError("imagelog: \(file.path): unreadable: \(file.problem)") }
    if let statePath {
      let examples = triage.rankedGroups.map(\.example)
      do {
        try writeFileAtomically(statePath, CrashTriage.state(crashes: reader.records, unreadable: triage.unreadable, examples: examples),
                                permissions: 0o600)
      } catch {
        printError("imagelog: \(statePath): \(error)")
        status = .failure
      }
    }
    let bytes: [UInt8]
    switch style {
    case .table: bytes = Array(triage.table().utf8)
    case .json: bytes = triage.json()
    case .html: bytes = Array(triage.html().utf8)
    }
    if let outputPath {
      do { try writeNamedOutput(outputPath, bytes) } catch {
        printError("imagelog: \(outputPath): \(error)")
        return .failure
      }
    } else {
      bytes.withUnsafeBytes { writeOutput($0) }
    }
    return status
  }

  /// `paths` less the names starting with `.` (files being written, hidden files) and, for each crash of
  /// a crash folder (`PROGRAM.PID.TIME.EXT`), all but the one file read for it: its `.crash` (imagelog's
  /// symbolicated report), else its `.dmp`, else its core. A file named on the command line (`given`) is
  /// always kept.
  static func crashFiles(_ paths: [String], given: String) -> [String] {
    let preference = ["crash", "dmp", "core.zst"]
    var chosen: [String: (path: String, rank: Int)] = [:]  // crash folder path + stem -> its file read
    var order: [String] = []  // stems and plain files in the walk's order
    var plain: Set<String> = []
    for path in paths {
      let name = Image.shortName(of: path)
      if path != given, name.hasPrefix(".") { continue }
      guard path != given, let stem = CrashFolder.crashStem(name, extensions: CrashDatabase.fileExtensions) else {
        plain.insert(path)
        order.append(path)
        continue
      }
      let key = "\u{0}" + String(path.dropLast(name.count)) + stem  // a NUL: never a path
      let rank = preference.firstIndex { name.hasSuffix("." + $0) } ?? preference.count  // .upload: never read
      if let known = chosen[key] {
        if rank < known.rank { chosen[key] = (path, rank) }
      } else {
        chosen[key] = (path, rank)
        order.append(key)
      }
    }
    return order.compactMap { key in
      if plain.contains(key) { return key }
      guard let (path, rank) = chosen[key], rank < preference.count else { return nil }
      return path
    }
  }
}
