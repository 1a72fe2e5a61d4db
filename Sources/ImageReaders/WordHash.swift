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
      offset == skipping ? 0 : reader.field(UInt64.self, littleEndianAt: offset)
    }
    // Four words a step, into the four lanes. Only the step over the block holding `skipping` asks of
    // each word whether it is that one (asked of every word, it took a fifth of the time).
    @inline(__always) func block(_ offset: Int) {
      mix(&lanes.0, reader.field(UInt64.self, littleEndianAt: offset))
      mix(&lanes.1, reader.field(UInt64.self, littleEndianAt: offset + 8))
      mix(&lanes.2, reader.field(UInt64.self, littleEndianAt: offset + 16))
      mix(&lanes.3, reader.field(UInt64.self, littleEndianAt: offset + 24))
    }
    let words = reader.count / 8
    let blocks = words / 4  // block b is words 4b..<4b+4, all inside
    let skippedBlock = skipping / 32
    for number in 0..<min(skippedBlock, blocks) { block(number * 32) }
    if skippedBlock < blocks {
      let offset = skippedBlock * 32
      mix(&lanes.0, word(offset))
      mix(&lanes.1, word(offset + 8))
      mix(&lanes.2, word(offset + 16))
      mix(&lanes.3, word(offset + 24))
    }
    if skippedBlock + 1 < blocks { for number in (skippedBlock + 1)..<blocks { block(number * 32) } }
    var index = blocks * 4
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
