public import ProcessInspection
import ImageReaders

/// A process at one moment: the one model every source builds and every writer reads.
///
/// A live process (`imagelog pid --threads`), a core, a minidump, the crash handler's report and each
/// foreign text report (Apple, Swift, sanitizers, systemd-coredump, Android, glibc) become this value;
/// symbolication fills in each frame's answer and each image's file; the writers (imagelog's
/// report layout, JSON, the classic `.crash` text, a minidump) read it. A report read from text keeps
/// its text in `document`, only so that it can be annotated in place.
public struct ProcessSnapshot: Sendable {
  /// Where the snapshot came from: a report's kind, or what imagelog captured.
  public enum Format: String, Sendable, CaseIterable {
    /// imagelog's own layout: the crash handler's report, `pid --threads`, a core.
    case imagelog
    /// Apple's `.crash` text, with or without a one-line JSON header (`bug_type` 109).
    case appleCrash = "crash"
    /// Apple's `.ips` JSON (`bug_type` 309).
    case appleIPS = "ips"
    /// Swift's backtracer output (`SWIFT_BACKTRACE=...,symbolicate=off`).
    case swiftBacktrace = "swift-backtrace"
    /// Swift's backtracer output in JSON (`SWIFT_BACKTRACE=...,format=json`).
    case swiftBacktraceJSON = "swift-backtrace-json"
    /// Bare addresses with images given on the command line.
    case addresses
    /// Sanitizer reports (ASan, TSan, MSan, UBSan, LSan) and LLVM stack dumps.
    case sanitizer
    /// systemd-coredump's journal entry or `coredumpctl info`.
    case coredump
    /// Android tombstones and logcat crash dumps.
    case androidTombstone = "android-tombstone"
    /// glibc's `backtrace_symbols` / `backtrace_symbols_fd` lines.
    case glibcBacktrace = "glibc-backtrace"
    /// A minidump (Crashpad, Breakpad, rust-minidump, imagelog).
    case minidump

    /// The Linux logs, found line by line inside a longer log: symbolicated by inserting the function
    /// into each frame line.
    package var isLinuxLog: Bool {
      self == .sanitizer || self == .coredump || self == .androidTombstone || self == .glibcBacktrace
    }

    /// True for Swift's backtracer, whose `NAME + N` counts from the address it looks up (a return
    /// address less one: `adjustedProgramCounter`); every other kind counts from the frame's address as
    /// written (Apple's `+ N`, glibc's `dladdr` offset, Android's, imagelog's layout).
    package var measuresOffsetsFromLookup: Bool { self == .swiftBacktrace || self == .swiftBacktraceJSON }
  }

  /// What the source said about the process itself.
  public struct Process: Sendable, Equatable {
    /// The process's name (`/proc/PID/comm`, a core's `NT_PRPSINFO`, a report's `Process:`).
    public var name: String?
    /// The process id.
    public var pid: Int32?
    /// The executable's path.
    public var path: String?
    /// `Linux RELEASE MACHINE` as `uname` gives them, or the report's `OS Version:`.
    public var osVersion: String?
    /// The report's architecture (`Code Type:`, the ips `cpuType`, the machine of `OS Version:`).
    public var architecture: String?
    /// When the snapshot was taken (or the core written), seconds since the epoch (UTC).
    public var date: Int64?
    /// How many threads the source says the process had (imagelog's `Threads:`), which may be more
    /// than it lists.
    public var threadCount: Int?
    /// How long the threads were stopped to be read (`pid --threads`), in nanoseconds.
    public var stoppedNanoseconds: UInt64?
    /// The process's files from `/proc` (maps, status, command line, auxiliary vector...) and the
    /// system's (`/etc/lsb-release`, `/proc/cpuinfo`), as a minidump carries them: kept by sources that
    /// read them (a minidump; a capture made to be written as one).
    package var linuxFiles = MinidumpFile.LinuxStreams()

    /// What a source says of the process; each field is `nil` when it does not say.
    public init(name: String? = nil, pid: Int32? = nil, path: String? = nil, osVersion: String? = nil,
                architecture: String? = nil, date: Int64? = nil, threadCount: Int? = nil,
                stoppedNanoseconds: UInt64? = nil) {
      self.name = name
      self.pid = pid
      self.path = path
      self.osVersion = osVersion
      self.architecture = architecture
      self.date = date
      self.threadCount = threadCount
      self.stoppedNanoseconds = stoppedNanoseconds
    }
  }

