internal import Glibc
import ProcessInspection
import ImageReaders
import Snapshot

/// A file given to a command, opened as what it is: the one place a crash file is opened and told
/// apart, for every command. Its first bytes say whether it is an ELF core, a minidump or text
/// (`CrashFileKind`); text is every other crash imagelog reads — each report kind, several reports in
/// one file, imagelog's crash document, bare addresses with image lines — which `ReportParser` tells
/// apart by the text itself. Standard input (`-`) and other streams (a FIFO, `<(...)`) are read whole
/// and then told apart the same way.
package enum CrashFile {
  /// An ELF core: its notes decoded, its memory read on demand. `ProcessSnapshot.core` makes its
  /// snapshot (its threads unwound in that memory); `imagelog file` lists its images from it.
  case core(CoreDump)
  /// A minidump's process. Its threads are walked when it is symbolicated (`Symbolicator`), in the
  /// dump's memory, which the snapshot carries.
  case minidump(ProcessSnapshot)
  /// The reports a text holds, in order: each a snapshot or why it could not be read. At least one:
  /// a text with none is an error.
  case reports([Result<ProcessSnapshot, ReportError>])

  /// The kind the file's first bytes said.
  package var kind: CrashFileKind {
    switch self {
    case .core: .core
    case .minidump: .minidump
    case .reports: .text
    }
  }

  /// Every crash the file holds, as snapshots (each, for a text, a report or why it could not be read):
  /// a core's, its threads unwound and what could not be read of its images among its `problems`; a
  /// minidump's, walked when symbolicated.
  package func snapshots() -> [Result<ProcessSnapshot, ReportError>] {
    switch self {
    case .core(let dump):
      var (snapshot, problems) = ProcessSnapshot.core(dump)
      snapshot.problems += problems.filter { !snapshot.problems.contains($0) }
      return [.success(snapshot)]
    case .minidump(let snapshot): return [.success(snapshot)]
    case .reports(let reports): return reports
    }
  }

  /// The most of a core or a minidump read from a stream (standard input, a FIFO), which is held in
  /// memory whole; a file on disk is read in ranges on demand, whatever its size.
  package static let maximumStreamedCapture = 1 << 30

  /// Opens the file at `path` (`-`: standard input) as what it is. For text, `images` are the images
  /// bare addresses are in (`--image`), and `addresses` lines read after the text's own (addresses
  /// given beside it). Throws when the file cannot be read, when a core's or a minidump's structure is
  /// broken, and when a text holds no crash at all; the error names the file.
  package static func open(_ path: String, images: [ProcessSnapshot.Image] = [],
                           addresses: [String] = []) throws(CrashFileError) -> CrashFile {
    // A FIFO (`<(...)`) or a device is read as a stream, told by `stat` before any open: an open that
    // does not block (`FileBytes`'s), closed at once, would let a FIFO's writer in to find no reader.
    if path == "-" || FileSystem.kind(path) == .other { return try openStream(path, images: images, addresses: addresses) }
    let file: FileBytes
    do { file = try FileBytes(path: path) } catch {
      throw CrashFileError(path: path, kind: nil, problem: .open(error))
    }
    return try open(file, images: images, addresses: addresses)
  }

  /// The file `file` reads, opened as what it is: a core or a minidump (`capture(in:)`), else text.
  static func open(_ file: FileBytes, images: [ProcessSnapshot.Image], addresses: [String]) throws(CrashFileError) -> CrashFile {
    if let capture = try capture(in: file) { return capture }
    guard file.count <= ReportText.maximumSize else {
      throw CrashFileError(path: file.path, kind: .text, problem: .text(ReportReading.tooLarge(limit: ReportText.maximumSize)))
    }
    let text: String
    do {
      text = try file.withRanges { ranges throws(FormatError) in
        try ranges.slice(at: 0, length: ranges.count).withUnsafeBytes { PathBytes.string($0) }
      }
    } catch {
      throw CrashFileError(path: file.path, kind: .text, problem: file.readError.map { .open($0) } ?? .format(error))
    }
    return try reports(text, path: file.path, images: images, addresses: addresses)
  }

  /// The core or the minidump `file` holds, opened; `nil` when its first bytes say it is neither (text,
  /// or a binary `imagelog file` reads). Throws when it is one whose structure is broken.
  package static func capture(in file: FileBytes) throws(CrashFileError) -> CrashFile? {
    let kind = file.withRanges { ranges in
      (try? ranges.slice(at: 0, length: min(ranges.count, CrashFileKind.headSize))).map(CrashFileKind.init(head:)) ?? .text
    }
    switch kind {
    case .core:
      do { return .core(try CoreDump(path: file.path, file: file)) } catch {
        switch error {
        case .open(let reason): throw CrashFileError(path: file.path, kind: .core, problem: .open(reason))
        case .format(let reason): throw CrashFileError(path: file.path, kind: .core, problem: .format(reason))
        }
      }
    case .minidump:
      do { return .minidump(try ProcessSnapshot.minidump(file)) } catch {
        throw CrashFileError(path: file.path, kind: .minidump, problem: file.readError.map { .open($0) } ?? .format(error))
      }
    case .text:
      return nil
    }
  }

  /// Bare addresses given alone (the command line's), in `images`: a text of their lines, named
  /// `<arguments>` in errors.
  package static func addresses(_ addresses: [String], images: [ProcessSnapshot.Image]) throws(CrashFileError) -> CrashFile {
    try reports("", path: "<arguments>", images: images, addresses: addresses)
  }

  /// The reports in `text`, with `addresses` as lines after its own.
  static func reports(_ text: String, path: String, images: [ProcessSnapshot.Image],
                      addresses: [String]) throws(CrashFileError) -> CrashFile {
    var text = text
    if !addresses.isEmpty { text += (text.isEmpty || text.hasSuffix("\n") ? "" : "\n") + addresses.joined(separator: "\n") + "\n" }
    let reports = ReportParser.parseAll(text, images: images)
    if reports.count == 1, case .failure(let error) = reports[0] {
      throw CrashFileError(path: path, kind: .text, problem: .text(error))
    }
    return .reports(reports)
  }

  /// A stream (standard input, a FIFO, a character device) read to its end: its first bytes say what
  /// it is, and so how much of it may be held (`ReportText.maximumSize` for text,
  /// `maximumStreamedCapture` for a core or a minidump).
  static func openStream(_ path: String, images: [ProcessSnapshot.Image], addresses: [String]) throws(CrashFileError) -> CrashFile {
    let descriptor = path == "-" ? 0 : PathBytes.withCString(path) { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
    guard descriptor >= 0 else { throw CrashFileError(path: path, kind: nil, problem: .open(.system(.current("cannot open")))) }
    defer { if descriptor != 0 { close(descriptor) } }
    var bytes: [UInt8] = []
    let kind: CrashFileKind
    do throws(SystemError) {
      let ended = try ReportReading.read(descriptor, into: &bytes, past: CrashFileKind.headSize)
      kind = bytes.withUnsafeBytes { CrashFileKind(head: ByteReader(UnsafeRawBufferPointer(rebasing: $0.prefix(CrashFileKind.headSize)))) }
      if !ended { _ = try ReportReading.read(descriptor, into: &bytes, past: kind == .text ? ReportText.maximumSize : maximumStreamedCapture) }
    } catch {
      throw CrashFileError(path: path, kind: nil, problem: .open(.system(error)))
    }
    if kind == .text, bytes.count > ReportText.maximumSize {
      throw CrashFileError(path: path, kind: kind, problem: .text(ReportReading.tooLarge(limit: ReportText.maximumSize)))
    }
    if kind != .text, bytes.count > maximumStreamedCapture {
      throw CrashFileError(path: path, kind: kind, problem: .streamTooLarge(limit: maximumStreamedCapture))
    }
    guard !bytes.isEmpty else { throw CrashFileError(path: path, kind: nil, problem: .open(.empty)) }
    guard kind != .text else { return try reports(PathBytes.string(bytes), path: path, images: images, addresses: addresses) }
    // Held as one buffer: a parser's range must lie in one piece of what was kept.
    let held = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
    bytes.withUnsafeBytes { held.copyMemory(from: $0) }
    let count = bytes.count
    bytes = []
    return try open(FileBytes(path: path, count: count, held: [(0, held)]), images: images, addresses: addresses)
  }
}

/// Why a crash file could not be opened: the file, the kind its first bytes said (when they were
/// read), and the problem. `description` is `PATH: PROBLEM` (the command adds `imagelog: ` and
/// escapes the line, a path's control characters too, as every diagnostic).
package struct CrashFileError: Error, CustomStringConvertible {
  /// What went wrong.
  package enum Problem: Sendable, CustomStringConvertible {
    /// The file cannot be opened or read: missing, a folder, empty, unreadable, too large for a stream.
    case open(MappedFile.OpenError)
    /// A core's or a minidump's structure is broken (cut short, a table past its end).
    case format(FormatError)
    /// A text that holds no crash imagelog reads, or is too large for one.
    case text(ReportError)
    /// A core or a minidump read from a stream, too large to be held in memory (more than `limit` bytes).
    case streamTooLarge(limit: Int)

    package var description: String {
      switch self {
      case .open(let error): error.description
      case .format(let error): error.description
      case .text(let error): error.description
      case .streamTooLarge(let limit): "too large to read from a stream (over \(limit) bytes): give the file's path"
      }
    }
  }

  /// The path as given (`-`: standard input).
  package var path: String
  /// The kind the file's first bytes said; `nil` when none were read.
  package var kind: CrashFileKind?
  /// What went wrong.
  package var problem: Problem

  package var description: String { "\(path): \(problem)" }
}
