import ProcessInspection
import ImageReaders
import Snapshot

extension ProcessSnapshot {
  /// The most of an abort message read: glibc's messages are a line or a few (an assertion, a
  /// `malloc` check, a fortify failure).
  static let maximumAbortMessageBytes = 4096

  /// The message glibc kept as the process aborted, read from `memory` (the process's or its core's):
  /// libc's `__abort_msg` (exported as `GLIBC_PRIVATE` in `.dynsym`) points to a `struct abort_msg_s
  /// { unsigned int size; char msg[]; }` that `__assert_fail` and `__libc_message` (`free(): invalid
  /// pointer`, `*** buffer overflow detected ***`) fill just before `abort()`. The message without its
  /// final newline, at most `maximumAbortMessageBytes`; `nil` when no libc of `images` has the symbol,
  /// when it is not set (the process did not abort through glibc) or cannot be read.
  package static func glibcAbortMessage(images: [ProcessInspection.Image], memory: some MemoryReading) -> String? {
    for image in images where image.name.hasPrefix("libc.so") || image.name.hasPrefix("libc-") {
      guard let found = try? abortMessageSymbol(of: image) else { continue }
      let (offset, overflowed) = found.address.addingReportingOverflow(image.loadBias)
      guard !overflowed else { return nil }
      return abortMessage(at: offset, is64Bit: found.is64Bit, endian: found.endian, in: memory)
    }
    return nil
  }

  /// `__abort_msg`'s link-time address in `image`'s file, when that file is the image's (its build-id,
  /// when both have one), and how its words are laid out.
  static func abortMessageSymbol(of image: ProcessInspection.Image) throws -> (address: UInt64, is64Bit: Bool, endian: ByteReader.Endian)? {
    let file = try MappedFile(path: image.path)
    return try file.withReader { bytes throws(FormatError) in
      let elf = try ELFFile(bytes)
      if let expected = image.buildID, let actual = elf.buildID, expected != actual { return nil }
      guard let address = try elf.dataSymbolAddress(named: "__abort_msg", in: bytes) else { return nil }
      return (address, elf.header.is64Bit, elf.header.endian)
    }
  }

  /// The `abort_msg_s` message that the pointer at `address` points to, in `memory`.
  static func abortMessage(at address: UInt64, is64Bit: Bool, endian: ByteReader.Endian, in memory: some MemoryReading) -> String? {
    func bytes(_ at: UInt64, _ count: Int) -> [UInt8]? {
      var result = [UInt8](repeating: 0, count: count)
      return result.withUnsafeMutableBytes { memory.read(at, into: $0) } ? result : nil
    }
    guard let word = bytes(address, is64Bit ? 8 : 4) else { return nil }
    let pointer = word.withUnsafeBytes { raw -> UInt64? in
      var reader = ByteReader(raw, endian: endian)
      return try? reader.readWord(is64Bit: is64Bit)
    }
    guard let pointer, pointer != 0, let sizeBytes = bytes(pointer, 4) else { return nil }
    let size = sizeBytes.withUnsafeBytes { raw -> UInt32? in
      var reader = ByteReader(raw, endian: endian)
      return try? reader.read(UInt32.self)
    }
    // `size` is the whole mapping glibc made for the message, the 4-byte size included.
    guard let size, size > 4 else { return nil }
    let length = min(Int(size) - 4, maximumAbortMessageBytes)  // UInt32 -> Int is exact on 64-bit; size > 4
    let (start, overflowed) = pointer.addingReportingOverflow(4)
    guard !overflowed, let text = bytes(start, length) else { return nil }
    var message = text.prefix { $0 != 0 }[...]
    while let last = message.last, last == 0x0A || last == 0x0D { message = message.dropLast() }
    return message.isEmpty ? nil : String(decoding: message, as: UTF8.self)
  }
}
