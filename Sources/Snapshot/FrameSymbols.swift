/// What symbolication found for one frame: the image and offset, and the functions it is in.
public struct FrameSymbols: Sendable, Equatable {
  /// One function the frame is in: the innermost inlined one first, the real function last.
  public struct Function: Sendable, Equatable {
    /// The name, demangled as asked; `nil` when unknown.
    public var name: String?
    /// The name as stored in the file.
    public var rawName: String?
    /// Bytes from the function's start to the frame's address (the real function only).
    public var offset: UInt64?
    /// The source file, when DWARF gives one.
    public var file: String?
    /// The source line (1-based), when known.
    public var line: Int?
    /// The source column (1-based; 0 when unknown).
    public var column: Int?
    /// True for a function inlined into the next one.
    public var isInlined: Bool

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
  /// The link-time address looked up (after `- 1` for return addresses).
  public var lookupAddress: UInt64?
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

  private mutating func clearFunction() {
    realFunction = Function(name: nil, rawName: nil, offset: nil, file: nil, line: nil, column: nil, isInlined: false)
    hasFunction = false
  }
}
