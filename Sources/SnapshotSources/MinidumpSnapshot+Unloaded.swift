import ImageReaders
import Snapshot

extension ProcessSnapshot {
  /// A minidump's unloaded modules as the snapshot's unloaded images, in the stream's order (imagelog
  /// writes the newest first): base, size and name only, which is all `MINIDUMP_UNLOADED_MODULE` holds.
  static func unloadedImages(_ modules: [MinidumpFile.UnloadedModule]) -> [UnloadedImage] {
    modules.map { UnloadedImage(baseAddress: $0.baseAddress, size: UInt64($0.size), path: $0.name) }
  }
}
