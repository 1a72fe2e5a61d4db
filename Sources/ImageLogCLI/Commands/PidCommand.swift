#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Symbolication
import Snapshot
import SnapshotFormatting
import SnapshotSources

/// `imagelog pid PID`: the images of another running process. `imagelog pid --threads PID`: every
/// thread's stack, as a crash report of the live process.
struct PidCommand: Command {
  static let name = "pid"
  static let abstract = "List the images of a running process, or with --threads the stack of each of its threads."
  static let usage = "imagelog pid [--threads] <pid> [--format <style>] [--full-build-ids] [--no-symbolicate] "
    + "[--search <path> ...] [--symbols <dir> ...] [--demangle <style>] [--no-demangle] [--no-lines] [--no-system-debug] [--no-cache]"
  static let helpSections = """
    ARGUMENTS:
      <pid>                   The process to inspect.

    OPTIONS:
      --format <style>        logger, crash, unstrip or json (default: crash). With --threads: report
                              (default: imagelog's crash-report layout), json (the shape of
                              imagelog symbolicate --format json, with "threads") or stackwalk-json.
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      --threads               Stop the process for an instant, read every thread's registers and stack,
                              let it go, and print each thread's backtrace (see THREADS).
      --no-symbolicate        With --threads: addresses only (image + offset), to symbolicate later with
                              imagelog symbolicate (in json: each frame's status "not-looked-up").
      --search <path>         With --threads: a folder or file holding binaries and debug files. Repeatable.
      --symbols <dir>         With --threads: a Breakpad symbol store, as for symbolicate. Repeatable.
      --demangle <style>      With --threads: simplified (default), full or none.
      --no-demangle           Same as --demangle none.
      --no-lines              With --threads: symbol tables only, no file:line from DWARF.
      --no-system-debug       With --threads: do not look in /usr/lib/debug, debuginfod caches or servers.
      --no-cache              With --threads: neither read nor write the symbol cache (see symbolicate).
      -h, --help              Show help information.

    THREADS:
      imagelog pid --threads PID writes the report imagelog's crash handler writes (Process, Path,
      Date/Time, OS Version, Threads, and Stopped: how long the process was stopped), then each thread
      with its name (/proc/PID/task/TID/comm), tid and state (the letter of /proc/PID/task/TID/stat
      just before the stop) and its frames, then Binary Images; symbolicated as imagelog symbolicate
      does it (the same matching by build-id, DWARF lines and inlined frames). Every thread is stopped
      at once with PTRACE_SEIZE and PTRACE_INTERRUPT (no SIGSTOP), its registers and the live part of
      its stack are copied, and every thread is let go; the stacks are then unwound from the copies
      (call frame information, then frame pointers, then stack scanning, frames marked "(frame
      pointer)" or "(stack scan)"). If imagelog is killed meanwhile, the kernel lets the threads go.
      A thread that does not stop within 100 ms (uninterruptible sleep) or exits meanwhile is listed
      with the reason. Needs ptrace access: the same user with /proc/sys/kernel/yama/ptrace_scope 0
      (1: only descendants), or CAP_SYS_PTRACE; and no debugger already attached. Exit status 1 when
      the process cannot be stopped, or a thread that still runs could not be read.

    NOTES:
      Needs the access ptrace(2) calls PTRACE_MODE_READ for /proc/PID/maps: the same user (and, to
      read memory, /proc/sys/kernel/yama/ptrace_scope 0 unless the process is your child), root, or
      CAP_SYS_PTRACE. When refused, the error says which check failed: the uid, capabilities the process
      holds that imagelog lacks, a process that is not dumpable, or ptrace_scope, and whether
      CAP_SYS_PTRACE would do. When the memory cannot be read, headers come from the files
      (/proc/PID/map_files, /proc/PID/root). Images are listed in address order, as eu-unstrip -n -p.
      Only images mapped now are listed: the kernel keeps no record of those unloaded before, so pid
      cannot list them. A process that runs imagelog inside it (CrashReporter, run --crash-dir) keeps
      its last removed images, but only its crash reports list them; 'imagelog watch' and 'imagelog run'
      print removals as they happen. An image whose file was deleted or replaced on disk after it was
      loaded ("(deleted)" in /proc/PID/maps) is described from memory, and with --threads symbolicated
      from the loaded file, opened through /proc/PID/map_files (root or CAP_SYS_ADMIN: the kernel
      allows no one else), or else from a file with its build-id; a note says which, and that the file
      on disk is another build.
    """