  /// The signal a process died of. The crashed thread is the one whose `crashed` is true.
  public struct Exception: Sendable, Equatable {
    /// The signal number (`si_signo`).
    public var signal: Int32
    /// `si_code`.
    public var code: Int32
    /// The fault address (`si_addr`), 0 when the signal has none; for a minidump, the address the crash
    /// is about as its platform gives it (a Windows access violation's: the address accessed).
    public var address: Address
    /// The exception as its platform names it when it is not a POSIX signal, as minidump-stackwalk
    /// prints it (`EXCEPTION_ACCESS_VIOLATION_READ`, `EXC_BAD_ACCESS / KERN_INVALID_ADDRESS`,
    /// `DUMP_REQUESTED`); `nil` for a signal, which `signal` and `code` say. `signal` and `code` then
    /// hold the platform's raw code and flags.
    public var reason: String?
    /// True when nothing crashed: the writer was asked for a dump (Breakpad's and Crashpad's dump
    /// requests). No thread is marked crashed; the one that asked has `requestedDump`.
    public var isDumpRequested = false

    /// A signal with its `si_code` and fault address.
    public init(signal: Int32, code: Int32, address: Address) {
      self.signal = signal
      self.code = code
      self.address = address
    }
  }

  /// The kind of source.
  public var format: Format
  /// What the source said about the process.
  public var process: Process
  /// The signal, for a crash; `nil` for a live process and for reports that do not say.
  public var exception: Exception?
  /// The message the process gave as it aborted, as its source holds it: glibc's (`__abort_msg`: an
  /// assertion, `free(): invalid pointer`) read from a crashed process's or a core's memory, the Swift
  /// runtime's `Fatal error: ...`, a report's `Abort Message:` line. `nil` when there was none.
  public var abortMessage: String?
  /// The size in bytes of the allocation whose failure the crash is, when its source says so (a
  /// sanitizer's `allocation-size-too-big` or `out-of-memory` report).
  public var oomAllocationSize: UInt64?
  /// The threads in the source's order (a live process's and a core's: `/proc/PID/task` order).
  public var threads: [Thread]
  /// The images the source lists, in its order; frames refer to them by index.
  public var images: [Image]
  /// The images the process removed before the snapshot, newest first, when the source kept them
  /// (`UnloadedImage`).
  public var unloadedImages: [UnloadedImage] = []
  /// The images added after the program started and those removed, oldest first, when the source kept
  /// them (`ImageEvent`): the report's Image Timeline.
  public var imageTimeline: [ImageEvent] = []
  /// Parts of the source that could not be read, each a short phrase naming the line or field.
  public var problems: [String]
  /// What symbolication could not do (unreadable debug files or search paths, files refused).
  public var notes: [String] = []
  /// A text or JSON report's own document, kept to be annotated in place; `nil` for captures.
  public var document: ReportDocument?
  /// The crash's signature (Socorro's algorithm, made from the symbolicated crashing thread), once
  /// made; writers show it (`Signature:`, `"signature"`).
  package var signature: String?
  /// The images no file holds (the vDSO), copied by a source that read the process's memory (a live
  /// process, a core) while it could: symbolication names their frames from these bytes.
  package var inMemoryImages: [InMemoryImage] = []
  /// The memory a source leaves its threads to be unwound in (a minidump's: each thread's stack and
  /// whatever else its writer kept), when it holds registers but no frames for them: unwinding needs
  /// the images' files (their call frame information), which symbolication finds. `Symbolicator`
  /// walks those threads in it before it names any frame, then lets it go. `nil` for the sources that
  /// unwind their threads themselves (a live process, a core) and once walked.
  package var memoryToWalk: (any MemoryReading & Sendable)?
  /// For a snapshot read from imagelog's crash document: the report's own name for each frame as the
  /// document recorded it (`reported`), by the frame's place in the document (its `position`'s
  /// `documentThread`, and `line` for its index there): the report it came from is not there to read
  /// it from again. Held here, not in each frame, so a frame costs no more.
  package var documentReported: [FrameRef: ReportedFunction] = [:]

  /// A snapshot of these parts.
  public init(format: Format, process: Process = Process(), exception: Exception? = nil, threads: [Thread] = [],
              images: [Image] = [], problems: [String] = [], document: ReportDocument? = nil) {
    self.format = format
    self.process = process
    self.exception = exception
    self.threads = threads
    self.images = images
    self.problems = problems
    self.document = document
  }

  /// The index of the thread marked crashed, when one is.
  public var crashedThreadIndex: Int? { threads.firstIndex { $0.crashed } }

  /// How many frames all the threads have.
  package var frameCount: Int { threads.reduce(0) { $0 + $1.frames.count } }
}
