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
    /// The line in `lines` the frame was read from (`nil` for `.ips` frames).
    public var line: Int?
    /// The column in that line (in `Character`s) where the frame's symbol part starts: everything
    /// before it is kept, everything after is replaced when symbolicated.
    public var symbolColumn: Int?
    /// The symbol the report already had for the frame, if any.
    public var reportedSymbol: String?
    /// For `.ips`: the path to the frame in the JSON (`threads[i].frames[j]`).
    public var ipsThread: Int?
  }

  /// One thread's heading.
  public struct Thread: Sendable, Equatable {
    /// The thread's number as the report writes it (-1: Apple's `Last Exception Backtrace`).
    public var number: Int
    /// True for the thread the report marks as crashed.
    public var crashed: Bool
    /// The thread's or its queue's name, when the report gives one.
    public var name: String?
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

  /// The number of the crashed thread, when the report marks one.
  public var crashedThread: Int? { threads.first { $0.crashed }?.number }
}

/// Why a text could not be read as a crash report at all.
public struct ReportError: Error, Equatable, Sendable, CustomStringConvertible {
  public var description: String
  /// An error with this one-line description.
  public init(_ description: String) { self.description = description }
}
