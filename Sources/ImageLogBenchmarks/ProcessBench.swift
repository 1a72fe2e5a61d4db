internal import CImageLog
internal import Glibc
import ImageLog

// Other processes: `imagelog pid` (ProcessImages.snapshot, called in process) against
// `eu-unstrip -n -p PID` on the same live process, and the cost `imagelog run` adds to a program
// that loads 200 libraries.

func processBenchmarks() throws -> [BenchmarkTable] {
  var tables: [BenchmarkTable] = []
  guard haveTool("cc") else { throw BenchError("cc is needed to build the benchmark programs") }
  let directory = try benchTemporaryDirectory()
  defer { _ = try? runProcess(["rm", "-rf", directory], discardOutput: true) }
  let libraries = try makeManyLibraries(count: 300, in: directory)
  let loader = "\(directory)/load-many"
  try buildLoader(at: loader)

  if haveTool("eu-unstrip") {
    var rows: [[String]] = []
    var targets: [(String, [String])] = []
    if haveTool("python3") {
      targets.append(("python3 with ssl and sqlite3",
                      ["python3", "-c", "import ssl, sqlite3, time; print('ready', flush=True); time.sleep(600)"]))
    }
    targets.append(("C program with 300 dlopened libraries", [loader, "hold"] + libraries))
    for (label, command) in targets {
      let target = try BenchChild(command)
      defer { target.stop() }
      try target.wait(for: "ready")
      let pid = target.pid
      let ours = try ProcessImages.snapshot(of: pid)
      let unstrip = try runProcess(["eu-unstrip", "-n", "-p", String(pid)])
      // eu-unstrip also lists mapped files that are not ELF (locale archives) with no build-id.
      let theirKeys = Set(unstrip.output.split(separator: "\n").map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
        .filter { !$0.hasSuffix(" -") })
      let formatter = ImageFormatter(style: .unstrip)
      let ourKeys = Set(ours.map { formatter.format($0).split(separator: " ").prefix(2).joined(separator: " ") })
      let identical = ourKeys == theirKeys
      let iterations = 20
      let ourTime = try medianSeconds(iterations: iterations) { _ = try ProcessImages.snapshot(of: pid) }
      let theirTime = try medianSeconds(iterations: iterations) {
        _ = try runProcess(["eu-unstrip", "-n", "-p", String(pid)], discardOutput: true)
      }
      rows.append([label, String(ours.count), formatDuration(ourTime), formatDuration(theirTime),
                   "\(rounded(theirTime / ourTime))x", identical ? "yes" : "NO (\(ourKeys.symmetricDifference(theirKeys).count) differ)"])
    }
    tables.append(BenchmarkTable(
      title: "imagelog pid vs eu-unstrip -n -p",
      notes: "`ProcessImages.snapshot(of:)` (what `imagelog pid` calls) against `eu-unstrip -n -p PID` run on the "
        + "same live process, medians of 20. \"Identical\": the same start, size and build-id (with its address) "
        + "for every ELF module eu-unstrip lists. eu-unstrip's time includes starting the tool, which is how it is used.",
      header: ["process", "images", "imagelog pid", "eu-unstrip -n -p", "speed-up", "identical"],
      rows: rows))
  }

  // imagelog run on a program that dlopens 200 libraries, against running it plain. The runs are
  // interleaved (plain, module, imagelog run, ...) so drift on a shared machine hits all three alike.
  let imagelog = benchSiblingExecutable("imagelog")
  let module = benchSiblingExecutable("libImageLogAudit.so")
  if access(imagelog, X_OK) == 0, access(module, R_OK) == 0 {
    let command = [loader, "load"] + Array(libraries.prefix(200))
    let sink = open("/dev/null", O_WRONLY)  // inherited by the audited program: its output descriptor
    defer { close(sink) }
    var environment: [String] = []
    var entry = environ
    while let pointer = entry.pointee { environment.append(String(cString: pointer)); entry += 1 }
    let audited = environment + ["LD_AUDIT=\(module)", "IMAGELOG_AUDIT_FD=\(sink)"]
    // A do-nothing audit module: what the loader itself charges for auditing (loading a module into
    // a namespace of its own, calling the hooks), which no LD_AUDIT module can avoid. It uses nothing
    // from libc, so cc links none; ours links none either (audit.c makes its own system calls).
    let noop = "\(directory)/libnoop-audit.so"
    let noopSource = "#include <link.h>\nunsigned int la_version(unsigned int v) { return v; }\n"
      + "unsigned int la_objopen(struct link_map *m, Lmid_t l, uintptr_t *c) { return 0; }\n"
    try benchWriteFile(noop + ".c", Array(noopSource.utf8))
    guard try runProcess(["cc", "-O2", "-shared", "-fPIC", "-D_GNU_SOURCE", "-o", noop, noop + ".c"], discardOutput: true).status == 0 else {
      throw BenchError("cc failed on the no-op audit module")
    }
    let noopAudited = environment + ["LD_AUDIT=\(noop)"]
    let iterations = 31
    let measured = try interleavedMediansWithCPU([
      { _ = try benchSpawn(command) },
      { _ = try benchSpawn(command, environment: noopAudited) },
      // As under `imagelog run`: the module formats every event and writes it to /dev/null.
      { _ = try benchSpawn(command, environment: audited) },
      { _ = try benchSpawn([imagelog, "run", "--output", "/dev/null", "--"] + command) },
      { _ = try benchSpawn([imagelog, "run", "--output", "/dev/null", "--", "/bin/true"]) },
      { _ = try benchSpawn([imagelog, "--version"]) },
      { _ = try benchSpawn(["/bin/true"], environment: environment) },
    ], iterations: iterations)
    let p = measured[0], n = measured[1], m = measured[2], r = measured[3]
    let events = try runProcess([imagelog, "run", "--output", "/dev/stdout", "--"] + command)
    let count = events.output.split(separator: "\n").count
    func slowdown(_ value: Double, _ base: Double) -> String { "\(rounded((value / base - 1) * 100))%" }
    func row(_ name: String, _ value: (wall: Double, cpu: Double), compared: Bool) -> [String] {
      [name, formatDuration(value.wall), compared ? slowdown(value.wall, p.wall) : "-",
       formatDuration(value.cpu), compared ? slowdown(value.cpu, p.cpu) : "-"]
    }
    tables.append(BenchmarkTable(
      title: "imagelog run: cost on a program loading 200 libraries",
      notes: "A C program that dlopens 200 tiny libraries and exits. Rows, interleaved, medians of \(iterations): "
        + "plain; with a do-nothing audit module (cc-built, `la_version` and `la_objopen` only): the loader's own "
        + "price for auditing (neither it nor ours brings a libc into the audit namespace); with our "
        + "audit module as `imagelog run` sets it up (`LD_AUDIT`, each event formatted and written to /dev/null with one "
        + "write(2)): what the module costs; the whole `imagelog run --output /dev/null`, which adds imagelog's own "
        + "exec before it executes the program in its own process (the loader, libc and libm, then run's C from "
        + "imagelog's first constructor: the Swift runtime never starts); and "
        + "`imagelog run -- /bin/true` for the fixed part alone, next to what it is made of: `imagelog --version` "
        + "(imagelog's own start-up and exit, nothing run) and `/bin/true` plain. \(count) events per run. The CPU "
        + "columns are the process's user + system time (the children's rusage): on a busy machine they move less than "
        + "the wall time.",
      header: ["run", "time", "slowdown", "CPU", "CPU slowdown"],
      rows: [row("plain", p, compared: false),
             row("with a do-nothing audit module", n, compared: true),
             row("with the audit module", m, compared: true),
             row("imagelog run", r, compared: true),
             row("imagelog run -- /bin/true (fixed cost)", measured[4], compared: false),
             row("imagelog --version (start-up and exit)", measured[5], compared: false),
             row("/bin/true", measured[6], compared: false)]))
  }
  return tables
}

