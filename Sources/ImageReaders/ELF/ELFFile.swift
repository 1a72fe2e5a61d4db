/// An ELF file decoded from bytes (placeholder until the ELF reader lands).
public struct ELFFile: Sendable {
  /// The file header.
  public var header: ELFHeader

  public init(_ bytes: ByteReader) throws(FormatError) {
    header = try ELFHeader(bytes)
  }
}
