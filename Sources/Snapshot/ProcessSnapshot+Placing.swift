public import ProcessInspection
import ImageReaders

extension ProcessSnapshot {
  /// Puts each frame without an image in the image whose address range holds it: the narrowest, when
  /// ranges overlap, and never an image with neither identity nor path (Apple's `0x0 -
  /// 0xffffffffffffffff ???`); else the image named as `imageName` names the frame's image column (a
  /// report's frame line); else the nearest image below it whose end is unknown.
  ///
  /// `imageName(thread, frame)`: the name the source wrote beside the frame, if any.
  package mutating func placeFrames(imageName: (_ thread: Int, _ frame: Int) -> String? = { _, _ in nil }) {
    // Sorted once, searched by address per frame: the work grows with frames times log(images), not
    // frames times images (a hostile dump names thousands of each; MinidumpShapesCLITests holds it).
    let places = FramePlaces(images)
    var byName: [String: Int]?
    for threadIndex in threads.indices {
      for frameIndex in threads[threadIndex].frames.indices where threads[threadIndex].frames[frameIndex].imageIndex == nil {
        // A return address is placed by the call before it, as minidump-stackwalk places a caller: a
        // call at a module's very end returns to the first byte past it.
        let frame = threads[threadIndex].frames[frameIndex]
        let address = frame.isReturnAddress && frame.address > 0 ? frame.address - 1 : frame.address
        var found = places.narrowestImage(containing: address)
        if found == nil, let name = imageName(threadIndex, frameIndex) {
          if byName == nil {
            var first: [String: Int] = [:]
            for (index, image) in images.enumerated() where first[image.name] == nil { first[image.name] = index }
            byName = first
          }
          found = byName?[name]
        }
        if found == nil { found = places.nearestUnsizedImage(below: address) }
        threads[threadIndex].frames[frameIndex].imageIndex = found
      }
    }
  }
}

/// Which image holds an address, as `placeFrames` asks it: the narrowest ranged image containing it (the
/// first of equals in the images' order), else the nearest image of unknown size at or below it. Built
/// once in O(n log n); each question is a binary search.
struct FramePlaces {
  /// The ranged images, the narrowest claiming first.
  private let ranged: RangeOwners
  /// The images of unknown size, by load address (then by index).
  private var unsized: [(address: UInt64, index: Int)] = []

  init(_ images: [ProcessSnapshot.Image]) {
    // Images that are not ranged hold nothing (last < first).
    let ranges = images.map { image in
      image.isRanged ? (first: image.loadAddress, last: image.endAddress ?? 0) : (first: UInt64.max, last: 0)
    }
    let narrowestFirst = ranges.indices.sorted { (ranges[$0].last &- ranges[$0].first, $0) < (ranges[$1].last &- ranges[$1].first, $1) }
    ranged = RangeOwners(ranges, claimOrder: narrowestFirst)
    for (index, image) in images.enumerated() where image.endAddress == nil { unsized.append((image.loadAddress, index)) }
    unsized.sort { ($0.address, $0.index) < ($1.address, $1.index) }
  }

  /// The narrowest ranged image holding `address` (the first of equals), or `nil`.
  func narrowestImage(containing address: UInt64) -> Int? { ranged.owner(of: address) }

  /// The image of unknown size with the highest load address at or below `address` (the first of equals).
  func nearestUnsizedImage(below address: UInt64) -> Int? {
    var low = 0, high = unsized.count
    while low < high {
      let middle = low + (high - low) / 2
      if unsized[middle].address <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0 else { return nil }
    let nearest = unsized[low - 1].address
    // The first of those at the same load address.
    var first = low - 1
    var bottom = 0
    while bottom < first {
      let middle = bottom + (first - bottom) / 2
      if unsized[middle].address < nearest { bottom = middle + 1 } else { first = middle }
    }
    return unsized[first].index
  }
}

extension ProcessSnapshot.Image {
  /// An image as the loader mapped it (a capture): its Binary Images line's range and its build-id's
  /// first 16 bytes, as imagelog's report writes them.
  public init(_ loaded: ProcessInspection.Image) {
    self.init(name: loaded.name, path: loaded.path, loadAddress: loaded.loadAddress, endAddress: loaded.crashLineEnd,
              identity: loaded.buildID.flatMap { ImageIdentity($0.compactUUID) }, architecture: loaded.architecture)
    self.loaded = loaded
  }
}
