public import ProcessInspection
import ImageReaders

extension ProcessSnapshot {
  /// One binary image of the process, as much of it as the source knows.
  public struct Image: Sendable, Equatable {
    /// The short name (`libswiftCore.so`, `MyApp`); `???` when the source does not know.
    public var name: String
    /// The path the source recorded, `nil` when unknown.
    public var path: String?
    /// Where the image starts in the process (ELF: the first mapped byte; Mach-O: `__TEXT`).
    public var loadAddress: Address
    /// The last byte (inclusive) the source gives for the image, when it gives one.
    public var endAddress: Address?
    /// The identity recorded for the image, `nil` when none was (or it was all zeros).
    public var identity: ImageIdentity?
    /// The architecture the source names for the image (Mach-O slice selection), when it does.
    public var architecture: String?
    /// True when a frame's address minus `loadAddress` is a link-time virtual address: sanitizers,
    /// Android and glibc give offsets from the load bias (`dlpi_addr`), not from the first mapped byte.
    public var offsetsFromLoadBias = false
    /// True when the source gave no load address for the image (glibc's `symbol+0xoffset` frames):
    /// it is found from a frame's symbol once the file is found.
    public var loadAddressFromSymbols = false
    /// The image as the loader maps it, when the source is a capture (a live process, a core, a
    /// minidump): the Binary Images lines and the unwinder read it.
    public var loaded: ProcessInspection.Image?
    /// Where symbolication found the image's file, or why not; `nil` when no frame is in the image or
    /// symbolication has not run.
    public var resolution: Resolution?
    /// The file DWARF came from, when it is another file than the one the symbols came from.
    public var debugFile: String?
    /// The debug file's name as the source records it (a minidump's CodeView record: `test_app.pdb`,
    /// `libc.so.6`): the folder a Breakpad symbol store files the image's symbols under. `nil` when the
    /// source does not say.
    public var debugFileName: String?
    /// Breakpad's debug identifier as the source records it (`5A9832E5287241C1838ED98914E9B7FF1`: a
    /// GUID or UUID and an age), when it does: with `debugFileName`, where a store holds the symbols.
    public var debugID: String?
    /// The code identifier as minidump-stackwalk prints it (a whole build-id, a Mach-O UUID, a PE time
    /// stamp and size), when the source has one.
    public var codeID: String?

    /// An image as a report gives it.
    public init(name: String, path: String?, loadAddress: Address, endAddress: Address?, identity: ImageIdentity?,
                architecture: String?) {
      self.name = name
      self.path = path
      self.loadAddress = loadAddress
      self.endAddress = endAddress
      self.identity = identity
      self.architecture = architecture
    }

    /// True when frames are placed in the image by its address range: the source gives its end, and
    /// its identity or path (Apple's `0x0 - 0xffffffffffffffff ???` is no image to place frames in).
    package var isRanged: Bool { endAddress != nil && (identity != nil || path != nil) }

    /// Where the image's file was found, or why not.
    public enum Resolution: Sendable, Equatable {
      /// Found by identity (`how` says where: `path`, `search`, `build-id`, `debuginfod`...).
      case found(path: String, how: String)
      /// Found at the recorded path; the source gives no identity to check it by.
      case unverified(path: String)
      /// The only file found has another identity.
      case mismatch(reportID: String, fileID: String, path: String)
      /// The source has no identity, and what it says contradicts the file at its path (`reason`): its
      /// function names disagree with the file's at those offsets, or an offset lies past the end of the
      /// file's mapped segments. Another build: none of its names are used.
      case otherBuild(path: String, reason: String)
      /// No file was found.
      case missing
      /// No file was looked for: symbolication did not run.
      case notSearched
    }
  }
}
