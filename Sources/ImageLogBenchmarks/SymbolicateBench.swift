internal import Glibc
import ImageLog
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication

/// Symbolication speed: 20,000 addresses in one large Swift library from its symbol tables (names
/// demangled) against `llvm-symbolizer` on the same addresses, and a 100-frame report end to end.
func symbolicateBenchmarks() throws -> [BenchmarkTable] {
  let library = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"
  guard FileSystemProbe.exists(library) else { throw BenchError("\(library) not found") }
  let (file, symbols) = try codeSymbols(library)
  guard symbols.count > 1000 else { throw BenchError("\(library): only \(symbols.count) symbols") }
  var addresses: [UInt64] = []
  addresses.reserveCapacity(20_000)
  for index in 0..<20_000 {
    let symbol = symbols[(index &* 7919) % symbols.count]  // spread over the whole table
    addresses.append(symbol.address + (symbol.size > 0 ? UInt64(index) % symbol.size : 0))  // inside the symbol
  }
  let load: UInt64 = 0x7f00_0000_0000
  let directory = "/tmp/imagelog-bench-symbolicate-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let addressFile = directory + "/addresses.txt"
  try writeText(addresses.map { "0x" + String($0, radix: 16) }.joined(separator: "\n") + "\n", to: addressFile)
  let runtimeFile = directory + "/runtime-addresses.txt"
  try writeText(addresses.map { "0x" + String($0 + load, radix: 16) }.joined(separator: "\n") + "\n", to: runtimeFile)
  let imagelog = CommandLine.arguments[0].split(separator: "/").dropLast().joined(separator: "/")
  let cli = (CommandLine.arguments[0].hasPrefix("/") ? "/" : "") + (imagelog.isEmpty ? "." : imagelog) + "/imagelog"

  var rows: [[String]] = []
  var resolved = 0
  let image = ProcessSnapshot.Image(name: "libswiftCore.so", path: library, loadAddress: load, endAddress: nil,
                                    identity: file.buildID.map(ImageIdentity.init), architecture: nil)
  let addressText = addresses.map { "0x" + String($0 + load, radix: 16) }.joined(separator: "\n")
  var options = SymbolicationOptions()
  options.lineInfo = false
  options.systemDirectories = false
  let inProcess = try medianSeconds(iterations: 5) {
    // The library path end to end: parse, identity check, symbol table, lookups, demangling, output bytes.
    var report = try ReportParser.parse(addressText, images: [image])
    Symbolicator.symbolicate(&report, options: options)
    resolved = report.threads.reduce(0) { $0 + $1.frames.filter { $0.symbols.status == .symbolicated }.count }
    _ = report.formattedUTF8(.report)
  }
  rows.append(["imagelog API (parse, load symbols, lookup, simplified demangle, output bytes)", formatDuration(inProcess),
               "", "\(resolved) / 20000 resolved"])
  let imageOption = "--image \(library)@0x\(String(load, radix: 16))"
  let ours = "\(cli) symbolicate --no-lines \(imageOption) - < \(runtimeFile) > /dev/null"
  let theirs = "llvm-symbolizer --obj=\(library) < \(addressFile) > /dev/null"
  var agreement = ""
  if FileSystemProbe.exists(cli) && haveTool("llvm-symbolizer") {
    // The same function for every address, where both name one (raw names: llvm-symbolizer does not
    // demangle Swift).
    let ourNames = try runProcess(["sh", "-c", "\(cli) symbolicate --no-lines --no-demangle \(imageOption) - < \(runtimeFile)"])
      .output.split(separator: "\n").prefix(addresses.count).map { $0.split(separator: " ").dropFirst().first.map(String.init) ?? "" }
    let theirNames = try runProcess(["sh", "-c", "llvm-symbolizer --no-demangle --obj=\(library) < \(addressFile)"])
      .output.split(separator: "\n").enumerated().filter { $0.offset % 2 == 0 }.map { String($0.element) }
    let same = zip(ourNames, theirNames).filter { $0 == $1 }.count
    let differing = zip(addresses, zip(ourNames, theirNames)).filter { $1.0 != $1.1 }
      .prefix(3).map { "0x\(String($0.0, radix: 16)): \($0.1.0) / \($0.1.1)" }
    agreement = " Function names: \(same) of \(addresses.count) identical to llvm-symbolizer's (raw names compared)"
      + (differing.isEmpty ? "." : "; differing, ours / llvm-symbolizer's: " + differing.joined(separator: "; ") + ".")
    // Interleaved rounds, so both see the same machine: medians of wall-clock and of CPU time (user +
    // system: imagelog demangles on every core for a long list, so its CPU time can exceed its wall time).
    var samples: [[(wall: Double, cpu: Double)]] = [[], []]
    _ = try timedShell(ours)
    _ = try timedShell(theirs)
    for _ in 0..<15 {
      samples[0].append(try timedShell(ours))
      samples[1].append(try timedShell(theirs))
    }
    let wall = samples.map { median($0.map(\.wall)) }
    let cpu = samples.map { median($0.map(\.cpu)) }
    rows.append(["`imagelog symbolicate --no-lines --image ...` (process)", formatDuration(wall[0]), formatDuration(cpu[0]),
                 "demangled; \(rounded(wall[0] / wall[1] * 100))% of llvm-symbolizer's wall time"])
    rows.append(["`llvm-symbolizer --obj=libswiftCore.so` (process)", formatDuration(wall[1]), formatDuration(cpu[1]),
                 "Swift names not demangled"])
  }
  var tables = [BenchmarkTable(
    title: "Symbolication: 20,000 addresses in libswiftCore.so (symbol tables only)",
    notes: "Addresses spread over the library's \(symbols.count) function symbols in executable sections. Processes: medians of 15 interleaved "
      + "rounds (each through `sh -c`, output to /dev/null); API: median of 5 runs.\(agreement)",
    header: ["tool", "wall", "CPU", "notes"], rows: rows)]

  // A 100-frame imagelog report over libswiftCore, end to end through the CLI.
  if FileSystemProbe.exists(cli), let buildID = file.buildID {
    var report = "Process:         bench [1]\nOS Version:      Linux 6.1.0 x86_64\nCrashed Thread:  0  tid 1\n\nThread 0 Crashed:\n"
    for index in 0..<100 {
      let address = addresses[index * 199] + load
      report += "\(index)   libswiftCore.so               0x\(hexDigits(address, width: 16)) 0x\(hexDigits(load)) + \(address - load)\n"
    }
    report += "\nBinary Images:\n0x\(hexDigits(load)) - 0x\(hexDigits(load + 0xFFFFFFF)) libswiftCore.so x86_64  <\(buildID.compactUUID)> \(library)\n"
    let reportFile = directory + "/report.crash"
    try writeText(report, to: reportFile)
    let endToEnd = try medianSeconds(iterations: 5) {
      _ = try runProcess([cli, "symbolicate", reportFile], discardOutput: true)
    }
    var reportRows = [["`imagelog symbolicate report.crash` (100 frames, lines from DWARF)", formatDuration(endToEnd)]]
    if haveTool("llvm-symbolizer") {
      let hundred = directory + "/hundred.txt"
      try writeText((0..<100).map { "0x" + String(addresses[$0 * 199], radix: 16) }.joined(separator: "\n") + "\n", to: hundred)
      let seconds = try medianSeconds(iterations: 5) {
        _ = try runProcess(["sh", "-c", "llvm-symbolizer --obj=\(library) < \(hundred)"], discardOutput: true)
      }
      reportRows.append(["`llvm-symbolizer` on the same 100 addresses", formatDuration(seconds)])
    }
    tables.append(BenchmarkTable(title: "Symbolication: a 100-frame report end to end",
                                 notes: "Process start to output, report parsing, identity matching, symbols, demangling. Goal: under 100 ms.",
                                 header: ["tool", "time"], rows: reportRows))
  }
  return tables
}

