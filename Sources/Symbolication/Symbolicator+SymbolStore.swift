import ImageReaders
import Snapshot

extension Symbolicator {
  /// What an image is symbolicated from: a file the locator found, or a symbol store's `.sym`.
  enum ImageSource {
    case found(SymbolFile, how: String)
    case unverified(SymbolFile)
    case mismatch(reportID: String, fileID: String, path: String)
    case missing
    /// The `.sym` at `path`, whose `MODULE` debug id is the image's.
    case stored(BreakpadSymbolFile, path: String)
  }

  /// `outcome`, or for an image the locator found no file of its identity for, the store's `.sym`
  /// with that identity. A `.sym` with another debug id is a mismatch when nothing else was found; the
  /// store's refusals join `notes`.
  static func storeOutcome(_ outcome: DebugFileLocator.Outcome, image: ProcessSnapshot.Image, store: SymbolStore?,
                           notes: inout [String]) -> ImageSource {
    switch outcome {
    case .found(let file, let how): return .found(file, how: how)
    case .unverified(let file): return .unverified(file)
    case .mismatch, .missing:
      guard let store else { break }
      let (stored, storeNotes) = store.symbols(for: image)
      for note in storeNotes where !notes.contains(note) { notes.append(note) }
      switch stored {
      case .found(let symbols, let path): return .stored(symbols, path: path)
      case .mismatch(let fileID, let path):
        if case .missing = outcome, let identity = image.identity {
          return .mismatch(reportID: identity.text, fileID: fileID, path: path)
        }
      case .missing: break
      }
    }
    switch outcome {
    case let .mismatch(reportID, fileID, path): return .mismatch(reportID: reportID, fileID: fileID, path: path)
    default: return .missing
    }
  }

  /// Names `frame` (at `offset` from its image's load address) from a symbol store's `.sym`, whose
  /// addresses are offsets from the module's base: its `FUNC` (with the `INLINE` calls and the line
  /// record holding the address), or the `PUBLIC` below it where no `FUNC` holds it, as
  /// minidump-stackwalk does. Without `lineInfo`, the function alone.
  static func lookUp(_ frame: ProcessSnapshot.Frame, offset: UInt64, in symbols: BreakpadSymbolFile,
                     measuredAs format: ProcessSnapshot.Format, result: inout FrameSymbols, demangler: Demangler,
                     lineInfo: Bool) {
    result.status = .noSymbol
    // Return addresses point after the call: look up the call itself (on arm 2 back: a thumb return
    // address is odd, and one back is the instruction after the call).
    let back: UInt64 = symbols.module.architecture == "arm" ? 2 : 1
    let lookup = frame.isReturnAddress && offset >= back ? offset - back : offset
    result.lookupAddress = lookup
    result.linkAddress = offset
    var frames = symbols.frames(at: lookup)
    guard let outer = frames.last else { return }
    if !lineInfo { frames = [outer] }
    result.status = .symbolicated
    result.functions = frames.map { [result] source in
      let located = lineInfo && source.file != nil
      return FrameSymbols.Function(
        name: demangler.demangle(source.function), rawName: source.function,
        offset: source.isInlined ? nil : result.offset(from: source.functionAddress, measuredAs: format),
        file: located ? source.file : nil, line: located ? source.line.map { Int($0) } : nil, column: nil,
        isInlined: source.isInlined, startAddress: source.isInlined ? nil : source.functionAddress)
    }
  }
}

extension Symbolicator {
  /// `image`'s `.sym` in `locator`'s symbol store, `nil` when there is no store or no `.sym` with its identity.
  static func storedSymbols(_ image: ProcessSnapshot.Image, locator: DebugFileLocator) -> BreakpadSymbolFile? {
    guard let store = locator.symbolStore, case .found(let symbols, _) = store.symbols(for: image).outcome else { return nil }
    return symbols
  }
}
