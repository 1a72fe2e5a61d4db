internal import Glibc
import ImageLog
import Symbolication
import ImageReaders

/// `imagelog symbols --inlines` against Mozilla's `dump_syms --inlines` 2.3.5 (installed by
/// Scripts/install-test-tools) on the largest files here: libstdc++'s debug build, libc with its
/// libc6-dbg debug file, python3.11 with its python3.11-dbg debug file. Each side writes the whole
/// `.sym` to /dev/null, in an empty working folder; the records are compared first (read back with
/// `BreakpadSymbolFile`): FUNC ranges, line records (dump_syms' doubled relative folders undone, see
/// `undoubled`), INLINE records (names aside: the two demangle differently, see `BreakpadNames`),
/// PUBLIC addresses, STACK CFI ranges and rules.
func symbolsBenchmark() throws -> [BenchmarkTable] {
  // An absolute path: the commands run in a folder of their own.
  var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
  guard realpath(CommandLine.arguments[0], &resolved) != nil else { throw BenchError("cannot resolve \(CommandLine.arguments[0])") }
  let me = String(decoding: resolved.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  let imagelog = me.split(separator: "/").dropLast().map { "/" + $0 }.joined() + "/imagelog"
  guard FileSystemProbe.exists(imagelog) else { throw BenchError("\(imagelog) is not built") }
  let dumpSyms = pipelineToolsFolder() + "/bin/dump_syms"
  guard access(dumpSyms, X_OK) == 0 else { throw BenchError("dump_syms not installed (Scripts/install-test-tools)") }
  var inputs: [(name: String, ours: [String], theirs: [String])] = []
  let libstdcxx = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
  if FileSystemProbe.exists(libstdcxx) { inputs.append(("libstdc++ debug build", [libstdcxx], [libstdcxx])) }
  for (name, path) in [("libc + libc6-dbg", "/lib/x86_64-linux-gnu/libc.so.6"), ("python3.11 + python3.11-dbg", "/usr/bin/python3.11")] {
    if let debug = debugFileByBuildID(path) { inputs.append((name, [path], [path, debug])) }
  }
  guard !inputs.isEmpty else { throw BenchError("none of libstdc++6-12-dbg, libc6-dbg, python3.11-dbg is installed") }
  let work = "/tmp/imagelog-bench-symbols-\(getpid())"
  mkdir(work, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", work], discardOutput: true) }

  var rows: [[String]] = []
  var notes: [String] = []
  for input in inputs {
    let ours = "cd \(work) && exec \(imagelog) symbols --inlines \(input.ours.joined(separator: " "))"
    let theirs = "cd \(work) && exec \(dumpSyms) --inlines \(input.theirs.joined(separator: " "))"
    // Same answers first.
    let ourText = try runProcess(["sh", "-c", ours + " 2>/dev/null"]).output
    let theirText = try runProcess(["sh", "-c", theirs + " 2>/dev/null"]).output
    let comparison = try compareRecords(ourText, theirText)
    notes.append("\(input.name): \(comparison)")
    var samples: [[Measurement]] = [[], []]
    for _ in 0..<5 {
      samples[0].append(try measuredShell(ours + " > /dev/null 2>&1"))
      samples[1].append(try measuredShell(theirs + " > /dev/null 2>&1"))
    }
    let wall = samples.map { median($0.map(\.wall)) }
    let cpu = samples.map { median($0.map(\.cpu)) }
    let memory = try [ours, theirs].map { try measuredShell($0 + " > /dev/null 2>&1", peakMemory: true).maxRSSKiB }
    rows.append(["\(input.name): `imagelog symbols --inlines`", formatDuration(wall[0]), formatDuration(cpu[0]),
                 "\(rounded(Double(memory[0]) / 1024)) MiB", "\(rounded(wall[1] / wall[0]))x dump_syms' speed"])
    rows.append(["\(input.name): `dump_syms --inlines`", formatDuration(wall[1]), formatDuration(cpu[1]),
                 "\(rounded(Double(memory[1]) / 1024)) MiB", ""])
  }
  return [BenchmarkTable(
    title: "Breakpad symbol files: imagelog symbols vs dump_syms",
    notes: "The whole `.sym` of each file written to /dev/null (`--inlines`; a binary's debug file found by build-id, "
      + "which dump_syms is given), medians of 5 interleaved runs; CPU is user + system (imagelog's workers count "
      + "there, not in wall); peak RSS from one more run under GNU time (%M). " + notes.joined(separator: " "),
    header: ["tool", "wall", "CPU", "peak RSS", "notes"], rows: rows)]
}

/// What the two files share, said in one sentence: FUNC ranges, line and INLINE records, PUBLIC addresses
/// and STACK CFI rows (rules as a set: the tools order a row's registers differently). Throws when a
/// file cannot be read.
private func compareRecords(_ ours: String, _ theirs: String) throws -> String {
  let a = try ByteReader.reading(Array(ours.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
  let b = try ByteReader.reading(Array(theirs.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
  func functions(_ file: BreakpadSymbolFile) -> [String] {
    let names = file.files.mapValues(undoubled)
    return file.functions.map { function in
      let lines = file.lines[function.lines].map { "\($0.address) \($0.size) \($0.line) \(names[$0.file] ?? "")" }
      let inlines = file.inlines[function.inlines].map {
        "\($0.depth) \($0.callLine) \(names[$0.callFile] ?? "") \(file.inlineRanges[$0.ranges])"
      }
      return "\(function.address) \(function.size) " + lines.joined(separator: ",") + inlines.joined(separator: ",")
    }
  }
  func frames(_ file: BreakpadSymbolFile) -> [String] {
    file.frameEntries.map { entry in
      ([entry.rules] + file.frameDeltas[entry.deltas].map(\.rules)).map(file.ruleText).map {
        BreakpadSymbolFile.rules($0).map { "\($0.register)=\($0.expression)" }.sorted().joined(separator: " ")
      }.joined(separator: "|") + " \(entry.address) \(entry.size)"
    }
  }
  let sameFunctions = zip(functions(a), functions(b)).filter { $0 == $1 }.count
  let samePublics = Set(a.publics.map(\.address)).intersection(b.publics.map(\.address)).count
  let sameFrames = zip(frames(a), frames(b)).filter { $0 == $1 }.count
  let sameNames = zip(a.functions, b.functions).filter { $0.name == $1.name }.count
  return "\(sameFunctions) of \(b.functions.count) FUNC records (\(a.functions.count) ours) have the same range, line and "
    + "INLINE records (\(sameNames) the same name); \(samePublics) of \(b.publics.count) PUBLIC addresses and "
    + "\(sameFrames) of \(b.frameEntries.count) STACK CFI entries (\(a.frameEntries.count) ours) the same."
}

/// A relative path whose leading folders repeat, with the repeat dropped (`csu/csu/init-first.c` ->
/// `csu/init-first.c`): dump_syms joins a DWARF 5 unit's relative compilation directory with line-table
/// directory 0, which is that same directory (BreakpadSymbolsLibraryTests checks the rule against
/// readelf); imagelog does not.
private func undoubled(_ path: String) -> String {
  guard !path.hasPrefix("/") else { return path }
  let parts = path.split(separator: "/", omittingEmptySubsequences: false)
  for count in stride(from: parts.count / 2, through: 1, by: -1) where parts[..<count] == parts[count..<(2 * count)] {
    return parts[count...].joined(separator: "/")
  }
  return path
}

/// `/usr/lib/debug/.build-id/xx/yyyy.debug` for `path`'s build-id, when installed.
private func debugFileByBuildID(_ path: String) -> String? {
  guard let file = try? SymbolFile.load(path: path).first, let id = file.buildID else { return nil }
  let hex = id.hex
  let debug = "/usr/lib/debug/.build-id/\(hex.prefix(2))/\(hex.dropFirst(2)).debug"
  return FileSystemProbe.exists(debug) ? debug : nil
}

