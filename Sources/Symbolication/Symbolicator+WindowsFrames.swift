import ProcessInspection
import ImageReaders
import Snapshot

/// A 32-bit x86 Windows module's `STACK WIN` records, for the unwinder: the caller of a frame by the
/// record covering its address, and the parameter size each frame leaves for the next walk step
/// (rust-minidump's `fill_symbol`: the `STACK WIN` record's, else the `FUNC`'s, else the `PUBLIC`'s).
struct BreakpadWindowsFrameSource: WindowsFrameSource {
  let frames: BreakpadWindowsFrames
  let symbols: BreakpadSymbolFile

  func caller(of callee: RegisterSet, at address: UInt64, grandCalleeParameterSize: UInt32, hasGrandCallee: Bool,
              memory: any MemoryReading) -> RegisterSet? {
    guard let record = frames.record(covering: address) else { return nil }
    // i386 DWARF numbers: 3 ebx, 4 esp, 5 ebp, 6 esi, 7 edi, 8 eip.
    func value(_ register: Int) -> UInt32? { callee[dwarf: register].flatMap { UInt32(exactly: $0) } }
    let registers = BreakpadWindowsFrames.Registers(eip: value(8), esp: value(4), ebp: value(5), ebx: value(3),
                                                    esi: value(6), edi: value(7))
    let read = { (address: UInt64) -> UInt32? in
      var word: UInt32 = 0
      guard withUnsafeMutableBytes(of: &word, { memory.read(address, into: $0) }) else { return nil }
      return UInt32(littleEndian: word)
    }
    guard let caller = BreakpadWindowsFrames.caller(of: registers, by: record, grandCalleeParameterSize: grandCalleeParameterSize,
                                                    hasGrandCallee: hasGrandCallee, read: read) else { return nil }
    var result = RegisterSet(architecture: .i386)
    for (register, value) in [(8, caller.eip), (4, caller.esp), (5, caller.ebp), (3, caller.ebx), (6, caller.esi), (7, caller.edi)] {
      result[dwarf: register] = value.map(UInt64.init)
    }
    return result
  }

  func parameterSize(at address: UInt64) -> UInt32? {
    if let index = symbols.functionIndex(containing: address) {
      // rust-minidump keeps parameter sizes in 32 bits.
      return frames.record(covering: address)?.parameterSize ?? UInt32(truncatingIfNeeded: symbols.functions[index].parameterSize)
    }
    return symbols.publicSymbol(at: address).map { UInt32(truncatingIfNeeded: $0.parameterSize) }
  }
}

extension Symbolicator {
  /// The `STACK WIN` records of `image`'s `.sym` in the locator's store (`symbols`, already read), for
  /// a 32-bit x86 module; `nil` for another architecture. A module without records still gives its
  /// functions' parameter sizes to the walk of the frame above. The records are read from the lines the
  /// symbols' reader saw them on (it counts and skips them), in the bytes it kept when it read on demand,
  /// else on a pass of their own over the file; a file whose records break the format gives none (the
  /// walk goes on by CFI, frame pointers and scanning).
  static func storedWindowsFrames(_ image: ProcessSnapshot.Image, symbols: BreakpadSymbolFile,
                                  locator: DebugFileLocator) -> BreakpadWindowsFrameSource? {
    guard symbols.module.architecture == "x86" else { return nil }
    var frames = BreakpadWindowsFrames(records: [])
    if let read = try? BreakpadWindowsFrames(in: symbols) {
      frames = read
    } else if symbols.skippedWindowsFrames > 0, let store = locator.symbolStore,
              case .found(_, let path) = store.symbols(for: image).outcome, let mapped = try? MappedFile(path: path),
              let read = try? mapped.withReader({ reader throws(FormatError) in try BreakpadWindowsFrames(reader) }) {
      frames = read
    }
    return BreakpadWindowsFrameSource(frames: frames, symbols: symbols)
  }
}
