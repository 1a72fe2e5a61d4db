#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageLogSymbolication
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Synchronization

/// `imagelog pid PID`: the images of another running process. `imagelog pid --threads PID`: every
/// thread's stack, as a crash report of the live process.
struct PidCommand: Command {
  static let name = "pid"
  static let abstract = "List the images of a running process, or with --threads the stack of each of its threads."
  static let usage = "imagelog pid [--threads] <pid> [--format <style>] [--full-build-ids] [--no-symbolicate] "
    + "[--search <path> ...] [--demangle <style>] [--no-demangle] [--no-lines] [--no-system-debug]"
  static let helpSections = """
    ARGUMENTS:
      <pid>                   The process to inspect.

    OPTIONS:
      --format <style>        logger, crash, unstrip or json (default: crash). With --threads: report
                              (default: imagelog's crash-report layout) or json (the shape of
                              imagelog symbolicate --format json, with "threads").
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      --threads               Stop the process for an instant, read every thread's registers and stack,
                              let it go, and print each thread's backtrace (see THREADS).
      --no-symbolicate        With --threads: addresses only (image + offset), to symbolicate later with
                              imagelog symbolicate (in json: each frame's status "not-looked-up").
      --search <path>         With --threads: a folder or file holding binaries and debug files. Repeatable.
      --demangle <style>      With --threads: simplified (default), full or none.
      --no-demangle           Same as --demangle none.
      --no-lines              With --threads: symbol tables only, no file:line from DWARF.
      --no-system-debug       With --threads: do not look in /usr/lib/debug, debuginfod caches or servers.
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
          throw scanner.usageError("Unknown format '\(format)' for --threads (report or json)")
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

  /// `--threads`: stop, copy, let go; then unwind the copies, write the report and symbolicate it.
  func runThreads() -> ExitStatus {
    // The files to symbolicate with are found and read on a second thread: their search is most of
    // symbolication's time for a few frames. It starts while the threads are stopped, with the files
    // most frames are in; the others come with the stacks.
    let prefetch = symbolicating ? FilePrefetch(of: pid, options: options) : nil
    let capture: ProcessSnapshot.Capture
    do {
      capture = try ProcessSnapshot.capture(pid: pid)
    } catch {
      prefetch?.finish()
      printError("imagelog: \(error)")
      return .failure
    }
    var snapshot = capture.snapshot
    prefetch?.unwound(capture.stacks, images: snapshot.images.compactMap(\.loaded))
    for failure in capture.failures { printError("imagelog: \(failure)") }
    let status: ExitStatus = capture.failures.isEmpty ? .success : .failure
    if prefetch == nil && style == .report {
      writeOutput(snapshot.imagelogReportText())
      return status
    }
    let crashReport = snapshot.flatReport()
    let locator = prefetch?.finish()
    let result = locator.map { Symbolicator.symbolicate(crashReport, options: options, locator: $0) }
      ?? Symbolicator.unsymbolicated(crashReport)
    var last: UInt8?
    if style == .report {
      snapshot.take(result)
      var text = snapshot.imagelogReportText() + result.summary()
      last = text.utf8.last
      text.withUTF8 { writeOutput(UnsafeRawBufferPointer($0)) }
    } else {
      result.write(style) { chunk in
        last = chunk.last
        writeOutput(chunk)
      }
    }
    if last != UInt8(ascii: "\n") { writeOutput("\n") }
    // The files the locator mapped and the tables it read are left to the process's exit, which drops
    // them all at once: unmapping and freeing them one by one here would be work for nothing.
    _ = locator.map { Unmanaged.passRetained($0) }
    return status
  }

  /// Finds, on a thread of its own, the files symbolication will read for the images of `pid` that
  /// frames are in, and their symbols for those frames: the locator keeps what it found and read for
  /// `symbolicate`. While the caller stops and copies the threads, it reads the image list itself and
  /// looks for the program's file and the C library's (where threads waiting in a system call stopped),
  /// until `unwound` gives it the stacks and the images after the stop; then it looks for the other
  /// images frames are in and reads the symbols. The vDSO is in no file: its symbols come from the
  /// target's memory (a few pages), read there too.
  final class FilePrefetch: @unchecked Sendable {
    // Made and used by the worker until `finish` joins it, then the caller's alone; made by `init` when
    // no thread could be started.
    private var madeLocator: DebugFileLocator?
    private var locator: DebugFileLocator { madeLocator! }  // set before any use: see init
    private var worker: WorkerThread?
    private let pid: Int32
    // True once the vDSO's copy is the locator's (it answers again for every image when that changes).
    private var readVDSO = false
    // Written by `unwound` before it posts the semaphore; read by the worker after its wait.
    private var stacks: [[UnwoundFrame]] = []
    private var images: [Image] = []
    private var handedOver = false
    private let stacksReady = Atomic<Bool>(false)
    // Set by the worker as the last thing it does with the locator.
    private let searchDone = Atomic<Bool>(false)
    // Who reads the symbols once the stacks are here: `searching` while the worker's early search
    // uses the locator, then `waiting`; the worker moves it on to `readByWorker`, or `finish` to
    // `readByCaller` (each with a compare-and-exchange, so only one of them reads).
    private let phase = Atomic<Int>(Phase.searching)
    private enum Phase {
      static let searching = 0, waiting = 1, readByWorker = 2, readByCaller = 3
    }
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(of pid: Int32, options: SymbolicationOptions) {
      self.pid = pid
      sem_init(semaphore, 0, 0)
      // With one processor the early search would only slow the stop and the unwinding.
      let early = WorkerThread.processorCount > 1
      worker = WorkerThread.start { [self] in
        madeLocator = Symbolicator.locator(forOneReport: options)
        if early, let images = try? ProcessImages.snapshot(of: pid) {
          readVDSO(images)
          for image in images where Self.isLikely(image) {
            guard !stacksReady.load(ordering: .acquiring) else { break }  // the stacks tell which are needed
            locator.prepareSymbols(ThreadsReport.reportImage(image), architecture: nil, offsets: [])
          }
        }
        phase.store(Phase.waiting, ordering: .releasing)
        // Woken from the semaphore, the worker is often put on the processor of the thread that posts
        // it, to run once that thread blocks or its time slice ends (BENCHMARKS.md, "A worker thread's
        // start while its maker works"): with a processor to itself it watches for the stacks instead,
        // yielding, for at most `watchNanoseconds`, then waits.
        let deadline = monotonicNanoseconds() + Self.watchNanoseconds
        while early, !stacksReady.load(ordering: .acquiring), monotonicNanoseconds() < deadline { sched_yield() }
        while sem_wait(semaphore) != 0 {}  // EINTR: wait again
        guard phase.compareExchange(expected: Phase.waiting, desired: Phase.readByWorker, ordering: .acquiringAndReleasing)
          .exchanged else { return }  // `finish` read them
        readSymbols()
        searchDone.store(true, ordering: .releasing)
      }
      if worker == nil { madeLocator = Symbolicator.locator(forOneReport: options) }  // the work will be done here
    }

    /// How long the worker watches for the stacks before it waits for them: longer than unwinding
    /// takes for most processes.
    static let watchNanoseconds = 20_000_000

    /// How long `finish` watches for the worker's end before it waits for it: longer than reading
    /// symbol tables takes once the stacks are unwound, not DWARF's line tables (which take longer
    /// than a wake-up costs).
    static let finishWatchNanoseconds = 2_000_000

    deinit {
      sem_destroy(semaphore)
      semaphore.deallocate()
    }

    /// The images most frames are in: the program, and the C library, where threads waiting in a
    /// system call stopped. A guess: a wrong one costs time, not answers.
    static func isLikely(_ image: Image) -> Bool {
      image.isMainExecutable || image.name.hasPrefix("libc.so") || image.name.hasPrefix("libc-")
        || image.name.hasPrefix("ld-musl")
    }

    /// Gives the worker the unwound stacks and the images after the stop (once; `finish` gives it none
    /// if this was not called).
    func unwound(_ stacks: [[UnwoundFrame]], images: [Image]) {
      guard !handedOver else { return }
      handedOver = true
      self.stacks = stacks
      self.images = images
      guard worker != nil else { return readSymbols() }  // no thread to be had: the work, here and now
      stacksReady.store(true, ordering: .releasing)
      sem_post(semaphore)
    }

    /// Waits for the search to end and returns the locator.
    @discardableResult
    func finish() -> DebugFileLocator {
      unwound([], images: [])
      // A worker that has not taken up the stacks since they were given (it was not given a processor
      // meanwhile) has done with the locator: the symbols are read here instead of waiting for it.
      if worker != nil,
         phase.compareExchange(expected: Phase.waiting, desired: Phase.readByCaller, ordering: .acquiringAndReleasing).exchanged {
        readSymbols()
        worker?.detach()
        worker = nil
        return locator
      }
      // Asleep in pthread_join, this thread would be woken when the worker has exited, often only once
      // its processor is given back to it (as for the worker woken from the semaphore, above). It
      // watches for the worker's last write instead, for at most `finishWatchNanoseconds`, and lets
      // the worker exit unjoined.
      let deadline = monotonicNanoseconds() + Self.finishWatchNanoseconds
      while worker != nil, !searchDone.load(ordering: .acquiring), monotonicNanoseconds() < deadline { sched_yield() }
      if searchDone.load(ordering: .acquiring) { worker?.detach() } else { worker?.join() }
      worker = nil
      return locator
    }

    /// Gives the locator the vDSO's symbols as the target's memory holds them (once).
    private func readVDSO(_ images: [Image]) {
      guard !readVDSO else { return }
      readVDSO = true
      locator.inMemoryImages = InMemoryImage.copies(of: images, in: ProcessMemory(pid: pid))
    }

    /// Finds the files of the images frames are in and reads their symbols for the frames' addresses.
    private func readSymbols() {
      // Each frame's offset in its image as symbolication will look it up: a return address (every
      // frame but a thread's first, as the report is read) less 1.
      var offsets = [[UInt64]](repeating: [], count: images.count)
      for frames in stacks {
        for (position, frame) in frames.enumerated() {
          guard let index = images.firstIndex(where: { $0.loadRange.contains(frame.pc) }) else { continue }
          let offset = frame.pc - images[index].loadAddress  // loadRange starts at loadAddress
          offsets[index].append(position > 0 && offset > 0 ? offset - 1 : offset)
        }
      }
      guard offsets.contains(where: { !$0.isEmpty }) else { return }
      readVDSO(images)
      for index in images.indices where !offsets[index].isEmpty {
        // Each image as the report will be read back: what symbolicate asks the locator for.
        locator.prepareSymbols(ThreadsReport.reportImage(images[index]), architecture: nil, offsets: offsets[index])
      }
    }
  }

  /// The report's mark for a frame found other than by CFI (`FrameTrust`'s raw value), nil for CFI.
  static func trustMark(_ trust: FrameTrust) -> String? {
    trust == .framePointer || trust == .stackScan ? trust.rawValue : nil
  }

  /// `Linux RELEASE MACHINE`, as `uname -srm` and the crash handler write it.
  static func osVersion() -> String {
    var names = utsname()
    uname(&names)
    func field<T>(_ value: T) -> String {
      withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
    return "Linux \(field(names.release)) \(field(names.machine))"
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
