internal import Glibc
import ImageLog
import ImageReaders

/// `imagelog file` against `readelf -n -d -lW` over every ELF file under the system library folder:
/// build-id, text size, SONAME and NEEDED. Both get the same file list in one process each; the
/// answers are compared before anything is timed, and the in-process reader is timed as well.
func fileBenchmark() throws -> [BenchmarkTable] {
  let folder = "/usr/lib/x86_64-linux-gnu"
  let files = elfFiles(under: folder)
  guard !files.isEmpty else { throw BenchError("no ELF files under \(folder)") }
  guard haveTool("readelf") else { throw BenchError("readelf is not installed (binutils)") }
  let cli = imagelogExecutable()
  guard access(cli, X_OK) == 0 else { throw BenchError("\(cli) is not built") }

  // Same answers first: every file's build-id, text size, SONAME and NEEDED from both tools.
  let ours = try runProcess([cli, "file", "--format", "json"] + files)
  let theirs = try runProcess(["readelf", "-n", "-d", "-lW"] + files)
  let ourAnswers = answersFromJSON(ours.output)
  let readelfAnswers = answersFromReadelf(theirs.output)
  var mismatches = 0
  for path in files where ourAnswers[path] != readelfAnswers[path] {
    mismatches += 1
    if mismatches <= 5 {
      printProgress("bench: \(path): imagelog \(String(describing: ourAnswers[path])) readelf \(String(describing: readelfAnswers[path]))")
    }
  }

  // The contenders take turns, round after round, so a change in machine load hits them alike.
  let iterations = 15
  let processorCount = sysconf(Int32(_SC_NPROCESSORS_ONLN))
  var checksum = 0
  let contenders: [() throws -> Void] = [
    { _ = try runProcess(["readelf", "-n", "-d", "-lW"] + files, discardOutput: true) },
    { _ = try runProcess([cli, "file", "--format", "json"] + files, discardOutput: true) },
    { _ = try runProcess([cli, "file"] + files, discardOutput: true) },
    {
      setenv("IMAGELOG_THREADS", "1", 1)
      defer { unsetenv("IMAGELOG_THREADS") }
      _ = try runProcess([cli, "file", "--format", "json"] + files, discardOutput: true)
    },
    {
      for path in files {
        guard let mapped = try? MappedFile(path: path) else { continue }
        let parsed: BinaryFile? = mapped.withReader { reader in try? BinaryFile.parse(reader) }
        if case .elf(let file)? = parsed { checksum &+= file.needed.count &+ Int(file.textSize & 0xFF) }
      }
    },
    {
      // The floor under any reader of these files: open, fstat, one 4 KiB read, close; no parsing.
      var buffer = [UInt8](repeating: 0, count: 4096)
      for path in files {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { continue }
        var info = stat()
        _ = fstat(descriptor, &info)
        checksum &+= buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) } &+ Int(info.st_size & 1)
        close(descriptor)
      }
    },
    {
      for path in files {
        guard let bytes = try? FileBytes(path: path) else { continue }
        let parsed: ELFFile? = bytes.withRanges { ranges in try? ELFFile(source: ranges, names: .lookedFor) }
        if let parsed { checksum &+= parsed.needed.count &+ Int(parsed.textSize & 0xFF) }
      }
    },
  ]
  let measured = try interleavedMediansWithCPU(contenders, iterations: iterations)
  _ = checksum
  let medians = measured.map(\.wall)
  let (readelfSeconds, cliSeconds, crashSeconds, oneThreadSeconds) = (medians[0], medians[1], medians[2], medians[3])
  let (inProcessSeconds, floorSeconds, rangesSeconds) = (medians[4], medians[5], medians[6])
  // CPU time of the processes (user + system, all threads); the in-process rows run no process.
  func cpu(_ index: Int) -> String { formatDuration(measured[index].cpu) }

  func ratio(_ seconds: Double) -> String { "\(rounded(readelfSeconds / seconds))x" }
  let table = BenchmarkTable(
    title: "imagelog file vs readelf (\(files.count) ELF files under \(folder))",
    notes: "Build-id, text size, SONAME and NEEDED of every ELF file under the folder, one process per tool "
      + "over the same file list, output discarded. Same answers checked first: "
      + (mismatches == 0 ? "all \(files.count) files agree." : "\(mismatches) files DISAGREE.")
      + " Median of \(iterations) interleaved rounds. Reproduce: `make bench`. Both are bound by per-file system calls "
      + "and process start-up: readelf reads each file with about 20 lseek and read calls; imagelog opens it, "
      + "fstats it and reads what the ELF parser asks for with about 2.6 pread calls (FileBytes: the first and "
      + "last 4 KiB, PT_DYNAMIC, and of the dynamic string table only the part holding the library names, "
      + "so a big library's table is neither copied whole nor mapped), checks every table as before but makes Strings only "
      + "of the section names it looks for (`ELFFile(source:names: .lookedFor)`; no style prints section names), "
      + "and prints in argument order. Lists of 64 files or more are read on one thread more than there are "
      + "processors (four at most; \(processorCount) processors here, so \(min(4, processorCount + 1)) threads), "
      + "while the calling thread prints in order; the CPU column is the process's user + system time over all its "
      + "threads (from the children's rusage), so it shows what the threads cost. The one-thread row is the same run "
      + "with IMAGELOG_THREADS=1. The in-process "
      + "FileBytes row decodes as the command does (`names: .lookedFor`). "
      + "imagelog links the Swift runtime statically; its start-up alone is the `imagelog --version` row of the Mach-O table below.",
    header: ["what", "time", "per file", "readelf time / this", "CPU"],
    rows: [
      ["`readelf -n -d -lW FILES`", formatDuration(readelfSeconds), formatDuration(readelfSeconds / Double(files.count)), "1x", cpu(0)],
      ["`imagelog file --format json FILES`", formatDuration(cliSeconds), formatDuration(cliSeconds / Double(files.count)), ratio(cliSeconds), cpu(1)],
      ["`imagelog file FILES` (crash lines)", formatDuration(crashSeconds), formatDuration(crashSeconds / Double(files.count)), ratio(crashSeconds), cpu(2)],
      ["`imagelog file --format json FILES`, one reader thread", formatDuration(oneThreadSeconds), formatDuration(oneThreadSeconds / Double(files.count)), ratio(oneThreadSeconds), cpu(3)],
      ["in-process MappedFile + BinaryFile.parse", formatDuration(inProcessSeconds), formatDuration(inProcessSeconds / Double(files.count)), ratio(inProcessSeconds), ""],
      ["in-process open + fstat + one 4 KiB pread + close per file, no parsing (the floor)", formatDuration(floorSeconds), formatDuration(floorSeconds / Double(files.count)), ratio(floorSeconds), ""],
      ["in-process FileBytes + ELFFile(source:names: .lookedFor), one thread", formatDuration(rangesSeconds), formatDuration(rangesSeconds / Double(files.count)), ratio(rangesSeconds), ""],
    ])
  return [table]
}

