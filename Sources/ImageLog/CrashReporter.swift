internal import CImageLog
internal import Glibc
import ImageReaders
import Synchronization

/// An opt-in crash handler that writes imagelog's crash report, and the crash-time image table it
/// and any other signal handler can write.
///
/// ```swift
/// import ImageLog
/// try CrashReporter.install(writingTo: "/var/tmp/myprog.crash")
/// ```
///
/// On SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT or SIGTRAP the handler (on an alternate signal
/// stack) appends a report to the file opened at install time, in Apple's layout: a header
/// (process, path, pid, UTC time, OS, signal and `si_code` names, fault address, crashed thread's
/// index and id, thread count), every thread of the process with its name
/// (`/proc/self/task/TID/comm`) and frames (`N   image   0xADDR 0xLOAD + OFFSET`, marked
/// `(frame pointer)` or `(stack scan)` when found that way), the crashed thread's registers, and the
/// `Binary Images` in the `crash` style. `imagelog symbolicate` reads it. Each other thread is
/// asked with a real-time signal (SIGPROF when it blocks that one, as libdispatch's workers do) to
/// unwind itself; one that does not answer within a bounded wait (longer while it is still runnable:
/// crash_internal.h's `IL_ANSWER_BUDGET_MS` and `IL_ANSWER_LIMIT_MS`), or that sleeps blocking every such
/// signal, is listed with the reason instead of frames. The handler uses only
/// async-signal-safe system calls: no allocation, no locks, no stdio; it works while any thread
/// holds the allocator's lock. The fault address is 0 for a signal that was sent (`abort`, `kill`:
/// `si_code` <= 0). A second thread crashing meanwhile waits (bounded) for the first
/// report, then goes to the previous handler. A report descriptor that fails (a pipe nobody reads)
/// costs the report, not the process's own exit signal.
///
/// Chaining: afterwards the handler puts back the handlers it found at install (Swift's
/// backtracer, a debugger's or sanitizer's, the default) and re-raises the signal (a fault is
/// simply retried; `abort`, `raise` and traps are sent again with the same `siginfo`), so the exit
/// status, core dumps and other reporters behave as without it.
///
/// Swift's backtracer: the Swift runtime installs its handlers before `main`
/// (`SWIFT_BACKTRACE=enable=yes`, the default on Linux). Install after that (any time in `main`)
/// and imagelog's report is written first, then Swift's backtracer runs as usual and prints its
/// own backtrace to stderr. With `SWIFT_BACKTRACE=enable=no` the default action follows instead.
/// A handler someone installs after ours replaces ours; if it chains (as Swift's does), ours runs.
///
/// The frame walk follows frame pointers (each read through a reader that cannot fault), and
/// across code built without them (most of glibc) scans the stack for return addresses that
/// follow a call instruction, up to 128 frames; see `Sources/CImageLog/crash_internal.h` for the design (which file does what).
public enum CrashReporter {
  /// Why `install` failed: the report path (if any) and the system call that failed.
  public struct InstallError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The report path, or nil when installing on a descriptor.
    public var path: String?
    /// What failed: "cannot open", "cannot install", with its `errno`.
    public var system: SystemError

    package init(path: String?, _ system: SystemError) {
      self.path = path
      self.system = system
    }

