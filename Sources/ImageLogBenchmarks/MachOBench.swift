internal import Glibc
import ImageLog
import ImageReaders

/// UUID and `__TEXT` of every slice of the Mach-O fixtures (and of any files named in
/// `IMAGELOG_BENCH_MACHO`, colon-separated), read by imagelog and by `llvm-otool-14 -l` over the same
/// files. The answers are compared slice by slice before anything is timed.
func machOBenchmark() throws -> [BenchmarkTable] {
  let otool = "llvm-otool-14"
  guard haveTool(otool), haveTool("llvm-objdump-14") else {
    printProgress("bench: \(otool) not installed; Mach-O benchmark skipped")
    return []
  }
  var paths = listFiles("Tests/ImageReadersTests/Fixtures/macho").filter { isMachO($0) }
  if let extra = getenv("IMAGELOG_BENCH_MACHO") {
    paths += String(cString: extra).split(separator: ":").map(String.init).filter { isMachO($0) }
  }
  guard !paths.isEmpty else { throw BenchError("no Mach-O files found (run from the package root)") }

  // Same answers: imagelog's UUID and __TEXT range per slice against otool -l's (its --arch=all spelling,
  // since llvm-otool-14 shows only the host slice of a universal file).
  let ours = try paths.flatMap { try readSlices($0) }
  let theirs = try otoolSlices(paths)
  let sliceCount = ours.count
  guard ours == theirs else {
    let mismatch = zip(ours, theirs).first { $0 != $1 }.map { "ours \($0.0), otool \($0.1)" } ?? "\(ours.count) vs \(theirs.count) slices"
    throw BenchError("imagelog and llvm-otool disagree: \(mismatch)")
  }

  // The contenders take turns, round after round, so a change in machine load hits them alike.
  let iterations = 15
  let cli = ".build/release/imagelog"
  let haveCLI = access(cli, X_OK) == 0 && (try? runProcess([cli, "file", "--uuid"] + paths, discardOutput: true).status) == 0
  var contenders: [() throws -> Void] = [
    { _ = try runProcess([otool, "-l"] + paths, discardOutput: true) },
    { for path in paths { _ = try readSlices(path) } },
    { for path in paths { _ = try readSlicesInRanges(path) } },
  ]
  if haveCLI {
    contenders += [
      { _ = try runProcess([cli, "file", "--uuid"] + paths, discardOutput: true) },
      // Start-up alone (no file read), so the process rows can be read per file.
      { _ = try runProcess([cli, "--version"], discardOutput: true) },
      { _ = try runProcess([otool, "--version"], discardOutput: true) },
    ]
  }
  let medians = try interleavedMedians(contenders, iterations: iterations)
  let (peer, library, ranged) = (medians[0], medians[1], medians[2])
  var rows = [
    ["llvm-otool-14 -l (one process, all files)", formatDuration(peer), "1x"],
    ["ImageReaders in process (map + parse + summary)", formatDuration(library), rounded(peer / library) + "x"],
    ["ImageReaders in process, ranges as `imagelog file` reads them (FileBytes + parse(source:) + summary)",
     formatDuration(ranged), rounded(peer / ranged) + "x"],
  ]
  if haveCLI {
    let (process, ourStart, peerStart) = (medians[3], medians[4], medians[5])
    rows.insert(["imagelog file --uuid (one process, all files)", formatDuration(process), rounded(peer / process) + "x"],
                at: 1)
    rows.append(["start-up only: llvm-otool-14 --version / imagelog --version",
                 formatDuration(peerStart) + " / " + formatDuration(ourStart), rounded(peerStart / ourStart) + "x"])
  }
  return [BenchmarkTable(
    title: "Mach-O: UUID and __TEXT of every slice",
    notes: "\(paths.count) Mach-O files (\(sliceCount) slices: thin, FAT_MAGIC and FAT_MAGIC_64) from "
      + "Tests/ImageReadersTests/Fixtures/macho plus IMAGELOG_BENCH_MACHO. Same answers checked first: every "
      + "slice's LC_UUID and __TEXT vmaddr/vmsize equal what llvm-otool -l prints. Goal: at least 10x llvm-otool. "
      + "With this few files a process row is mostly start-up (last row): llvm-otool loads LLVM, imagelog the Swift "
      + "runtime; the in-process rows are the reading itself (a private mapping of each whole file, or the pread calls of `imagelog file`: each header, the load commands and the code signature). Medians of \(iterations) interleaved rounds.",
    header: ["reader", "median of \(iterations)", "speed-up"],
    rows: rows)]
}

