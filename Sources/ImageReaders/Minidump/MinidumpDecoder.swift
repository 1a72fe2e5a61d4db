/// The reading of one dump's streams: each stream's bytes found through the directory, decoded, and
/// what went wrong collected as `problems` (a stream's failure stops no other).
struct MinidumpDecoder<Source: RandomAccessBytes> {
  let file: Source
  let streams: [MinidumpFile.Stream]
  /// Bytes that may still be copied out of the file (strings, records, Linux streams).
  var budget: Int
  var problems: [FormatError] = []
  /// `SystemInfo`'s architecture, which decides the context layout and the word size.
  var architecture: UInt16?
  /// Memory ranges as the streams list them, before sorting: (address, size, file offset, what).
  var memory: [(address: UInt64, size: UInt64, fileOffset: UInt64, what: String)] = []

  init(file: Source, streams: [MinidumpFile.Stream], budget: Int) {
    self.file = file
    self.streams = streams
    self.budget = budget
  }

  /// `stream name (directory N)`: how messages name a stream.
  static func label(_ type: UInt32, _ index: Int) -> String { "\(MinidumpFile.streamName(type)) stream (directory \(index))" }

  /// Decodes the first stream of `type` with `body` (given the stream's bytes and its label); the
  /// error of a broken one becomes a problem and the result `nil`. A second stream of the same type is
  /// named as a problem and not read.
  mutating func decode<T>(_ type: UInt32,
                          _ body: (inout MinidumpDecoder, ByteReader, String) throws(FormatError) -> T) -> T? {
    var result: T?
    var first: Int?
    for (index, stream) in streams.enumerated() where stream.type == type {
      let label = Self.label(type, index)
      if let first {
        note(.minidump("\(label): a second \(MinidumpFile.streamName(type)) stream, not read (directory \(first) was)"))
        continue
      }
      first = index
      do {
        let reader = try bytes(stream.location, "stream")
        result = try body(&self, reader, label)
      } catch {
        note(Self.labelled(error, label))
      }
    }
    return result
  }

  /// `error` with `label` in front, unless it already names where it happened.
  static func labelled(_ error: FormatError, _ label: String) -> FormatError {
    if case .minidump(let text) = error, text.hasPrefix(label) || error == budgetSpent { return error }
    return .minidump("\(label): \(error)")
  }

  /// A reader over the bytes `location` names, checked against the file.
  func bytes(_ location: MinidumpFile.Location, _ what: @autoclosure () -> String) throws(FormatError) -> ByteReader {
    try bytes(at: UInt64(location.rva), size: UInt64(location.dataSize), what())
  }

  func bytes(at offset: UInt64, size: UInt64, _ what: @autoclosure () -> String) throws(FormatError) -> ByteReader {
    let range = try ByteReader.checkedRange(offset: offset, size: size, limit: file.count, "\(what()) at file offset")
    return try file.slice(at: range.lowerBound, length: range.count)
  }

  /// Takes `count` bytes from the copy budget, or throws: the first time with a message, later with
  /// `budgetSpent`, which `note` drops (one line says it, not one per entry).
  mutating func spend(_ count: Int, _ what: @autoclosure () -> String) throws(FormatError) {
    guard count <= budget else {
      if budget < 0 { throw Self.budgetSpent }
      budget = -1
      throw .minidump("\(what()): more bytes copied out of the dump than it holds (entries share their data); "
                      + "this and later copies left out")
    }
    budget -= count
  }

  static var budgetSpent: FormatError { .minidump("") }

  /// Records `error` as a problem (a repeat of the spent budget is not).
  mutating func note(_ error: FormatError) {
    if error != Self.budgetSpent { problems.append(error) }
  }

  /// The bytes of `reader`, copied (a Linux stream).
  mutating func copy(_ reader: ByteReader) throws(FormatError) -> [UInt8] {
    try spend(reader.count, "stream")
    return try reader.bytes(at: 0, length: reader.count)
  }

  /// The `MINIDUMP_STRING` at `rva`: a 32-bit byte length, then that many bytes of UTF-16LE (the NUL
  /// after them is not required). An odd length or one past the end of the file throws.
  mutating func string(at rva: UInt64, _ what: @autoclosure () -> String) throws(FormatError) -> String {
    let lengthBytes = try bytes(at: rva, size: 4, "\(what()) (MINIDUMP_STRING)")
    let length = try lengthBytes.peek(UInt32.self, at: 0)
    guard length % 2 == 0 else { throw .minidump("\(what()): MINIDUMP_STRING length \(length) is odd (UTF-16)") }
    // rva + 4 <= file.count (checked above): the sum cannot overflow.
    let text = try bytes(at: rva + 4, size: UInt64(length), "\(what()) (\(length) bytes of MINIDUMP_STRING)")
    try spend(text.count, what())
    return Self.utf16(text, count: text.count / 2)
  }

