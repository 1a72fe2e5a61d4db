import ProcessInspection
import ImageReaders
import Snapshot

extension Symbolicator {
  /// Places the images whose load address the report did not give (glibc's `symbol+0xoffset` frames,
  /// and its `./prog[0x…]` and `./prog() [0x…]` ones, which give none): the first frame whose symbol the
  /// found file has fixes the image's load bias, as `dladdr(3)` computed the offset from that symbol; a
  /// fixed-address executable (`ET_EXEC`) has bias 0. Frames of an image that cannot be placed are
  /// detached from it (no guess); the returned notes say which.
  /// `files`: by image index.
  static func placeImagesBySymbols(_ report: inout ProcessSnapshot, files: [SymbolFile?]) -> [String] {
    var notes: [String] = []
    for imageIndex in report.images.indices where report.images[imageIndex].loadAddressFromSymbols {
      let frameIndices = report.frameRefs.filter { report[$0].imageIndex == imageIndex }
      guard !frameIndices.isEmpty, let file = files[imageIndex] else { continue }  // a missing file: nothing to place
      let wanted = Set(frameIndices.compactMap { report[$0].symbolOffset?.name })
      var addresses: [String: UInt64] = [:]
      if !wanted.isEmpty {
        for index in 0..<file.symbols.count {
          let symbol = file.symbols.symbol(at: index)
          if wanted.contains(symbol.name), addresses[symbol.name] == nil { addresses[symbol.name] = symbol.address }
        }
      }
      var placed: UInt64?
      for frameIndex in frameIndices {
        guard let located = report[frameIndex].symbolOffset, let start = addresses[located.name] else { continue }
        placed = report[frameIndex].address &- (start &+ located.offset)
        break
      }
      if placed == nil, file.isFixedAddress, report.images[imageIndex].offsetsFromLoadBias { placed = 0 }
      if let placed {
        report.images[imageIndex].loadAddress = placed
        report.images[imageIndex].loadAddressFromSymbols = false
      } else {
        for frameIndex in frameIndices { report[frameIndex].imageIndex = nil }
        notes.append("\(report.images[imageIndex].path ?? report.images[imageIndex].name): no frame gives an offset or a "
                     + "symbol this file has, so its \(frameIndices.count) frames cannot be placed")
      }
    }
    return notes
  }
}
