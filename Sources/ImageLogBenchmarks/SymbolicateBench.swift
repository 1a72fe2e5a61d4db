internal import Glibc
import ImageLog
import ImageLogSymbolication
import ImageReaders

/// Symbolication speed: 20,000 addresses in one large Swift library from its symbol tables (names
/// demangled) against `llvm-symbolizer` on the same addresses, and a 100-frame report end to end.
func symbolicateBenchmarks() throws -> [BenchmarkTable] {
  let library = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"
  guard FileSystemProbe.exists(library) else { throw BenchError("\(library) not found") }
  guard let file = try SymbolFile.load(path: library).first else { throw BenchError("\(library): no slice") }
  // Code addresses, as a crash report has: symbols in executable sections (SHF_EXECINSTR), not the
  // labels of data sections (`_edata`, `__start_swift5_...`) that llvm-symbolizer names by data symbols.
  let code = try MappedFile(path: library).withReader { reader in
    try ELFFile(reader).sections.filter { $0.flags & 0x4 != 0 }.map { $0.vmAddress..<($0.vmAddress &+ $0.size) }
  }
  let symbols = file.symbols.symbols.filter { symbol in code.contains { $0.contains(symbol.address) } }
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
  let image = CrashReport.Image(name: "libswiftCore.so", path: library, loadAddress: load, endAddress: nil,
                                identity: file.buildID.map(ImageIdentity.init), architecture: nil)
  let addressText = addresses.map { "0x" + String($0 + load, radix: 16) }.joined(separator: "\n")
  var options = SymbolicationOptions()
  options.lineInfo = false
  options.systemDirectories = false
  let inProcess = try medianSeconds(iterations: 5) {
    // The library path end to end: parse, identity check, symbol table, lookups, demangling, output bytes.
    let report = try ReportParser.parse(addressText, images: [image])
    let result = Symbolicator.symbolicate(report, options: options)
    resolved = result.frames.filter { $0.status == .symbolicated }.count
    _ = result.formattedUTF8(.report)
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

/// Runs `command` with `sh -c` and returns its wall-clock and CPU (user + system) seconds.
private func timedShell(_ command: String) throws -> (wall: Double, cpu: Double) {
  let measurement = try measuredShell(command)
  return (measurement.wall, measurement.cpu)
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

enum FileSystemProbe {
  static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

func writeText(_ text: String, to path: String) throws {
  guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
  fputs(text, file)
  fclose(file)
}
