#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// A core without `NT_FILE` (a real kernel core with the note hidden): its images come from the
/// dynamic linker's list in its memory, the same as `NT_FILE` gives; a hostile list (a loop, a name
/// outside the core, an absurd `r_debug`, a chain longer than the core has segments) gives a partial
/// list and one line saying why, never a trap or a hang.
@Suite(.serialized) struct ELFCoreLinkMapTests {
  /// The real core (NT_FILE hidden), and the images the same core lists through NT_FILE.
  static let realCore: Result<(bytes: [UInt8], withNote: ELFCoreImageList), TestSupportError> = {
    do {
      let directory = try makeTemporaryDirectory("imagelog-core-linkmap")
      var bytes = try readFileBytes(CoreFileProgram.kernelCore(in: directory)) ?? []
      _ = try? runTool(["rm", "-rf", directory])
      let withNote = try list(bytes)
      guard hideFileNotes(&bytes) == 1 else { return .failure(TestSupportError("the kernel core has no NT_FILE")) }
      return .success((bytes, withNote))
    } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }()

  static func list(_ bytes: [UInt8]) throws -> ELFCoreImageList {
    try withCore(bytes) { core, reader in core.imageList(in: reader) }
  }

  /// Where the walk found `r_debug` and each `link_map` entry, and the core's segments.
  static func layout(_ bytes: [UInt8]) throws -> (rDebug: UInt64, entries: [UInt64], core: ELFCore) {
    try withCore(bytes) { core, reader in
      var walk = ELFCoreLinkMap(core: core) { address, length throws(FormatError) in
        try core.memory(at: address, length: length, in: reader)
      }
      walk.run()
      return (try #require(walk.debugAddress), walk.entryAddresses, core)
    }
  }

  /// Writes `words` (64-bit, little-endian) over the process's memory at `address` in `bytes`.
  static func write(_ words: [UInt64], at address: UInt64, in bytes: inout [UInt8], core: ELFCore) throws {
    let range = try #require(core.fileRange(ofMemory: address, length: words.count * 8), "0x\(hexDigits(address)) not in the core")
    bytes.replaceSubrange(range, with: words.flatMap(le64))
  }

  static func word(_ bytes: [UInt8], at address: UInt64, core: ELFCore) throws -> UInt64 {
    let range = try #require(core.fileRange(ofMemory: address, length: 8))
    return bytes[range].reversed().reduce(0) { $0 << 8 | UInt64($1) }
  }

  @Test(.enabled(if: CoreFileProgram.kernelWritesCores && haveTool("cc"), "cc missing, or the kernel cannot write cores here"))
  func listsWhatTheFileNoteLists() throws {
    let (bytes, withNote) = try Self.realCore.get()
    let list = try Self.list(bytes)
    #expect(list.source == .linkMap)
    #expect(list.problems == [])
    func keys(_ images: [ELFCoreImage]) -> [String] {
      images.map { "0x\(hexDigits($0.loadAddress)) \($0.headers?.buildID?.hex ?? "-") \($0.isVDSO)" }
    }
    #expect(keys(list.images) == keys(withNote.images))
    #expect(list.images.count >= 4, "the program, libc, the dynamic linker and the vDSO: \(keys(list.images))")
    // The names are l_name's (the program's: AT_EXECFN), the same files NT_FILE names by another path.
    for (ours, theirs) in zip(list.images, withNote.images) where !ours.isVDSO {
      #expect(ours.path.split(separator: "/").last == theirs.path.split(separator: "/").last, "\(ours.path) vs \(theirs.path)")
      // Mappings made from the PT_LOADs are covered by the ones NT_FILE records (RELRO's mprotect splits
      // one in two), each byte at the same file offset.
      for mapping in ours.mappings {
        let overlapping = theirs.mappings.filter { $0.vmRange.overlaps(mapping.vmRange) }
        let covered = overlapping.reduce(UInt64(0)) { total, other in
          total + (min(other.vmRange.upperBound, mapping.vmRange.upperBound) - max(other.vmRange.lowerBound, mapping.vmRange.lowerBound))
        }
        #expect(covered == UInt64(mapping.vmRange.count), "\(ours.path): \(mapping) vs \(theirs.mappings)")
        #expect(overlapping.allSatisfy { $0.fileOffset &- mapping.fileOffset == $0.vmRange.lowerBound &- mapping.vmRange.lowerBound },
                "\(ours.path): \(mapping) vs \(theirs.mappings)")
      }
    }
  }

