import ImageReaders

extension SymbolCacheFormat {
  /// The cache file holding `table`'s answers (see `SymbolCacheFormat`), for the DWARF with identity
  /// `identity` (ASCII, at most `maximumIdentityLength` bytes) and source fingerprint `fingerprint`.
  /// `nil` when the table does not fit the format: ranges spanning 2^32 bytes or more, or sections of
  /// 2^32 bytes or more.
  package static func bytes(of table: DWARFAnswerTable, identity: String, fingerprint: UInt64) -> [UInt8]? {
    let identityBytes = Array(identity.utf8)
    guard identityBytes.count <= maximumIdentityLength else { return nil }
    var strings: [UInt8] = []
    var stringOffsets: [UInt32] = []
    stringOffsets.reserveCapacity(table.strings.count)
    for text in table.strings {
      guard let offset = UInt32(exactly: strings.count) else { return nil }
      stringOffsets.append(offset)
      var length = UInt64(text.utf8.count)
      repeat {
        let low = UInt8(truncatingIfNeeded: length & 0x7F)
        length >>= 7
        strings.append(length == 0 ? low : low | 0x80)
      } while length > 0
      strings.append(contentsOf: text.utf8)
    }
    guard let stringBytes = UInt32(exactly: strings.count), let rangeCount = UInt32(exactly: table.starts.count),
          let subroutineCount = UInt32(exactly: table.subroutines.count) else { return nil }
    let base = table.starts.first ?? 0
    // Every index below comes from the table itself: in range by construction.
    func string(_ index: Int32) -> UInt32 { index < 0 ? none : stringOffsets[Int(index)] }
    func index(_ value: Int32) -> UInt32 { value < 0 ? none : UInt32(value) }

    var bytes: [UInt8] = []
    bytes.reserveCapacity(headerSize + identityBytes.count + (4 + rangeSize) * table.starts.count
                            + subroutineSize * table.subroutines.count + strings.count)
    func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    append(magic)
    append(version)
    append(UInt32(headerSize))
    append(UInt32(identityBytes.count))  // at most maximumIdentityLength
    append(fingerprint)
    append(UInt64(0))  // the checksum, written last
    append(UInt64(0))  // the file size, written last
    append(rangeCount)
    append(subroutineCount)
    append(stringBytes)
    append(UInt32(0))
    append(base)
    bytes.append(contentsOf: identityBytes)
    for start in table.starts {
      guard let offset = UInt32(exactly: start - base) else { return nil }  // starts ascend from base
      append(offset)
    }
    for location in table.locations {
      append(index(location.subroutine))
      append(string(location.file))
      append(location.line)
      append(location.column)
    }
    for subroutine in table.subroutines {
      append(string(subroutine.name))
      append(index(subroutine.next))
      append(UInt32(subroutine.isInlined ? 1 : 0))
      append(string(subroutine.callFile))
      append(subroutine.callLine)
      append(subroutine.callColumn)
    }
    bytes.append(contentsOf: strings)
    withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { size in
      for (position, byte) in size.enumerated() { bytes[32 + position] = byte }
    }
    guard let checksum = try? ByteReader.reading(bytes, { (reader) throws(FormatError) in try Self.checksum(reader) }) else {
      return nil
    }
    withUnsafeBytes(of: checksum.littleEndian) { value in
      for (position, byte) in value.enumerated() { bytes[checksumOffset + position] = byte }
    }
    return bytes
  }
}
