import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// `ELFFile(source:)` fed by a source that copies each asked-for range into its own buffer (as
/// `FileBytes` does with pread) decodes to exactly what `ELFFile(_:)` decodes from the whole file in
/// memory, and throws exactly the same errors, for every ELF fixture and thousands of mutations.
@Suite struct ELFRangedSourceTests {
  /// Copies every range it is asked for into a fresh allocation, kept until the source goes away, and
  /// remembers the ranges.
  final class CopyingSource {
    let file: [UInt8]
    private(set) var buffers: [UnsafeMutableRawBufferPointer] = []
    private(set) var requests: [Range<Int>] = []

    init(_ file: [UInt8]) { self.file = file }
    deinit { for buffer in buffers { buffer.deallocate() } }

    func fetch(_ start: Int, _ length: Int) -> UnsafeRawBufferPointer {
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(length, 1), alignment: 1)
      file.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<start + length])) }
      buffers.append(buffer)
      requests.append(start..<start + length)
      return UnsafeRawBufferPointer(rebasing: buffer[0..<length])
    }
  }

  struct Ranges: RandomAccessBytes {
    let source: CopyingSource
    var endian: ByteReader.Endian = .little
    var count: Int { source.file.count }

    func slice(at start: Int, length: Int) throws(FormatError) -> ByteReader {
      guard start >= 0, length >= 0, start <= count, length <= count - start else {
        throw .outOfRange(start: start, length: length, limit: count)
      }
      return ByteReader(source.fetch(start, length), endian: endian)
    }
  }

  /// The whole decoded value as text (every stored property), or the error.
  static func decodeWhole(_ bytes: [UInt8]) -> String {
    bytes.withUnsafeBytes { raw in
      do throws(FormatError) { return String(describing: try ELFFile(ByteReader(raw))) } catch { return "error: \(error)" }
    }
  }

  static func decodeRanged(_ bytes: [UInt8]) -> (text: String, requests: [Range<Int>]) {
    let source = CopyingSource(bytes)
    do throws(FormatError) {
      return (String(describing: try ELFFile(source: Ranges(source: source))), source.requests)
    } catch {
      return ("error: \(error)", source.requests)
    }
  }

  static var elfFixtures: [String] { Fixtures.all(in: "elf") }

  @Test func rangedDecodeEqualsWholeFileDecode() throws {
    let names = Self.elfFixtures
    try #require(!names.isEmpty, "no ELF fixtures under \(Fixtures.directory)")
    for name in names {
      let bytes = try Fixtures.bytes(name)
      let ranged = Self.decodeRanged(bytes)
      #expect(ranged.text == Self.decodeWhole(bytes), "\(name)")
      // Only ranges inside the file are fetched, and far fewer bytes than the file for a real binary.
      #expect(ranged.requests.allSatisfy { $0.lowerBound >= 0 && $0.upperBound <= bytes.count }, "\(name)")
    }
  }

  @Test func rangedDecodeEqualsWholeFileDecodeUnderMutation() throws {
    try MutationTests.expectSameUnderMutation(Self.elfFixtures, seed: 0xF11E_2026,
                                              decode: { Self.decodeRanged($0).text }, reference: Self.decodeWhole)
  }

  @Test func shortFilesGiveTheSameErrors() throws {
    let original = try Fixtures.bytes(try #require(Self.elfFixtures.first))
    for length in [0, 1, 4, 7, 15, 16, 17, 40, 52, 63, 64, 65, 200] where length <= original.count {
      let bytes = Array(original.prefix(length))
      #expect(Self.decodeRanged(bytes).text == Self.decodeWhole(bytes), "first \(length) bytes")
    }
  }
}

/// `BuildID`'s printed forms against a plain reference written here (per-byte `String(radix:)`),
/// for lengths around the 16 bytes a UUID takes.
@Suite struct BuildIDFormTests {
  static func referenceHex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
  }

  static func referenceDashed(_ sixteen: [UInt8]) -> String {
    let hex = Array(referenceHex(sixteen))
    return [hex[0..<8], hex[8..<12], hex[12..<16], hex[16..<20], hex[20..<32]].map { String($0) }.joined(separator: "-")
  }

  @Test(arguments: [0, 1, 8, 15, 16, 17, 20, 32, 64])
  func formsMatchTheReference(length: Int) {
    var rng = SeededGenerator(seed: UInt64(length) &+ 7)
    let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
    let id = BuildID(bytes)
    let sixteen = Array((bytes + [UInt8](repeating: 0, count: 16)).prefix(16))
    #expect(id.hex == Self.referenceHex(bytes))
    #expect(id.description == Self.referenceHex(bytes))
    #expect(id.uuidBytes == sixteen)
    #expect(id.compactUUID == Self.referenceHex(sixteen))
    #expect(id.uuid == Self.referenceDashed(sixteen).uppercased())
    var swapped = sixteen
    swapped[0..<4].reverse()
    swapped[4..<6].reverse()
    swapped[6..<8].reverse()
    #expect(id.debugID == Self.referenceDashed(swapped).uppercased())
  }

  @Test func everyByteValue() {
    let bytes = (0...255).map { UInt8($0) }
    #expect(BuildID(bytes).hex == Self.referenceHex(bytes))
  }
}
