/// CRC-32 as zlib's `crc32` and gdb's `gnu_debuglink_crc32` compute it (IEEE 802.3, reflected,
/// polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF): the checksum `.gnu_debuglink` records
/// for the separate debug file.
package enum CRC32 {
  /// The checksum of `bytes` continuing from `crc` (0 to start), as `crc32(crc, bytes, count)`.
  package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
    var value = ~crc
    // Slicing-by-4 would be faster; one table lookup a byte is the reference form, and it is only run
    // once per candidate debug file.
    for byte in bytes {
      value = table[Int(UInt8(truncatingIfNeeded: value) ^ byte)] ^ (value >> 8)
    }
    return ~value
  }

  /// The checksum of every byte `reader` covers.
  package static func checksum(_ reader: ByteReader) -> UInt32 {
    reader.withUnsafeBytes { checksum($0) }
  }

  static let table: [UInt32] = (0..<256).map { (index: UInt32) -> UInt32 in
    var value = index
    for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
    return value
  }
}
