internal import Glibc
import ImageLog
import ImageReaders

func fileExperiment() {
  let files = elfFiles(under: "/usr/lib/x86_64-linux-gnu")
  var sink = 0
  let stages: [(String, () -> Void)] = [
    ("open+fstat+close", {
      for path in files { if let b = try? FileBytes(path: path) { sink &+= b.count } }
    }),
    ("+ head slice", {
      for path in files {
        guard let b = try? FileBytes(path: path) else { continue }
        b.withRanges { r in if let s = try? r.slice(at: 0, length: min(r.count, 64)) { sink &+= s.count } }
      }
    }),
    ("+ ELFFile(source:)", {
      for path in files {
        guard let b = try? FileBytes(path: path) else { continue }
        b.withRanges { r in if let f = try? ELFFile(source: r) { sink &+= f.sections.count } }
      }
    }),
    ("ELFFile(bytes) from memory only", {}),
  ]
  // preload bytes for parse-only
  var blobs: [[UInt8]] = []
  for path in files.prefix(901) {
    guard let m = try? MappedFile(path: path), m.count < 4_000_000 else { continue }
    blobs.append(m.withReader { r in (try? r.bytes(at: 0, length: r.count)) ?? [] })
  }
  let clock = ContinuousClock()
  for (name, body) in stages where name != "ELFFile(bytes) from memory only" {
    body()
    var best = Duration.seconds(100)
    for _ in 0..<15 { best = min(best, clock.measure(body)) }
    print(name, best)
  }
  let parseOnly = {
    for blob in blobs { if case .elf(let f)? = try? BinaryFile.parse(blob) { sink &+= f.sections.count } }
  }
  var best = Duration.seconds(100)
  for _ in 0..<15 { best = min(best, clock.measure(parseOnly)) }
  print("parse only (\(blobs.count) files in memory)", best)
  print(sink)
}
func runFileExperimentIfAsked() {
  if getenv("FP_EXPERIMENT") != nil { fileExperiment(); exit(0) }
}
