extension MinidumpFile {
  /// The range in `memoryRanges` holding `address`, or `nil`. Binary search: the ranges are sorted and
  /// do not overlap.
  package func memoryRange(containing address: UInt64) -> MemoryRange? {
    memoryRangeIndex(containing: address).map { memoryRanges[$0] }
  }

  func memoryRangeIndex(containing address: UInt64) -> Int? {
    memoryRanges.sortedRangeIndex(containing: address) { $0.addressRange }
  }

  /// The byte range of the dump file that holds the process's memory `address ..< address + length`,
  /// when one range holds all of it; `nil` when any of it is not in the dump (or `length` is 0).
  package func fileRange(ofMemory address: UInt64, length: Int) -> Range<Int>? {
    guard length > 0, let range = memoryRange(containing: address) else { return nil }
    let delta = address - range.address  // the range contains address
    guard UInt64(length) <= range.size - delta else { return nil }
    // memoryRanges only holds ranges whose bytes lie in the file (memoryRanges(threads:) clips them),
    // so fileOffset + delta + length <= fileSize fits in Int.
    guard let start = Int(exactly: range.fileOffset + delta) else { return nil }
    return start..<start + length
  }

  /// A reader over the process's memory `address ..< address + length`, when one range of the dump holds
  /// all of it; `nil` otherwise. `source` is the dump's bytes, as given to `init(source:)`.
  package func memory<Source: RandomAccessBytes>(at address: UInt64, length: Int,
                                                in source: Source) throws(FormatError) -> ByteReader? {
    guard let range = fileRange(ofMemory: address, length: length) else { return nil }
    var reader = try source.slice(at: range.lowerBound, length: range.count)
    reader.endian = .little
    return reader
  }

  /// How many bytes from `address` on the dump holds without a gap (across adjacent ranges).
  package func availableBytes(from address: UInt64) -> UInt64 {
    guard var index = memoryRangeIndex(containing: address) else { return 0 }
    var total = memoryRanges[index].address &+ memoryRanges[index].size &- address
    // Each step moves to the next range: bounded by the range count.
    while index + 1 < memoryRanges.count,
          memoryRanges[index + 1].address == memoryRanges[index].address &+ memoryRanges[index].size {
      index += 1
      total &+= memoryRanges[index].size
    }
    return total
  }

  /// The byte range of the dump file holding `thread`'s stack: the one its own descriptor names when
  /// that lies in the file (two threads naming one start address may hold different bytes, each its
  /// own, as minidump-stackwalk reads them), else (a descriptor with no bytes of its own, as a full
  /// memory dump's) the memory ranges' bytes at its address; `nil` when the dump holds none.
  func stackFileRange(of thread: Thread) -> Range<Int>? {
    let size = Int(thread.stack.location.dataSize)  // UInt32 -> Int is exact on 64-bit
    let start = Int(thread.stack.location.rva)  // likewise
    if size > 0, start > 0, start <= fileSize, size <= fileSize - start { return start..<start + size }
    return fileRange(ofMemory: thread.stack.startAddress, length: size)
  }

  /// The bytes of `thread`'s stack as the dump holds them (`stackFileRange(of:)`), and the address of
  /// the first; `nil` when the dump holds none.
  package func stack<Source: RandomAccessBytes>(of thread: Thread,
                                               in source: Source) throws(FormatError) -> (address: UInt64, bytes: ByteReader)? {
    guard let range = stackFileRange(of: thread) else { return nil }
    var reader = try source.slice(at: range.lowerBound, length: range.count)
    reader.endian = .little
    return (thread.stack.startAddress, reader)
  }

  /// Every thread's stack (`stack(of:in:)`), in `threads`' order, copied out of the dump so that a range
  /// of the file is held once however many threads name it: threads whose stacks lie at the same bytes
  /// of the file share one array (threads naming one address with different bytes each keep their own). The copies together hold at most the file's size (distinct stacks do not overlap
  /// in a dump any writer makes); a stack past that is `nil`, and one problem says how many were left out.
  /// `nil` too for a thread whose stack the dump does not hold.
  package func stackCopies<Source: RandomAccessBytes>(in source: Source)
    -> (stacks: [(address: UInt64, bytes: [UInt8])?], problem: FormatError?) {
    var held: [Range<Int>: [UInt8]] = [:]
    var budget = fileSize
    var dropped: (count: Int, first: Int) = (0, 0)
    var stacks: [(address: UInt64, bytes: [UInt8])?] = []
    stacks.reserveCapacity(threads.count)
    for (index, thread) in threads.enumerated() {
      guard let range = stackFileRange(of: thread) else {
        stacks.append(nil)
        continue
      }
      if let bytes = held[range] {
        stacks.append((thread.stack.startAddress, bytes))
        continue
      }
      guard range.count <= budget,
            let bytes = try? source.slice(at: range.lowerBound, length: range.count).bytes(at: 0, length: range.count) else {
        if dropped.count == 0 { dropped.first = index }
        dropped.count += 1
        stacks.append(nil)
        continue
      }
      budget -= range.count
      held[range] = bytes
      stacks.append((thread.stack.startAddress, bytes))
    }
    guard dropped.count > 0 else { return (stacks, nil) }
    let label = MinidumpDecoder<ByteReader>.label(Self.threadListType, streams.firstIndex { $0.type == Self.threadListType } ?? 0)
    return (stacks, .minidump("\(label): the stacks of \(dropped.count) threads (the first thread \(dropped.first), tid "
                              + "\(threads[dropped.first].tid)) left out: the stacks kept already hold as many bytes as the file"))
  }
}

