import ImageReaders
import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
import Testing

/// The unloaded-image history (`crash_unloaded.h`) as the capture helper decodes it from a crashed
/// process: hand-made headers and entries, complete, torn (being written at the crash), empty and
/// malformed, with the exact errors; hostile times never trap.
@Suite struct UnloadedHistoryTests {
  static func header(magic: String = "ILUNLOAD", version: UInt32 = 1, headerSize: UInt32 = 64, entrySize: UInt32 = 512,
                     capacity: UInt32, written: UInt64) -> [UInt8] {
    var bytes = Array(magic.utf8.prefix(8))
    bytes += [UInt8](repeating: 0, count: 8 - bytes.count)
    for value in [version, headerSize, entrySize, capacity] { bytes += withUnsafeBytes(of: value.littleEndian, Array.init) }
    bytes += withUnsafeBytes(of: written.littleEndian, Array.init)
    return bytes + [UInt8](repeating: 0, count: 64 - bytes.count)
  }

  static func entry(sequence: UInt64, base: UInt64 = 0x7000_0000, size: UInt64 = 0x4000, loaded: Int64 = 1_000,
                    unloaded: Int64 = 5_000, tid: Int32 = 42, buildID: [UInt8] = [0xAB, 0xCD], idSize: UInt32? = nil,
                    path: String = "/opt/libplugin.so", pathLength: UInt32? = nil) -> [UInt8] {
    var bytes: [UInt8] = []
    for value in [sequence, base, size, 0] { bytes += withUnsafeBytes(of: value.littleEndian, Array.init) }
    for value in [loaded, unloaded] { bytes += withUnsafeBytes(of: value.littleEndian, Array.init) }
    bytes += withUnsafeBytes(of: tid.littleEndian, Array.init)
    bytes += withUnsafeBytes(of: (idSize ?? UInt32(buildID.count)).littleEndian, Array.init)
    bytes += buildID + [UInt8](repeating: 0, count: 64 - buildID.count)
    bytes += withUnsafeBytes(of: (pathLength ?? UInt32(path.utf8.count)).littleEndian, Array.init)
    bytes += [0, 0, 0, 0]
    bytes += Array(path.utf8) + [UInt8](repeating: 0, count: 384 - path.utf8.count)
    return bytes
  }

