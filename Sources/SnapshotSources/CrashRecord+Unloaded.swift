import ProcessInspection
import ImageReaders
import Snapshot

extension CrashRecord {
  /// The history's layout (`Sources/CImageLog/crash_unloaded.h`): a 64-byte header, then 512-byte entries.
  static let historyMagic: [UInt8] = Array("ILUNLOAD".utf8)
  static let historyHeaderSize = 64, historyEntrySize = 512, historyMaximum = 64
  /// The events after the entries (version 2): 128 bytes each, at most twice the entries.
  static let eventSize = 128, eventMaximum = 128, eventNameSize = 80

  /// The images the crashed process removed before its crash, newest first, read from the history the
  /// record names (none for a version 1 record, or a history that cannot be read: `problems` says why).
  /// An entry being written at the crash is left out.
  func unloadedImages(problems: inout [String]) -> [ProcessSnapshot.UnloadedImage] {
    guard historyAddress != 0 else { return [] }
    var header = [UInt8](repeating: 0, count: Self.historyHeaderSize)
    let memory = ProcessMemory(pid: pid)
    guard header.withUnsafeMutableBytes({ memory.read(historyAddress, into: $0) }) else {
      problems.append("pid \(pid): cannot read the unloaded-image history at 0x\(hexDigits(historyAddress))")
      return []
    }
    do {
      let (capacity, written) = try Self.decodeHistoryHeader(header)
      guard capacity > 0, written > 0 else { return [] }
      // capacity <= historyMaximum (checked): the read is at most 32 KiB.
      var entries = [UInt8](repeating: 0, count: capacity * Self.historyEntrySize)
      guard entries.withUnsafeMutableBytes({ memory.read(historyAddress &+ UInt64(Self.historyHeaderSize), into: $0) }) else {
        problems.append("pid \(pid): cannot read the unloaded-image history's entries")
        return []
      }
      return try Self.decodeHistoryEntries(entries, capacity: capacity, written: written, crashNanoseconds: dateNanoseconds)
    } catch {
      problems.append("pid \(pid): the unloaded-image history at 0x\(hexDigits(historyAddress)) is not usable: \(error)")
      return []
    }
  }

  /// The loads after the program started and the unloads, oldest first, read from the history the record
  /// names (none for a version 1 history: `problems` says why one cannot be read). An event being written at
  /// the crash is left out.
  func imageTimeline(problems: inout [String]) -> [ProcessSnapshot.ImageEvent] {
    guard historyAddress != 0, let crashNanoseconds = dateNanoseconds else { return [] }
    var header = [UInt8](repeating: 0, count: Self.historyHeaderSize)
    let memory = ProcessMemory(pid: pid)
    guard header.withUnsafeMutableBytes({ memory.read(historyAddress, into: $0) }) else { return [] }  // unloadedImages said it
    do {
      let (capacity, written) = try Self.decodeEventHeader(header)
      guard capacity > 0, written > 0 else { return [] }
      // capacity <= eventMaximum (checked): the read is at most 16 KiB, after the 64 entries.
      var events = [UInt8](repeating: 0, count: capacity * Self.eventSize)
      let start = historyAddress &+ UInt64(Self.historyHeaderSize + Self.historyMaximum * Self.historyEntrySize)
      guard events.withUnsafeMutableBytes({ memory.read(start, into: $0) }) else {
        problems.append("pid \(pid): cannot read the image timeline's events")
        return []
      }
      return try Self.decodeEvents(events, capacity: capacity, written: written, crashNanoseconds: crashNanoseconds)
    } catch {
      problems.append("pid \(pid): the image timeline at 0x\(hexDigits(historyAddress)) is not usable: \(error)")
      return []
    }
  }

  /// The header's event capacity and count of events written: (0, 0) for version 1, which has none.
  static func decodeEventHeader(_ bytes: [UInt8]) throws(FormatError) -> (capacity: Int, written: UInt64) {
    _ = try decodeHistoryHeader(bytes)
    return try ByteReader.reading(bytes, endian: .little) { (start: ByteReader) throws(FormatError) -> (Int, UInt64) in
      var reader = start
      _ = try reader.readBytes(8)
      guard try reader.read(UInt32.self) == 2 else { return (0, 0) }
      _ = try reader.readBytes(20)
      let capacity = try reader.read(UInt32.self), size = try reader.read(UInt32.self)
      let written = try reader.read(UInt64.self)
      guard size == UInt32(eventSize) else { throw .elf("event size \(size), not \(eventSize)") }
      guard capacity <= UInt32(eventMaximum) else { throw .elf("event capacity \(capacity) above \(eventMaximum)") }
      return (Int(capacity), written)  // capacity <= 128
    }
  }