/// The executable `name` built next to this benchmark binary (.build/release/).
func benchSiblingExecutable(_ name: String) -> String {
  var buffer = [CChar](repeating: 0, count: 4097)
  let count = readlink("/proc/self/exe", &buffer, 4096)
  let me = String(decoding: buffer[0..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  return String(me[..<(me.lastIndex(of: "/") ?? me.startIndex)]) + "/" + name
}

func benchTemporaryDirectory() throws -> String {
  var template = Array("/tmp/imagelog-bench-process-XXXXXX".utf8CString)
  guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
    throw BenchError("mkdtemp failed")
  }
  return String(cString: made)
}

/// `count` distinct tiny shared libraries: one is compiled, the rest are copies with their build-id
/// patched (so each has its own identity, as real libraries do) — compiling hundreds would take minutes.
func makeManyLibraries(count: Int, in directory: String) throws -> [String] {
  let source = "\(directory)/tiny.c"
  let template = "\(directory)/libtiny.so"
  let script = "printf 'int tiny(void) { return 42; }\\n' > \(source) && cc -shared -fPIC -Wl,--build-id=sha1 -o \(template) \(source)"
  guard try runProcess(["sh", "-c", script], discardOutput: true).status == 0 else { throw BenchError("cc failed") }
  let notes = try runProcess(["readelf", "-n", template]).output
  guard let hex = notes.split(separator: "\n").first(where: { $0.contains("Build ID:") })?.split(separator: " ").last,
        hex.count == 40 else { throw BenchError("no build-id in \(template)") }
  var id: [UInt8] = []
  var index = hex.startIndex
  while index < hex.endIndex {
    let next = hex.index(index, offsetBy: 2)
    id.append(UInt8(hex[index..<next], radix: 16) ?? 0)
    index = next
  }
  var bytes = try benchReadFile(template)
  guard let offset = (0...(bytes.count - id.count)).first(where: { Array(bytes[$0..<($0 + id.count)]) == id }) else {
    throw BenchError("build-id bytes not found in \(template)")
  }
  var paths: [String] = []
  for number in 0..<count {
    bytes[offset + 16] = UInt8(number & 0xff)
    bytes[offset + 17] = UInt8(number >> 8)
    let path = "\(directory)/libtiny\(number).so"
    try benchWriteFile(path, bytes)
    paths.append(path)
  }
  return paths
}

/// The loader program: `load LIB...` dlopens every library and exits; `hold LIB...` dlopens them,
/// prints "ready" and sleeps.
func buildLoader(at path: String) throws {
  let source = """
    #include <dlfcn.h>
    #include <stdio.h>
    #include <string.h>
    #include <unistd.h>
    int main(int argc, char **argv) {
      for (int i = 2; i < argc; i++) if (!dlopen(argv[i], RTLD_NOW)) { fprintf(stderr, "%s\\n", dlerror()); return 1; }
      if (argc > 1 && strcmp(argv[1], "hold") == 0) { printf("ready\\n"); fflush(stdout); for (;;) pause(); }
      return 0;
    }
    """
  try benchWriteFile(path + ".c", Array(source.utf8))
  guard try runProcess(["cc", "-O2", "-o", path, path + ".c", "-ldl"], discardOutput: true).status == 0 else {
    throw BenchError("cc failed on the loader")
  }
}

func benchReadFile(_ path: String) throws -> [UInt8] {
  guard let file = fopen(path, "rb") else { throw BenchError("cannot read \(path)") }
  defer { fclose(file) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let count = fread(&buffer, 1, buffer.count, file)
    if count <= 0 { break }
    bytes += buffer[0..<count]
  }
  return bytes
}

func benchWriteFile(_ path: String, _ bytes: [UInt8]) throws {
  guard let file = fopen(path, "wb") else { throw BenchError("cannot write \(path)") }
  defer { fclose(file) }
  guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw BenchError("short write to \(path)") }
}

