/// A universal (fat) file decoded from bytes (placeholder until the universal reader lands).
public struct FatFile: Sendable {
  /// True for `FAT_MAGIC` and `FAT_MAGIC_64` read big-endian.
  public static func isMagic(_ magic: UInt32) -> Bool {
    magic == 0xCAFE_BABE || magic == 0xCAFE_BABF
  }

  public init(_ bytes: ByteReader) throws(FormatError) {
    throw .fat("universal reading is not implemented yet")
  }

  /// One summary per slice, in header order.
  public var slices: [SliceSummary] { [] }
}
