import Glibc
import ImageLogTestSupport
import ImageReaders
import Snapshot
import Symbolication
import Testing


/// Whole-file reads and writes for test inputs made by patching fixtures.
enum SymbolFileBytes {
  static func read(_ path: String) throws -> [UInt8] {
    guard let bytes = readFileBytes(path) else { throw TestSupportError("cannot read \(path)") }
    return bytes
  }

  static func write(_ bytes: [UInt8], to path: String) throws {
    guard let file = fopen(path, "wb") else { throw TestSupportError("cannot write \(path)") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw TestSupportError("short write to \(path)") }
  }
}

/// A thread's own fields without its frames: threads compared as a whole (`ProcessSnapshot.Thread` holds
/// its frames and registers for the kernel, and is not `Equatable`).
struct ThreadHeading: Equatable, CustomStringConvertible {
  var number: Int
  var crashed: Bool
  var name: String?
  var tid: UInt64? = nil
  var state: String? = nil
  var problem: String? = nil
  var registers: Registers? = nil

  var description: String {
    "\(number)\(crashed ? " crashed" : "") \(name ?? "-") tid \(tid.map(String.init) ?? "-") state \(state ?? "-")"
      + " problem \(problem ?? "-")\(registers == nil ? "" : " registers")"
  }
}

extension ProcessSnapshot.Thread {
  var heading: ThreadHeading {
    ThreadHeading(number: number, crashed: crashed, name: name, tid: tid, state: state, problem: problem, registers: registers)
  }
}

extension ProcessSnapshot {
  /// The number of the thread marked crashed.
  var crashedThreadNumber: Int? { threads.first { $0.crashed }?.number }
}

extension ProcessSnapshot {
  /// The file DWARF came from for each image whose DWARF is in another file than its symbols, by image index.
  var debugFiles: [Int: String] {
    Dictionary(uniqueKeysWithValues: images.indices.compactMap { index in images[index].debugFile.map { (index, $0) } })
  }
}

extension Symbolicator {
  /// `snapshot` symbolicated: `symbolicate(_:options:)` on a copy, so that a test can keep what was read
  /// beside what symbolication made of it.
  static func symbolicated(_ snapshot: ProcessSnapshot, options: SymbolicationOptions = SymbolicationOptions(),
                           cache: SymbolicationCache? = nil) -> ProcessSnapshot {
    var copy = snapshot
    symbolicate(&copy, options: options, cache: cache)
    return copy
  }

  /// `snapshot` symbolicated with `locator` (one made by `locator(forOneReport:)`), on a copy.
  static func symbolicated(_ snapshot: ProcessSnapshot, options: SymbolicationOptions,
                           locator: DebugFileLocator) -> ProcessSnapshot {
    var copy = snapshot
    symbolicate(&copy, options: options, locator: locator)
    return copy
  }
}

extension ProcessSnapshot {
  /// Each image frames are in with where symbolication found its file (or why not), in image order:
  /// what symbolication says of the images.
  var resolutions: [ImageResolutionEntry] {
    images.indices.compactMap { index in images[index].resolution.map { ImageResolutionEntry(imageIndex: index, status: $0) } }
  }
}

/// One image's resolution with its index in the snapshot's `images`.
struct ImageResolutionEntry: Equatable {
  var imageIndex: Int
  var status: ProcessSnapshot.Image.Resolution
}

extension ProcessSnapshot {
  /// Every frame, thread by thread, innermost first, each with its thread's number: the flat list of
  /// frames the tests read a report by (what it read of each frame, and what symbolication found).
  var frames: [ListedFrame] {
    threads.flatMap { thread in thread.frames.map { ListedFrame(thread: thread.number, frame: $0) } }
  }
}

/// A frame with the number of its thread: its own fields and its `symbols`' read through it
/// (`frame.address`, `frame.status`, `frame.functions`).
@dynamicMemberLookup
struct ListedFrame {
  /// The number of the frame's thread (`ProcessSnapshot.Thread.number`).
  var thread: Int
  var frame: ProcessSnapshot.Frame

  /// The frame's number in its thread (its `#N` or index column).
  var index: Int { frame.number }
  /// The report's line the frame was read from.
  var line: Int? { frame.position?.line }
  /// The column the frame's symbol part starts at in that line.
  var symbolColumn: Int? { frame.position?.column }

  subscript<Value>(dynamicMember keyPath: KeyPath<ProcessSnapshot.Frame, Value>) -> Value { frame[keyPath: keyPath] }
  subscript<Value>(dynamicMember keyPath: KeyPath<FrameSymbols, Value>) -> Value { frame.symbols[keyPath: keyPath] }
}

extension ProcessSnapshot {
  /// A text report's lines as read (none for captures and JSON reports).
  var lines: [String] { document?.lines ?? [] }
}
