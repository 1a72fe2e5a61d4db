import ImageReaders

extension Image {
  /// The most `fileBytes(in:)` copies: a vDSO is one or two pages; anything bigger is not one.
  package static let fileBytesLimit = 64 << 10

  /// True for an image no file holds: the vDSO (`[vdso]`, as `/proc/PID/maps` names it), which the
  /// kernel maps from its own memory. Its symbols are read from that memory, as eu-stack does.
  package var existsOnlyInMemory: Bool { path.hasPrefix("[") }

  /// The image's ELF file as mapped at `loadAddress` in `memory` (another process's or a core's): from
  /// the ELF header to the end of its last `PT_LOAD` or of its section headers, whichever is further
  /// (the vDSO's section headers lie past its `PT_LOAD`, and its symbols are found through them).
  /// `nil` when the header cannot be read or is not ELF, or the span exceeds `limit` bytes.
  /// Meant for images mapped whole, from their first byte (`existsOnlyInMemory`).
  package func fileBytes(in memory: some MemoryReading, limit: Int = Image.fileBytesLimit) -> [UInt8]? {
    var head = [UInt8](repeating: 0, count: 64)  // ELFCLASS64's header; ELFCLASS32's is 52 bytes
    guard head.withUnsafeMutableBytes({ memory.read(loadAddress, into: $0) }) else { return nil }
    guard let header = try? ByteReader.reading(head, { reader throws(FormatError) in try ELFHeader(reader) }) else { return nil }
    // e_shnum and e_shentsize are UInt16: their product cannot overflow UInt64.
    let tableSize = UInt64(header.sectionHeaderCount) * UInt64(header.sectionHeaderEntrySize)
    let (tableEnd, overflowed) = header.sectionHeaderOffset.addingReportingOverflow(tableSize)
    guard !overflowed else { return nil }
    let span = max(tableEnd, loadSize, 64)
    guard span <= UInt64(limit) else { return nil }
    var bytes = [UInt8](repeating: 0, count: Int(span))  // span <= limit, an Int
    guard bytes.withUnsafeMutableBytes({ memory.read(loadAddress, into: $0) }) else { return nil }
    return bytes
  }
}