/// Runs each body once to warm up, then `iterations` rounds of one run each, and returns each body's
/// median duration in seconds.
func interleavedMedians(_ bodies: [() throws -> Void], iterations: Int) throws -> [Double] {
  try interleavedMediansWithCPU(bodies, iterations: iterations).map(\.wall)
}

/// `interleavedMedians`, with the median CPU time (user + system) of the child processes each run
/// waited for, in seconds (0 for a body that runs no process).
func interleavedMediansWithCPU(_ bodies: [() throws -> Void], iterations: Int) throws -> [(wall: Double, cpu: Double)] {
  let runs = try interleavedRuns(bodies, iterations: iterations)
  return zip(runs.wall, runs.cpu).map { (median($0), median($1)) }
}

/// The `p`th percentile (0...100) of `values`, by rank: a value measured; 0 for none.
func percentile(_ values: [Double], _ p: Int) -> Double {
  let sorted = values.sorted()
  return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * p / 100)]
}

/// The median of `values` (the upper one of an even count), 0 for none.
func median(_ values: [Double]) -> Double { percentile(values, 50) }

/// The user + system seconds of this process's children that have been waited for.
func childrenCPUSeconds() -> Double {
  var usage = rusage()
  getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage)
  func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
  return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// What `interleavedMediansWithCPU` takes its medians of: each body's wall and CPU seconds, run by run.
