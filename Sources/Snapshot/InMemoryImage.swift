internal import Glibc
public import ProcessInspection
public import ImageReaders

/// An image's ELF file copied from memory, for an image no file holds (the vDSO): symbolication reads
/// its symbols from these bytes when its build-id is the report image's, as eu-stack does. Or, for an
/// image whose file was deleted or replaced after it was loaded, the loaded file itself, held open
/// through the process's mapping of it (`mapping`). A source that reads a process's memory (a live
/// process, a core) keeps these in its snapshot (`ProcessSnapshot.inMemoryImages`) while that memory
/// can be read.
public struct InMemoryImage: Sendable {
  /// The build-id the image had where it was copied from (only an image with it is served).
  public var buildID: BuildID
  /// The name shown for where the symbols came from (`[vdso]`).
  public var path: String
  /// The ELF file as mapped, from its header (empty for a `mapping`).
  public var bytes: [UInt8]
  /// The file the image was loaded from, when it is no longer at its path: read whole (symbols, DWARF).
  package var mapping: MappedImageFile?
  /// Why that file could not be opened through the mapping (`bytes` and `mapping` empty then): said in
  /// the report beside what symbolication found instead.
  package var mappingProblem: String?

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

  /// Of `images` of live process `pid`: the vDSO copied from its memory (`copies`) and the images whose
  /// file is no longer at its path held through their mappings (`heldMappings`).
  package static func live(_ images: [Image], pid: Int32) -> [InMemoryImage] {
    copies(of: images, in: ProcessMemory(pid: pid)) + heldMappings(of: images, pid: pid)
  }

  /// For each image of `images` with a build-id whose file was deleted or replaced on disk after it was
  /// loaded (`Image.deletedMark`), the loaded file opened through process `pid`'s mapping of its first
  /// page (`/proc/PID/map_files/START-END`) and held open: its symbols and DWARF are then read from it
  /// even after the process is gone (a crashed program let go before symbolication). Only while `pid`
  /// lives (or the kernel holds it, dumping its core); a file found there is used only when its build-id
  /// is the image's. The kernel opens those files only for a reader with `CAP_SYS_ADMIN`
  /// (`CAP_CHECKPOINT_RESTORE` since Linux 5.9); for others, such images are found by their identity
  /// elsewhere, or not at all.
  package static func heldMappings(of images: [Image], pid: Int32) -> [InMemoryImage] {
    var result: [InMemoryImage] = []
    let deleted = images.filter { Image.withoutDeletedMark($0.path).deleted && $0.buildID != nil }
    guard !deleted.isEmpty else { return result }
    let folder = "/proc/\(pid)/map_files"
    let names = FileSystem.contents(folder)
    for image in deleted {
      guard let buildID = image.buildID else { continue }
      let start = hexDigits(image.loadAddress) + "-"
      var held = InMemoryImage(buildID: buildID, path: image.path, bytes: [])
      guard let name = names.first(where: { $0.hasPrefix(start) }) else {
        held.mappingProblem = "\(folder): no mapping starts at 0x\(hexDigits(image.loadAddress)) (or it cannot be listed)"
        result.append(held)
        continue
      }
      switch MappedImageFile.open(folder + "/" + name) {
      case .success(let mapping): held.mapping = mapping
      case .failure(let error):
        held.mappingProblem = "\(folder)/\(name): \(error.description)"
          + (error.errno == EPERM || error.errno == EACCES ? " (the kernel opens it for CAP_SYS_ADMIN only)" : "")
      }
      result.append(held)
    }
    return result
  }
}

/// A file held open by descriptor, read through `/proc/self/fd/N`: the file a process mapped, opened
/// through its `/proc/PID/map_files` entry, stays readable after the process exits and whatever now
/// lies at its path. Closed when the last copy of the `InMemoryImage` holding it goes.
package final class MappedImageFile: Sendable {
  /// Where it was opened (`/proc/PID/map_files/START-END`), as reports name it.
  package let origin: String
  private let descriptor: Int32

  private init(origin: String, descriptor: Int32) {
    self.origin = origin
    self.descriptor = descriptor
  }

  /// Opens `origin` for reading, or says why it cannot.
  static func open(_ origin: String) -> Result<MappedImageFile, SystemError> {
    let descriptor = PathBytes.withCString(origin) { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
    guard descriptor >= 0 else { return .failure(SystemError.current("cannot open")) }
    return .success(MappedImageFile(origin: origin, descriptor: descriptor))
  }

  /// A path that opens the file held.
  package var path: String { "/proc/self/fd/\(descriptor)" }

  deinit { close(descriptor) }
}
