public import ProcessInspection
public import ImageReaders

extension ProcessSnapshot {
  /// One thread: who it is, how it stood, and its backtrace.
  public struct Thread: Sendable {
    /// The thread's number as the source gives it: its position for captures; a report's own number
    /// (-1: Apple's `Last Exception Backtrace`; -1 - N: `Application Specific Backtrace N`).
    public var number: Int
    /// The kernel's thread id (a `.ips` thread's `id`), when known.
    public var tid: UInt64?
    /// The thread's (or its queue's, or its stack's heading's) name, when known.
    public var name: String?
    /// The state letter of `/proc/PID/task/TID/stat` (`S`, `R`, `D`...), for a live process.
    public var state: String?
    /// True for the thread that crashed.
    public var crashed: Bool
    /// True for the thread that asked for a dump when nothing crashed (`Exception.isDumpRequested`, or
    /// Breakpad's requesting thread in a dump without an exception).
    public var requestedDump = false
    /// Why the thread has no backtrace, when it has none for a reason the source gives.
    public var problem: String?
    /// The thread's registers, when the source gives them: every general register of a capture, a core
    /// or a minidump's context (where a walk of a thread not yet unwound starts, what a minidump written
    /// from the snapshot holds), those a report lists (its crashed thread's). Writers show the crashed
    /// (or dump-requesting) thread's.
    public var registers: Registers?
    /// The backtrace, innermost frame first.
    public var frames: [Frame]
    /// The thread's stack as copied when the snapshot was taken (a live capture), from at or below its
    /// stack pointer: what a minidump written from the snapshot keeps of it.
    package var stack: BufferMemory?

    /// A thread with what the source knows of it; frames are added as they are read.
    public init(number: Int, tid: UInt64? = nil, name: String? = nil, state: String? = nil, crashed: Bool = false,
                problem: String? = nil, registers: Registers? = nil, frames: [Frame] = []) {
      self.number = number
      self.tid = tid
      self.name = name
      self.state = state
      self.crashed = crashed
      self.problem = problem
      self.registers = registers
      self.frames = frames
    }
  }

  /// One frame of a backtrace: an address, how it was found, the image it is in, what the source said
  /// of it, and (once symbolicated) what it is.
  public struct Frame: Sendable {
    /// The frame's number as the source gives it (a report's `#N` or index column; for captures its
    /// position in the backtrace).
    public var number: Int
    /// The PC (frame 0, or a frame a signal interrupted), else a return address.
    public var address: Address
    /// True when `address` is a return address: lookups use `address - 1`, so a call that ends a
    /// function (a `noreturn` call) is found in its caller, as debuggers and the Swift backtracer do.
    public var isReturnAddress: Bool
    /// How the frame was found, when the source says (captures always; imagelog's report marks frame
    /// pointer and stack scan frames).
    public var trust: FrameTrust?
    /// True when the source's frame line names no module to look the frame up in (a sanitizer line it
    /// symbolized itself, `(<unknown module>)`, TSan's `(0x…)`, glibc's bare `[0x…]`): the frame keeps what
    /// the source says of it (`reportedFunction`).
    public var namesNoModule = false
    /// The index in the snapshot's `images` of the image holding `address`, when known.
    public var imageIndex: Int?
    /// The symbol the source already gave for the frame, as it wrote it.
    public var reportedSymbol: String?
    /// The `symbol+0xoffset` the source located the frame by (glibc's `backtrace_symbols`), which
    /// places an image whose load address the source does not give.
    public var symbolOffset: SymbolOffset?
    /// Where the frame stands in the source's `document`, to annotate it in place.
    public var position: Position?
    /// What symbolication found (`.notLookedUp` until it runs).
    public var symbols: FrameSymbols

    /// A frame at `address`; `isReturnAddress` for every frame but the PC (and signal-interrupted ones).
    public init(number: Int, address: Address, isReturnAddress: Bool, trust: FrameTrust? = nil, imageIndex: Int? = nil,
                reportedSymbol: String? = nil, symbolOffset: SymbolOffset? = nil, position: Position? = nil) {
      self.number = number
      self.address = address
      self.isReturnAddress = isReturnAddress
      self.trust = trust
      self.imageIndex = imageIndex
      self.reportedSymbol = reportedSymbol
      self.symbolOffset = symbolOffset
      self.position = position
      symbols = FrameSymbols()
    }

    /// A captured frame as the unwinder found it; every frame after a thread's first is a return address.
    public init(number: Int, _ frame: UnwoundFrame) {
      self.init(number: number, address: frame.pc, isReturnAddress: number > 0, trust: frame.trust)
    }

    /// The trust imagelog's report layout marks on a frame line (frame pointer, stack scan); `nil` for the
    /// others, which are the usual case.
    package var markedTrust: FrameTrust? { trust == .framePointer || trust == .stackScan ? trust : nil }

    /// The mark imagelog's report layout writes at the end of a frame line found by frame pointer or
    /// stack scan (`  (frame pointer)`, `  (stack scan)`); empty for the others.
    package static func trustMark(_ trust: FrameTrust?) -> String {
      switch trust {
      case .framePointer?: "  (frame pointer)"
      case .stackScan?: "  (stack scan)"
      default: ""
      }
    }
  }

  /// A position given as a symbol's name and an offset from its start.
  public struct SymbolOffset: Sendable, Equatable {
    /// The symbol's name as the report wrote it.
    public var name: String
    /// Bytes from the symbol's start.
    public var offset: UInt64

    /// A symbol `name` and the frame's `offset` into it.
    public init(name: String, offset: UInt64) {
      self.name = name
      self.offset = offset
    }
  }

  /// Where a frame stands in its report's document.
  public struct Position: Sendable, Equatable {
    /// The line of a text report the frame was read from, 0-based.
    public var line: Int?
    /// The column in that line (in `Character`s) where the frame's symbol part starts: everything before
    /// it is kept, the rest is replaced (or, in Linux logs, pushed right) when symbolicated.
    public var column: Int?
    /// For JSON reports (`.ips`, the backtracer's JSON): the index of the thread's array in the document
    /// (-1: `.ips`'s `lastExceptionBacktrace`); the frame's own index there is its `number`.
    public var documentThread: Int?

    /// Where the frame was in its report.
    public init(line: Int? = nil, column: Int? = nil, documentThread: Int? = nil) {
      self.line = line
      self.column = column
      self.documentThread = documentThread
    }
  }
}
