internal import Glibc
import ImageLog
import ImageReaders
import Symbolication

/// The symbol cache (#28): a 100-frame libc report through `imagelog symbolicate` with an empty cache
/// (cold) and with the cache the first report wrote (warm, another 100 addresses), beside
/// `--no-cache` and llvm-symbolizer; then the cache file for libc6-dbg's debug file beside Sentry's
/// SymCache (the `symbolic` Python package): size, build time, 100 lookups in-process. Same answers
/// first: the cold and warm outputs against `--no-cache`'s, and each innermost function and line
/// against SymCache's.
func symbolCacheBenchmark() throws -> [BenchmarkTable] {
  guard let debugFile = libcDebugFile() else { throw BenchError("libc6-dbg is not installed") }
  let me = CommandLine.arguments[0]
  let folder = me.split(separator: "/").dropLast().joined(separator: "/")
  let imagelog = (me.hasPrefix("/") ? "/" : "") + (folder.isEmpty ? "." : folder) + "/imagelog"
  guard FileSystemProbe.exists(imagelog) else { throw BenchError("\(imagelog) is not built") }
  let directory = "/tmp/imagelog-bench-cache-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let cache = directory + "/cache"
  let libc = "/lib/x86_64-linux-gnu/libc.so.6"
  guard let buildID = try SymbolFile.load(path: libc).first?.buildID else { throw BenchError("\(libc) has no build-id") }

  // Two reports of 100 different frames each.
  let addresses = try sampleCodeAddresses(libc, count: 200)
  let load: UInt64 = 0x7f00_0000_0000
  var reports: [String] = []
  var addressFiles: [String] = []
  for (part, slice) in [addresses.prefix(100), addresses.suffix(100)].enumerated() {
    var report = "Process:         bench [1]\nOS Version:      Linux 6.1.0 x86_64\nCrashed Thread:  0  tid 1\n\nThread 0 Crashed:\n"
    for (index, address) in slice.enumerated() {
      report += "\(index)   libc.so.6                     0x\(hexDigits(address + load, width: 16)) 0x\(hexDigits(load)) + \(address)\n"
    }
    report += "\nBinary Images:\n0x\(hexDigits(load)) - 0x\(hexDigits(load + 0xFFFFFF)) libc.so.6 x86_64  <\(buildID.compactUUID)> \(libc)\n"
    reports.append(directory + "/report-\(part).crash")
    try writeText(report, to: reports[part])
    addressFiles.append(directory + "/addresses-\(part).txt")
    try writeText(slice.map { "0x" + String($0, radix: 16) }.joined(separator: "\n") + "\n", to: addressFiles[part])
  }
  // Every imagelog this area starts (and the builders they start) uses this cache, not the run's.
  let runCache = getenv("XDG_CACHE_HOME").map { String(cString: $0) }
  setenv("XDG_CACHE_HOME", cache, 1)
  defer { if let runCache { setenv("XDG_CACHE_HOME", runCache, 1) } else { unsetenv("XDG_CACHE_HOME") } }
  let symbolize = "exec \(imagelog) symbolicate"
  func emptyCache() throws { _ = try runProcess(["rm", "-rf", cache], discardOutput: true) }

  let build = [imagelog, "cache-build", "--identity", buildID.hex, debugFile]
  func entryWritten() -> Bool { FileSystem.contents(cache + "/imagelog").contains { $0.hasSuffix(".ilsc") } }
  // A cold run leaves `imagelog cache-build` running in the background: waited for, so it does not run
  // beside the next measurement (and the warm runs find the entry).
  func awaitEntry() throws {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(120)
    while !entryWritten() || FileSystem.contents(cache + "/imagelog").contains(where: { $0.hasPrefix(".") }) {
      guard clock.now < deadline else { throw BenchError("no cache entry after 120 s") }
      usleep(2000)
    }
  }

  // Same answers first.
  var agreement: [String] = []
  try emptyCache()
  for part in 0..<2 {
    let without = try runProcess(["sh", "-c", "\(symbolize) --no-cache \(reports[part])"]).output
    let with = try runProcess(["sh", "-c", "\(symbolize) \(reports[part])"]).output
    try awaitEntry()
    agreement.append(with == without ? "identical" : "DIFFERENT")
  }
  let entries = FileSystem.contents(cache + "/imagelog")

  let symbolizer = currentSymbolizer()
  // Each run is spawned directly (a shell's start-up would be a third of a warm run).
  typealias Run = (name: String, arguments: [String], input: String?, before: () throws -> Void, after: () throws -> Void)
  var commands: [Run] = [
    ("`imagelog symbolicate --no-cache` (no cache)", [imagelog, "symbolicate", "--no-cache", reports[0]], nil, {}, {}),
    ("`imagelog symbolicate`, cold (empty cache: answers from the DWARF, starts the build)",
     [imagelog, "symbolicate", reports[0]], nil, emptyCache, awaitEntry),
    ("`imagelog cache-build` (the build a cold run starts in the background)", build, nil, emptyCache, {}),
    ("`imagelog symbolicate`, warm (another 100 frames, the cache written)", [imagelog, "symbolicate", reports[1]], nil,
     { if !entryWritten() { _ = try benchSpawn(build) } }, {}),
  ]
  if let symbolizer {
    commands.append(("\(symbolizer.name) --inlines on the first 100 addresses",
                     [symbolizer.path, "--inlines", "--obj=\(libc)"], addressFiles[0], {}, {}))
    commands.append(("\(symbolizer.name) --inlines on the other 100",
                     [symbolizer.path, "--inlines", "--obj=\(libc)"], addressFiles[1], {}, {}))
  }
  var wallSamples = [[Double]](repeating: [], count: commands.count)
  var cpuSamples = wallSamples
  for _ in 0..<11 {
    for (index, entry) in commands.enumerated() {
      try entry.before()
      let cpuBefore = childrenCPUSeconds()
      var status: Int32 = 0
      let elapsed = try ContinuousClock().measure { status = try benchSpawn(entry.arguments, input: entry.input) }
      guard status == 0 else { throw BenchError("\(entry.arguments.joined(separator: " ")): wait status \(status)") }
      wallSamples[index].append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
      cpuSamples[index].append(childrenCPUSeconds() - cpuBefore)
      try entry.after()
    }
  }
  let wall = wallSamples.map(median)
  let cpu = cpuSamples.map(median)
  var rows: [[String]] = []
  for (index, entry) in commands.enumerated() {
    var note = ""
    if symbolizer != nil, index == 1 { note = "\(rounded(wall[1] / wall[4]))x llvm-symbolizer's time (goal: at most 2x)" }
    if symbolizer != nil, index == 3 { note = "\(rounded(wall[5] / wall[3]))x faster than llvm-symbolizer (goal: at least 8x, at most 5 ms)" }
    rows.append([entry.name, formatDuration(wall[index]), formatDuration(cpu[index]), note])
  }
  var tables = [BenchmarkTable(
    title: "Symbol cache: a 100-frame report end to end, cold and warm",
    notes: "`imagelog symbolicate report.crash`: 100 frames in libc.so.6, lines and inlined frames from libc6-dbg's debug "
      + "file found by build-id; XDG_CACHE_HOME a fresh folder (emptied before each cold run; the build it starts in "
      + "the background awaited after it, outside the time). Warm: a report of 100 other "
      + "frames, once the cache is written. Each program spawned directly (no shell), process start to exit, medians of 11 interleaved runs. Output with the cache "
      + "against --no-cache's: cold \(agreement[0]), warm \(agreement[1]); cache folder: \(entries.joined(separator: ", ")).",
    header: ["run", "wall", "CPU", "notes"], rows: rows)]

  // The cache file beside SymCache, in-process.
  var table = DWARFAnswerTable()
  let buildSeconds = try medianSeconds(iterations: 3) {
    let reader = try DWARFReader(DebugInfoFile.dwarfSections(path: debugFile))
    table = try reader.answerTable()
  }
  guard let fingerprint = SymbolCacheStore.fingerprint(path: debugFile, architecture: nil, supplementaryPath: nil),
        let bytes = SymbolCacheFormat.bytes(of: table, identity: buildID.hex, fingerprint: fingerprint) else {
    throw BenchError("libc's answers do not fit the cache format")
  }
  let serializeSeconds = medianSeconds(iterations: 3) {
    _ = SymbolCacheFormat.bytes(of: table, identity: buildID.hex, fingerprint: fingerprint)
  }
  let ourFile = directory + "/libc.ilsc"
  try writeBytes(bytes, to: ourFile)
  let lookups = Array(addresses.prefix(100))
  var ours: [[DWARFFrame]] = []
  let openSeconds = try medianSeconds(iterations: 51) {
    _ = try SymbolCacheFile(mapped: MappedFile(path: ourFile), identity: buildID.hex, fingerprint: fingerprint)
  }
  let opened = try SymbolCacheFile(mapped: MappedFile(path: ourFile), identity: buildID.hex, fingerprint: fingerprint)
  let lookupSeconds = try medianSeconds(iterations: 51) {
    ours = try lookups.map { try opened.frames(at: $0) }
  }

  // symbolic: build, write, reopen, 100 lookups (median of 51 rounds), answers.
  let script = """
    import sys, time, os
    from symbolic import Archive, SymCache
    debug, out, addresses = sys.argv[1], sys.argv[2], [int(a, 16) for a in open(sys.argv[3])]
    builds = []
    for _ in range(3):
        start = time.perf_counter()
        obj = next(iter(Archive.open(debug).iter_objects()))
        cache = SymCache.from_object(obj)
        builds.append(time.perf_counter() - start)
    with open(out, 'wb') as f: cache.dump_into(f)
    opens, lookups = [], []
    for _ in range(51):
        start = time.perf_counter(); reopened = SymCache.open(out); opens.append(time.perf_counter() - start)
        start = time.perf_counter(); answers = [reopened.lookup(a) for a in addresses]; lookups.append(time.perf_counter() - start)
    median = lambda v: sorted(v)[len(v) // 2]
    print(median(builds), os.path.getsize(out), median(opens), median(lookups), cache.version)
    for found in answers:
        print('%s %d' % (found[0].symbol, found[0].line) if found else '-')
    """
  try writeText(script, to: directory + "/symcache.py")
  let python = "PYTHONPATH=\(pipelineToolsFolder())/python python3"
  let result = try runProcess(["sh", "-c", "\(python) \(directory)/symcache.py \(debugFile) \(directory)/libc.symcache \(addressFiles[0])"])
  var symcacheRows: [[String]] = []
  var symcacheNote = "symbolic could not be run (PYTHONPATH=~/.cache/imagelog-test-tools/python)."
  let lines = result.output.split(separator: "\n").map(String.init)
  if result.status == 0, let first = lines.first {
    let fields = first.split(separator: " ").map(String.init)
    if fields.count == 5, let build = Double(fields[0]), let size = Double(fields[1]), let open = Double(fields[2]),
       let lookup = Double(fields[3]) {
      symcacheRows.append(["SymCache v\(fields[4]) (symbolic, Python)", "\(rounded(size / 1_048_576)) MiB", formatDuration(build),
                           formatDuration(open), formatDuration(lookup)])
      let theirs = lines.dropFirst()
      let mine = ours.map { frames in frames.first.map { "\($0.function ?? "?") \($0.line)" } ?? "-" }
      let same = zip(mine, theirs).filter { $0 == $1 }.count
      let differing = zip(lookups, zip(mine, theirs)).filter { $1.0 != $1.1 }.prefix(3)
        .map { "0x\(String($0.0, radix: 16)): ours `\($0.1.0)`, SymCache's `\($0.1.1)`" }
      symcacheNote = "Innermost function and line: \(same) of 100 identical to SymCache's"
        + (differing.isEmpty ? "." : "; e.g. " + differing.joined(separator: "; ") + ".")
    }
  }
  symcacheRows.insert(["imagelog symbol cache v\(SymbolCacheFormat.version)", "\(rounded(Double(bytes.count) / 1_048_576)) MiB",
                       "\(formatDuration(buildSeconds)) (+ \(formatDuration(serializeSeconds)) to lay out)",
                       formatDuration(openSeconds), formatDuration(lookupSeconds)], at: 0)
  tables.append(BenchmarkTable(
    title: "Symbol cache file beside Sentry's SymCache (libc6-dbg)",
    notes: "For libc6-dbg's debug file: the file's size; building it from the DWARF (ours: mapping and inflating the "
      + "sections, reading every unit, every answer; SymCache: `Archive.open` + `SymCache.from_object`), median of 3; "
      + "opening a written file (ours checks the header and the checksum over the whole file), and 100 lookups (the "
      + "report's first 100 addresses, with inlined frames), medians of 51, in-process. \(symcacheNote)",
    header: ["cache", "size", "build", "open", "100 lookups"], rows: symcacheRows))
  return tables
}

/// The Swift toolchain's llvm-symbolizer (current LLVM), else Debian's llvm-14.
private func currentSymbolizer() -> (name: String, path: String)? {
  if let swiftc = try? runProcess(["sh", "-c", "command -v swiftc"]).output.split(separator: "\n").first,
     let slash = swiftc.lastIndex(of: "/"), FileSystemProbe.exists(String(swiftc[..<slash]) + "/llvm-symbolizer") {
    return ("toolchain llvm-symbolizer", String(swiftc[..<slash]) + "/llvm-symbolizer")
  }
  return haveTool("llvm-symbolizer-14") ? ("llvm-symbolizer-14", "llvm-symbolizer-14") : nil
}

private func writeBytes(_ bytes: [UInt8], to path: String) throws {
  do { try writeFileAtomically(path, bytes) } catch { throw BenchError("cannot write \(path): \(error)") }
}
