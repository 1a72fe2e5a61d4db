import ImageLogTestSupport
import Snapshot
import Testing

/// `ProcessSnapshot.placeFrames`, which now sorts the images once and searches by address (issue 35:
/// a scan of every image per frame made a dump of 20,000 threads and 20,000 modules take seconds),
/// against its rule written out as that scan: the narrowest ranged image holding the address (the
/// first of equals), never one with neither identity nor path; else the image the report names; else
/// the nearest image of unknown size at or below. Seeded images that overlap, nest, repeat, touch
/// 2^64 - 1 or end before they start, and addresses at and around every edge.
@Suite struct FramePlacingTests {
  /// The rule as a scan of every image per frame (what `placeFrames` did before).
  static func scanned(_ images: [ProcessSnapshot.Image], _ address: UInt64, name: String?) -> Int? {
    var found: Int?
    var foundSpan: UInt64 = 0
    for (index, image) in images.enumerated() where image.isRanged {
      guard address >= image.loadAddress, let end = image.endAddress, address <= end else { continue }
      if found == nil || end - image.loadAddress < foundSpan { (found, foundSpan) = (index, end - image.loadAddress) }
    }
    if found == nil, let name { found = images.firstIndex { $0.name == name } }
    if found == nil {
      found = images.indices.filter { images[$0].endAddress == nil && images[$0].loadAddress <= address }
        .max { images[$0].loadAddress < images[$1].loadAddress }
    }
    return found
  }

  @Test func sortedSearchAnswersAsTheScan() {
    var rng = SeededGenerator(seed: 0x35_0002)
    for round in 0..<200 {
      // Addresses from a small set, so that images share starts and ends.
      let corners: [UInt64] = [0, 1, 0x1000, 0x1FFF, 0x2000, 0x3000, 0x8000, UInt64.max - 1, UInt64.max]
      func address() -> UInt64 {
        Bool.random(using: &rng) ? corners.randomElement(using: &rng)! : UInt64.random(in: 0..<0x10000, using: &rng) & ~0xFF
      }
      var images: [ProcessSnapshot.Image] = []
      for index in 0..<Int.random(in: 0...12, using: &rng) {
        let start = address()
        let end: UInt64? = switch Int.random(in: 0..<6, using: &rng) {
        case 0: nil  // size unknown
        case 1: start &- 1  // ends before it starts (or wraps): holds nothing
        default: max(start, address())
        }
        let anonymous = Int.random(in: 0..<5, using: &rng) == 0  // neither identity nor path
        images.append(ProcessSnapshot.Image(name: "image\(index % 4)", path: anonymous ? nil : "/lib/image\(index)",
                                            loadAddress: start, endAddress: end, identity: nil, architecture: "x86_64"))
      }
      var probes = corners
      for image in images {
        probes += [image.loadAddress, image.loadAddress &- 1, image.loadAddress &+ 1]
        if let end = image.endAddress { probes += [end, end &+ 1, end &- 1] }
      }
      let names: [String?] = probes.indices.map { $0 % 3 == 0 ? "image\($0 % 5)" : nil }
      var snapshot = ProcessSnapshot(format: .minidump, threads: [ProcessSnapshot.Thread(number: 0)], images: images)
      snapshot.threads[0].frames = probes.enumerated().map { ProcessSnapshot.Frame(number: $0.offset, address: $0.element,
                                                                                    isReturnAddress: false) }
      snapshot.placeFrames { _, frame in names[frame] }
      for (index, probe) in probes.enumerated() {
        let expected = Self.scanned(images, probe, name: names[index])
        #expect(snapshot.threads[0].frames[index].imageIndex == expected,
                "round \(round): 0x\(String(probe, radix: 16)) in \(images.map { ($0.loadAddress, $0.endAddress, $0.path) })")
      }
    }
  }
}
