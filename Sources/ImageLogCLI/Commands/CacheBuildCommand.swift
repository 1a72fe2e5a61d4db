#if canImport(Glibc)
internal import Glibc
#endif
import Symbolication

/// `imagelog cache-build`: builds one symbol cache entry, started in the background by a symbolication
/// that found none (see `SymbolCacheSettings.buildElsewhere`), so that run answers from the DWARF at
/// once and the next one from the cache.
///
/// Internal: left out of `imagelog --help`'s list; `imagelog help cache-build` describes it.
struct CacheBuildCommand: Command {
  static let name = "cache-build"
  static let isInternal = true
  static let abstract = "Internal: build the symbol cache entry of one DWARF file (symbolicate starts it in the background)."
  static let usage = "imagelog cache-build --identity <hex> [--arch <name>] [--supplementary <path>] [--wait-fd <fd>] <path>"
  static let helpSections = """
    ARGUMENTS:
      <path>                  The binary or debug file whose DWARF is read.

    OPTIONS:
      --identity <hex>        Its build-id or UUID (lowercase hex), which names the entry.
      --arch <name>           The slice of a universal file.
      --supplementary <path>  Its dwz supplementary file.
      --wait-fd <fd>          Start once this descriptor reads end-of-file (the run that started it
                              holds the other end of the pipe until it exits).
      -h, --help              Show help information.

    The entry goes into the symbol cache folder symbolicate uses ($XDG_CACHE_HOME/imagelog, else
    ~/.cache/imagelog; bounded by IMAGELOG_CACHE_SIZE). Nothing is written when an entry that checks is
    already there.
    """

  var request: SymbolCacheRequest
  var settings: SymbolCacheSettings
  var waitDescriptor: Int32?

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    guard let identity = try scanner.option("--identity") else { throw scanner.usageError("Missing '--identity <hex>'") }
    let architecture = try scanner.option("--arch")
    let supplementary = try scanner.option("--supplementary")
    if let text = try scanner.option("--wait-fd") {
      guard let descriptor = Int32(text), descriptor > 2 else { throw scanner.usageError("'\(text)' is not a descriptor above 2") }
      waitDescriptor = descriptor
    }
    let paths = try scanner.positionals()
    guard paths.count == 1, let path = paths.first else { throw scanner.usageError("Expected one <path>") }
    request = SymbolCacheRequest(path: path, architecture: architecture, supplementaryPath: supplementary, identity: identity)
    let found: SymbolCacheSettings?
    do { found = try SymbolCacheSettings.fromEnvironment() } catch { throw scanner.usageError("\(error)") }
    guard let found else { throw scanner.usageError("Neither XDG_CACHE_HOME nor HOME names a cache folder") }
    settings = found
  }

  func run() throws -> ExitStatus {
    // Behind the run that started it and whatever the user does next: the entry is for later.
    _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
    if let waitDescriptor {
      // Blocks until the starting run has exited (its end of the pipe closed): it keeps both cores.
      var byte: UInt8 = 0
      while read(waitDescriptor, &byte, 1) < 0 && errno == EINTR {}
      close(waitDescriptor)
    }
    do {
      try request.build(into: settings)
      return .success
    } catch {
      printError("imagelog: cache-build: \(error)")
      return .failure
    }
  }

  /// Starts `imagelog cache-build` for `request` in a session of its own, its standard streams on
  /// /dev/null, without waiting for it: the run that asked goes on answering from the DWARF, and the
  /// builder waits for it to exit (the write end of a pipe, close-on-exec, is held until then) before
  /// reading anything. Nothing happens when imagelog's own path cannot be found or the process cannot
  /// be started (the next run asks again).
  static func startInBackground(_ request: SymbolCacheRequest) {
    var arguments = [name, "--identity", request.identity]
    if let architecture = request.architecture { arguments += ["--arch", architecture] }
    if let supplementary = request.supplementaryPath { arguments += ["--supplementary", supplementary] }
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }  // no later child holds the pipe open
    let waitDescriptor: Int32 = 3
    arguments += ["--wait-fd", "\(waitDescriptor)", "--", request.path]
    // The copy of ends[0] as descriptor 3 is not close-on-exec.
    startDetachedImagelog(arguments, passing: (ends[0], as: waitDescriptor))
    close(ends[0])
    // ends[1] stays open until this process exits, on purpose: that is the builder's signal to start.
  }
}
