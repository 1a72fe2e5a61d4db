import ProcessInspection
import ImageReaders
import Snapshot

extension CrashRecord {
  /// The history's layout (`Sources/CImageLog/crash_unloaded.h`): a 64-byte header, then 512-byte entries.
  static let historyMagic: [UInt8] = Array("ILUNLOAD".utf8)
  static let historyHeaderSize = 64, historyEntrySize = 512, historyMaximum = 64

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

  /// The header's capacity and count of unloads written.
  static func decodeHistoryHeader(_ bytes: [UInt8]) throws(FormatError) -> (capacity: Int, written: UInt64) {
    try ByteReader.reading(bytes, endian: .little) { (start: ByteReader) throws(FormatError) -> (Int, UInt64) in
      var reader = start
      guard try reader.readBytes(8) == historyMagic else { throw .elf("no ILUNLOAD magic") }
      let version = try reader.read(UInt32.self), headerSize = try reader.read(UInt32.self)
      let entrySize = try reader.read(UInt32.self), capacity = try reader.read(UInt32.self)
      let written = try reader.read(UInt64.self)
      guard version == 1, headerSize == UInt32(historyHeaderSize), entrySize == UInt32(historyEntrySize) else {
        throw .elf("version \(version), header \(headerSize), entry \(entrySize): not version 1")
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
