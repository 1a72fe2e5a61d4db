import ImageReaders

/// The bytes a process had mapped from files, read from the files themselves: an image's headers,
/// code and call frame tables where a minidump (which keeps stacks, not code) left them out. Each file
/// is added with the mappings its program headers give it at its load bias; only a file shown to be
/// the one the process mapped (by build-id) should be added.
///
/// Not for concurrent use (as `FileBytes`).
package final class MappedFileMemory: MemoryReading {
  /// Every file's mappings, in the order added (the first added that holds an address is read).
  private var mappings: [(mapping: ELFCore.MappedFiles.Mapping, file: FileBytes)] = []
  /// Which mapping holds an address; made at the first read after an `add` (a dump's thousands of
  /// modules are not scanned per read).
  private var owners: RangeOwners?

  /// No file yet.
  package init() {}

  /// Reads `mappings`' addresses from `file` (each mapping's `fileOffset` into it).
  package func add(_ file: FileBytes, mappings: [ELFCore.MappedFiles.Mapping]) {
    self.mappings += mappings.map { ($0, file) }
    owners = nil
  }

  package func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard buffer.count > 0 else { return true }
    if owners == nil {
      let ranges = mappings.map { entry in
        entry.mapping.vmRange.isEmpty ? (first: UInt64.max, last: 0) : (entry.mapping.vmRange.lowerBound, entry.mapping.vmRange.upperBound - 1)
      }
      owners = RangeOwners(ranges, claimOrder: Array(ranges.indices))
    }
    guard let index = owners?.owner(of: address) else { return false }
    let (mapping, file) = mappings[index]
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

/// Two memories read as one: `first` where it holds the bytes, else `second` (a thread's copied stack
/// before the files an image was mapped from, say).
package struct LayeredMemory<First: MemoryReading, Second: MemoryReading>: MemoryReading {
  package let first: First
  package let second: Second

  package init(_ first: First, _ second: Second) {
    self.first = first
    self.second = second
  }

  package func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    first.read(address, into: buffer) || second.read(address, into: buffer)
  }
}
