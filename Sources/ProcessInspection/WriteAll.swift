internal import Glibc
import ImageReaders

/// The one write-everything loop: writes all of `bytes` to `descriptor`, retrying a `write(2)`
/// interrupted by a signal (`EINTR`) and continuing after short writes (pipes, terminals).
///
/// Returns `false` when a write failed or wrote nothing (a closed pipe, a full disk; `errno` says
/// why); what was not written is dropped, as stdio drops it. Async-signal-safe: only `write(2)`, no
/// allocation, so the crash handler and the audit-record readers may use it too.
@discardableResult
public func writeAll(to descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
  guard let base = bytes.baseAddress else { return true }
  var offset = 0
  while offset < bytes.count {
    let written = write(descriptor, base + offset, bytes.count - offset)
    if written < 0 && errno == EINTR { continue }
    guard written > 0 else { return false }
    offset += written  // write(2) returns at most the count asked for: offset stays <= bytes.count
  }
  return true
}

/// Writes all of `text`'s UTF-8 to `descriptor` (`writeAll(to:_:)` on its bytes).
@discardableResult
public func writeAll(to descriptor: Int32, _ text: String) -> Bool {
  var text = text
  return text.withUTF8 { writeAll(to: descriptor, UnsafeRawBufferPointer($0)) }
}

/// Writes what `write` writes to the file a user named for a command's output (`-o FILE`). A name that
/// is a stream — a terminal, a pipe, a character device such as `/dev/null`, itself or through a link
/// such as `/dev/stdout` — is written in place as a shell's `>` writes it: replacing it would put a
/// regular file where `/dev/null` or `/dev/stdout` was, for every other program of the machine. Any other
/// name (a file, a link to one, nothing yet) is written by `writeFileAtomically`. Returns true when it
/// wrote a stream (a command then keeps its own messages off it: `-o /dev/stdout | gzip`).
@discardableResult
package func writeNamedOutput(_ path: String, permissions: UInt32 = 0o644, _ write: (Int32) -> Bool) throws(SystemError) -> Bool {
  var target = stat()
  guard PathBytes.withCString(path, { stat($0, &target) }) == 0, isStream(target.st_mode) else {
    try writeFileAtomically(path, permissions: permissions, write)
    return false
  }
  // No O_CREAT, no O_TRUNC: a stream is neither made nor emptied. O_NONBLOCK: a FIFO nobody reads
  // fails at once (ENXIO) instead of waiting; cleared before writing.
  let descriptor = PathBytes.withCString(path) { open($0, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) }
  guard descriptor >= 0 else { throw .current("cannot open") }
  // What was opened, not what was looked at: a name swapped for a file between the two is written as a
  // file is, never through the descriptor (it would write into that file in place).
  var opened = stat()
  guard fstat(descriptor, &opened) == 0, isStream(opened.st_mode) else {
    close(descriptor)
    try writeFileAtomically(path, permissions: permissions, write)
    return false
  }
  defer { close(descriptor) }
  _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
  guard write(descriptor) else { throw .current("cannot write it") }
  return true
}

/// `writeNamedOutput(_:permissions:_:)` of `bytes`.
@discardableResult
package func writeNamedOutput(_ path: String, _ bytes: [UInt8], permissions: UInt32 = 0o644) throws(SystemError) -> Bool {
  try writeNamedOutput(path, permissions: permissions) { descriptor in
    bytes.withUnsafeBytes { writeAll(to: descriptor, $0) }
  }
}

private func isStream(_ mode: mode_t) -> Bool {
  let type = mode & S_IFMT
  return type == S_IFCHR || type == S_IFIFO || type == S_IFSOCK
}

/// Writes `bytes` to a new file at `path` so that no reader ever sees half of it: into a temporary
/// file beside it (`.PATH.XXXXXX`, mode `permissions` less the umask), then renamed over `path`. The
/// temporary file is removed when anything fails.
package func writeFileAtomically(_ path: String, _ bytes: [UInt8], permissions: UInt32 = 0o644) throws(SystemError) {
  try writeFileAtomically(path, permissions: permissions) { descriptor in
    bytes.withUnsafeBytes { writeAll(to: descriptor, $0) }
  }
}

/// `writeFileAtomically(_:_:permissions:)` for contents written by `write` to the temporary file's
/// descriptor as they are made (true when all of it was written; `errno` says why not).
package func writeFileAtomically(_ path: String, permissions: UInt32 = 0o644,
                                 _ write: (Int32) -> Bool) throws(SystemError) {
  let slash = path.lastIndex(of: "/")
  let folder = slash.map { String(path[...$0]) } ?? ""
  let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
  var template = PathBytes.bytes("\(folder).\(name).XXXXXX").map { CChar(bitPattern: $0) } + [0]
  let descriptor = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
  guard descriptor >= 0 else { throw .current("cannot make a temporary file beside it") }
  let temporary = PathBytes.string(template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
  let mask = umask(0)
  umask(mask)
  let written = write(descriptor)
  let failure = written ? nil : errno
  if failure == nil, fchmod(descriptor, mode_t(permissions) & ~mask) != 0 || close(descriptor) != 0 {
    let error = SystemError.current("cannot write it")
    _ = PathBytes.withCString(temporary, unlink)
    throw error
  }
  if let failure {
    close(descriptor)
    _ = PathBytes.withCString(temporary, unlink)
    throw SystemError("cannot write it", errno: failure)
  }
  guard PathBytes.withCString(temporary, { from in PathBytes.withCString(path) { rename(from, $0) } }) == 0 else {
    let error = SystemError.current("cannot rename the temporary file onto it")
    _ = PathBytes.withCString(temporary, unlink)
    throw error
  }
}
