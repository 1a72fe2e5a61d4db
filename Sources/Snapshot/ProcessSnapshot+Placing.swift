public import ImageLog

extension ProcessSnapshot {
  /// Puts each frame without an image in the image whose address range holds it: the narrowest, when
  /// ranges overlap, and never an image with neither identity nor path (Apple's `0x0 -
  /// 0xffffffffffffffff ???`); else the image named as `imageName` names the frame's image column (a
  /// report's frame line); else the nearest image below it whose end is unknown.
  ///
  /// `imageName(thread, frame)`: the name the source wrote beside the frame, if any.
  package mutating func placeFrames(imageName: (_ thread: Int, _ frame: Int) -> String? = { _, _ in nil }) {
    // Sorted once, searched by address per frame: thousands of threads over thousands of images stay
    // cheap (a scan of the images per frame made a 20,000 x 20,000 dump take seconds).
    let places = FramePlaces(images)
    var byName: [String: Int]?
    for threadIndex in threads.indices {
      for frameIndex in threads[threadIndex].frames.indices where threads[threadIndex].frames[frameIndex].imageIndex == nil {
        let address = threads[threadIndex].frames[frameIndex].address
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
  /// Where the address space changes owner: `owners[k]` holds `starts[k] ... starts[k + 1] - 1` (the
  /// last through 2^64 - 1), `nil` where no ranged image does.
  private var starts: [UInt64] = []
  private var owners: [Int?] = []
  /// The images of unknown size, by load address (then by index).
  private var unsized: [(address: UInt64, index: Int)] = []

  init(_ images: [ProcessSnapshot.Image]) {
    // (first, last address, index) of each ranged image that holds any address.
    var ranged: [(first: UInt64, last: UInt64, index: Int)] = []
    for (index, image) in images.enumerated() {
      if let end = image.endAddress {
        if image.isRanged, image.loadAddress <= end { ranged.append((image.loadAddress, end, index)) }
      } else {
        unsized.append((image.loadAddress, index))
      }
    }
    unsized.sort { ($0.address, $0.index) < ($1.address, $1.index) }
    var points = Set<UInt64>()
    for image in ranged {
      points.insert(image.first)
      if image.last < UInt64.max { points.insert(image.last + 1) }
    }
    starts = points.sorted()
    owners = [Int?](repeating: nil, count: starts.count)
    // The narrowest first: each image takes the pieces of its range no narrower one took. `next[k]` leads
    // to the first piece at or after k not taken yet (path halving), so each piece is taken once.
    var next = Array(0...starts.count)
    func free(_ piece: Int) -> Int {
      var piece = piece
      while next[piece] != piece {
        next[piece] = next[next[piece]]
        piece = next[piece]
      }
      return piece
    }
    ranged.sort { ($0.last - $0.first, $0.index) < ($1.last - $1.first, $1.index) }
    for image in ranged {
      let upper = Self.pieces(startingAtOrBelow: image.last, in: starts)
      var piece = free(Self.pieces(startingAtOrBelow: image.first, in: starts) - 1)  // starts holds image.first
      while piece < upper {
        owners[piece] = image.index
        next[piece] = piece + 1
        piece = free(piece + 1)
      }
    }
  }

  /// How many of the sorted `values` are at most `address`.
  private static func pieces(startingAtOrBelow address: UInt64, in values: [UInt64]) -> Int {
    var low = 0, high = values.count
    while low < high {
      let middle = low + (high - low) / 2
      if values[middle] <= address { low = middle + 1 } else { high = middle }
    }
    return low
  }

  /// The narrowest ranged image holding `address` (the first of equals), or `nil`.
  func narrowestImage(containing address: UInt64) -> Int? {
    let count = Self.pieces(startingAtOrBelow: address, in: starts)
    return count > 0 ? owners[count - 1] : nil
  }

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
  public init(_ loaded: ImageLog.Image) {
    self.init(name: loaded.name, path: loaded.path, loadAddress: loaded.loadAddress, endAddress: loaded.crashLineEnd,
              identity: loaded.buildID.flatMap { ImageIdentity($0.compactUUID) }, architecture: loaded.architecture)
    self.loaded = loaded
  }
}
