internal import CImageLogProcess
internal import CImageLogUnwind
internal import Glibc

/// Where the unwinder reads the unwound process's memory: our own, another process's, a core's.
public protocol MemoryReading {
  /// Copies `buffer.count` bytes at `address` into `buffer`; false when any of them cannot be read.
  /// Never faults and never reads a partial range as a success.
  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool
}

/// Another process's memory, read with `process_vm_readv(2)` (needs the same rights as ptrace: the
/// same user and `ptrace_scope` allowing it, or `CAP_SYS_PTRACE`).
public struct ProcessMemory: MemoryReading, Sendable {
  /// The process read.
  public var pid: Int32

  /// Reads process `pid`.
  public init(pid: Int32) { self.pid = pid }

  /// Copies the process's bytes at `address` with `process_vm_readv`; false when any is unreadable.
  public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return true }
    let got = il_read_process_memory(pid, address, base, buffer.count)
    if got == buffer.count { return true }
    // A main thread that exited (pthread_exit) no longer reaches the memory its process runs on in.
    guard got < 0, errno == ESRCH, let thread = ProcessImages.liveThread(of: pid) else { return false }
    return il_read_process_memory(thread, address, base, buffer.count) == buffer.count
  }
}

/// Bytes held in memory, at `address` (a `.debug_frame` read from a file, a test's hand-made section).
public struct BufferMemory: MemoryReading, Sendable {
  /// The bytes.
  public var bytes: [UInt8]
  /// The address of the first byte.
  public var address: UInt64

  /// `bytes` at `address`.
  public init(_ bytes: [UInt8], at address: UInt64 = 0) {
    self.bytes = bytes
    self.address = address
  }

  /// Copies the bytes at `address`; false when any lies outside the buffer.
  public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    let (offset, below) = address.subtractingReportingOverflow(self.address)
    guard !below, offset <= UInt64(bytes.count), UInt64(buffer.count) <= UInt64(bytes.count) - offset else { return false }
    let start = Int(offset)  // offset <= bytes.count
    bytes.withUnsafeBytes { raw in
      buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[start..<start + buffer.count]))
    }
    return true
  }
}

/// A `MemoryReading` lent to the C unwinder as an `il_memory`: the callback finds the reader through
/// the opaque context. Valid only inside `withCMemory`'s body.
final class MemoryBox {
  let memory: any MemoryReading
  init(_ memory: any MemoryReading) { self.memory = memory }
}

let memoryCallback: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafeMutableRawPointer?, Int) -> Int32 = {
  context, address, out, length in
  guard let context else { return 0 }
  let box = Unmanaged<MemoryBox>.fromOpaque(context).takeUnretainedValue()
  guard length > 0 else { return 1 }
  guard let out else { return 0 }
  return box.memory.read(address, into: UnsafeMutableRawBufferPointer(start: out, count: length)) ? 1 : 0
}

func withCMemory<Result>(_ memory: any MemoryReading, _ body: (UnsafePointer<il_memory>) -> Result) -> Result {
  let box = MemoryBox(memory)
  return withExtendedLifetime(box) {
    var cMemory = il_memory(read: memoryCallback, context: Unmanaged.passUnretained(box).toOpaque())
    return withUnsafePointer(to: &cMemory) { body($0) }
  }
}
