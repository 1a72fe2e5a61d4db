#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog

/// `imagelog run -- COMMAND`: every image COMMAND's dynamic loader adds and removes.
///
/// imagelog prepares the environment (the audit module in `LD_AUDIT`, the output descriptor, the
/// style) and executes the command in its own process: the program keeps imagelog's PID, parent,
/// signals and exit status, and the module (Sources/CImageLogAudit) writes each event itself.
struct RunCommand: Command {
  static let name = "run"
  static let abstract = "Run a command and report every image its loader adds and removes (LD_AUDIT)."
  static let usage = "imagelog run [--timing] [--output <file>] [--format <style>] [--full-build-ids] [--no-follow] -- <command> [<argument> ...]"
  static let helpSections = """
    ARGUMENTS:
      <command> [<argument> ...]
                              The program to run, searched on PATH, and its arguments.

    OPTIONS:
      --timing                Add to each image when it was added (ms since imagelog started the
                              program) and how long the loader took to find, open and map it (from
                              the start of its search). Relocation and constructors come after; they
                              show as the gap before the next image's time.
      --output <file>         Write the events to <file> instead of standard error.
      --format <style>        logger, crash, unstrip or json (default: logger).
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      --no-follow             Report only the command's own process (and the children it forks
                              without executing anything). By default, as LD_DEBUG does, programs
                              it executes are reported too (a wrapper script's real program, a
                              shell's commands).
      -h, --help              Show help information.

    NOTES:
      imagelog puts its rtld-audit module (libImageLogAudit.so next to imagelog, or
      PREFIX/lib/imagelog/) in LD_AUDIT and then becomes the command: same PID, same parent, same
      signals, same exit status; nothing runs beside it. The module writes one line per event, with
      one write(2) each, to a descriptor imagelog opened (the file, or a copy of standard error at a
      high number, left open across exec); the program's own streams are untouched.
      Events start with the executable, the dynamic loader and the vDSO, before main runs; an image
      is added when the loader has mapped it (before its constructors) and removed by dlclose.
      Images still loaded when the program exits are not reported as removed.
      Lines from any process other than the command's own start with [pid N] (JSON: a "pid"
      field): forked children, and the programs executed (unless --no-follow). Followed programs
      see LD_AUDIT and IMAGELOG_AUDIT_* in their environment, as they see LD_DEBUG.
      Paths are escaped in the text styles: \\\\, \\n, \\r, \\t, \\xHH for other control bytes and
      bytes that are not UTF-8, \\u{HH} for C1 controls.
      Set-user-ID and set-group-ID programs (and programs with file capabilities) run with LD_AUDIT
      ignored by the loader: imagelog says so, and they report nothing (nor do the programs they
      execute). A program that closes every descriptor it did not open (a daemon) closes the
      module's too: its later events, and those of the programs it executes, are lost, and nothing
      else changes. Statically linked programs have no loader and report nothing.
    """

