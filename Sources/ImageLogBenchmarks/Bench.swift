internal import Glibc

import ImageLog

/// One results table: a heading, the command that reproduces it, a header row and rows.
struct BenchmarkTable {
  var title: String
  var notes: String
  var header: [String]
  var rows: [[String]]

  var markdown: String {
    var text = "## \(title)\n\n\(notes)\n\n| " + header.joined(separator: " | ") + " |\n|"
    text += String(repeating: " --- |", count: header.count) + "\n"
    for row in rows { text += "| " + row.joined(separator: " | ") + " |\n" }
    return text
  }
}

/// Progress to standard error (never part of the results).
func printProgress(_ text: String) {
  writeAll(to: 2, text + "\n")
}

/// Runs `body` `iterations` times after one warm-up call and returns the median duration in seconds.
func medianSeconds(iterations: Int, _ body: () throws -> Void) rethrows -> Double {
  try body()
  var samples: [Double] = []
  samples.reserveCapacity(iterations)
  let clock = ContinuousClock()
  for _ in 0..<iterations {
    let elapsed = try clock.measure(body)
    samples.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
  }
  samples.sort()
  return samples[samples.count / 2]
}

/// Formats seconds with a unit a person reads at a glance.
func formatDuration(_ seconds: Double) -> String {
  if seconds < 1e-3 { return "\(rounded(seconds * 1e6)) µs" }
  if seconds < 1 { return "\(rounded(seconds * 1e3)) ms" }
  return "\(rounded(seconds)) s"
}

func rounded(_ value: Double) -> String {
  let scaled = (value * 10).rounded() / 10
  return scaled == scaled.rounded() ? String(Int(scaled)) : String(scaled)
}

/// Spawns `arguments` (searched on PATH), waits, and returns its exit status and standard output.
func runProcess(_ arguments: [String], discardOutput: Bool = false) throws -> (status: Int32, output: String) {
  var pipeEnds: [Int32] = [0, 0]
  guard pipe(&pipeEnds) == 0 else { throw BenchError("pipe failed") }
  var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  if discardOutput {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
  } else {
    posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
  }
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
  posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { for pointer in argv { free(pointer) } }
  var pid: pid_t = 0
  let spawned = posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ)
  close(pipeEnds[1])
  guard spawned == 0 else { close(pipeEnds[0]); throw BenchError("cannot run \(arguments[0])") }
  var output: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = buffer.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
    if count <= 0 { break }
    output += buffer[0..<count]
  }
  close(pipeEnds[0])
  var status: Int32 = 0
  waitpid(pid, &status, 0)
  return (status, String(decoding: output, as: UTF8.self))
}

/// One run of a child process: wall-clock and CPU (user + system) seconds, and its peak resident set
/// (0 when not asked for or GNU time is missing).
struct Measurement {
  var wall: Double
  var cpu: Double
  var maxRSSKiB: Int
}

/// Runs `command` with `sh -c` and measures it; with `peakMemory`, under GNU time (`/usr/bin/time -f %M`),
/// which reports the peak resident set (and adds its own start-up to the times). Not `wait4`'s own rusage: posix_spawn starts the child with `CLONE_VM`, and at its exec the kernel
/// records the high-water mark of the memory it leaves, which is this benchmark process's; GNU time's
/// child is forked from a small process, so its figure is the measured program's own.
func measuredShell(_ command: String, peakMemory: Bool = false) throws -> Measurement {
  let gnuTime = "/usr/bin/time"
  let haveTime = peakMemory && access(gnuTime, X_OK) == 0
  let report = "/tmp/imagelog-bench-rss-\(getpid())"
  let arguments = (haveTime ? [gnuTime, "-f", "%M", "-o", report] : []) + ["sh", "-c", command]
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { for pointer in argv { free(pointer) } }
  let clock = ContinuousClock()
  let start = clock.now
  var pid: pid_t = 0
  guard posix_spawnp(&pid, arguments[0], nil, nil, &argv, environ) == 0 else { throw BenchError("cannot run \(arguments[0])") }
  var status: Int32 = 0
  var usage = rusage()
  guard wait4(pid, &status, 0, &usage) == pid else { throw BenchError("wait4 failed") }
  let elapsed = clock.now - start
  guard status == 0 else { throw BenchError("\(command): exit status \(status)") }
  var peak = 0
  if haveTime, let file = fopen(report, "r") {
    var line = [CChar](repeating: 0, count: 64)
    if fgets(&line, Int32(line.count), file) != nil {
      peak = Int(String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) ?? 0
    }
    fclose(file)
    unlink(report)
  }
  func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
  return Measurement(wall: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                     cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime), maxRSSKiB: peak)
}

