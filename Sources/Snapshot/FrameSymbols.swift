/// What symbolication found for one frame: the image and offset, and the functions it is in.
public struct FrameSymbols: Sendable, Equatable {
  /// One function the frame is in: the innermost inlined one first, the real function last.
  public struct Function: Sendable, Equatable {
    /// The name, demangled as asked; `nil` when unknown.
    public var name: String?
    /// The name as stored in the file.
    public var rawName: String?
    /// Bytes from the function's start to the frame as the frame's own report measures them (the real
    /// function only): to the address looked up (`FrameSymbols.lookupAddress`, a return address less
    /// one) in Swift's backtracer's reports, to the frame's address as written in every other kind
    /// (`ProcessSnapshot.Format.measuresOffsetsFromLookup`). Symbolication derives it from `startAddress`
    /// (`FrameSymbols.offset(from:measuredAs:)`); a function only the source named keeps what the source
    /// wrote beside the name (glibc's `+0x1d`, Apple's `+ 12`), with `startAddress` `nil`. Writers that
    /// measure otherwise (minidump-stackwalk's `function_offset`) start from `startAddress`.
    public var offset: UInt64?
    /// Where the function starts, in the address space of `FrameSymbols.lookupAddress`: the symbol's
    /// link-time address in an ELF or Mach-O symbol table (or in the symbol cache made from one), a
    /// `.sym`'s `FUNC` or `PUBLIC` address (an offset from the module's base). `nil` for an inlined
    /// function, and for a function only a source named: a report's `symbol+offset` gives no address.
    package var startAddress: UInt64?
    /// The source file, when DWARF gives one.
    public var file: String?
    /// The source line (1-based), when known.
    public var line: Int?
    /// The source column (1-based; 0 when unknown).
    public var column: Int?
    /// True for a function inlined into the next one.
    public var isInlined: Bool

    /// A function with its source location, as symbolication or a report names it.
    public init(name: String?, rawName: String?, offset: UInt64?, file: String?, line: Int?, column: Int?,
                isInlined: Bool) {
      self.name = name
      self.rawName = rawName
      self.offset = offset
      self.file = file
      self.line = line
      self.column = column
      self.isInlined = isInlined
    }

    /// A function a symbol file gave, starting at `startAddress`.
    package init(name: String?, rawName: String?, offset: UInt64?, file: String?, line: Int?, column: Int?,
                 isInlined: Bool, startAddress: UInt64?) {
      self.init(name: name, rawName: rawName, offset: offset, file: file, line: line, column: column, isInlined: isInlined)
      self.startAddress = startAddress
    }
  }

  /// What became of the frame.
  public enum Status: Sendable, Equatable {
    /// Resolved to a symbol.
    case symbolicated
    /// The image was found, but no symbol covers the address.
    case noSymbol
    /// No image in the snapshot contains the address.
    case noImage
    /// No file with the image's identity was found.
    case missingImage
    /// The only file found has another identity.
    case mismatch(reportID: String, fileID: String, path: String)
    /// Not looked up: symbolication did not run (`--no-symbolicate`); the image and offset stand.
    case notLookedUp
    /// The source names no module to look the frame up in (a sanitizer line it symbolized itself,
    /// `(<unknown module>)`, glibc's bare `[0x…]`): `functions` holds the source's own function and
    /// location, when it gives them.
    case noModule
    /// The file found by path alone is another build than the source's (the image's resolution says
    /// why): nothing is taken from it, and `functions` holds the source's own names, when it gives them.
    case otherBuild
  }

  /// What became of the frame.
  public var status: Status = .notLookedUp
  /// The name of the frame's image.
  public var imageName: String?
  /// The frame's offset from its image's load address.
  public var imageOffset: UInt64?
  /// The link-time address looked up (after `- 1` for return addresses; for a `.sym`, an offset from
  /// the module's base, 2 back on arm).
  public var lookupAddress: UInt64?
  /// The frame's address where the symbol file places it (link-time; for a `.sym`, an offset from the
  /// module's base): `lookupAddress` before the step back for a return address.
  package var linkAddress: UInt64?
  /// The functions, innermost first; empty unless symbolicated.
  public var functions: [Function] {
    get { hasFunction ? inlinedFunctions + [realFunction] : inlinedFunctions }
    set {
      if let last = newValue.last { setFunction(last) } else { clearFunction() }
      inlinedFunctions = Array(newValue.dropLast())
    }
  }
  /// The real function (the last of `functions`), when symbolicated.
  public var function: Function? { hasFunction ? realFunction : nil }
  /// The functions inlined into `function`, innermost first (from DWARF; usually none).
  public private(set) var inlinedFunctions: [Function] = []
  // Stored in the frame itself, not optional: a report of 20,000 addresses costs no array per frame
  // to build and free, and its output reads the names in place, without copying whole functions.
  package private(set) var realFunction = Function(name: nil, rawName: nil, offset: nil, file: nil, line: nil, column: nil,
                                                   isInlined: false)
  package private(set) var hasFunction = false

  /// Nothing looked up yet.
  public init() {}

  /// Sets the real function alone (no inlined ones).
  package mutating func setFunction(_ function: consuming Function) {
    realFunction = function
    hasFunction = true
    inlinedFunctions = []
  }

  /// Bytes from `start` (a function's `startAddress`) to this frame as a report of `format` measures
  /// them: to `lookupAddress` for Swift's backtracer (it measures a return address from the call), to
  /// `linkAddress` for the others; `nil` when that address is unknown or lies below `start`.
  package func offset(from start: UInt64, measuredAs format: ProcessSnapshot.Format) -> UInt64? {
    guard let point = format.measuresOffsetsFromLookup ? lookupAddress : linkAddress, point >= start else { return nil }
    return point - start
  }

  private mutating func clearFunction() {
    realFunction = Function(name: nil, rawName: nil, offset: nil, file: nil, line: nil, column: nil, isInlined: false)
    hasFunction = false
  }
}
