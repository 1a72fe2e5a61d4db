import ImageReaders
import Snapshot

extension Symbolicator {
  /// Frames in no mapped image but in one the process removed before the crash (`unloadedImages`):
  /// symbolicated from that image's file, found by its build-id (or at its path) as any image's is, with
  /// the same options. The frames keep no image (none is mapped there); their answers name the file's
  /// functions, and what could not be found is said in the notes.
  static func symbolicateUnloaded(_ snapshot: inout ProcessSnapshot, options: SymbolicationOptions,
                                  cache: SymbolicationCache?, locator: DebugFileLocator?) {
    guard !snapshot.unloadedImages.isEmpty else { return }
    // One image per unloaded image a frame is in, and a copy of each such frame placed in it.
    var side = ProcessSnapshot(format: snapshot.format, process: snapshot.process)
    var sideIndex: [Int: Int] = [:]
    var refs: [ProcessSnapshot.FrameRef] = []
    var frames: [ProcessSnapshot.Frame] = []
    let architecture = snapshot.images.lazy.compactMap(\.architecture).first
    for ref in snapshot.frameRefs {
      let frame = snapshot[ref]
      guard frame.imageIndex == nil, frame.symbols.status != .symbolicated,
            let unloaded = snapshot.unloadedImages.firstIndex(where: { $0.contains(frame.address) }) else { continue }
      let index = sideIndex[unloaded] ?? {
        let gone = snapshot.unloadedImages[unloaded]
        side.images.append(ProcessSnapshot.Image(
          name: gone.name, path: gone.path, loadAddress: gone.baseAddress, endAddress: gone.baseAddress &+ gone.size &- 1,
          identity: gone.buildID.isEmpty ? nil : ImageIdentity(BuildID(gone.buildID)), architecture: architecture))
        sideIndex[unloaded] = side.images.count - 1
        return side.images.count - 1
      }()
      var placed = frame
      placed.imageIndex = index
      frames.append(placed)
      refs.append(ref)
    }
    guard !frames.isEmpty else { return }
    side.threads = [ProcessSnapshot.Thread(number: 0, frames: frames)]
    symbolicate(&side, options: options, cache: cache, locator: locator)
    for (ref, frame) in zip(refs, side.threads[0].frames) { snapshot[ref].symbols = frame.symbols }
    for image in side.images {
      switch image.resolution {
      case .missing?: snapshot.notes.append("unloaded image \(image.name): its file was not found")
      case let .mismatch(reportID, fileID, path)?:
        snapshot.notes.append("unloaded image \(image.name): \(path) is another build (file <\(fileID)>, unloaded <\(reportID)>)")
      default: break
      }
    }
    for note in side.notes where !snapshot.notes.contains(note) { snapshot.notes.append(note) }
  }
}
