internal import Glibc
import ImageReaders

/// One line of `/proc/PID/maps`.
struct ProcessMapping: Equatable, Sendable {
  var start: Address
  var end: Address
  var isReadable: Bool
  var isExecutable: Bool
  var fileOffset: UInt64
  var deviceMajor: UInt32
  var deviceMinor: UInt32
  var inode: UInt64
  /// The pathname column as the kernel wrote it (`" (deleted)"` kept), or "" for anonymous memory.
  var path: String

  /// True for a mapping of a file (not anonymous memory, not a `[heap]`-style pseudo name).
  var isFile: Bool { inode != 0 && path.hasPrefix("/") }

  /// Parses the whole `maps` text. Malformed lines are skipped: the kernel writes this text, but a
  /// line can still be cut short if the process changes its mappings between two reads.
  static func parse(_ text: [UInt8]) -> [ProcessMapping] {
    var result: [ProcessMapping] = []
    result.reserveCapacity(text.count / 80)
    var lineStart = 0
    while lineStart < text.count {
      var lineEnd = lineStart
      while lineEnd < text.count, text[lineEnd] != 0x0A { lineEnd += 1 }
      if let mapping = parseLine(text[lineStart..<lineEnd]) { result.append(mapping) }
      lineStart = lineEnd + 1  // lineEnd < text.count or the loop ends
    }
    return result
  }

  /// `start-end perms offset major:minor inode   path`
  static func parseLine(_ line: ArraySlice<UInt8>) -> ProcessMapping? {
    var index = line.startIndex
    func hexField(until terminator: UInt8) -> UInt64? {
      var value: UInt64 = 0
      var digits = 0
      while index < line.endIndex, line[index] != terminator {
        let byte = line[index]
        let digit: UInt8
        switch byte {
        case 0x30...0x39: digit = byte - 0x30
        case 0x61...0x66: digit = byte - 0x61 + 10
        case 0x41...0x46: digit = byte - 0x41 + 10
        default: return nil
        }
        guard digits < 16 else { return nil }
        value = value << 4 | UInt64(digit)
        digits += 1
        index += 1
      }
      guard digits > 0, index < line.endIndex else { return nil }
      index += 1  // the terminator
      return value
    }
    guard let start = hexField(until: 0x2D), let end = hexField(until: 0x20) else { return nil }
    guard line.endIndex - index >= 5 else { return nil }
    let isReadable = line[index] == 0x72
    let isExecutable = line[index + 2] == 0x78
    index += 4  // rwxp
    guard index < line.endIndex, line[index] == 0x20 else { return nil }
    index += 1
    guard let offset = hexField(until: 0x20), let major = hexField(until: 0x3A),
          let minor = hexField(until: 0x20) else { return nil }
    var inode: UInt64 = 0
    var digits = 0
    while index < line.endIndex, line[index] >= 0x30, line[index] <= 0x39, digits < 20 {
      let (product, overflow) = inode.multipliedReportingOverflow(by: 10)
      let (sum, carry) = product.addingReportingOverflow(UInt64(line[index] - 0x30))
      guard !overflow, !carry else { return nil }
      inode = sum
      index += 1
      digits += 1
    }
    while index < line.endIndex, line[index] == 0x20 { index += 1 }
    let path = PathBytes.string(line[index...])
    return ProcessMapping(start: start, end: end, isReadable: isReadable, isExecutable: isExecutable,
                          fileOffset: offset, deviceMajor: UInt32(truncatingIfNeeded: major),
                          deviceMinor: UInt32(truncatingIfNeeded: minor), inode: inode, path: path)
  }

  func isSameFile(as other: ProcessMapping) -> Bool {
    inode == other.inode && deviceMajor == other.deviceMajor && deviceMinor == other.deviceMinor && path == other.path
  }
}

/// Small `/proc` file helpers: whole-file reads with the errno kept.
package enum ProcFile {
  /// Reads a whole (pseudo) file; throws the errno of `open` or `read`.
  package static func read(_ path: String) throws(SystemError) -> [UInt8] {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw .current("open") }
    defer { close(descriptor) }
    var result: [UInt8] = []
    // An uninitialized buffer, on the stack where the runtime can: most of these files are a few
    // hundred bytes, read many times per command (a thread's stat), and a zeroed 64 KiB array each time
    // cost more than the read.
    let failure: Int32? = withUnsafeTemporaryAllocation(byteCount: 16384, alignment: 16) { buffer in
      while true {
        let got = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
        if got < 0 {
          if errno == EINTR { continue }
          return errno
        }
        if got == 0 { return nil }
        result.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
      }
    }
    if let failure { throw SystemError("read", errno: failure) }
    return result
  }
}

