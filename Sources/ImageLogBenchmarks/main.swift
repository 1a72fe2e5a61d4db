// `make bench`: every benchmark measures imagelog and a real peer side by side in this one run,
// and the tables go to BENCHMARKS.md. Each area adds its function to `benchmarks`.
let benchmarks: [(name: String, run: () throws -> [BenchmarkTable])] = [
  ("snapshot and observers", snapshotBenchmark),
  ("file", fileBenchmark),
  ("symbolicate", symbolicateBenchmarks),
  ("Mach-O UUID and __TEXT vs llvm-otool", machOBenchmark),
  ("other processes", processBenchmarks),
]

var tables: [BenchmarkTable] = []
for benchmark in benchmarks {
  printProgress("bench: \(benchmark.name)")
  do { tables += try benchmark.run() } catch { printProgress("bench: \(benchmark.name) failed: \(error)") }
}
try writeBenchmarks(tables, to: "BENCHMARKS.md")
