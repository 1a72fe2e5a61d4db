import ImageLogTestSupport
import ImageReaders
@testable import Symbolication
import Testing

/// The cache file against the DWARF it is built from: the same frames for every address asked, and
/// damaged or hostile files refused or answered without a trap.
@Suite struct SymbolCacheFormatTests {
  /// For every fixture, the cache gives what the DWARF reader gives (function, file, line, column,
  /// inlined) at each range's start, the address before it, and 3000 random addresses around the code.
  /// DWARFOracleTests compares the DWARF reader's answers with llvm-symbolizer's at every instruction.
  @Test(arguments: CacheFixtures.all)
  func answersEqualTheDWARF(fixture: CacheFixture) throws {
    let bytes = try CacheFixtures.cacheBytes(fixture)
    let file = try SymbolCacheFile(bytes: bytes, identity: fixture.identity, fingerprint: try CacheFixtures.fingerprint(fixture))
    let oracle = try CacheFixtures.dwarf(fixture)
    let table = try CacheFixtures.dwarf(fixture).answerTable()
    let probes = CacheFixtures.probes(table, random: 3000, seed: 0x5C)
    var mismatches: [String] = []
    var withFrames = 0, withInlined = 0
    for address in probes {
      let expected = CacheFixtures.answer { try oracle.frames(at: address) }
      let cached = CacheFixtures.answer { try file.frames(at: address) }
      if !expected.isEmpty { withFrames += 1 }
      if expected.contains("(inlined)") { withInlined += 1 }
      if expected != cached, mismatches.count < 5 {
        mismatches.append("0x\(String(address, radix: 16)): DWARF \(expected); cache \(cached)")
      }
    }
    #expect(mismatches.isEmpty, "\(fixture): \(mismatches.joined(separator: "\n"))")
    #expect(withFrames > 0, "\(fixture): no address had frames")
    if fixture.name.contains("-O2") && !fixture.name.hasPrefix("macho") {
      #expect(withInlined > 0, "\(fixture): no inlined frames asked")
    }
  }

  /// The same for libc6-dbg's debug file: 20,000 random addresses and every 50th range start.
  @Test(.enabled(if: CacheFixtures.libcDebugFile != nil, "libc6-dbg is not installed"))
  func libcAnswersEqualTheDWARF() throws {
    let fixture = try #require(CacheFixtures.libcDebugFile)
    let bytes = try CacheFixtures.cacheBytes(fixture)
    let file = try SymbolCacheFile(bytes: bytes, identity: fixture.identity, fingerprint: try CacheFixtures.fingerprint(fixture))
    let oracle = try CacheFixtures.dwarf(fixture)
    let table = try CacheFixtures.dwarf(fixture).answerTable()
    var probes = CacheFixtures.probes(DWARFAnswerTable(), random: 0, seed: 0)
    for (index, start) in table.starts.enumerated() where index % 50 == 0 { probes += [start, start &- 1] }
    var generator = SeededGenerator(seed: 0x11BC)
    let low = table.starts.first ?? 0, high = table.starts.last ?? 0
    for _ in 0..<20_000 { probes.append(UInt64.random(in: low...max(low, high), using: &generator)) }
    var mismatches: [String] = []
    var withInlined = 0
    for address in probes {
      let expected = CacheFixtures.answer { try oracle.frames(at: address) }
      if expected.contains("(inlined)") { withInlined += 1 }
      let cached = CacheFixtures.answer { try file.frames(at: address) }
      if expected != cached, mismatches.count < 5 {
        mismatches.append("0x\(String(address, radix: 16)): DWARF \(expected); cache \(cached)")
      }
    }
    #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
    #expect(withInlined > 1000, "only \(withInlined) addresses with inlined frames")
  }

  static func fixture() throws -> (CacheFixture, [UInt8], UInt64) {
    let fixture = try #require(CacheFixtures.all.first { $0.name == "gcc-cxx-O2-dwarf5" })
    return (fixture, try CacheFixtures.cacheBytes(fixture), try CacheFixtures.fingerprint(fixture))
  }