  /// The complete events, oldest first, dated relative to `crashNanoseconds`.
  static func decodeEvents(_ bytes: [UInt8], capacity: Int, written: UInt64,
                           crashNanoseconds: Int64) throws(FormatError) -> [ProcessSnapshot.ImageEvent] {
    try ByteReader.reading(bytes, endian: .little) { (all: ByteReader) throws(FormatError) -> [ProcessSnapshot.ImageEvent] in
      var events: [ProcessSnapshot.ImageEvent] = []
      let count = Int(min(written, UInt64(capacity)))  // <= capacity <= 128
      for age in (0..<count).reversed() {
        // (written - 1 - age) % capacity: written > age here, and the result < capacity.
        let slot = Int((written - 1 - UInt64(age)) % UInt64(capacity))
        var reader = try all.slice(at: slot * eventSize, length: eventSize)
        let sequence = try reader.read(UInt64.self)
        guard sequence != 0, sequence & 1 == 0 else { continue }  // empty, or being written at the crash
        let time = try reader.read(Int64.self), base = try reader.read(UInt64.self), loaded = try reader.read(Int64.self)
        let tid = try reader.read(Int32.self), kindValue = try reader.read(UInt32.self)
        let nameLength = Int(try reader.read(UInt32.self))
        _ = try reader.read(UInt32.self)  // flags
        guard nameLength <= eventNameSize, kindValue == 1 || kindValue == 2 else {
          throw .elf("event \(age): kind \(kindValue), name \(nameLength) bytes")
        }
        let name = String(decoding: try reader.readBytes(eventNameSize).prefix(nameLength), as: UTF8.self)
        let (offset, overflowed) = time.subtractingReportingOverflow(crashNanoseconds)
        guard !overflowed else { continue }
        var event = ProcessSnapshot.ImageEvent(kind: kindValue == 1 ? .loaded : .unloaded, name: name, baseAddress: base,
                                               crashOffsetNanoseconds: offset, tid: tid)
        let (loadedFor, tooLong) = time.subtractingReportingOverflow(loaded)
        if kindValue == 2, loaded != 0, !tooLong, loadedFor >= 0 { event.loadedForNanoseconds = UInt64(loadedFor) }
        events.append(event)
      }
      return events
    }
  }

  /// The header's capacity and count of unloads written.
  static func decodeHistoryHeader(_ bytes: [UInt8]) throws(FormatError) -> (capacity: Int, written: UInt64) {
    try ByteReader.reading(bytes, endian: .little) { (start: ByteReader) throws(FormatError) -> (Int, UInt64) in
      var reader = start
      guard try reader.readBytes(8) == historyMagic else { throw .elf("no ILUNLOAD magic") }
      let version = try reader.read(UInt32.self), headerSize = try reader.read(UInt32.self)
      let entrySize = try reader.read(UInt32.self), capacity = try reader.read(UInt32.self)
      let written = try reader.read(UInt64.self)
      guard version == 1 || version == 2, headerSize == UInt32(historyHeaderSize), entrySize == UInt32(historyEntrySize) else {
        throw .elf("version \(version), header \(headerSize), entry \(entrySize): not version 1 or 2")
      }
      guard capacity <= UInt32(historyMaximum) else { throw .elf("capacity \(capacity) above \(historyMaximum)") }
      return (Int(capacity), written)  // capacity <= 64
    }
  }

  /// The complete entries, newest first; `crashNanoseconds` dates them relative to the crash.
  static func decodeHistoryEntries(_ bytes: [UInt8], capacity: Int, written: UInt64,
                                   crashNanoseconds: Int64?) throws(FormatError) -> [ProcessSnapshot.UnloadedImage] {
    try ByteReader.reading(bytes, endian: .little) { (all: ByteReader) throws(FormatError) -> [ProcessSnapshot.UnloadedImage] in
      var images: [ProcessSnapshot.UnloadedImage] = []
      let count = Int(min(written, UInt64(capacity)))  // <= capacity <= 64
      for age in 0..<count {
        // (written - 1 - age) % capacity: written > age here, and the result < capacity.
        let slot = Int((written - 1 - UInt64(age)) % UInt64(capacity))
        var reader = try all.slice(at: slot * historyEntrySize, length: historyEntrySize)
        let sequence = try reader.read(UInt64.self)
        guard sequence != 0, sequence & 1 == 0 else { continue }  // empty, or being written at the crash
        let base = try reader.read(UInt64.self), size = try reader.read(UInt64.self)
        _ = try reader.read(UInt64.self)  // load bias
        let loaded = try reader.read(Int64.self), unloaded = try reader.read(Int64.self)
        let tid = try reader.read(Int32.self), idSize = Int(try reader.read(UInt32.self))
        let idBytes = try reader.readBytes(64)
        let pathLength = Int(try reader.read(UInt32.self))
        _ = try reader.read(UInt32.self)  // flags
        guard idSize <= 64, pathLength <= 384 else { throw .elf("entry \(age): build-id \(idSize), path \(pathLength) bytes") }
        let path = String(decoding: try reader.readBytes(384).prefix(pathLength), as: UTF8.self)
        var image = ProcessSnapshot.UnloadedImage(baseAddress: base, size: size, path: path,
                                                  buildID: Array(idBytes.prefix(idSize)), tid: tid)
        if let crashNanoseconds {
          let (before, overflowed) = crashNanoseconds.subtractingReportingOverflow(unloaded)
          if !overflowed, before >= 0 { image.unloadedBeforeCrashNanoseconds = UInt64(before) }
        }
        let (loadedFor, overflowed) = unloaded.subtractingReportingOverflow(loaded)
        if loaded != 0, !overflowed, loadedFor >= 0 { image.loadedForNanoseconds = UInt64(loadedFor) }
        images.append(image)
      }
      return images
    }
  }
}
