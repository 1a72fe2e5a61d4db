/// An ELF file decoded from bytes (placeholder until the ELF reader lands).
public struct ELFFile: Sendable {
  /// The file header.
  public var header: ELFHeader

  public init(_ bytes: ByteReader) throws(FormatError) {
    header = try ELFHeader(bytes)
  }

  /// The crash-tooling view of this file.
  public var summary: SliceSummary {
    SliceSummary(architecture: elfArchitectureName(machine: header.machine, is64Bit: header.is64Bit),
                 fileType: "elf", buildID: nil, textVMRange: 0..<0, loadVMRange: 0..<0)
  }
}
