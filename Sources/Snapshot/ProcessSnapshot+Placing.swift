public import ImageLog

extension ProcessSnapshot {
  /// Puts each frame without an image in the image whose address range holds it: the narrowest, when
  /// ranges overlap, and never an image with neither identity nor path (Apple's `0x0 -
  /// 0xffffffffffffffff ???`); else the image named as `imageName` names the frame's image column (a
  /// report's frame line); else the nearest image below it whose end is unknown.
  ///
  /// `imageName(thread, frame)`: the name the source wrote beside the frame, if any.
  public mutating func placeFrames(imageName: (_ thread: Int, _ frame: Int) -> String? = { _, _ in nil }) {
    let ranged = images.indices.filter { images[$0].isRanged }
    let unsized = images.indices.filter { images[$0].endAddress == nil }
    for threadIndex in threads.indices {
      for frameIndex in threads[threadIndex].frames.indices where threads[threadIndex].frames[frameIndex].imageIndex == nil {
        let address = threads[threadIndex].frames[frameIndex].address
        // The narrowest image containing the address (the first of equals); no array per frame.
        var found: Int?
        var foundSpan: UInt64 = 0
        for candidate in ranged {
          let start = images[candidate].loadAddress
          guard address >= start, let end = images[candidate].endAddress, address <= end else { continue }
          let span = end - start  // start <= address <= end
          if found == nil || span < foundSpan { (found, foundSpan) = (candidate, span) }
        }
        if found == nil, let name = imageName(threadIndex, frameIndex) {
          found = images.firstIndex { $0.name == name }
        }
        if found == nil {
          // An image of unknown size: the nearest one below.
          found = unsized.filter { images[$0].loadAddress <= address }.max { images[$0].loadAddress < images[$1].loadAddress }
        }
        threads[threadIndex].frames[frameIndex].imageIndex = found
      }
    }
  }
}

extension ProcessSnapshot.Image {
  /// An image as the loader mapped it (a capture): its Binary Images line's range and its build-id's
  /// first 16 bytes, as imagelog's report writes them.
  public init(_ loaded: ImageLog.Image) {
    self.init(name: loaded.name, path: loaded.path, loadAddress: loaded.loadAddress, endAddress: loaded.crashLineEnd,
              identity: loaded.buildID.flatMap { ImageIdentity($0.compactUUID) }, architecture: loaded.architecture)
    self.loaded = loaded
  }
}