  /// Writes `value` at `offset` and recomputes the checksum: a file whose damage the checksum cannot see.
  static func forge(_ bytes: inout [UInt8], _ value: UInt32, at offset: Int) throws {
    withUnsafeBytes(of: value.littleEndian) { for (index, byte) in $0.enumerated() { bytes[offset + index] = byte } }
    try reseal(&bytes)
  }

  static func reseal(_ bytes: inout [UInt8]) throws {
    let checksum = try ByteReader.reading(bytes) { (reader) throws(FormatError) in try SymbolCacheFormat.checksum(reader) }
    withUnsafeBytes(of: checksum.littleEndian) {
      for (index, byte) in $0.enumerated() { bytes[SymbolCacheFormat.checksumOffset + index] = byte }
    }
  }

  /// A changed byte anywhere (every 61st is tried) or a shorter file is refused when opened.
  @Test func damageIsRefused() throws {
    let (fixture, bytes, fingerprint) = try Self.fixture()
    #expect(throws: Never.self) { try SymbolCacheFile(bytes: bytes, identity: fixture.identity, fingerprint: fingerprint) }
    for offset in stride(from: 0, to: bytes.count, by: 61) where !(24..<32).contains(offset) {
      var damaged = bytes
      damaged[offset] ^= 0x10
      #expect(throws: FormatError.self, "byte \(offset)") {
        try SymbolCacheFile(bytes: damaged, identity: fixture.identity, fingerprint: fingerprint)
      }
    }
    for length in [0, 1, 63, 64, bytes.count / 2, bytes.count - 1] {
      #expect(throws: FormatError.self, "\(length) bytes") {
        try SymbolCacheFile(bytes: Array(bytes.prefix(length)), identity: fixture.identity, fingerprint: fingerprint)
      }
    }
  }

  /// Another version, identity or source, each said as such.
  @Test func otherVersionIdentityOrSourceIsRefused() throws {
    let (fixture, bytes, fingerprint) = try Self.fixture()
    var older = bytes
    try Self.forge(&older, 0, at: 4)
    #expect(throws: FormatError.symbolCache("format version 0, not \(SymbolCacheFormat.version)")) {
      try SymbolCacheFile(bytes: older, identity: fixture.identity, fingerprint: fingerprint)
    }
    let other = String(fixture.identity.reversed())
    #expect(throws: FormatError.symbolCache("built for another identity")) {
      try SymbolCacheFile(bytes: bytes, identity: other, fingerprint: fingerprint)
    }
    #expect(throws: FormatError.symbolCache("built from another file")) {
      try SymbolCacheFile(bytes: bytes, identity: fixture.identity, fingerprint: fingerprint ^ 1)
    }
    var wrongSize = bytes
    try Self.forge(&wrongSize, 9, at: 40)  // the range count: the sections no longer add up
    #expect(throws: FormatError.symbolCache("its sections do not add up to its size")) {
      try SymbolCacheFile(bytes: wrongSize, identity: fixture.identity, fingerprint: fingerprint)
    }
  }

  /// Files changed behind a recomputed checksum (a forger's, not damage): opening and answering
  /// either throws `FormatError` or answers; never traps or loops. Seeded.
  @Test func forgedFilesOnlyThrow() throws {
    let (fixture, bytes, fingerprint) = try Self.fixture()
    let table = try CacheFixtures.dwarf(fixture).answerTable()
    let probes = CacheFixtures.probes(table, random: 50, seed: 7).prefix(200)
    var generator = SeededGenerator(seed: 0xF0F)
    var opened = 0, threw = 0
    for _ in 0..<400 {
      var forged = bytes
      for _ in 0..<Int.random(in: 1...4, using: &generator) {
        let offset = Int.random(in: 64..<forged.count, using: &generator)
        forged[offset] = UInt8.random(in: 0...255, using: &generator)
      }
      try Self.reseal(&forged)
      guard let file = try? SymbolCacheFile(bytes: forged, identity: fixture.identity, fingerprint: fingerprint) else {
        threw += 1
        continue
      }
      opened += 1
      for address in probes {
        do { _ = try file.frames(at: address) } catch { threw += 1 }
      }
    }
    #expect(opened > 0)
  }
}
