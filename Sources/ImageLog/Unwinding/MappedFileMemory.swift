public import ImageReaders

/// The bytes a process had mapped from files, read from the files themselves: an image's headers,
/// code and call frame tables where a minidump (which keeps stacks, not code) left them out. Each file
/// is added with the mappings its program headers give it at its load bias; only a file shown to be
/// the one the process mapped (by build-id) should be added.
///
/// Not for concurrent use (as `FileBytes`).
public final class MappedFileMemory: MemoryReading {
  private var files: [(mappings: [ELFCore.MappedFiles.Mapping], file: FileBytes)] = []

  /// No file yet.
  public init() {}

  /// Reads `mappings`' addresses from `file` (each mapping's `fileOffset` into it).
  public func add(_ file: FileBytes, mappings: [ELFCore.MappedFiles.Mapping]) {
    files.append((mappings, file))
  }

  public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard buffer.count > 0 else { return true }
    for (mappings, file) in files {
      for mapping in mappings where mapping.vmRange.contains(address) {
        let delta = address - mapping.vmRange.lowerBound  // the mapping holds the address
        let (offset, overflow) = mapping.fileOffset.addingReportingOverflow(delta)
        guard !overflow, UInt64(buffer.count) <= mapping.vmRange.upperBound - address,
              let start = Int(exactly: offset) else { return false }
        return file.withRanges { ranges in
          guard let reader = try? ranges.slice(at: start, length: buffer.count) else { return false }
          reader.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<buffer.count])) }
          return true
        }
      }
    }
    return false
  }
}

/// Two memories read as one: `first` where it holds the bytes, else `second` (a thread's copied stack
/// before the files an image was mapped from, say).
public struct LayeredMemory<First: MemoryReading, Second: MemoryReading>: MemoryReading {
  public let first: First
  public let second: Second

  public init(_ first: First, _ second: Second) {
    self.first = first
    self.second = second
  }

  public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    first.read(address, into: buffer) || second.read(address, into: buffer)
  }
}