func interleavedRuns(_ bodies: [() throws -> Void], iterations: Int) throws -> (wall: [[Double]], cpu: [[Double]]) {
  for body in bodies { try body() }
  var wall = [[Double]](repeating: [], count: bodies.count)
  var cpu = [[Double]](repeating: [], count: bodies.count)
  let clock = ContinuousClock()
  for _ in 0..<iterations {
    for (index, body) in bodies.enumerated() {
      let cpuBefore = childrenCPUSeconds()
      let elapsed = try clock.measure(body)
      cpu[index].append(childrenCPUSeconds() - cpuBefore)
      wall[index].append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
  }
  return (wall, cpu)
}

/// What both tools are asked, per file.
struct FileAnswers: Equatable, CustomStringConvertible {
  var buildID = ""
  var textSize: UInt64 = 0
  var soname = ""
  var needed: [String] = []
  var description: String { "build-id \(buildID) text \(textSize) soname \(soname) needed \(needed)" }
}

/// The imagelog executable next to this benchmark (same configuration).
func imagelogExecutable() -> String {
  let me = CommandLine.arguments[0]
  guard let slash = me.lastIndex(of: "/") else { return "imagelog" }
  return String(me[..<slash]) + "/imagelog"
}

/// Regular files (not links) under `folder` whose first bytes are `\x7fELF`, sorted.
func elfFiles(under folder: String) -> [String] {
  var result: [String] = []
  var pending = [folder]
  while let current = pending.popLast() {
    guard let directory = opendir(current) else { continue }
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
      if name == "." || name == ".." { continue }
      let path = current + "/" + name
      var info = stat()
      guard lstat(path, &info) == 0 else { continue }
      switch info.st_mode & S_IFMT {
      case S_IFDIR: pending.append(path)
      case S_IFREG:
        guard let file = fopen(path, "rb") else { continue }
        var magic = [UInt8](repeating: 0, count: 4)
        if fread(&magic, 1, 4, file) == 4 && magic == [0x7F, 0x45, 0x4C, 0x46] { result.append(path) }
        fclose(file)
      default: continue
      }
    }
    closedir(directory)
  }
  return result.sorted()
}

/// Build-id, text size, SONAME and NEEDED per path from `imagelog file --format json` (one object a line).
func answersFromJSON(_ output: String) -> [String: FileAnswers] {
  func string(_ line: Substring, _ key: String) -> String? {
    guard let range = line.firstRange(of: "\"\(key)\":\"") else { return nil }
    let rest = line[range.upperBound...]
    return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
  }
  var result: [String: FileAnswers] = [:]
  for line in output.split(separator: "\n") where line.hasPrefix("{") {
    guard let path = string(line, "path") else { continue }
    var answers = FileAnswers()
    answers.buildID = string(line, "buildID") ?? ""
    answers.soname = string(line, "installName") ?? ""
    if let range = line.firstRange(of: "\"textSize\":") {
      answers.textSize = UInt64(line[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }
    if let range = line.firstRange(of: "\"dependencies\":["), let close = line[range.upperBound...].firstIndex(of: "]") {
      answers.needed = line[range.upperBound..<close].split(separator: ",").map { String($0.dropFirst().dropLast()) }
    }
    result[path] = answers
  }
  return result
}

/// The same answers from `readelf -n -d -lW`: text size from the PT_LOADs as imagelog's Image defines it
/// (first PT_LOAD page-aligned to the end of the last executable one).
func answersFromReadelf(_ output: String) -> [String: FileAnswers] {
  var result: [String: FileAnswers] = [:]
  var path: String?
  var answers = FileAnswers()
  var first: UInt64?
  var textEnd: UInt64 = 0
  func finish() {
    guard let path else { return }
    if let first { answers.textSize = max(textEnd, first) - first }
    result[path] = answers
  }
  for line in output.split(separator: "\n") {
    if line.hasPrefix("File: ") {
      finish()
      path = String(line.dropFirst(6))
      answers = FileAnswers()
      first = nil
      textEnd = 0
      continue
    }
    let words = line.split(separator: " ")
    if words.first == "LOAD", words.count >= 8 {
      let vaddr = UInt64(words[2].dropFirst(2), radix: 16) ?? 0
      let memsz = UInt64(words[5].dropFirst(2), radix: 16) ?? 0
      let align = UInt64(words.last!.dropFirst(2), radix: 16) ?? 1
      let start = align > 1 ? vaddr & ~(align - 1) : vaddr
      first = min(first ?? start, start)
      if words[6..<(words.count - 1)].contains(where: { $0.contains("E") }) { textEnd = max(textEnd, vaddr + memsz) }
    }
    if let range = line.firstRange(of: "Build ID: "), answers.buildID.isEmpty {
      answers.buildID = String(line[range.upperBound...])
    }
    if line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") {
      answers.needed.append(String(line[line.index(after: open)..<close]))
    }
    if line.contains("(SONAME)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") {
      answers.soname = String(line[line.index(after: open)..<close])
    }
  }
  finish()
  return result
}
