#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources

/// `imagelog minidump PID|CORE -o FILE`: a running process or a core, written as a minidump.
struct MinidumpCommand: Command {
  static let name = "minidump"
  static let abstract = "Write a minidump of a running process (stopped for an instant) or of a core file."
  static let usage = "imagelog minidump (<pid> | <core>) -o <file> [--environ]"
  static let helpSections = """
    ARGUMENTS:
      <pid>                   A running process: every thread is stopped at once (as pid --threads
                              stops them), its registers and stack copied, and every thread let go; the
                              process runs on, nothing changed.
      <core>                  An ELF core file (- reads one from standard input): its threads'
                              registers and stacks, its images.

    OPTIONS:
      -o, --output <file>     Where to write the dump (written whole to a temporary file beside it,
                              then renamed: a reader never sees half a dump), mode 0600: it holds
                              the threads' stacks. A stream (/dev/stdout, a pipe) is written in place.
      --environ               Also keep the process's environment (/proc/PID/environ). Left out by
                              default: environments hold secrets (tokens, passwords).
      -h, --help              Show help information.

    WHAT IS IN IT:
      The streams Breakpad's Linux writer writes: ThreadList (each thread's registers and stack),
      ModuleList (each image with its GNU build-id as a CodeView record, so symbol servers match it
      by debug id), SystemInfo, MiscInfo (the process id), the Linux streams (/proc/PID/maps,
      status, cmdline, auxv, /etc/lsb-release, /proc/cpuinfo; for a core, its auxiliary vector and
      command line), and ThreadNames; for a core that crashed, the Exception stream (signal, code,
      address, thread). Read it with imagelog symbolicate, minidump-stackwalk, or any crash
      pipeline that takes minidumps (Sentry, Socorro, Backtrace).
    """

  var target: String
  var output: String
  var environment: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    guard let output = try scanner.option("-o", "--output") else { throw scanner.usageError("Missing '-o <file>'") }
    self.output = output
    environment = scanner.flag("--environ")
    let rest = try scanner.positionals()
    guard let first = rest.first else { throw scanner.usageError("Missing expected argument '<pid> | <core>'") }
    guard rest.count == 1 else { throw scanner.usageError("Unexpected argument '\(rest[1])'") }
    target = first
  }

  func run() throws -> ExitStatus {
    var snapshot: ProcessSnapshot
    var status = ExitStatus.success
    if let pid = Int32(target), pid > 0, access(target, F_OK) != 0 {
      do {
        let capture = try ProcessSnapshot.capture(pid: pid, linuxFiles: true, environment: environment)
        for failure in capture.failures { printError("imagelog: \(failure)") }
        if !capture.failures.isEmpty { status = .failure }
        snapshot = capture.snapshot
      } catch {
        printError("imagelog: \(error)")
        return .failure
      }
    } else {
      let opened: CrashFile
      do { opened = try CrashFile.open(target) } catch {
        // Text that is no crash is no core either.
        printError("imagelog: " + (error.kind == .text ? "\(target): neither a process ID nor a core file" : "\(error)"))
        return .failure
      }
      guard case .core(let dump) = opened else {
        printError("imagelog: \(target): " + (opened.kind == .minidump ? "a minidump already, not a core file" : "neither a process ID nor a core file"))
        return .failure
      }
      let problems: [String]
      (snapshot, problems) = ProcessSnapshot.core(dump, stacks: true)
      for problem in problems { printError("imagelog: \(target): \(problem)") }
    }
    do {
      let bytes = try snapshot.minidumpBytes()
      let streamed = try writeNamedOutput(output, bytes, permissions: 0o600)  // stacks and, with --environ, secrets
      let summary = "\(TextEscaping.escaped(output)): \(snapshot.threads.count) threads, \(snapshot.images.count) modules, "
        + "\(bytes.count) bytes"
      // Written to a stream (`-o /dev/stdout | gzip`), the dump is all that goes down it.
      if streamed { printError(summary) } else { printOutput(summary) }
    } catch {
      printError("imagelog: \(output): \(error)")
      return .failure
    }
    return status
  }
}