    /// The path, when there is one, then what failed.
    public var description: String { path.map { "\($0): \(system)" } ?? system.description }
  }

  private static let tableObservers = Mutex<[ObservationToken]?>(nil)

  /// Starts keeping the crash-time image table current: every loaded image now, and every image
  /// added or removed later (through `LoadedImages.onAdd`/`onRemove`). Idempotent; `install` calls
  /// it. Call it yourself to use `writeBinaryImages(toFileDescriptor:)` from your own handler.
  public static func startImageTable() {
    tableObservers.withLock { tokens in
      guard tokens == nil else { return }
      let added = LoadedImages.onAdd { image in
        crashLine(image) { line in
          let buildID = image.buildID?.bytes ?? []
          _ = PathBytes.withCString(image.path) { path in
            buildID.withUnsafeBufferPointer { id in
              il_crash_table_add_image(image.loadAddress, image.loadRange.upperBound, image.textRange.lowerBound,
                                       image.textRange.upperBound, image.name, line, path, id.baseAddress, id.count)
            }
          }
        }
      }
      let removed = LoadedImages.onRemove { image in
        _ = il_crash_table_remove(image.loadAddress)
      }
      tokens = [added, removed]
    }
  }

  /// The image's Binary Images line (the `crash` style, no newline), NUL-terminated, written by the C the
  /// audit module of `imagelog run` writes its lines with (CImageLogImage.h), so a crash report and a run
  /// describe an image with the same bytes; tests hold both against `ImageFormatter`.
  static func crashLine(_ image: Image, _ body: (UnsafePointer<CChar>) -> Void) {
    var buffer = [CChar](repeating: 0, count: 8 * Int(PATH_MAX) + 512)  // a path escaped twice at 4 bytes a byte
    let buildID = image.buildID?.bytes ?? []
    PathBytes.withCString(image.path) { path in
      image.architecture.withCString { architecture in
        buildID.withUnsafeBufferPointer { idBytes in
          var described = il_image(path: path, architecture: architecture, load_bias: image.loadBias,
                                   load_address: image.loadAddress, text_end: image.textRange.upperBound,
                                   load_end: image.loadRange.upperBound,
                                   file_mapped_end: image.fileMappedRange.upperBound,
                                   build_id: idBytes.isEmpty ? nil : idBytes.baseAddress, build_id_size: idBytes.count,
                                   build_id_address: image.buildIDAddress ?? 0, is_main: image.isMainExecutable ? 1 : 0)
          var options = il_line_options()
          options.style = Int32(IL_STYLE_CRASH)
          options.without_event = 1
          buffer.withUnsafeMutableBufferPointer { storage in
            // One byte kept for the NUL: the line is at most capacity bytes.
            var line = il_line(text: storage.baseAddress, capacity: storage.count - 1, used: 0, truncated: 0)
            let length = il_image_line(&line, &described, &options)
            storage[length] = 0
            body(UnsafePointer(storage.baseAddress!))
          }
        }
      }
    }
  }

  /// How many images removed (`dlclose`) before a crash its report lists under `Unloaded Images` (and
  /// names in a frame whose code is no longer mapped): at most 64, 16 unless set, 0 for none. The report's
  /// `Image Timeline` keeps twice as many events: the images added after `install` and those removed. The
  /// history is static memory (512 bytes an image, 128 an event): nothing is allocated when an image comes
  /// or goes or at the crash. Setting it forgets the images and events kept so far. Returns false above 64.
  @discardableResult
  public static func keepUnloadedImages(_ count: Int) -> Bool {
    guard let count = UInt32(exactly: count) else { return false }
    return il_crash_keep_unloaded(count) == 0
  }

  /// The number of images in the crash-time table (0 before `startImageTable`).
  package static var imageTableCount: Int { il_crash_table_count() }

  /// Writes the crash-time image table to `fileDescriptor`, one `crash`-style Binary Images line
  /// per image, each ending in a newline. Async-signal-safe: only `write(2)`, no allocation, no
  /// lock, and never a half-updated table. Returns false when a write failed.
  @discardableResult
  public static func writeBinaryImages(toFileDescriptor fileDescriptor: Int32) -> Bool {
    il_crash_write_binary_images(fileDescriptor) >= 0
  }

  /// Installs the crash handler, appending reports to `path` (created with mode 0600 if needed, never
  /// opened through a symbolic link; opened now, so a crash needs no `open`). Calling it again switches the report file (the
  /// previous descriptor stays open: a crash on another thread may be writing to it).
  ///
  /// Throws `InstallError` (`PATH: cannot open: REASON`) when the file cannot be opened.
  public static func install(writingTo path: String) throws(InstallError) {
    let fileDescriptor = PathBytes.withCString(path, il_crash_open_report)
    guard fileDescriptor >= 0 else { throw InstallError(path: path, .current("cannot open")) }
    do {
      try install(fileDescriptor: fileDescriptor)
    } catch {
      close(fileDescriptor)
      throw InstallError(path: path, error.system)
    }
  }

  /// Installs the crash handler, writing reports to `fileDescriptor` (for example 2, standard
  /// error). The descriptor must stay open. Also starts the image table and gives the calling
  /// thread an alternate signal stack.
  public static func install(fileDescriptor: Int32) throws(InstallError) {
    startImageTable()
    let status = il_crash_install(fileDescriptor)
    guard status == 0 else { throw InstallError(path: nil, SystemError("cannot install", errno: status)) }
  }

  /// The default of `install(helper:crashDirectory:timeoutMilliseconds:fallbackReportPath:)`'s wait for
  /// the helper (`CImageLogCrashHelper.h`'s `IL_HELPER_DEFAULT_TIMEOUT_MS`: Swift's backtracer's default).
  public static let defaultHelperTimeoutMilliseconds = 30_000

  /// Installs the crash handler with out-of-process capture: on a crash it starts `helper` (the
  /// `imagelog` executable) as `imagelog capture-crash`, lets it trace the process
  /// (`PR_SET_PTRACER`, for Yama's `ptrace_scope` 1) and waits for it, at most `timeoutMilliseconds`.
  /// The helper stops every thread with ptrace (threads that block every signal included), unwinds
  /// them from outside (the crashed one from the registers the handler recorded) and writes the report
  /// into `crashDirectory` as `PROGRAM.PID.YYYYMMDDTHHMMSSZ.crash` (`CrashFolder`'s names), atomically (a temporary name, then
  /// linked to its own); then the process dies of its own signal, as without imagelog, while the helper
  /// writes the minidump beside it (`.dmp`) and renames the symbolicated report (file:line, inlined
  /// functions) over the first one.
  ///
  /// The helper is started with a raw `clone` (no `fork`: its handlers take the allocator's lock) and
  /// an argument list laid out now: `helper` and `crashDirectory` are made absolute now, not at the
  /// crash. When the helper writes no report (missing, not executable, failed, crashed, still running
  /// at the timeout: killed), the handler says so on standard error and writes its in-process report
  /// (the one `install(writingTo:)` writes) to `fallbackReportPath`, or, when nil, into
  /// `crashDirectory` under the helper's name. The other handler options (chaining, Swift's
  /// backtracer) are `install(writingTo:)`'s.
  ///
  /// Throws `InstallError` when a path cannot be resolved or the handler cannot be installed.
  public static func install(helper: String, crashDirectory: String,
                             timeoutMilliseconds: Int = defaultHelperTimeoutMilliseconds,
                             fallbackReportPath: String? = nil) throws(InstallError) {
    guard let helperPath = FileSystem.realPath(helper) else {
      throw InstallError(path: helper, .current("cannot resolve the helper"))
    }
    guard let directory = FileSystem.realPath(crashDirectory) else {
      throw InstallError(path: crashDirectory, .current("cannot resolve the crash directory"))
    }
    let status = PathBytes.withCString(helperPath) { helperPath in
      PathBytes.withCString(directory) { il_crash_set_helper(helperPath, $0, UInt64(max(0, timeoutMilliseconds))) }
    }
    guard status == 0 else { throw InstallError(path: helper, SystemError("cannot lay out the helper", errno: status)) }
    if let fallbackReportPath {
      try install(writingTo: fallbackReportPath)
    } else {
      startImageTable()
      let installed = il_crash_install(-1)
      guard installed == 0 else { throw InstallError(path: nil, SystemError("cannot install", errno: installed)) }
    }
  }

  /// Gives the calling thread its own alternate signal stack, so that a stack overflow on it is
  /// reported too (each thread needs one; `install` prepares the thread that calls it).
  public static func prepareCurrentThread() throws(InstallError) {
    let status = il_crash_prepare_thread()
    guard status == 0 else { throw InstallError(path: nil, SystemError("cannot allocate an alternate signal stack", errno: status)) }
  }

  /// Puts back the signal handlers found by `install`. The image table stays current.
  public static func uninstall() {
    _ = il_crash_uninstall()
  }
}
