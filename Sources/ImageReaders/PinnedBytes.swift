/// Bytes that stay at one address for as long as the object lives: what a reader that comes back to a
/// file's bytes after parsing it (a `.sym` read on demand) holds, instead of a copy. A mapped file is
/// one (`MappedFile`); `CopiedBytes` makes one of bytes that were only lent for a scope.
package protocol PinnedBytes: AnyObject, Sendable {
  /// Calls `body` with all the bytes (valid during the call; the same address at every call).
  func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R
}

/// A copy of some bytes, freed with the object. Sendable: the bytes are never written after `init`.
package final class CopiedBytes: PinnedBytes, @unchecked Sendable {
  private let buffer: UnsafeMutableRawBufferPointer

  /// A copy of `bytes`.
  package init(_ bytes: UnsafeRawBufferPointer) {
    buffer = .allocate(byteCount: bytes.count, alignment: 1)
    buffer.copyMemory(from: bytes)
  }

  deinit { buffer.deallocate() }

  package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
    try body(UnsafeRawBufferPointer(buffer))
  }
}
