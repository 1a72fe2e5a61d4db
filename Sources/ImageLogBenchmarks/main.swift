// `make bench`: every benchmark measures imagelog and a real peer side by side in this one run,
// and the tables go to BENCHMARKS.md. Each area adds its function to `benchmarks`.
internal import Glibc

// `ImageLogBenchmarks dwarf-lookup FILE`: the child process the DWARF benchmark times (DWARFBench.swift).
if CommandLine.arguments.count == 3 && CommandLine.arguments[1] == "dwarf-lookup" {
  exit(dwarfLookupWorker(CommandLine.arguments[2]))
}

let benchmarks: [(name: String, run: () throws -> [BenchmarkTable])] = [
  ("snapshot and observers", snapshotBenchmark),
  ("file", fileBenchmark),
  ("symbolicate", symbolicateBenchmarks),
  ("many reports at once (symbolicate --output-dir)", manyReportsBenchmark),
  ("dwarf lines and inlines vs llvm-symbolizer", dwarfBenchmarks),
  ("symbol cache vs llvm-symbolizer and SymCache", symbolCacheBenchmark),
  ("imagelog symbols vs dump_syms", symbolsBenchmark),
  ("Mach-O UUID and __TEXT vs llvm-otool", machOBenchmark),
  ("other processes", processBenchmarks),
  ("crash report of every thread vs Swift's backtracer", crashBenchmark),
  ("crash report with the image history", crashHistoryBenchmark),
  ("crash capture from outside vs Crashpad and Swift's backtracer", captureBenchmark),
  ("pid --threads vs eu-stack", threadsBenchmarks),
  ("minidump read vs minidump-stackwalk, written vs eu-stack, sizes vs Crashpad", minidumpBenchmarks),
  (".sym files read by symbolicate vs minidump-stackwalk", symbolFileReadingBenchmarks),
  ("worker thread start", workerStartBenchmark),
  ("triage of many crashes", triageBenchmark),
]

// The symbol cache of every imagelog the benchmarks start: a fresh folder of this run, not the user's, so
// that no figure depends on what an earlier run left there (each area that reads DWARF says whether it
// measures with the cache or --no-cache). The pipeline peers are still found where the tests find them.
if getenv("IMAGELOG_TEST_TOOLS") == nil { setenv("IMAGELOG_TEST_TOOLS", pipelineToolsFolder(), 1) }
let benchCache = "/tmp/imagelog-bench-xdg-\(getpid())"
mkdir(benchCache, 0o700)
setenv("XDG_CACHE_HOME", benchCache, 1)

// IMAGELOG_BENCH_ONLY=file (a part of an area's name) runs that area alone and writes BENCHMARKS-partial.md,
// leaving BENCHMARKS.md, which is always one full run, untouched.
let only = getenv("IMAGELOG_BENCH_ONLY").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
var tables: [BenchmarkTable] = []
for benchmark in benchmarks where only.map({ benchmark.name.contains($0) }) ?? true {
  printProgress("bench: \(benchmark.name)")
  do { tables += try benchmark.run() } catch { printProgress("bench: \(benchmark.name) failed: \(error)") }
  try? awaitCacheBuilders()  // none of an area's builders runs beside the next area
}
_ = try? runProcess(["rm", "-rf", benchCache], discardOutput: true)
try writeBenchmarks(tables, to: only == nil ? "BENCHMARKS.md" : "BENCHMARKS-partial.md")