  var arguments: [String]
  var timing: Bool
  var follow: Bool
  var outputPath: String?
  var formatter: ImageFormatter

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    timing = scanner.flag("--timing")
    follow = !scanner.flag("--no-follow")
    outputPath = try scanner.option("--output", "-o", command: Self.name, usage: Self.usage)
    formatter = try parseFormatter(&scanner, command: Self.name, usage: Self.usage, default: .logger)
    arguments = try scanner.positionals(command: Self.name, usage: Self.usage)
    guard !arguments.isEmpty else {
      throw UsageError(message: "Missing expected argument '<command>'", commandName: Self.name, usage: Self.usage)
    }
  }

  func run() throws -> ExitStatus {
    let command = arguments[0]
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    let module: String
    switch Self.findModule() {
    case .success(let found): module = found
    case .failure(let searched):
      printError("imagelog: cannot find the audit module \(Self.moduleFileName) (looked at \(searched.searched.joined(separator: ", "))); "
                 + "build it with 'swift build --product ImageLogAudit' or install with 'make install'")
      return .failure
    }
    let executable: String
    switch Self.resolve(command) {
    case .found(let path): executable = path
    case .notFound:
      printError("imagelog: \(command): command not found")
      return .failure
    case .notExecutable(let path):
      printError("imagelog: \(command): cannot run \(path): \(String(cString: strerror(EACCES)))")
      return .failure
    }
    if Self.isSecureExecution(executable) {
      printError("imagelog: \(command): set-user-ID or set-group-ID program: the dynamic loader ignores LD_AUDIT, so no images can be reported")
    }

    // The module's descriptor: the file, or a copy of standard error, at a high number the program
    // will not get from open(2) by accident, and open across exec (only this one).
    var opened: Int32 = 2
    if let outputPath {
      opened = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
      guard opened >= 0 else {
        printError("imagelog: \(outputPath): cannot open: \(String(cString: strerror(errno)))")
        return .failure
      }
    }
    let output = Self.highDescriptor(copying: opened)
    guard output >= 0 else {
      printError("imagelog: cannot keep a descriptor for the events: \(String(cString: strerror(errno)))")
      return .failure
    }
    var info = stat()
    guard fstat(output, &info) == 0 else {
      printError("imagelog: cannot keep a descriptor for the events: \(String(cString: strerror(errno)))")
      return .failure
    }

    var added = [
      "IMAGELOG_AUDIT_FD=\(output)", "IMAGELOG_AUDIT_FILE=\(info.st_dev):\(info.st_ino)",
      "IMAGELOG_AUDIT_FORMAT=\(formatter.style.rawValue)", "IMAGELOG_AUDIT_PID=\(getpid())",
      "IMAGELOG_AUDIT_MODULE=\(module)",
      // A monotonic clock is non-negative: the conversions are exact.
      "IMAGELOG_AUDIT_START_NS=\(UInt64(start.tv_sec) * 1_000_000_000 + UInt64(start.tv_nsec))",
    ]
    if timing { added.append("IMAGELOG_AUDIT_TIMING=1") }
    if formatter.fullBuildIDs { added.append("IMAGELOG_AUDIT_FULL_BUILD_IDS=1") }
    if !follow { added.append("IMAGELOG_AUDIT_NO_FOLLOW=1") }
    var environment: [String] = []
    var existingAudit = ""
    var entry = environ
    while let pointer = entry.pointee {
      let variable = String(cString: pointer)
      entry += 1
      if variable.hasPrefix("IMAGELOG_AUDIT_") { continue }
      if variable.hasPrefix("LD_AUDIT=") { existingAudit = String(variable.dropFirst(9)); continue }
      environment.append(variable)
    }
    environment.append("LD_AUDIT=" + (existingAudit.isEmpty ? module : "\(module):\(existingAudit)"))
    environment += added

    let code = Self.execute(executable, arguments: arguments, environment: environment)
    // Still here: the exec failed, and the program never ran.
    close(output)
    printError("imagelog: \(command): cannot run \(executable): \(String(cString: strerror(code)))")
    return .failure
  }

  /// The module's file name, as SwiftPM builds the `ImageLogAudit` product and `make install` copies it.
  static let moduleFileName = "libImageLogAudit.so"

  /// The module next to the running executable (`.build/debug/`), else in `PREFIX/lib/imagelog/` for
  /// an executable in `PREFIX/bin/`; or the places looked at.
  static func findModule() -> Result<String, ModuleNotFound> {
    var buffer = [CChar](repeating: 0, count: 4097)
    let count = readlink("/proc/self/exe", &buffer, 4096)
    let real = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    var candidates: [String] = []
    if let slash = real.lastIndex(of: "/") {
      let directory = String(real[..<slash])
      candidates.append("\(directory)/\(moduleFileName)")
      if let parentSlash = directory.lastIndex(of: "/") {
        candidates.append("\(directory[..<parentSlash])/lib/imagelog/\(moduleFileName)")
      }
    }
    for candidate in candidates where access(candidate, R_OK) == 0 { return .success(candidate) }
    return .failure(ModuleNotFound(searched: candidates))
  }

  struct ModuleNotFound: Error { var searched: [String] }

  enum Resolution: Equatable {
    case found(String)
    case notFound
    /// A file by that name exists but may not be executed (no execute permission, a directory).
    case notExecutable(String)
  }

  /// The file `command` runs, as execvp(3) looks for it: itself when it contains a `/`, else the
  /// first executable regular file on `PATH`. A file that is there but not executable is reported
  /// as such, not as missing.
  static func resolve(_ command: String) -> Resolution {
    func check(_ candidate: String) -> Resolution {
      var info = stat()
      guard stat(candidate, &info) == 0 else { return .notFound }
      guard info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 else { return .notExecutable(candidate) }
      return .found(candidate)
    }
    if command.contains("/") { return check(command) }
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
    var denied: Resolution = .notFound
    for directory in path.split(separator: ":", omittingEmptySubsequences: false) {
      let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
      switch check(candidate) {
      case .found(let found): return .found(found)
      case .notExecutable(let file) where denied == .notFound:
        var info = stat()
        if stat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG { denied = .notExecutable(file) }
      default: break
      }
    }
    return denied
  }

  /// True when running `path` changes the user or group ID (set-user-ID or set-group-ID to someone
  /// else): the kernel sets `AT_SECURE`, and the loader then ignores `LD_AUDIT`.
  static func isSecureExecution(_ path: String) -> Bool {
    var info = stat()
    guard stat(path, &info) == 0 else { return false }
    return (info.st_mode & S_ISUID != 0 && info.st_uid != getuid())
      || (info.st_mode & S_ISGID != 0 && info.st_gid != getgid())
  }

  /// A copy of `descriptor` near the top of the descriptor limit (below 1024, where select(2) still
  /// works), not close-on-exec; `descriptor` itself is closed unless it is standard error.
  static func highDescriptor(copying descriptor: Int32) -> Int32 {
    var limit = rlimit()
    let ceiling = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int32(clamping: min(limit.rlim_cur, 1024)) : 256
    var copy: Int32 = -1
    for floor in [ceiling - 1, ceiling / 2, 10] where floor > 2 {
      copy = fcntl(descriptor, F_DUPFD, floor)
      if copy >= 0 { break }
    }
    if descriptor != 2 { close(descriptor) }
    return copy
  }

  /// execve(2) with `arguments` and `environment`; returns its errno when it fails.
  static func execute(_ path: String, arguments: [String], environment: [String]) -> Int32 {
    func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
      var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
      defer { for pointer in pointers { free(pointer) } }
      pointers.append(nil)
      return body(pointers)
    }
    return withCStrings(arguments) { argv in
      withCStrings(environment) { envp in
        _ = execve(path, argv, envp)
        return errno
      }
    }
  }
}
