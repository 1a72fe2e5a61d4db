public import ImageLog
public import ImageReaders

/// An image's ELF file copied from memory, for an image no file holds (the vDSO): symbolication reads
/// its symbols from these bytes when its build-id is the report image's, as eu-stack does. A source
/// that reads a process's memory (a live process, a core) keeps these in its snapshot
/// (`ProcessSnapshot.inMemoryImages`) while that memory can be read.
public struct InMemoryImage: Sendable {
  /// The build-id the image had where it was copied from (only an image with it is served).
  public var buildID: BuildID
  /// The name shown for where the symbols came from (`[vdso]`).
  public var path: String
  /// The ELF file as mapped, from its header.
  public var bytes: [UInt8]

  /// The ELF file `bytes` of the image at `path` with `buildID`.
  public init(buildID: BuildID, path: String, bytes: [UInt8]) {
    self.buildID = buildID
    self.path = path
    self.bytes = bytes
  }

  /// The images of `images` that exist only in memory (`Image.existsOnlyInMemory`) and have a
  /// build-id, copied from `memory` (a process's or a core's); those that cannot be read are left out.
  public static func copies(of images: [Image], in memory: some MemoryReading) -> [InMemoryImage] {
    images.compactMap { image in
      guard image.existsOnlyInMemory, let buildID = image.buildID, let bytes = image.fileBytes(in: memory) else { return nil }
      return InMemoryImage(buildID: buildID, path: image.path, bytes: bytes)
    }
  }
}
