internal import Glibc

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