/// The ELF file at `path` and its function symbols in executable sections (SHF_EXECINSTR): code
/// addresses, as a crash report has, not the labels of data sections (`_edata`, `__start_swift5_...`)
/// that llvm-symbolizer names by data symbols.
func codeSymbols(_ path: String) throws -> (file: SymbolFile, symbols: [SymbolTable.Symbol]) {
  guard let file = try SymbolFile.load(path: path).first else { throw BenchError("\(path): no slice") }
  let code = try MappedFile(path: path).withReader { reader in
    try ELFFile(reader).sections.filter { $0.flags & 0x4 != 0 }.map { $0.vmAddress..<($0.vmAddress &+ $0.size) }
  }
  return (file, file.symbols.symbols.filter { symbol in code.contains { $0.contains(symbol.address) } })
}

/// A crash collector's batch: 1,000 reports of 100 frames over the same 20 libraries, symbolicated by
/// one `imagelog symbolicate --output-dir` against one `imagelog symbolicate` process per report (what a
/// collector without it runs). Both write every report to a file; the files are compared first.
func manyReportsBenchmark() throws -> [BenchmarkTable] {
  let imagelog = CommandLine.arguments[0].split(separator: "/").dropLast().joined(separator: "/")
  let cli = (CommandLine.arguments[0].hasPrefix("/") ? "/" : "") + (imagelog.isEmpty ? "." : imagelog) + "/imagelog"
  guard FileSystemProbe.exists(cli) else { throw BenchError("\(cli) not found: build the imagelog product first") }
  // System libraries a crash names most (libc and libstdc++ with their Debian debug files, when
  // installed: lines from DWARF), then the Swift runtime's, until there are 20.
  let system = ["libc.so.6", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libz.so.1", "libzstd.so.1", "liblzma.so.5",
                "libcrypto.so.3", "libssl.so.3", "libsqlite3.so.0", "libcurl.so.4", "libxml2.so.2"]
    .map { "/lib/x86_64-linux-gnu/" + $0 }
  let swift = ["libswiftCore.so", "libFoundation.so", "libFoundationEssentials.so", "libdispatch.so", "libswift_Concurrency.so",
               "libswiftDispatch.so", "libBlocksRuntime.so", "libswiftGlibc.so", "libswift_StringProcessing.so",
               "libswift_RegexParser.so", "libswiftSynchronization.so", "libswiftObservation.so", "libXCTest.so",
               "libFoundationNetworking.so", "libFoundationXML.so", "libswiftRemoteMirror.so"]
    .map { "/opt/swift/usr/lib/swift/linux/" + $0 }
  var libraries: [(path: String, file: SymbolFile, symbols: [SymbolTable.Symbol])] = []
  for path in system + swift where libraries.count < 20 && FileSystemProbe.exists(path) {
    guard let (file, symbols) = try? codeSymbols(path), file.buildID != nil, symbols.count >= 50 else { continue }
    libraries.append((path, file, symbols))
  }
  guard libraries.count == 20 else { throw BenchError("only \(libraries.count) libraries with build-ids and symbols found") }

  let directory = "/tmp/imagelog-bench-many-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  mkdir(directory + "/reports", 0o755)
  let reportCount = 1000
  var state: UInt64 = 0x5EED  // a fixed sequence (Knuth's MMIX LCG, high bits): the same reports every run
  func next() -> UInt64 {
    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    return state >> 24
  }
  var images = "\nBinary Images:\n"
  for (index, library) in libraries.enumerated() {
    let load = 0x7f00_0000_0000 + UInt64(index) << 32
    let end = load + (library.file.loadSize ?? 0x1000_0000) - 1
    images += "0x\(hexDigits(load)) - 0x\(hexDigits(end)) \(Image.shortName(of: library.path)) x86_64  "
      + "<\(library.file.buildID?.compactUUID ?? "")> \(library.path)\n"
  }
  for report in 0..<reportCount {
    var text = "Process:         collected [\(1000 + report)]\nOS Version:      Linux 6.1.0 x86_64\nCrashed Thread:  0  tid 1\n\n"
      + "Thread 0 Crashed:\n"
    for frame in 0..<100 {
      let index = Int(next() % UInt64(libraries.count))
      let symbol = libraries[index].symbols[Int(next() % UInt64(libraries[index].symbols.count))]
      let offset = symbol.address - libraries[index].file.imageBaseVMAddress + (symbol.size > 1 ? next() % symbol.size : 0)
      let load = 0x7f00_0000_0000 + UInt64(index) << 32
      let name = Image.shortName(of: libraries[index].path)
      text += padded(String(frame), 4) + padded(name, 30) + "0x\(hexDigits(load + offset, width: 16)) 0x\(hexDigits(load)) + \(offset)\n"
    }
    try writeText(text + images, to: directory + "/reports/r\(report).crash")
  }

  func padded(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(1, width - text.count)) }
  let batch = "\(cli) symbolicate --output-dir \(directory)/batch \(directory)/reports/*.crash > \(directory)/batch.txt"
  func each(_ folder: String, _ options: String = "") -> String {
    "mkdir -p \(directory)/\(folder) && for f in \(directory)/reports/*.crash; do "
      + "\(cli) symbolicate \(options) \"$f\" > \(directory)/\(folder)/\"${f##*/}\" || exit 1; done"
  }
  // A first batch fills the symbol cache (its builders awaited): every timed way answers from the same
  // cache, but for the last, which reads the DWARF in each process as before the cache.
  _ = try measuredShell(batch)
  try awaitCacheBuilders()
  // Same answers first: every report's file from the batch equals the one its own process wrote.
  let first = try measuredShell(batch, peakMemory: true)
  let firstEach = try measuredShell(each("each"))
  let uncached = try measuredShell(each("uncached", "--no-cache"))
  var identical = 0
  var symbolicated = ""
  for report in 0..<reportCount {
    let name = "/r\(report).crash"
    let ours = try runProcess(["cat", directory + "/batch" + name]).output
    let cached = try runProcess(["cat", directory + "/each" + name]).output
    let fromDWARF = try runProcess(["cat", directory + "/uncached" + name]).output
    if ours == cached && ours == fromDWARF { identical += 1 }
    if report == 0, let summary = ours.split(separator: "\n").last(where: { $0.hasPrefix("-- symbolicated by imagelog:") }) {
      symbolicated = String(summary.dropFirst("-- symbolicated by imagelog: ".count))
    }
  }
  guard identical == reportCount else { throw BenchError("only \(identical) of \(reportCount) reports agree between the three ways") }
  // One round of a process per report (1,000 runs, minutes) is the one checked above; the batch is
  // run twice more and its median taken.
  var batches = [first]
  for _ in 0..<2 { batches.append(try measuredShell(batch, peakMemory: true)) }
  let batchWall = median(batches.map(\.wall)), batchCPU = median(batches.map(\.cpu))
  let peak = median(batches.map { Double($0.maxRSSKiB) }) / 1024
  let names = libraries.map { Image.shortName(of: $0.path) }.joined(separator: ", ")
  var rows = [["`imagelog symbolicate --output-dir DIR` (one process, every file read once)", formatDuration(batchWall),
               formatDuration(batchCPU), peak > 0 ? "\(rounded(peak)) MiB" : "", formatDuration(batchWall / Double(reportCount))]]
  for (way, run) in [("one process per report", firstEach), ("one process per report, `--no-cache`", uncached)] {
    rows.append(["`imagelog symbolicate REPORT > FILE`, \(way)", formatDuration(run.wall), formatDuration(run.cpu), "",
                 formatDuration(run.wall / Double(reportCount))])
    rows.append(["ratio (\(way) / --output-dir)", "\(rounded(run.wall / batchWall))x", "\(rounded(run.cpu / batchCPU))x", "", ""])
  }
  return [BenchmarkTable(
    title: "Symbolication: \(reportCount) reports of 100 frames over the same 20 libraries",
    notes: "A crash collector's batch. Libraries: \(names) (libc and libstdc++ with lines from their Debian debug "
      + "files when installed). Each way writes every report to its own file; all \(reportCount) files are identical "
      + "between the three (checked first; report 0: \(symbolicated)). The first two answer lines from the symbol cache "
      + "an untimed first batch filled; the third reads the DWARF in every process. One process per report: the one "
      + "round that made the files compared; --output-dir: median of 3 runs. Goal (set before the cache): at least 20x "
      + "less total time with --output-dir than one process per report.",
    header: ["way", "wall", "CPU", "peak memory", "per report"], rows: rows)]
}

/// Runs `command` with `sh -c` and returns its wall-clock and CPU (user + system) seconds.
private func timedShell(_ command: String) throws -> (wall: Double, cpu: Double) {
  let measurement = try measuredShell(command)
  return (measurement.wall, measurement.cpu)
}

enum FileSystemProbe {
  static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

func writeText(_ text: String, to path: String) throws {
  guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
  fputs(text, file)
  fclose(file)
}