/// A long-running program on a stdout pipe, killed and reaped by `stop`.
final class BenchChild {
  let pid: pid_t
  private let output: Int32
  private var stopped = false

  init(_ arguments: [String]) throws {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { throw BenchError("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
    posix_spawn_file_actions_addclose(&actions, ends[0])
    posix_spawn_file_actions_addclose(&actions, ends[1])
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var child: pid_t = 0
    let status = posix_spawnp(&child, arguments[0], &actions, nil, &argv, environ)
    close(ends[1])
    guard status == 0 else { close(ends[0]); throw BenchError("cannot start \(arguments[0])") }
    pid = child
    output = ends[0]
  }

  func wait(for line: String) throws {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while read(output, &byte, 1) == 1 {
      if byte == 0x0A {
        if String(decoding: bytes, as: UTF8.self) == line { return }
        bytes = []
      } else {
        bytes.append(byte)
      }
    }
    throw BenchError("\(pid) ended before printing \(line)")
  }

  func stop() {
    guard !stopped else { return }
    stopped = true
    kill(pid, SIGKILL)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    close(output)
  }
}

/// Runs `arguments` with `environment` (default: ours) and standard input from the file `input` (default:
/// ours), output discarded; returns the wait status.
func benchSpawn(_ arguments: [String], environment: [String]? = nil, input: String? = nil) throws -> Int32 {
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  if let input { posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0) }
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
  var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
  defer { for pointer in argv { free(pointer) } }
  var envp: [UnsafeMutablePointer<CChar>?] = (environment ?? []).map { strdup($0) } + [nil]
  defer { for pointer in envp { free(pointer) } }
  var pid: pid_t = 0
  let spawned = environment == nil
    ? posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ)
    : posix_spawnp(&pid, arguments[0], &actions, nil, &argv, &envp)
  guard spawned == 0 else { throw BenchError("cannot run \(arguments[0])") }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
  return status
}