  var pid: Int32
  var formatter = ImageFormatter(style: .crash)
  /// `--threads`: the stacks, not the image list.
  var threads = false
  var symbolicating = true
  var style: ReportStyle = .report
  var options = SymbolicationOptions()

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    threads = scanner.flag("--threads")
    if threads {
      if let format = try scanner.option("--format") {
        guard let chosen = ReportStyle(rawValue: format), chosen != .crash else {
          throw scanner.usageError("Unknown format '\(format)' for --threads (report, json or stackwalk-json)")
        }
        style = chosen
      }
      symbolicating = !scanner.flag("--no-symbolicate")
      options = try parseSymbolicationOptions(&scanner)
    } else {
      formatter = try parseFormatter(&scanner, default: .crash)
    }
    pid = try parsePIDArgument(&scanner)
  }

  func run() throws -> ExitStatus {
    if threads { return runThreads() }
    let images: [Image]
    do {
      images = try ProcessImages.snapshot(of: pid)
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    var text = ""
    for image in images { text += formatter.format(image) + "\n" }
    if !text.isEmpty { text.removeLast() }
    printOutput(text)
    return .success
  }

  /// `--threads`: stop, copy, let go; then unwind the copies, symbolicate and write the report.
  func runThreads() -> ExitStatus {
    let capture: ProcessSnapshot.Capture
    do {
      capture = try ProcessSnapshot.capture(pid: pid)
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    var snapshot = capture.snapshot
    for failure in capture.failures { printError("imagelog: \(failure)") }
    let status: ExitStatus = capture.failures.isEmpty ? .success : .failure
    // The vDSO, in no file, and a file deleted or replaced since it was loaded are in the snapshot: the
    // capture copied the one and holds the other open through the process's mapping.
    writeSnapshot(&snapshot, style: style, symbolicate: symbolicating, options: options)
    return status
  }
}


/// A PID argument: a positive decimal number.
/// The one positional argument of `imagelog pid` and `imagelog watch`: a process ID.
func parsePIDArgument(_ scanner: inout ArgumentScanner) throws(UsageError) -> Int32 {
  let rest = try scanner.positionals()
  guard let first = rest.first else {
    throw scanner.usageError("Missing expected argument '<pid>'")
  }
  guard rest.count == 1 else {
    throw scanner.usageError("Unexpected argument '\(rest[1])'")
  }
  return try parsePID(first, scanner)
}

func parsePID(_ text: String, _ scanner: ArgumentScanner) throws(UsageError) -> Int32 {
  guard let pid = Int32(text), pid > 0 else {
    throw scanner.usageError("'\(text)' is not a process ID")
  }
  return pid
}

/// `--format <style>` and `--full-build-ids` for the process commands, as `imagelog list` reads them.
func parseFormatter(_ scanner: inout ArgumentScanner, default fallback: ImageFormatStyle) throws(UsageError) -> ImageFormatter {
  let styleName = try scanner.option("--format") ?? fallback.rawValue
  guard let style = ImageFormatStyle(rawValue: styleName) else {
    let choices = ImageFormatStyle.allCases.map(\.rawValue).joined(separator: ", ")
    throw scanner.usageError("Unknown format '\(styleName)' (expected one of: \(choices))")
  }
  return ImageFormatter(style: style, fullBuildIDs: scanner.flag("--full-build-ids"))
}