/// Where Scripts/install-test-tools puts the crash-pipeline peers, as the tests find them (`pipelineTool`):
/// `$IMAGELOG_TEST_TOOLS`, else `$XDG_CACHE_HOME/imagelog-test-tools`, else `~/.cache/imagelog-test-tools`.
func pipelineToolsFolder() -> String {
  func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
  if let folder = variable("IMAGELOG_TEST_TOOLS") { return folder }
  if let cache = variable("XDG_CACHE_HOME") { return cache + "/imagelog-test-tools" }
  return (variable("HOME") ?? "/root") + "/.cache/imagelog-test-tools"
}

/// The peer `name` installed there (`bin/NAME`), nil when it is not.
func pipelineToolPath(_ name: String) -> String? {
  let path = pipelineToolsFolder() + "/bin/" + name
  return access(path, X_OK) == 0 ? path : nil
}

/// True when `tool` is on PATH.
func haveTool(_ tool: String) -> Bool {
  (try? runProcess(["sh", "-c", "command -v \(tool)"], discardOutput: true).status) == 0
}

struct BenchError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// Writes the tables, with the command that made them, to `path`.
func writeBenchmarks(_ tables: [BenchmarkTable], to path: String) throws {
  var text = "# Benchmarks\n\nMade by `make bench` (`swift run -c release ImageLogBenchmarks`) on one machine, "
  text += "each imagelog figure measured side by side with its peer in the same run. Medians.\n\n"
  for table in tables { text += table.markdown + "\n" }
  text += designFigures()
  guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
  fputs(text, file)
  fclose(file)
  print(text)
}

/// The heading of BENCHMARKS.md's last section: figures the code's comments point to, measured once
/// when each choice was made (with the commands that measured them), not by `make bench`.
let designFiguresHeading = "## Figures behind design choices"

/// That section as BENCHMARKS.md holds it, carried over by every run so a full `make bench` does not
/// drop it: the figures live in the document, not in this program's source.
func designFigures() -> String {
  guard let file = fopen("BENCHMARKS.md", "r") else { return "" }
  defer { fclose(file) }
  var text = ""
  var line = [CChar](repeating: 0, count: 1 << 16)
  var inSection = false
  while fgets(&line, Int32(line.count), file) != nil {
    let read = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    if read.hasPrefix(designFiguresHeading) { inSection = true }
    if inSection { text += read }
  }
  return text
}

/// Waits until no `imagelog cache-build` runs: the symbol cache's builders a cold run leaves behind, so
/// that they neither run beside the next measurement nor leave the cache half-filled for it.
func awaitCacheBuilders() throws {
  let clock = ContinuousClock()
  let deadline = clock.now + .seconds(300)
  func builderRuns() -> Bool {
    FileSystem.contents("/proc").contains { name in
      guard name.first?.isNumber == true, let bytes = try? readAll("/proc/\(name)/cmdline") else { return false }
      return bytes.split(separator: 0).dropFirst().first.map { Array($0) == Array("cache-build".utf8) } ?? false
    }
  }
  while builderRuns() {
    guard clock.now < deadline else { throw BenchError("an imagelog cache-build still runs after 300 s") }
    usleep(5000)
  }
}
