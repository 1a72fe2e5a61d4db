#if canImport(Glibc)
internal import Glibc
#endif
internal import CImageLogMain
import ImageLog

/// `imagelog run -- COMMAND`: every image COMMAND's dynamic loader adds and removes.
///
/// imagelog prepares the environment (the audit module in `LD_AUDIT`, the output descriptor, the
/// style) and executes the command in its own process: the program keeps imagelog's PID, parent,
/// signals and exit status, and the module (Sources/CImageLogAudit) writes each event itself.
///
/// All of it, the arguments included, is C (Sources/CImageLogMain/run.c), run from the executable's
/// first constructor before the Swift runtime starts: nothing imagelog does before the exec is of any
/// use to the command, so none of it may cost. `imagelog run --help` and `imagelog help run` come here.
struct RunCommand: Command {
  static let name = "run"
  static let abstract = "Run a command and report every image its loader adds and removes (LD_AUDIT)."
  static let usage = String(cString: il_run_usage)
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
      --crash-dir <directory> Catch the program's crashes (see CRASHES): each one leaves a
                              symbolicated report (with the crash's signature) and a minidump in
                              <directory>, PROGRAM.PID.YYYYMMDDTHHMMSSZ.crash and .dmp. The
                              directory is made (mode 0755, and its parents) when missing.
      --crash-timeout <seconds>
                              How long a crashing program waits for imagelog to capture it before
                              it writes a shorter report itself (default: 30; with --crash-wait,
                              symbolication included).
      --crash-wait            Keep a crashing program until its report is final (symbolicated)
                              and its minidump written, so that when it has exited the files in
                              <directory> are the last ones (see CRASHES).
      --crash-document        With --crash-dir: also write each crash's document, PROGRAM.PID.TIME.json
                              (imagelog symbolicate --format json's, with the crash's signature),
                              before the symbolicated report.
      --upload-url <url>      With --crash-dir: once a crash's files are written, send the crashes
                              waiting in <directory> to <url> ('imagelog upload', started in a
                              process of its own: the program's exit never waits for the network).
      --unloaded-history <count>
                              How many images the program removed (dlclose) a crash report lists
                              under Unloaded Images (0 to 64; default: 16).
      -h, --help              Show help information.

    NOTES:
      imagelog puts its rtld-audit module (libImageLogAudit.so next to imagelog, or
      PREFIX/lib/imagelog/) in LD_AUDIT and then becomes the command: same PID, same parent, same
      signals, same exit status; nothing runs beside it. The module writes one line per event, with
      one write(2) each, to a descriptor imagelog opened (the file, or a copy of standard error at a
      high number, left open across exec); the program's own streams are untouched.
      Events start with the executable, the dynamic loader and the vDSO, before main runs; an image
      is added when the loader has mapped it (before its constructors) and removed by dlclose;
      a Removed line ends with how long the image was loaded, '(loaded for D ms)'
      ("loadedForNanoseconds" in JSON). Images still loaded when the program exits are not
      reported as removed.
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

    CRASHES:
      With --crash-dir, as glibc's catchsegv did, the audit module installs a handler for SIGSEGV,
      SIGBUS, SIGILL, SIGFPE, SIGABRT and SIGTRAP before the program's own code runs (the program's
      main thread gets an alternate signal stack, so a stack overflow there is caught too). At a crash
      it starts imagelog (imagelog capture-crash, an internal subcommand) without fork and lets it
      trace the program (PR_SET_PTRACER, for Yama's ptrace_scope 1); imagelog stops every thread
      with ptrace, threads that block every signal included, unwinds each (the crashed one from the
      registers the handler recorded) and writes the report, under a temporary name first so no
      reader sees half of it. Then the program dies of its own signal (exit status and core dumps as
      without imagelog) while imagelog writes the minidump and puts the symbolicated report (file:line,
      inlined functions) in place of the first, atomically. That first report ends with the line
      "-- provisional: being symbolicated, to be replaced"; the one that replaces it, with
      "-- symbolicated by imagelog: ...". With --crash-wait the program dies only once the
      symbolicated report and the minidump are in place: when it has exited, the report is final (a
      script that runs it needs no waiting of its own). When imagelog cannot
      capture it (ptrace refused by a seccomp filter, a timeout), the module says why on standard
      error and writes a shorter report itself: every thread listed, the crashed one unwound in
      process, its registers, Binary Images. Both reports, and the minidump (UnloadedModuleList),
      list the last images the program removed (dlclose; --unloaded-history) under Unloaded Images, with their
      build-ids, when they went and by which thread; a frame whose code is no longer mapped is named
      after the image it was in ("(unloaded 3.200 ms before the crash by thread 4)").
      A handler the program installs itself replaces
      imagelog's; the Swift runtime leaves imagelog's in place (its backtracer then stays out).
      Threads the program creates have no alternate stack of imagelog's: a stack overflow on one
      of them ends the program with no report. Images are still logged (--output /dev/null to not).
    """

  /// The constructor ran `run` before main (argv.c), so this is reached only if it did not (or found the
  /// crash directory missing): the same C then.
  init(_ scanner: inout ArgumentScanner) throws(UsageError) {}

  func run() throws -> ExitStatus {
    // The crash directory il_run found missing (in the constructor, or here): made as core-handler makes
    // its --output-dir (mode 0755, and its parents), then il_run again.
    var status = Int32(IL_RUN_MAKE_CRASH_DIRECTORY)
    for _ in 0..<2 where status == Int32(IL_RUN_MAKE_CRASH_DIRECTORY) {
      if let missing = il_run_crash_directory_to_make() {
        let path = String(cString: missing)
        do {
          _ = try CrashFolder(path: path)
        } catch {
          printError("imagelog: \(path): cannot write crash reports there: \(error.reason)")
          return .failure
        }
      }
      status = il_run(CommandLine.argc, CommandLine.unsafeArgv, environ)
    }
    return status == ExitStatus.usage.code ? .usage : .failure
  }
}
