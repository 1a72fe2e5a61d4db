import ImageLog
import ImageLogTestSupport
import ImageReaders

/// An ELF file's bytes as the loader would map them at their link-time addresses (each PT_LOAD's file
/// part; the rest reads as unreadable): the unwinder's CFI lookups (header, then .eh_frame) run over
/// it as over a process.
struct FileImageMemory: MemoryReading {
  var segments: [(address: UInt64, bytes: [UInt8])]

  init(_ bytes: [UInt8]) throws {
    segments = try bytes.withUnsafeBytes { raw in
      let elf = try ELFFile(ByteReader(raw))
      return elf.programHeaders.filter { $0.type == ProgramHeader.load && $0.fileSize > 0 }.map { header in
        let start = Int(header.fileOffset), end = min(bytes.count, start + Int(header.fileSize))
        return (header.vmAddress, Array(bytes[min(start, end)..<end]))
      }
    }
  }

  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    for segment in segments where address >= segment.address && address - segment.address <= UInt64(segment.bytes.count) {
      return BufferMemory(segment.bytes, at: segment.address).read(address, into: buffer)
    }
    return false
  }
}

/// A file's call frame sections, found by section name.
struct FileCallFrames {
  var memory: FileImageMemory
  var machine: UInt16
  var is64Bit: Bool
  var ehFrame: (address: UInt64, size: UInt64)?
  var ehFrameHeader: UInt64?
  var debugFrame: [UInt8]?

  init(_ bytes: [UInt8]) throws {
    memory = try FileImageMemory(bytes)
    let compressed: UInt64 = 0x800  // SHF_COMPRESSED
    (machine, is64Bit, ehFrame, ehFrameHeader, debugFrame) = try bytes.withUnsafeBytes { raw in
      let file = ByteReader(raw)
      let elf = try ELFFile(file)
      let frame = elf.section(named: ".eh_frame").flatMap { $0.occupiesFile ? ($0.vmAddress, $0.size) : nil }
      let header = elf.section(named: ".eh_frame_hdr").flatMap { $0.occupiesFile ? $0.vmAddress : nil }
      var debug: [UInt8]?
      if let section = elf.section(named: ".debug_frame"), section.occupiesFile, section.flags & compressed == 0 {
        debug = try elf.contents(of: section, in: file).bytes(at: 0, length: Int(section.size))
      }
      return (elf.header.machine, elf.header.is64Bit, frame, header, debug)
    }
  }

  var image: UnwindImage {
    UnwindImage(textRange: 0..<UInt64.max, loadBias: 0, ehFrameHeader: ehFrameHeader,
                ehFrame: ehFrame.map { $0.address..<$0.address + $0.size }, debugFrame: debugFrame,
                addressSize: is64Bit ? 8 : 4)
  }
}
