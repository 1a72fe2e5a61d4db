/// A 64-bit multiply-rotate hash of little-endian 8-byte words (the last padded with zeros): the symbol
/// cache's checksum. Each step is a bijection of the running value, so one changed word always changes
/// the result; it guards against damage, not against a forger (bounds checks do that).
package enum WordHash {
  /// The hash of every byte of `reader`, the 8 bytes at `skipping` (a multiple of 8) read as zero.
  package static func hash(_ reader: ByteReader, skipping: Int) -> UInt64 {
    var hash: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(reader.count)
    @inline(__always) func mix(_ word: UInt64) {
      hash = (hash ^ word) &* 0x0000_0100_0000_01B3
      hash = (hash << 29) | (hash >> 35)
    }
    let words = reader.count / 8
    var index = 0
    while index < words {
      let offset = index * 8  // index < count / 8
      mix(offset == skipping ? 0 : reader.field(UInt64.self, at: offset))
      index += 1
    }
    var tail: UInt64 = 0, shift: UInt64 = 0
    var offset = words * 8
    while offset < reader.count {
      tail |= UInt64(reader.field(UInt8.self, at: offset)) << shift
      shift += 8  // fewer than 8 bytes are left
      offset += 1
    }
    if shift > 0 { mix(tail) }
    return hash
  }
}