extension MinidumpDecoder {
  /// `MINIDUMP_MEMORY_LIST`: a count and `MINIDUMP_MEMORY_DESCRIPTOR`s (16 bytes each).
  mutating func memoryList(_ reader: ByteReader, _ label: String) throws(FormatError) {
    memory += try list(reader, entrySize: 16, label) { _, index, entry throws(FormatError) in
      (entry.field(UInt64.self, at: 0), UInt64(entry.field(UInt32.self, at: 8)), UInt64(entry.field(UInt32.self, at: 12)),
       "\(label): range \(index)")
    }
  }

  /// `MINIDUMP_MEMORY64_LIST`: a 64-bit count, the file offset of the first range's bytes, then
  /// (address, size) pairs whose bytes follow each other from there.
  mutating func memory64List(_ reader: ByteReader, _ label: String) throws(FormatError) {
    let count = try reader.peek(UInt64.self, at: 0)
    var offset = try reader.peek(UInt64.self, at: 8)
    guard count <= UInt64((reader.count - 16) / 16) else {
      throw .minidump("\(label): \(count) ranges of 16 bytes do not fit in its \(reader.count) bytes")
    }
    var ranges: [(address: UInt64, size: UInt64, fileOffset: UInt64, what: String)] = []
    ranges.reserveCapacity(Int(count))  // count <= reader.count / 16
    for index in 0..<Int(count) {
      let entry = try reader.slice(at: 16 + index * 16, length: 16)
      let size = entry.field(UInt64.self, at: 8)
      ranges.append((entry.field(UInt64.self, at: 0), size, offset, "\(label): range \(index)"))
      let (next, overflow) = offset.addingReportingOverflow(size)
      guard !overflow else { throw .minidump("\(label): range \(index)'s bytes end past 2^64") }
      offset = next
    }
    memory += ranges
  }

  /// The memory ranges gathered from the streams, checked against the file, sorted and without
  /// overlaps. A range running past the end of the file keeps the bytes the file has; one wrapping
  /// past 2^64 is dropped; where two overlap with the same bytes (a thread's stack that the memory list
  /// repeats) one is kept silently, and where their bytes may differ the later range loses the overlap.
  mutating func memoryRanges(threads: [MinidumpFile.Thread]) -> [MinidumpFile.MemoryRange] {
    var candidates: [(range: MinidumpFile.MemoryRange, what: String, order: Int)] = []
    candidates.reserveCapacity(memory.count)
    let fileSize = UInt64(file.count)  // a count is never negative
    for (address, size, fileOffset, what) in memory where size > 0 {
      let description = "\(what) 0x\(hexDigits(address))+0x\(hexDigits(size))"
      guard size <= UInt64.max - address else {
        note(.minidump("\(description) wraps past the end of the address space"))
        continue
      }
      var kept = size
      if fileOffset >= fileSize || size > fileSize - fileOffset {
        kept = fileOffset >= fileSize ? 0 : fileSize - fileOffset
        note(.minidump("\(description) at file offset 0x\(hexDigits(fileOffset)) runs past the end of the file "
                                  + "(\(file.count) bytes): \(kept) bytes kept"))
        if kept == 0 { continue }
      }
      candidates.append((MinidumpFile.MemoryRange(address: address, size: kept, fileOffset: fileOffset), description, candidates.count))
    }
    // By address, the longer first, then in stream order: which of two overlapping ranges is kept does
    // not depend on the sort.
    candidates.sort {
      ($0.range.address, UInt64.max - $0.range.size, $0.order) < ($1.range.address, UInt64.max - $1.range.size, $1.order)
    }
    var ranges: [MinidumpFile.MemoryRange] = []
    var names: [String] = []
    ranges.reserveCapacity(candidates.count)
    for (candidate, what, _) in candidates {
      var range = candidate
      if let last = ranges.last, range.address < last.address &+ last.size {
        let lastEnd = last.address &+ last.size
        // The same bytes when both map the address to the same file offset.
        let sameBytes = range.fileOffset &- last.fileOffset == range.address &- last.address
        if !sameBytes {
          note(.minidump("\(what) overlaps \(names[names.count - 1]) with other bytes: the overlap is read from the latter"))
        }
        guard range.address &+ range.size > lastEnd else { continue }
        let cut = lastEnd - range.address
        range = MinidumpFile.MemoryRange(address: lastEnd, size: range.size - cut, fileOffset: range.fileOffset + cut)
      }
      ranges.append(range)
      names.append(what)
    }
    return ranges
  }
}

extension MinidumpFile {
  /// The `LinuxAuxv` stream as (`a_type`, `a_val`) pairs up to `AT_NULL` (not kept), in the dumped
  /// process's word size (from `SystemInfo`; 64-bit without one); `nil` when the dump has no such
  /// stream. (The `LinuxMaps` stream is `/proc/PID/maps` text: ImageLog's maps parser reads it.)
  package var auxiliaryVector: [(type: UInt64, value: UInt64)]? {
    guard let bytes = linux.auxiliaryVector else { return nil }
    let wide = Self.is64Bit(architecture: systemInfo?.processorArchitecture)
    // The same decoding as a core's NT_AUXV; it cannot fail (it stops where a pair no longer fits).
    return try? ByteReader.reading(bytes) { reader throws(FormatError) in try ELFCoreNotes.auxv(reader, is64Bit: wide) }
  }

  /// True when `PROCESSOR_ARCHITECTURE` `architecture` has 64-bit pointers (true without one).
  static func is64Bit(architecture: UInt16?) -> Bool { ![0, 1, 3, 5, 10, 0x8005].contains(architecture ?? 9) }
}