  /// Each hostile list: the expected line and the images that must still be listed.
  @Test(.enabled(if: CoreFileProgram.kernelWritesCores && haveTool("cc"), "cc missing, or the kernel cannot write cores here"))
  func hostileListsGivePartialListsAndOneLine() throws {
    let (original, withNote) = try Self.realCore.get()
    let (rDebug, entries, core) = try Self.layout(original)
    try #require(entries.count >= 4, "link_map entries: \(entries)")
    let main = try #require(withNote.images.first { $0.headers != nil && !$0.isVDSO && $0.path.hasSuffix("/coredump-threads") })
    let interpreter = try #require(core.auxiliaryValue(ELFCore.auxBase))

    // A loop: entry 2's l_next back to entry 1.
    var bytes = original
    try Self.write([entries[1]], at: entries[2] + 24, in: &bytes, core: core)
    var list = try Self.list(bytes)
    #expect(list.problems == ["link_map entry 3 (0x\(hexDigits(entries[1]))) comes round again: the list loops; "
                                + "the first 3 entries are listed"])
    #expect(list.images.contains { $0.loadAddress == main.loadAddress })

    // l_name outside every segment: the image stays, by its headers in the core, without a name.
    bytes = original
    let nowhere: UInt64 = 0xDEAD_0000_0000
    #expect(core.segment(containing: nowhere) == nil)
    let namedBefore = try Self.list(original).images
    try Self.write([nowhere], at: entries[2] + 8, in: &bytes, core: core)
    list = try Self.list(bytes)
    #expect(list.problems == ["link_map entry 2: l_name 0xdead00000000 is not a path in the core's memory"])
    #expect(list.images.map(\.loadAddress) == namedBefore.map(\.loadAddress))
    #expect(list.images.filter { $0.path == "[link_map entry 2]" }.count == 1, "\(list.images.map(\.path))")

    // An absurd r_debug (r_version 77): the program, the dynamic linker (AT_BASE) and the vDSO remain.
    bytes = original
    let versionWord = try Self.word(original, at: rDebug, core: core)
    try Self.write([versionWord & ~0xFFFF_FFFF | 77], at: rDebug, in: &bytes, core: core)
    list = try Self.list(bytes)
    #expect(list.problems == ["r_debug at 0x\(hexDigits(rDebug)) has r_version 77 (1 or 2 expected): not a dynamic "
                                + "linker's list; libraries not listed"])
    #expect(Set(list.images.map(\.loadAddress)) == [main.loadAddress, interpreter, core.auxiliaryValue(ELFCore.auxSysinfoEHDR)!])

    // r_map pointing outside the core.
    bytes = original
    try Self.write([0x10], at: rDebug + 8, in: &bytes, core: core)
    list = try Self.list(bytes)
    #expect(list.problems == ["link_map entry 0 at 0x10 is not in the core's memory: the list stops there"])
    #expect(list.images.count == 3)

    // An endless chain: the last entry leads into a chain of cleared entries, more than the core has
    // segments, laid in a writable segment that holds none of the real list.
    bytes = original
    let limit = core.segments.count
    let room = (limit + 4) * 32
    let area = try #require(core.segments.first { segment in
      segment.flags & 2 != 0 && segment.availableSize >= UInt64(room)
        && !entries.contains { segment.vmRange.contains($0) } && !segment.vmRange.contains(rDebug)
    }, "no writable segment of \(room) bytes apart from the list")
    let start = area.vmRange.lowerBound
    for index in 0..<(limit + 4) {
      let node = start + UInt64(index * 32)
      try Self.write([0, 0, 0, node + 32], at: node, in: &bytes, core: core)
    }
    try Self.write([start], at: entries[entries.count - 1] + 24, in: &bytes, core: core)
    list = try Self.list(bytes)
    #expect(list.problems == ["the link_map list has more entries than the core has segments (\(limit)): "
                                + "the first \(limit) are listed"])
    #expect(list.images.count == namedBefore.count, "the real entries came first and are all listed")
  }

  /// Seeded corruptions of the words and names the walk reads (r_debug, every link_map entry, the
  /// program's dynamic section): listing may come out partial, never trap or hang. Reaching the end
  /// is the assertion, with both whole and partial lists seen.
  @Test(.enabled(if: CoreFileProgram.kernelWritesCores && haveTool("cc"), "cc missing, or the kernel cannot write cores here"))
  func corruptedListsOnlyShortenTheList() throws {
    let (original, _) = try Self.realCore.get()
    let (rDebug, entries, core) = try Self.layout(original)
    var targets: [Range<Int>] = []
    for (address, length) in [(rDebug, 16)] + entries.map({ ($0, 32) }) {
      if let range = core.fileRange(ofMemory: address, length: length) { targets.append(range) }
    }
    var rng = SeededGenerator(seed: 0x11_4D_2026)
    var whole = 0, partial = 0
    var bytes = original
    for round in 0..<300 {
      var saved: [(Int, UInt8)] = []
      for _ in 0..<(1 + round % 3) {
        let range = targets[Int(rng.next() % UInt64(targets.count))]
        let at = range.lowerBound + Int(rng.next() % UInt64(range.count))
        saved.append((at, bytes[at]))
        bytes[at] = round % 2 == 0 ? bytes[at] ^ UInt8(1 << (rng.next() % 8)) : UInt8(truncatingIfNeeded: rng.next())
      }
      let list = try Self.list(bytes)
      if list.problems.isEmpty { whole += 1 } else { partial += 1 }
      #expect(list.problems.allSatisfy { !$0.contains("\n") })
      for (at, byte) in saved.reversed() { bytes[at] = byte }
    }
    #expect(whole > 0 && partial > 0, "\(whole) whole, \(partial) partial")
  }
}
