#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import ImageReaders

/// Expands `imagelog file`'s arguments into the files to read: named paths as given, a `.dSYM` bundle
/// as the DWARF files in its `Contents/Resources/DWARF` (with or without `-r`), and with `-r` the
/// regular files under named folders, in name order. Symbolic links are followed, but a folder
/// already visited (same device and inode) is never entered again, so link loops end.
enum FileWalker {
  /// A file to read and whether a folder walk found it (walks skip non-binaries silently).
  struct Input {
    var path: String
    var fromWalk: Bool
  }

  private struct FileID: Hashable {
    var device: UInt64
    var inode: UInt64
  }

  static func expand(_ paths: [String], recursive: Bool,
                     onError: (_ path: String, _ problem: String) -> Void) -> [Input] {
    var inputs: [Input] = []
    var visited: Set<FileID> = []
    for path in paths {
      // Only a folder is walked or opened as a bundle. Without -r, a path whose name is not `*.dSYM`
      // goes straight to the reader, whose fstat refuses folders: no stat call per named file.
      guard recursive || mayNameBundle(path) else {
        inputs.append(Input(path: path, fromWalk: false))
        continue
      }
      var info = stat()
      let isFolder = PathBytes.withCString(path, { stat($0, &info) }) == 0 && info.st_mode & S_IFMT == S_IFDIR
      if isFolder, DSYMBundle.isBundle(path) {
        // The files inside a bundle the user named are named too: each problem is reported.
        do {
          let files = try DSYMBundle.dwarfFiles(inBundle: path)
          if files.isEmpty { onError(path, "no DWARF files in the dSYM bundle") }
          inputs += files.map { Input(path: $0, fromWalk: false) }
        } catch {
          onError(path, error.description)
        }
      } else if recursive, isFolder {
        walk(path, info: info, into: &inputs, visited: &visited, onError: onError)
      } else {
        inputs.append(Input(path: path, fromWalk: false))
      }
    }
    return inputs
  }

  /// True when `path` ends in `.dSYM` (any case), trailing slashes ignored: `DSYMBundle.isBundle`'s
  /// name test, on the UTF-8 bytes.
  static func mayNameBundle(_ path: String) -> Bool {
    var path = path
    return path.withUTF8 { bytes in
      var end = bytes.count
      while end > 1, bytes[end - 1] == UInt8(ascii: "/") { end -= 1 }
      let suffix: [UInt8] = [UInt8(ascii: "."), UInt8(ascii: "d"), UInt8(ascii: "s"), UInt8(ascii: "y"), UInt8(ascii: "m")]
      guard end >= suffix.count else { return false }
      // ASCII letters fold to lowercase with 0x20; "." has the bit already.
      for index in 0..<suffix.count where bytes[end - suffix.count + index] | 0x20 != suffix[index] { return false }
      return true
    }
  }

  private static func walk(_ folder: String, info: stat, into inputs: inout [Input], visited: inout Set<FileID>,
                           onError: (_ path: String, _ problem: String) -> Void) {
    guard visited.insert(FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))).inserted else { return }
    guard let directory = PathBytes.withCString(folder, opendir) else {
      onError(folder, "cannot open directory: \(String(cString: strerror(errno)))")
      return
    }
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { raw in PathBytes.string(raw.prefix { $0 != 0 }) }
      if name != "." && name != ".." { names.append(name) }
    }
    closedir(directory)
    names.sort()
    let prefix = folder.hasSuffix("/") ? folder : folder + "/"
    for name in names {
      let path = prefix + name
      var entryInfo = stat()
      guard PathBytes.withCString(path, { stat($0, &entryInfo) }) == 0 else { continue }  // a dangling link or a file gone since readdir
      switch entryInfo.st_mode & S_IFMT {
      case S_IFDIR: walk(path, info: entryInfo, into: &inputs, visited: &visited, onError: onError)
      case S_IFREG: inputs.append(Input(path: path, fromWalk: true))
      default: continue  // FIFOs, sockets, devices are never binaries to read
      }
    }
  }
}

/// `[n/total] path` on standard error, redrawn in place, only when standard error is a terminal and
/// the run has already taken `defaultDelayMilliseconds`; cleared before any other line is written. The
/// environment variable `IMAGELOG_PROGRESS_DELAY_MS` changes that delay (the tests set 0): a short run
/// shows no line at all.
struct ProgressLine {
  private let total: Int
  private var done = 0
  private let enabled: Bool
  // Nanoseconds of CLOCK_MONOTONIC, not ContinuousClock: that type alone links the whole Concurrency
  // runtime and libdispatch into the executable, whose initializer then runs at every start-up.
  private let start: Int
  private let delay: Int
  private var lastDraw: Int
  private var drawn = false
  private var shown = false
  static let defaultDelayMilliseconds = 500

  init(total: Int) {
    self.total = total
    enabled = standardErrorIsTerminal
    start = monotonicNanoseconds()
    lastDraw = start
    let configured = getenv("IMAGELOG_PROGRESS_DELAY_MS").flatMap { Int(String(cString: $0)) }
    delay = max(0, min(configured ?? Self.defaultDelayMilliseconds, 86_400_000)) * 1_000_000
  }

  mutating func tick(_ path: String) {
    done += 1
    guard enabled else { return }
    let now = monotonicNanoseconds()
    guard now - start >= delay else { return }
    if drawn, now - lastDraw < 100_000_000 { return }
    lastDraw = now
    drawn = true
    shown = true
    writeStandardError("\r\u{1B}[K[\(done)/\(total)] \(TextEscaping.escaped(path))")
  }

  mutating func clear() {
    guard shown else { return }
    shown = false
    drawn = false
    writeStandardError("\r\u{1B}[K")
  }

  private func writeStandardError(_ text: String) {
    writeAll(to: 2, text)
  }
}