  @Test func headerIsCheckedFieldByField() throws {
    #expect(try CrashRecord.decodeHistoryHeader(Self.header(capacity: 16, written: 3)) == (16, 3))
    #expect(throws: FormatError.elf("no ILUNLOAD magic")) { try CrashRecord.decodeHistoryHeader(Self.header(magic: "ILCRASH", capacity: 1, written: 0)) }
    #expect(throws: FormatError.elf("version 3, header 64, entry 512: not version 1 or 2")) {
      try CrashRecord.decodeHistoryHeader(Self.header(version: 3, capacity: 1, written: 0))
    }
    #expect(throws: FormatError.elf("version 1, header 64, entry 256: not version 1 or 2")) {
      try CrashRecord.decodeHistoryHeader(Self.header(entrySize: 256, capacity: 1, written: 0))
    }
    // A capacity above the maximum would have the helper read (and allocate) past the ring.
    #expect(throws: FormatError.elf("capacity 65 above 64")) { try CrashRecord.decodeHistoryHeader(Self.header(capacity: 65, written: 0)) }
    #expect(throws: FormatError.self) { try CrashRecord.decodeHistoryHeader(Array(Self.header(capacity: 1, written: 0).prefix(20))) }
  }

  @Test func entriesNewestFirstWithoutTornOnes() throws {
    // Capacity 3, 5 written: slots hold unloads 4 (slot 0), 5 (slot 1, newest) and 3 (slot 2, torn).
    let bytes = Self.entry(sequence: 8, path: "/a/libfour.so") + Self.entry(sequence: 10, unloaded: 9_000, tid: 7, path: "/b/libfive.so")
      + Self.entry(sequence: 7, path: "/c/libtorn.so")
    let images = try CrashRecord.decodeHistoryEntries(bytes, capacity: 3, written: 5, crashNanoseconds: 12_000)
    #expect(images.map(\.name) == ["libfive.so", "libfour.so"])
    #expect(images[0].unloadedBeforeCrashNanoseconds == 3_000 && images[0].loadedForNanoseconds == 8_000 && images[0].tid == 7)
    #expect(images[1].unloadedBeforeCrashNanoseconds == 7_000 && images[1].buildID == [0xAB, 0xCD])
    #expect(images[0].contains(0x7000_3FFF) && !images[0].contains(0x7000_4000))
    // An empty slot (sequence 0) is skipped; an unknown load time gives no duration.
    let sparse = Self.entry(sequence: 0) + Self.entry(sequence: 2, loaded: 0)
    let one = try CrashRecord.decodeHistoryEntries(sparse, capacity: 2, written: 2, crashNanoseconds: nil)
    #expect(one.count == 1 && one[0].loadedForNanoseconds == nil && one[0].unloadedBeforeCrashNanoseconds == nil)
  }

  @Test func hostileEntriesThrowOrAreBounded() throws {
    #expect(throws: FormatError.elf("entry 0: build-id 65, path 17 bytes")) {
      try CrashRecord.decodeHistoryEntries(Self.entry(sequence: 2, idSize: 65), capacity: 1, written: 1, crashNanoseconds: nil)
    }
    #expect(throws: FormatError.elf("entry 0: build-id 2, path 385 bytes")) {
      try CrashRecord.decodeHistoryEntries(Self.entry(sequence: 2, pathLength: 385), capacity: 1, written: 1, crashNanoseconds: nil)
    }
    #expect(throws: FormatError.self) {
      try CrashRecord.decodeHistoryEntries(Array(Self.entry(sequence: 2).prefix(300)), capacity: 1, written: 1, crashNanoseconds: nil)
    }
    // Times that would overflow a subtraction are left out, not trapped on.
    let extreme = Self.entry(sequence: 2, loaded: .max, unloaded: .min)
    let images = try CrashRecord.decodeHistoryEntries(extreme, capacity: 1, written: .max, crashNanoseconds: .max)
    #expect(images.count == 1 && images[0].unloadedBeforeCrashNanoseconds == nil && images[0].loadedForNanoseconds == nil)
  }

  /// An Unloaded Images line of imagelog's report read back (`imagelog symbolicate` of an in-process
  /// report) and written again: the same bytes; lines that are not one are refused.
  @Test(arguments: [
    "0x7f4bc74b4000 - 0x7f4bc74b800f libplugin.so x86_64  <788bc8dfa9c58ec90d336ae1cb40bcb2864d9201> /tmp/a b/libplugin.so  unloaded 0.144 ms before the crash by thread 10802, loaded for 0.014 ms",
    "0x1000 - 0x1fff libx.so x86_64  <> /p/libx.so  unloaded 12.000 ms before the crash by thread 4",
  ])
  func reportLineRoundTrips(line: String) throws {
    let gone = try #require(AppleCrashParser.unloadedImage(line))
    #expect(ProcessSnapshot.unloadedLine(gone, architecture: "x86_64") == line)
  }

  @Test func notAnUnloadedLine() {
    #expect(AppleCrashParser.unloadedImage("0x1000 - 0x1fff lib.so x86_64  <ab> /p/lib.so") == nil)
    #expect(AppleCrashParser.unloadedImage("unloaded 1.000 ms before the crash") == nil)
    #expect(AppleCrashParser.unloadedImage("0x2000 - 0x1fff lib.so x86_64  <ab> /p/lib.so  unloaded 1.000 ms") == nil)
    #expect(AppleCrashParser.nanoseconds("99999999999999.000") == nil && AppleCrashParser.nanoseconds("1.5") == nil)
  }

  static func event(sequence: UInt64, time: Int64, base: UInt64 = 0x7000_0000, loaded: Int64 = 0, tid: Int32 = 42,
                    kind: UInt32, name: String, nameLength: UInt32? = nil) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes += withUnsafeBytes(of: sequence.littleEndian, Array.init)
    bytes += withUnsafeBytes(of: time.littleEndian, Array.init)
    bytes += withUnsafeBytes(of: base.littleEndian, Array.init)
    bytes += withUnsafeBytes(of: loaded.littleEndian, Array.init)
    bytes += withUnsafeBytes(of: tid.littleEndian, Array.init)
    for value: UInt32 in [kind, nameLength ?? UInt32(name.utf8.count), 0] { bytes += withUnsafeBytes(of: value.littleEndian, Array.init) }
    return bytes + Array(name.utf8) + [UInt8](repeating: 0, count: 80 - name.utf8.count)
  }

  /// The timeline's events (version 2): oldest first from the ring, a torn one left out, times relative
  /// to the crash, an unload's "loaded for"; a version 1 header has none; a bad kind or name length throws.
  @Test func timelineEventsOldestFirst() throws {
    var header = Self.header(version: 2, capacity: 16, written: 1)
    for (offset, value) in [(32, UInt32(3)), (36, UInt32(128))] {
      header.replaceSubrange(offset..<offset + 4, with: withUnsafeBytes(of: value.littleEndian, Array.init))
    }
    header.replaceSubrange(40..<48, with: withUnsafeBytes(of: UInt64(5).littleEndian, Array.init))
    #expect(try CrashRecord.decodeEventHeader(header) == (3, 5))
    #expect(try CrashRecord.decodeEventHeader(Self.header(capacity: 16, written: 1)) == (0, 0))
    // Capacity 3, 5 written: slot 0 holds event 4, slot 1 event 5 (newest), slot 2 event 3 (torn).
    let bytes = Self.event(sequence: 8, time: 1_000, base: 0x1000, tid: 7, kind: 1, name: "libfour.so")
      + Self.event(sequence: 10, time: 3_500_000, base: 0x1000, loaded: 1_000, kind: 2, name: "libfour.so")
      + Self.event(sequence: 5, time: 500, kind: 1, name: "libtorn.so")
    let events = try CrashRecord.decodeEvents(bytes, capacity: 3, written: 5, crashNanoseconds: 4_000_000)
    #expect(events == [
      .init(kind: .loaded, name: "libfour.so", baseAddress: 0x1000, crashOffsetNanoseconds: -3_999_000, tid: 7),
      .init(kind: .unloaded, name: "libfour.so", baseAddress: 0x1000, crashOffsetNanoseconds: -500_000,
            loadedForNanoseconds: 3_499_000, tid: 42),
    ])
    #expect(events.map(ProcessSnapshot.timelineLine) == [
      "-3.999 ms  loaded libfour.so at 0x1000 by thread 7",
      "-0.500 ms  unloaded libfour.so at 0x1000 (loaded for 3.499 ms) by thread 42",
    ])
    // Read back from a report's text: the same events.
    #expect(events.map(ProcessSnapshot.timelineLine).map(AppleCrashParser.timelineEvent) == events)
    #expect(AppleCrashParser.timelineEvent("-1.000 ms  mapped libx.so at 0x1000 by thread 4") == nil)
    #expect(AppleCrashParser.timelineEvent("-1.0 ms  loaded libx.so at 0x1000 by thread 4") == nil)
    #expect(AppleCrashParser.timelineEvent("+0.010 ms  unloaded lib x.so at 0x2000 by thread 4")
            == .init(kind: .unloaded, name: "lib x.so", baseAddress: 0x2000, crashOffsetNanoseconds: 10_000, tid: 4))
    #expect(throws: FormatError.elf("event 0: kind 3, name 10 bytes")) {
      try CrashRecord.decodeEvents(Self.event(sequence: 2, time: 0, kind: 3, name: "libfour.so"), capacity: 1, written: 1,
                                   crashNanoseconds: 0)
    }
    #expect(throws: FormatError.elf("event 0: kind 1, name 81 bytes")) {
      try CrashRecord.decodeEvents(Self.event(sequence: 2, time: 0, kind: 1, name: "a", nameLength: 81), capacity: 1, written: 1,
                                   crashNanoseconds: 0)
    }
    // A time whose distance to the crash overflows is left out, not trapped on.
    #expect(try CrashRecord.decodeEvents(Self.event(sequence: 2, time: .min, kind: 1, name: "a"), capacity: 1, written: 1,
                                         crashNanoseconds: .max).isEmpty)
  }
}
