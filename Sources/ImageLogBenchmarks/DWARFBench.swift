internal import Glibc
import ImageLog
import Symbolication
import ImageReaders

/// DWARF lines and inlines: 20,000 addresses in libc's debug file (libc6-dbg: zlib-compressed DWARF 5) and
/// in libstdc++'s debug build (libstdc++6-12-dbg: a large C++ library with its DWARF inside), looked up by
/// a child process on our reader (`ImageLogBenchmarks dwarf-lookup`) and by `llvm-symbolizer --inlines`
/// (Debian's llvm-14 and the Swift toolchain's, current LLVM); the answers are compared first. Then a
/// 100-frame report in libc through `imagelog symbolicate`.
///
/// llvm-symbolizer reads a copy of each file without its symbol tables: with `--functions=linkage` it
/// would otherwise replace the outermost DWARF name by an ELF symbol alias (see DWARFOracle in the tests),
/// and without them it has less to load, not more.
func dwarfBenchmarks() throws -> [BenchmarkTable] {
  // The toolchain's (current LLVM) llvm-symbolizer first: its answers are the ones compared (Debian's LLVM 14
  // doubles a relative DWARF 5 directory 0; the tests' `currentLLVMSymbolizer` says more).
  var symbolizers: [(name: String, path: String)] = []
  if let swiftc = try? runProcess(["sh", "-c", "command -v swiftc"]).output.split(separator: "\n").first,
     let slash = swiftc.lastIndex(of: "/"), FileSystemProbe.exists(String(swiftc[..<slash]) + "/llvm-symbolizer") {
    symbolizers.append(("toolchain llvm-symbolizer", String(swiftc[..<slash]) + "/llvm-symbolizer"))
  }
  if haveTool("llvm-symbolizer-14") { symbolizers.append(("llvm-symbolizer-14", "llvm-symbolizer-14")) }
  guard !symbolizers.isEmpty else { throw BenchError("no llvm-symbolizer (the Swift toolchain's or Debian llvm-14)") }
  guard haveTool("llvm-objcopy-14") else { throw BenchError("llvm-objcopy-14 not found (Debian llvm-14)") }
  let directory = "/tmp/imagelog-bench-dwarf-\(getpid())"
  mkdir(directory, 0o755)
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  var libraries: [(name: String, path: String)] = []
  if let libc = libcDebugFile() { libraries.append(("libc debug file", libc)) }
  let libstdcxx = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
  if FileSystemProbe.exists(libstdcxx) { libraries.append(("libstdc++ (debug build)", libstdcxx)) }
  guard !libraries.isEmpty else { throw BenchError("neither libc6-dbg nor libstdc++6-12-dbg is installed") }

  let me = CommandLine.arguments[0]
  var rows: [[String]] = []
  var notes: [String] = []
  for (name, path) in libraries {
    let addresses = try sampleCodeAddresses(path, count: 20_000)
    let addressFile = directory + "/addresses.txt"
    try writeText(addresses.map { "0x" + String($0, radix: 16) }.joined(separator: "\n") + "\n", to: addressFile)
    let copy = directory + "/without-symbols"
    // The dynamic symbols too (a shared library's .dynsym names its C1/D1 aliases where the DWARF says C2/D2),
    // with the sections that refer to them.
    let symbolSections = [".symtab", ".strtab", ".dynsym", ".dynstr", ".hash", ".gnu.hash", ".gnu.version", ".gnu.version_d",
                          ".gnu.version_r", ".rela.dyn", ".rela.plt", ".dynamic"]
    guard try runProcess(["llvm-objcopy-14"] + symbolSections.flatMap { ["-R", $0] } + [path, copy], discardOutput: true).status == 0 else {
      throw BenchError("llvm-objcopy-14 could not copy \(path) without its symbol tables")
    }
    let ours = "exec \(me) dwarf-lookup \(path) < \(addressFile)"
    let theirs = symbolizers.map {
      "exec \($0.path) --inlines --output-style=JSON --functions=linkage --no-demangle --obj=\(copy) < \(addressFile)"
    }
    // Same answers first: every address, the whole chain (the first llvm-symbolizer's).
    let ourLines = try runProcess(["sh", "-c", ours]).output.split(separator: "\n", omittingEmptySubsequences: false)
    let theirLines = try runProcess(["sh", "-c", theirs[0]]).output.split(separator: "\n")
    let theirAnswers = theirLines.map { line in (try? JSONValue.parse(line)).map(answerLine) ?? "(unreadable)" }
    let same = zip(ourLines, theirAnswers).filter { $0 == $1 }.count
    let inlined = theirAnswers.filter { $0.contains(" <- ") }.count
    let differing = zip(addresses, zip(ourLines, theirAnswers)).filter { $1.0 != $1.1 }.prefix(2)
      .map { "0x\(String($0.0, radix: 16)): ours `\($0.1.0)`, llvm-symbolizer's `\($0.1.1)`" }
    notes.append("\(name): \(same) of \(addresses.count) answers identical to the \(symbolizers[0].name)'s (\(inlined) with inlined frames)"
                 + (differing.isEmpty ? "." : "; e.g. " + differing.joined(separator: "; ") + "."))
    // Interleaved rounds, so both see the same machine.
    let commands = [ours] + theirs
    var samples = [[Measurement]](repeating: [], count: commands.count)
    for _ in 0..<5 {
      for (index, command) in commands.enumerated() { samples[index].append(try measuredShell(command + " > /dev/null")) }
    }
    let wall = samples.map { median($0.map(\.wall)) }
    let cpu = samples.map { median($0.map(\.cpu)) }
    let memory = try commands.map { try measuredShell($0 + " > /dev/null", peakMemory: true).maxRSSKiB }
    let speedups = symbolizers.indices.map { "\(rounded(wall[$0 + 1] / wall[0]))x \(symbolizers[$0].name)'s speed" }
    rows.append(["\(name): imagelog (`DebugInfoFile`)", formatDuration(wall[0]), formatDuration(cpu[0]),
                 "\(rounded(Double(memory[0]) / 1024)) MiB", speedups.joined(separator: ", ")])
    for (index, symbolizer) in symbolizers.enumerated() {
      rows.append(["\(name): \(symbolizer.name) --inlines", formatDuration(wall[index + 1]), formatDuration(cpu[index + 1]),
                   "\(rounded(Double(memory[index + 1]) / 1024)) MiB", ""])
    }
  }
  var tables = [BenchmarkTable(
    title: "DWARF: 20,000 addresses with lines and inlined frames",
    notes: "Addresses spread over each file's function symbols in executable sections, at varied offsets inside them. Each side is "
      + "one process reading the addresses on standard input and writing every frame (function, file, line, column) "
      + "for each; medians of 5 interleaved rounds; peak RSS from one more run under GNU time (%M). "
      + notes.joined(separator: " "),
    header: ["tool", "wall", "CPU", "peak RSS", "notes"], rows: rows)]

  // A 100-frame report in libc, process start to output, file:line from the debug file found by build-id.
  let cli = me.split(separator: "/").dropLast().joined(separator: "/")
  let imagelog = (me.hasPrefix("/") ? "/" : "") + (cli.isEmpty ? "." : cli) + "/imagelog"
  let libc = "/lib/x86_64-linux-gnu/libc.so.6"
  if FileSystemProbe.exists(imagelog), libcDebugFile() != nil, let file = try SymbolFile.load(path: libc).first,
     let buildID = file.buildID {
    let load: UInt64 = 0x7f00_0000_0000
    let addresses = try sampleCodeAddresses(libc, count: 100)
    var report = "Process:         bench [1]\nOS Version:      Linux 6.1.0 x86_64\nCrashed Thread:  0  tid 1\n\nThread 0 Crashed:\n"
    for (index, address) in addresses.enumerated() {
      report += "\(index)   libc.so.6                     0x\(hexDigits(address + load, width: 16)) 0x\(hexDigits(load)) + \(address)\n"
    }
    report += "\nBinary Images:\n0x\(hexDigits(load)) - 0x\(hexDigits(load + 0xFFFFFF)) libc.so.6 x86_64  <\(buildID.compactUUID)> \(libc)\n"
    let reportFile = directory + "/report.crash"
    try writeText(report, to: reportFile)
    let output = try runProcess([imagelog, "symbolicate", "--no-cache", reportFile]).output
    let withLines = output.split(separator: "\n").filter { $0.contains("libc.so.6") && $0.contains(".c:") }.count
    let hundred = directory + "/hundred.txt"
    try writeText(addresses.map { "0x" + String($0, radix: 16) }.joined(separator: "\n") + "\n", to: hundred)
    // llvm-symbolizer finds the same debug file by libc's build-id.
    let commands = ["exec \(imagelog) symbolicate --no-cache \(reportFile) > /dev/null"]
      + symbolizers.map { "exec \($0.path) --inlines --obj=\(libc) < \(hundred) > /dev/null" }
    var samples = [[Measurement]](repeating: [], count: commands.count)
    for _ in 0..<21 {
      for (index, command) in commands.enumerated() { samples[index].append(try measuredShell(command)) }
    }
    let memory = try commands.map { try measuredShell($0, peakMemory: true).maxRSSKiB }
    let names = ["`imagelog symbolicate report.crash` (100 frames, lines)"]
      + symbolizers.map { "\($0.name) --inlines on the same 100 addresses" }
    tables.append(BenchmarkTable(
      title: "DWARF: a 100-frame report end to end",
      notes: "`imagelog symbolicate report.crash`: 100 frames in libc.so.6, file:line:column and inlined frames from libc's "
        + "debug file, found by build-id; process start to output, medians of 21 interleaved runs. Goal: under 10 ms. "
        + "\(withLines) output lines name a libc source file.",
      header: ["tool", "wall", "CPU", "peak RSS"],
      rows: names.indices.map { index in
        [names[index], formatDuration(median(samples[index].map(\.wall))), formatDuration(median(samples[index].map(\.cpu))),
         "\(rounded(Double(memory[index]) / 1024)) MiB"]
      }))
  }
  return tables
}

