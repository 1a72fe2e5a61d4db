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
  let symbols = file.symbols.symbols
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
    // The library path end to end: parse, identity check, symbol table, lookups, demangling.
    let report = try ReportParser.parse(addressText, images: [image])
    let result = Symbolicator.symbolicate(report, options: options)
    resolved = result.frames.filter { $0.status == .symbolicated }.count
  }
  rows.append(["imagelog API (parse, load symbols, lookup, simplified demangle)", formatDuration(inProcess), "\(resolved) / 20000"])
  if FileSystemProbe.exists(cli) {
    let command = "\(cli) symbolicate --no-lines --image \(library)@0x\(String(load, radix: 16)) - < \(runtimeFile)"
    let seconds = try medianSeconds(iterations: 5) { _ = try runProcess(["sh", "-c", command], discardOutput: true) }
    rows.append(["`imagelog symbolicate --no-lines --image ...` (process)", formatDuration(seconds), "demangled"])
  }
  if haveTool("llvm-symbolizer") {
    let command = "llvm-symbolizer --obj=\(library) < \(addressFile)"
    let seconds = try medianSeconds(iterations: 5) { _ = try runProcess(["sh", "-c", command], discardOutput: true) }
    rows.append(["`llvm-symbolizer --obj=libswiftCore.so` (process)", formatDuration(seconds), "Swift names not demangled"])
  }
  var tables = [BenchmarkTable(
    title: "Symbolication: 20,000 addresses in libswiftCore.so (symbol tables only)",
    notes: "Addresses spread over the library's \(symbols.count) function symbols. Medians of 5 runs.",
    header: ["tool", "time", "notes"], rows: rows)]

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
    var reportRows = [["`imagelog symbolicate report.crash` (100 frames, lines via llvm-symbolizer)", formatDuration(endToEnd)]]
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

enum FileSystemProbe {
  static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

private func writeText(_ text: String, to path: String) throws {
  guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
  fputs(text, file)
  fclose(file)
}
