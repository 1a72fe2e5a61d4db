public import ImageLog
public import ImageReaders

/// A crash report read from text: where its frames and images are, so they can be symbolicated
/// and written back in place. The text's lines are kept exactly as they came.
public struct CrashReport: Sendable {
  /// Which kind of report this was read as.
  public enum Format: String, Sendable, CaseIterable {
    /// imagelog's crash handler and formatter output (Apple-.crash-like, Linux images).
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
    /// Sanitizer reports (ASan, TSan, MSan, UBSan, LSan) and LLVM stack dumps printed with `symbolize=0`.
    case sanitizer
    /// systemd-coredump's journal entry or `coredumpctl info`.
    case coredump
    /// Android tombstones and logcat crash dumps.
    case androidTombstone = "android-tombstone"
    /// glibc's `backtrace_symbols` / `backtrace_symbols_fd` lines.
    case glibcBacktrace = "glibc-backtrace"

    /// The Linux kinds, found line by line inside a longer log: frames are symbolicated by inserting
    /// the function into each frame line.
    public var isLinuxLog: Bool {
      self == .sanitizer || self == .coredump || self == .androidTombstone || self == .glibcBacktrace
    }
  }

  /// One binary image the report lists.
  public struct Image: Sendable, Equatable {
    /// The short name (`libswiftCore.so`, `MyApp`); `???` when the report does not know.
    public var name: String
    /// The path the report recorded, `nil` when unknown (`???`).
    public var path: String?
    /// Where the image starts in the crashed process (ELF: the first mapped byte; Mach-O: `__TEXT`).
    public var loadAddress: Address
    /// The last byte (inclusive) the report gives for the image, when it gives one.
    public var endAddress: Address?
    /// The identity recorded for the image, `nil` when none was (or it was all zeros).
    public var identity: ImageIdentity?
    /// The architecture the report names for the image (Mach-O slice selection), when it does.
    public var architecture: String?
    /// True when a frame's address minus `loadAddress` is a link-time virtual address: sanitizers,
    /// Android and glibc give offsets from the load bias (`dlpi_addr`), not from the first mapped byte.
    public var offsetsFromLoadBias = false
    /// True when the report gave no load address for the image (glibc's `symbol+0xoffset` frames):
    /// it is found from a frame's symbol once the file is found.
    public var loadAddressFromSymbols = false

    /// True when frames are placed in the image by its address range (`ReportParser.attachImages`):
    /// the report gives its end, and its identity or path.
    var isRanged: Bool { endAddress != nil && (identity != nil || path != nil) }

    /// An image as a report (or `--image`) gives it.
    public init(name: String, path: String?, loadAddress: Address, endAddress: Address?, identity: ImageIdentity?,
                architecture: String?) {
      self.name = name
      self.path = path
      self.loadAddress = loadAddress
      self.endAddress = endAddress
      self.identity = identity
      self.architecture = architecture
    }
  }

  /// One frame of a thread's backtrace.
  public struct Frame: Sendable, Equatable {
    /// The thread's number as the report writes it.
    public var thread: Int
    /// The frame's number within its thread.
    public var index: Int
    /// The address the report gives (a PC, or a return address for the frames after the first).
    public var address: Address
    /// Index into `images`, when the frame's image is known.
    public var imageIndex: Int?
    /// True when `address` is a return address: lookups use `address - 1`, so a call that ends a
    /// function (a `noreturn` call) is found in its caller, as debuggers and the Swift backtracer do.
    public var isReturnAddress: Bool
    /// True when the report's frame line names no module to look the frame up in (a sanitizer line
    /// already symbolized, `(<unknown module>)`, TSan's `(0x…)`, glibc's bare `[0x…]`): the frame keeps
    /// what the report says of it (`reportedFunction`). Next to `isReturnAddress`, in the padding before
    /// `line`: a frame is no larger for it (a list of addresses keeps millions).
    public var namesNoModule = false
    /// The line in `lines` the frame was read from (`nil` for `.ips` frames).
    public var line: Int?
    /// The column in that line (in `Character`s) where the frame's symbol part starts: everything
    /// before it is kept, everything after is replaced when symbolicated.
    public var symbolColumn: Int?
    /// The symbol the report already had for the frame, if any, as written (a symbolized sanitizer
    /// line's `main /src/a.c:12:3`: `reportedFunction` splits it).
    public var reportedSymbol: String?
    /// For `.ips`: the path to the frame in the JSON (`threads[i].frames[j]`).
    public var ipsThread: Int?
    /// The `symbol+0xoffset` the report located the frame by (glibc's `backtrace_symbols`).
    public var symbolOffset: SymbolOffset? = nil
    /// How the unwinder found the frame when the report says (imagelog's `  (frame pointer)` and
    /// `  (stack scan)` marks): `"frame-pointer"` or `"scan"`, as `FrameTrust` names them; `nil` for
    /// frames from the context or call frame information, and in reports that do not say.
    public var trust: String? = nil

