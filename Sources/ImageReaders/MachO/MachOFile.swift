/// A thin Mach-O file decoded from bytes (placeholder until the Mach-O reader lands).
public struct MachOFile: Sendable {
  /// True for `MH_MAGIC`, `MH_MAGIC_64` and their byte-swapped forms, read in either order.
  public static func isMagic(_ magic: UInt32) -> Bool {
    magic == 0xFEED_FACE || magic == 0xFEED_FACF
  }

  public init(_ bytes: ByteReader) throws(FormatError) {
    throw .machO("Mach-O reading is not implemented yet")
  }

  /// The crash-tooling view of this file.
  public var summary: SliceSummary {
    SliceSummary(architecture: "unknown", fileType: "unknown", buildID: nil, textVMRange: 0..<0, loadVMRange: 0..<0)
  }
}
