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
  text += designFigures
  guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
  fputs(text, file)
  fclose(file)
  print(text)
}

/// Figures the code's comments point to (BENCHMARKS.md): measured once when each choice was made, and
/// carried over by every run so a full `make bench` does not drop them.
let designFigures = #"""
## Figures behind design choices (measured once, not re-run by make bench)

Comments in the code point here ("BENCHMARKS.md") instead of quoting figures: the code says why, this file says how much.

- Reader threads for `imagelog file` (FileCommand+Parallel.swift): over the 901 ELF files of Debian's library folder on 2 processors, 3 threads took 13.4 ms, 2 threads 17.2 ms, 1 thread 20.8 ms (medians of 31 runs).
- FileBytes first reads (FileBytes.swift): over the same 901 files, about 2.5 reads and 12 KiB a file with 4 KiB at the start and 4 KiB at the end.
- Stored `Result` in MachOFile / FatFile.Slice (MachOFile.swift): the runtime's metadata instantiation for a generic type with an `Error` requirement scans the conformance records, about 100,000 instructions the first time a value is copied or destroyed; `file --uuid` over the Mach-O fixtures went from 1.55M to 1.34M instructions, 1665 to 1500 µs (medians of 301 spawns).
- CommandLine without the runtime's ArgvGrabber (CImageLogMain/argv.c): its static initializer costs about 100,000 instructions and a /proc/self/maps read at every start; `imagelog --version` went from 1499 to 1345 µs, `file --uuid` over the Mach-O fixtures from 2788 to 2371 µs (medians of 301 spawns).
- The audit module without the Swift runtime (CImageLogAudit/audit.c): with swiftrt.o's runtime references left in, LD_AUDIT brought the Swift runtime, libstdc++ and a second libm into the audit namespace, about 5 ms at each start of the audited program.
- The audit module without libc (CImageLogAudit/audit.c): a module that links libc makes the loader map, relocate and initialize a second libc in the audit namespace; `/bin/true` under our module went from 0.84 to 0.61 ms of CPU (plain 0.53 ms, under a do-nothing module 0.55 ms), and on the 200-library program the module's cost from +7.1% to +4.3% (do-nothing module +1.8%); 2,540 to 2,060 instructions per event (callgrind). Interleaved medians of 61–81 runs.
- `imagelog run` from the executable's first constructor (CImageLogMain/run.c), before the Swift runtime starts: `imagelog run --output /dev/null -- /bin/true` went from 1.70 to 1.45 ms of CPU with the old module (1.27 ms with the module without libc); a minimal C program that does the same from its constructor takes 1.13 ms, so what is left is the loader and kernel starting any dynamically linked executable. Interleaved medians of 61–81 runs.
- No dictionary or set keyed by a new type on `pid --threads`' main path (PageCachedMemory's sorted pages, Symbolicator's files by image index): the first `[K: V]` or `Set<K>` of a key type in a run makes the Swift runtime search every conformance record of the executable for `K: Hashable`, 110,000–145,000 instructions each, and the page faults of reading the records. Without three such first uses (keys UInt64, Int and Int8), `valgrind --tool=callgrind .build/release/imagelog pid --threads PID --no-lines` on Tests/Programs/process-threads.c with 10 threads went from 6.25M to 5.76M instructions. The compiler's `-disable-concrete-type-metadata-mangled-name-accessors` would drop the runtime's decoding of the remaining generic types too: it measured no faster after that change, and it would put unsafe flags on the library targets.
- Hot functions laid out together (Scripts/make-hot-sections, Sources/ImageLogCLI/StaticLink/hot-sections.txt, gold's --section-ordering-file): `perf stat -e page-faults .build/release/imagelog pid --threads PID --no-lines` on the same 10-thread process, 271 to 254 faults (in the executable's own code, by `perf record -e page-faults -d`: 74 to 48); `imagelog --version` 125 to 117.
"""#