    /// The mark imagelog's report layout writes after a frame line found with `trust`, `nil` for none.
    public static func trustMark(_ trust: String?) -> String? {
      switch trust {
      case FrameTrust.framePointer.rawValue: "  (frame pointer)"
      case FrameTrust.stackScan.rawValue: "  (stack scan)"
      default: nil
      }
    }

    /// `reportedSymbol` split into the function and the location a Linux frame line gives (a sanitizer's
    /// `main /src/a.c:12:3`, TSan's `<null> <null>`); `nil` when the report names nothing. Split when
    /// asked, not kept: a frame stays small.
    public var reportedFunction: ReportedFunction? {
      guard let reportedSymbol else { return nil }
      let (name, file, line, column) = LinuxLogParser.functionAndLocation(reportedSymbol)
      return name == nil && file == nil ? nil : ReportedFunction(name: name, file: file, line: line, column: column)
    }

    /// The trust a frame line's ending names (`trustMark` read back), with the length of the mark.
    static func trust(endingLine line: some StringProtocol) -> (trust: String, markLength: Int)? {
      for trust in [FrameTrust.framePointer.rawValue, FrameTrust.stackScan.rawValue] {
        if let mark = trustMark(trust), line.hasSuffix(mark) { return (trust, mark.count) }
      }
      return nil
    }
  }

  /// The function and source location a Linux frame line gives itself (`in main /src/a.c:12:3`).
  public struct ReportedFunction: Sendable, Equatable {
    /// The function as written (`main`, `operator new(unsigned long)`, `abort+164`); `nil` for `<null>`.
    public var name: String?
    /// The source file as written (`/src/a.c`, `../sysdeps/nptl/libc_start_call_main.h`).
    public var file: String?
    public var line: Int?
    public var column: Int?

    public init(name: String?, file: String? = nil, line: Int? = nil, column: Int? = nil) {
      self.name = name
      self.file = file
      self.line = line
      self.column = column
    }
  }

  /// A position given as a symbol's name and an offset from its start.
  public struct SymbolOffset: Sendable, Equatable {
    /// The symbol's name as the report wrote it.
    public var name: String
    /// Bytes from the symbol's start.
    public var offset: UInt64
  }

  /// One thread's heading.
  public struct Thread: Sendable, Equatable {
    /// The thread's number as the report writes it (-1: Apple's `Last Exception Backtrace`; -1 - N:
    /// `Application Specific Backtrace N`).
    public var number: Int
    /// True for the thread the report marks as crashed.
    public var crashed: Bool
    /// The thread's or its queue's name, when the report gives one.
    public var name: String?
    /// The kernel's thread id (imagelog's `tid T`, the `.ips` thread's `id`), when the report gives it.
    public var tid: UInt64? = nil
    /// The thread's state letter from `/proc/PID/task/TID/stat` (`S`, `R`, `D`...), when the report
    /// gives it (`imagelog pid --threads`).
    public var state: String? = nil
    /// Why the thread has no backtrace, when the report says (the text after `not unwound: `).
    public var problem: String? = nil
    /// The thread's registers, when the report lists them (the crashed thread's `Thread State`).
    public var registers: RegisterState? = nil
  }

  /// The kind of report this was read as.
  public var format: Format
  /// The report's lines, without line terminators.
  public var lines: [String]
  /// Thread headings in report order.
  public var threads: [Thread]
  /// Every frame of every thread, in report order.
  public var frames: [Frame]
  /// The images the report lists (`Binary Images`, `usedImages`, `Images`).
  public var images: [Image]
  /// The report's architecture (`Code Type:`, the ips `cpuType`, the Swift `Platform:` line).
  public var architecture: String?
  /// Parts of the report that could not be read, each a short phrase naming the line or field.
  public var problems: [String]
  /// For `.ips`: the header line and the body document.
  public var ipsHeader: JSONValue?
  /// The `.ips` body document.
  public var ipsBody: JSONValue?
  /// For the backtracer's JSON: the text before the document, and the document.
  public var preamble: String = ""
  /// The backtracer's JSON document.
  public var document: JSONValue?

  /// A report of `format` made of these parts (tests and callers that build reports).
  public init(format: Format, lines: [String] = [], threads: [Thread] = [], frames: [Frame] = [], images: [Image] = [],
              architecture: String? = nil, problems: [String] = []) {
    self.format = format
    self.lines = lines
    self.threads = threads
    self.frames = frames
    self.images = images
    self.architecture = architecture
    self.problems = problems
  }

  /// The number of threads the report's header says the process had (imagelog's `Threads:`).
  public var threadCount: Int? = nil

  /// The number of the crashed thread, when the report marks one.
  public var crashedThread: Int? { threads.first { $0.crashed }?.number }
}