  /// `count` UTF-16LE units at the start of `reader` (`reader.count >= 2 * count`), up to the first NUL;
  /// an unpaired surrogate is U+FFFD, as `String(decoding:as: UTF16.self)` makes it. Transcoded here to
  /// UTF-8: the generic UTF-16 decoding's first use costs a small `symbolicate` run more than the
  /// transcoding itself (BENCHMARKS.md, the .sym area's paragraph).
  static func utf16(_ reader: ByteReader, count: Int) -> String {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)  // ASCII; 3 bytes a unit at most
    var index = 0
    while index < count {
      let unit = UInt32(reader.field(UInt16.self, littleEndianAt: 2 * index))  // 2 * count <= reader.count
      index += 1
      if unit == 0 { break }
      var scalar = unit
      if (0xD800..<0xDC00).contains(unit), index < count {
        let low = UInt32(reader.field(UInt16.self, littleEndianAt: 2 * index))
        if (0xDC00..<0xE000).contains(low) {
          scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
          index += 1
        }
      }
      if (0xD800..<0xE000).contains(scalar) { scalar = 0xFFFD }
      switch scalar {
      case ..<0x80:
        bytes.append(UInt8(scalar))
      case ..<0x800:
        bytes.append(UInt8(0xC0 | scalar >> 6))
        bytes.append(UInt8(0x80 | scalar & 0x3F))
      case ..<0x10000:
        bytes.append(UInt8(0xE0 | scalar >> 12))
        bytes.append(UInt8(0x80 | scalar >> 6 & 0x3F))
        bytes.append(UInt8(0x80 | scalar & 0x3F))
      default:
        bytes.append(UInt8(0xF0 | scalar >> 18))
        bytes.append(UInt8(0x80 | scalar >> 12 & 0x3F))
        bytes.append(UInt8(0x80 | scalar >> 6 & 0x3F))
        bytes.append(UInt8(0x80 | scalar & 0x3F))
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Crashpad's `MinidumpUTF8String` at `rva`: a 32-bit length, then that many bytes (and a NUL).
  mutating func utf8String(at rva: UInt32, _ what: @autoclosure () -> String) throws(FormatError) -> String {
    String(decoding: try byteArray(at: rva, what()), as: UTF8.self)
  }

  /// Crashpad's `MinidumpByteArray` (and the body of a UTF-8 string): a 32-bit length and the bytes.
  mutating func byteArray(at rva: UInt32, _ what: @autoclosure () -> String) throws(FormatError) -> [UInt8] {
    let length = try bytes(at: UInt64(rva), size: 4, what()).peek(UInt32.self, at: 0)
    let body = try bytes(at: UInt64(rva) + 4, size: UInt64(length), "\(what()) (\(length) bytes)")
    try spend(body.count, what())
    return try body.bytes(at: 0, length: body.count)
  }

  /// The number of `entrySize`-byte entries after a 32-bit count at the start of `reader`, checked
  /// against its size. A list with 4 bytes of padding after the count (as some writers align the
  /// entries to 8) is accepted; the entries' offset is returned with the count.
  static func listCount(_ reader: ByteReader, entrySize: Int, _ what: String) throws(FormatError) -> (count: Int, start: Int) {
    let count = try reader.peek(UInt32.self, at: 0)
    let available = reader.count - 4  // peek proved 4 <= count
    guard UInt64(count) <= UInt64(available / entrySize) else {
      throw .minidump("\(what): \(count) entries of \(entrySize) bytes do not fit in its \(reader.count) bytes")
    }
    let used = Int(count) * entrySize  // <= available, checked above
    return (Int(count), available - used == 4 ? 8 : 4)
  }

  /// The entries of a counted list (see `listCount`), each given to `body` with its index as a reader
  /// over exactly its bytes; the values `body` returns, `nil`s left out.
  mutating func list<T>(_ reader: ByteReader, entrySize: Int, _ what: String,
                        _ body: (inout MinidumpDecoder, Int, ByteReader) throws(FormatError) -> T?) throws(FormatError) -> [T] {
    let (count, start) = try Self.listCount(reader, entrySize: entrySize, what)
    var values: [T] = []
    values.reserveCapacity(count)
    for index in 0..<count {
      // listCount proved that count entries of entrySize fit after start.
      if let value = try body(&self, index, try reader.slice(at: start + index * entrySize, length: entrySize)) { values.append(value) }
    }
    return values
  }

  /// `list` over the bytes `location` names (an empty location is an empty list).
  mutating func list<T>(at location: MinidumpFile.Location, entrySize: Int, _ what: String,
                        _ body: (inout MinidumpDecoder, Int, ByteReader) throws(FormatError) -> T?) throws(FormatError) -> [T] {
    guard location.dataSize > 0 else { return [] }
    return try list(try bytes(location, what), entrySize: entrySize, what, body)
  }
}