/// One slice's answer: architecture-independent so both sides compare in file order.
private struct SliceAnswer: Equatable, CustomStringConvertible {
  var uuid: String
  var textAddress: UInt64
  var textSize: UInt64
  var description: String { "\(uuid) __TEXT 0x\(hexDigits(textAddress))+0x\(hexDigits(textSize))" }
}

private func readSlices(_ path: String) throws -> [SliceAnswer] {
  let file = try MappedFile(path: path)
  return try file.withReader { reader throws(FormatError) in
    try BinaryFile.parse(reader).slices.map {
      SliceAnswer(uuid: $0.buildID?.uuid ?? "", textAddress: $0.textVMRange.lowerBound,
                  textSize: UInt64($0.textVMRange.count))
    }
  }
}

/// `readSlices` from the ranges the readers ask for (pread), as `imagelog file` reads a file.
private func readSlicesInRanges(_ path: String) throws -> [SliceAnswer] {
  let file = try FileBytes(path: path)
  return try file.withRanges { ranges throws(FormatError) in
    try BinaryFile.parse(source: ranges).slices.map {
      SliceAnswer(uuid: $0.buildID?.uuid ?? "", textAddress: $0.textVMRange.lowerBound,
                  textSize: UInt64($0.textVMRange.count))
    }
  }
}

/// UUID and __TEXT per slice from `llvm-otool -l` output (objdump's all-slices spelling of it).
private func otoolSlices(_ paths: [String]) throws -> [SliceAnswer] {
  var answers: [SliceAnswer] = []
  for path in paths {
    let output = try runProcess(["llvm-objdump-14", "--macho", "--private-headers", "--non-verbose", "--arch=all", path]).output
    var current: SliceAnswer?
    var inText = false
    for line in output.split(separator: "\n") {
      let words = line.split(separator: " ")
      if line == "Mach header" {
        if let slice = current { answers.append(slice) }
        current = SliceAnswer(uuid: "", textAddress: 0, textSize: 0)
      } else if words.first == "segname" {
        // An object file's one unnamed segment holds __TEXT,__text: imagelog's summary uses it as the text.
        inText = (words.count > 1 && words[1] == "__TEXT") || (words.count == 1 && current?.textSize == 0)
      } else if words.first == "cmd" || words.first == "sectname" {
        inText = false
      } else if inText, words.count == 2, words[0] == "vmaddr" {
        current?.textAddress = UInt64(words[1].dropFirst(2), radix: 16) ?? 0
      } else if inText, words.count == 2, words[0] == "vmsize" {
        current?.textSize = UInt64(words[1].dropFirst(2), radix: 16) ?? 0
      } else if words.count == 2, words[0] == "uuid" {
        current?.uuid = String(words[1])
      }
    }
    if let slice = current { answers.append(slice) }
  }
  return answers
}

private func isMachO(_ path: String) -> Bool {
  guard let file = fopen(path, "rb") else { return false }
  defer { fclose(file) }
  var magic: UInt32 = 0
  guard fread(&magic, 4, 1, file) == 1 else { return false }
  return [0xFEED_FACE, 0xFEED_FACF, 0xCEFA_EDFE, 0xCFFA_EDFE, 0xBEBA_FECA, 0xBFBA_FECA].contains(magic)
}

/// Regular files under `folder`, recursively, in name order.
private func listFiles(_ folder: String) -> [String] {
  guard let directory = opendir(folder) else { return [] }
  var names: [String] = []
  while let entry = readdir(directory) {
    let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    if !name.hasPrefix(".") { names.append(name) }
  }
  closedir(directory)
  var files: [String] = []
  for name in names.sorted() {
    let path = folder + "/" + name
    var info = stat()
    guard stat(path, &info) == 0 else { continue }
    if info.st_mode & S_IFMT == S_IFDIR { files += listFiles(path) } else if info.st_mode & S_IFMT == S_IFREG { files.append(path) }
  }
  return files
}