/// `ImageLogBenchmarks dwarf-lookup FILE`: reads hex addresses from standard input and writes one line
/// per address, the frames in `answerLine`'s form. The child process the DWARF benchmark times.
func dwarfLookupWorker(_ path: String) -> Int32 {
  let file: DebugInfoFile
  do { file = try DebugInfoFile(path: path) } catch { printProgress("dwarf-lookup: \(error)"); return 1 }
  var input: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
    if count < 0 && errno == EINTR { continue }
    guard count > 0 else { break }
    input += buffer[0..<count]
  }
  var output = ""
  for line in input.split(separator: UInt8(ascii: "\n")) {
    let text = String(decoding: line, as: UTF8.self)
    let address = UInt64(text.hasPrefix("0x") ? text.dropFirst(2) : Substring(text), radix: 16) ?? 0
    let frames = (try? file.frames(at: address)) ?? []
    output += frames.map { "\($0.function ?? "??") \($0.file):\($0.line):\($0.column)" }.joined(separator: " <- ")
    output += "\n"
  }
  return writeAll(to: 1, output) ? 0 : 1
}

/// llvm-symbolizer's JSON answer in `dwarfLookupWorker`'s form; an address outside the DWARF (only an ELF
/// symbol, no file, no start line) is an empty line, as our reader gives nothing there.
private func answerLine(_ answer: JSONValue) -> String {
  let symbols = answer["Symbol"]?.array ?? []
  if symbols.count == 1, symbols[0]["FileName"]?.string == "", symbols[0]["Line"]?.integer == 0,
     symbols[0]["StartLine"]?.integer == 0 {
    return ""
  }
  return symbols.map { symbol in
    let function = symbol["FunctionName"]?.string.flatMap { $0.isEmpty ? nil : $0 } ?? "??"
    return "\(function) \(symbol["FileName"]?.string ?? ""):\(symbol["Line"]?.integer ?? 0):\(symbol["Column"]?.integer ?? 0)"
  }.joined(separator: " <- ")
}

