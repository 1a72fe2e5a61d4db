/// A 64-bit multiply-rotate hash of little-endian 8-byte words (the last padded with zeros), in four
/// lanes (word i goes to lane i mod 4) so that the processor overlaps their multiplications: the symbol
/// cache's checksum. Each step is a bijection of its lane, so one changed word always changes the
/// result; it guards against damage, not against a forger (bounds checks do that).
package enum WordHash {
  /// The hash of every byte of `reader`, the 8 bytes at `skipping` (a multiple of 8) read as zero.
  package static func hash(_ reader: ByteReader, skipping: Int) -> UInt64 {
    let seed: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(reader.count)
    var lanes: (UInt64, UInt64, UInt64, UInt64) = (seed, seed &+ 1, seed &+ 2, seed &+ 3)
    @inline(__always) func mix(_ lane: inout UInt64, _ word: UInt64) {
      lane = (lane ^ word) &* 0x0000_0100_0000_01B3
      lane = (lane << 29) | (lane >> 35)
    }
    @inline(__always) func word(_ offset: Int) -> UInt64 {
      offset == skipping ? 0 : reader.field(UInt64.self, at: offset)
    }
    let words = reader.count / 8
    var index = 0
    while index + 4 <= words {
      let offset = index * 8  // index + 4 <= count / 8: the four words are inside
      mix(&lanes.0, word(offset))
      mix(&lanes.1, word(offset + 8))
      mix(&lanes.2, word(offset + 16))
      mix(&lanes.3, word(offset + 24))
      index += 4
    }
    while index < words {
      mix(&lanes.0, word(index * 8))
      index += 1
    }
    var tail: UInt64 = 0, shift: UInt64 = 0
    var offset = words * 8
    while offset < reader.count {
      tail |= UInt64(reader.field(UInt8.self, at: offset)) << shift
      shift += 8  // fewer than 8 bytes are left
      offset += 1
    }
    if shift > 0 { mix(&lanes.1, tail) }
    var hash = lanes.0
    mix(&hash, lanes.1)
    mix(&hash, lanes.2)
    mix(&hash, lanes.3)
    return hash
  }
}