/// The debug file libc6-dbg installs for the running libc, found by libc's build-id.
func libcDebugFile() -> String? {
  guard let file = try? SymbolFile.load(path: "/lib/x86_64-linux-gnu/libc.so.6").first, let id = file.buildID else { return nil }
  let hex = id.hex
  let path = "/usr/lib/debug/.build-id/\(hex.prefix(2))/\(hex.dropFirst(2)).debug"
  return FileSystemProbe.exists(path) ? path : nil
}

/// `count` addresses spread over `path`'s function symbols in executable sections, at varied offsets
/// inside each: a fixed spread, as the symbol-table benchmark takes, so every run asks the same addresses.
func sampleCodeAddresses(_ path: String, count: Int) throws -> [UInt64] {
  guard let file = try SymbolFile.load(path: path).first else { throw BenchError("\(path): no slice") }
  let code = try MappedFile(path: path).withReader { reader in
    try ELFFile(reader).sections.filter { $0.flags & 0x4 != 0 }.map { $0.vmAddress..<($0.vmAddress &+ $0.size) }
  }
  let symbols = file.symbols.symbols.filter { symbol in symbol.size > 0 && code.contains { $0.contains(symbol.address) } }
  guard symbols.count > 100 else { throw BenchError("\(path): only \(symbols.count) function symbols in code") }
  return (0..<count).map { index in
    let symbol = symbols[(index &* 7919) % symbols.count]
    return symbol.address + UInt64(index &* 104_729) % symbol.size
  }
}

