import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Hand-made malformed Mach-O and universal files with the exact error each must give (LLVM's checks),
/// and a bounded mutation run over the Mach-O fixtures that may only produce values or typed errors.
@Suite struct MachOMalformedTests {
  /// libfixture-x86_64-macos.dylib: 64-bit little-endian, first load command LC_SEGMENT_64 __TEXT.
  static let base = "libfixture-x86_64-macos.dylib"

  static func put32(_ bytes: inout [UInt8], at offset: Int, _ value: UInt32, bigEndian: Bool = false) {
    for index in 0..<4 {
      let shift = bigEndian ? 24 - 8 * index : 8 * index
      bytes[offset + index] = UInt8(truncatingIfNeeded: value >> shift)
    }
  }

  static func put64BE(_ bytes: inout [UInt8], at offset: Int, _ value: UInt64) {
    for index in 0..<8 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (56 - 8 * index)) }
  }

  /// The fixture with `edit` applied, and the load command offsets of the unedited file.
  static func edited(_ name: String = base, _ edit: (inout [UInt8], MachOFile, [Int]) -> Void) throws -> [UInt8] {
    var bytes = try MachOFixtures.bytes(name)
    guard case .machO(let file) = try BinaryFile.parse(bytes) else { throw CancellationError() }
    var offsets: [Int] = []
    var offset = file.header.size
    for _ in 0..<Int(file.header.commandCount) {
      offsets.append(offset)
      let little = bytes[offset + 4..<offset + 8].reversed().reduce(0) { $0 << 8 | Int($1) }
      let big = bytes[offset + 4..<offset + 8].reduce(0) { $0 << 8 | Int($1) }
      offset += file.header.endian == .little ? little : big
    }
    edit(&bytes, file, offsets)
    return bytes
  }

  static func index(of name: String, in file: MachOFile) -> Int {
    file.loadCommands.firstIndex { $0.name == name } ?? -1
  }

  @Test func cmdsizeZero() throws {
    let bytes = try Self.edited { bytes, _, offsets in Self.put32(&bytes, at: offsets[0] + 4, 0) }
    #expect(throws: FormatError.loadCommand(0, "cmdsize 0 is less than 8")) { try BinaryFile.parse(bytes) }
  }

  @Test func cmdsizeSmallerThanItsStruct() throws {
    let bytes = try Self.edited { bytes, _, offsets in Self.put32(&bytes, at: offsets[0] + 4, 16) }
    #expect(throws: FormatError.loadCommand(0, "LC_SEGMENT_64 cmdsize 16 is less than its struct (72)")) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func cmdsizeUnaligned() throws {
    let bytes = try Self.edited { bytes, _, offsets in Self.put32(&bytes, at: offsets[0] + 4, 20) }
    #expect(throws: FormatError.loadCommand(0, "cmdsize 20 not a multiple of 8")) { try BinaryFile.parse(bytes) }
  }

  @Test func cmdsizeUnalignedBigEndian32Bit() throws {
    let bytes = try Self.edited("handmade-ppc.dylib") { bytes, _, offsets in
      Self.put32(&bytes, at: offsets[1] + 4, 30, bigEndian: true)
    }
    #expect(throws: FormatError.loadCommand(1, "cmdsize 30 not a multiple of 4")) { try BinaryFile.parse(bytes) }
  }

  @Test func cmdsizePastSizeofcmds() throws {
    var expected: FormatError?
    let bytes = try Self.edited { bytes, file, offsets in
      let last = offsets.count - 1
      let size = UInt32(file.header.commandsSize) - UInt32(offsets[last] - 32) + 8
      Self.put32(&bytes, at: offsets[last] + 4, size)
      expected = .loadCommand(last, "extends past the end of all load commands in the file (cmdsize \(size) at "
                              + "offset \(offsets[last] - 32), sizeofcmds \(file.header.commandsSize))")
    }
    #expect(throws: try #require(expected)) { try BinaryFile.parse(bytes) }
  }

  @Test func absurdNcmds() throws {
    var sizeofcmds: UInt32 = 0
    let bytes = try Self.edited { bytes, file, _ in
      Self.put32(&bytes, at: 16, 0xFFFF_FFFF)
      sizeofcmds = file.header.commandsSize
    }
    #expect(throws: FormatError.machO("ncmds 4294967295 cannot fit in sizeofcmds \(sizeofcmds) (8 bytes each at least)")) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func ncmdsOneTooMany() throws {
    // One more command than there are: the walk reaches the end of sizeofcmds.
    var expected: FormatError?
    let bytes = try Self.edited { bytes, file, _ in
      Self.put32(&bytes, at: 16, file.header.commandCount + 1)
      expected = .loadCommand(Int(file.header.commandCount),
                              "extends past the end of all load commands in the file (sizeofcmds \(file.header.commandsSize))")
    }
    #expect(throws: try #require(expected)) { try BinaryFile.parse(bytes) }
  }

  @Test func sizeofcmdsPastTheFile() throws {
    let bytes = try Self.edited { bytes, _, _ in Self.put32(&bytes, at: 20, 0x7FFF_FFF0) }
    #expect(throws: FormatError.machO("load commands extend past the end of the file (sizeofcmds 2147483632, "
                                      + "\(bytes.count - 32) bytes after the header)")) { try BinaryFile.parse(bytes) }
  }

  @Test func truncatedHeader() throws {
    let bytes = Array(try MachOFixtures.bytes(Self.base).prefix(20))
    #expect(throws: FormatError.machO("truncated Mach-O header: 32 bytes needed, 20 in the file")) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func segmentFileRangePastTheEnd() throws {
    var count = 0
    let bytes = try Self.edited { bytes, _, offsets in
      // fileoff of LC_SEGMENT_64 __TEXT (at +40, little-endian 64-bit): beyond the file.
      count = bytes.count
      for index in 0..<8 { bytes[offsets[0] + 40 + index] = index == 2 ? 1 : 0 }
    }
    #expect(throws: FormatError.fieldOutOfRange("load command 0 LC_SEGMENT_64 __TEXT fileoff+filesize", offset: 0x10000,
                                                size: 4096, limit: count)) { try BinaryFile.parse(bytes) }
  }

  @Test func segmentNsectsInconsistent() throws {
    var size = 0
    let bytes = try Self.edited { bytes, _, offsets in
      size = offsets[1] - offsets[0]
      Self.put32(&bytes, at: offsets[0] + 64, 7)
    }
    #expect(throws: FormatError.loadCommand(0, "LC_SEGMENT_64 cmdsize \(size) inconsistent with nsects 7")) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func uuidWrongSize() throws {
    var index = 0
    let bytes = try Self.edited { bytes, file, offsets in
      index = Self.index(of: "LC_UUID", in: file)
      Self.put32(&bytes, at: offsets[index] + 4, 32)
    }
    #expect(throws: FormatError.loadCommand(index, "LC_UUID cmdsize 32 is not 24")) { try BinaryFile.parse(bytes) }
  }

  @Test func twoUUIDs() throws {
    var index = 0
    let bytes = try Self.edited { bytes, file, offsets in
      // LC_SYMTAB is 24 bytes too: renumber it LC_UUID; the real one is then the second.
      let symtab = Self.index(of: "LC_SYMTAB", in: file)
      index = max(symtab, Self.index(of: "LC_UUID", in: file))
      Self.put32(&bytes, at: offsets[symtab], 0x1B)
    }
    #expect(throws: FormatError.loadCommand(index, "more than one LC_UUID command")) { try BinaryFile.parse(bytes) }
  }

  @Test func dylibNameInsideStruct() throws {
    var index = 0
    let bytes = try Self.edited { bytes, file, offsets in
      index = Self.index(of: "LC_ID_DYLIB", in: file)
      Self.put32(&bytes, at: offsets[index] + 8, 8)
    }
    #expect(throws: FormatError.loadCommand(index, "LC_ID_DYLIB name.offset 8 lies inside the command's struct (24)")) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func dylibNameUnterminated() throws {
    var index = 0
    let bytes = try Self.edited { bytes, file, offsets in
      index = Self.index(of: "LC_ID_DYLIB", in: file)
      let size = bytes[offsets[index] + 4..<offsets[index] + 8].reversed().reduce(0) { $0 << 8 | Int($1) }
      for position in (offsets[index] + 24)..<(offsets[index] + size) { bytes[position] = 0x41 }
    }
    #expect(throws: FormatError.loadCommand(index, "LC_ID_DYLIB name extends past the end of the command (no NUL)")) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func codeSignatureRangePastTheEnd() throws {
    var index = 0
    var count = 0
    let bytes = try Self.edited("fixture-arm64-macos") { bytes, file, offsets in
      index = Self.index(of: "LC_CODE_SIGNATURE", in: file)
      Self.put32(&bytes, at: offsets[index] + 12, 0x10_0000)
      count = bytes.count
    }
    guard case .machO(let file) = try MachOFixtures.parse("fixture-arm64-macos"),
          let range = file.codeSignatureRange else { Issue.record("no signature"); return }
    #expect(throws: FormatError.fieldOutOfRange("load command \(index) LC_CODE_SIGNATURE dataoff+datasize",
                                                offset: UInt64(range.dataOffset), size: 0x10_0000, limit: count)) {
      try BinaryFile.parse(bytes)
    }
  }

  @Test func notMachO() {
    #expect(throws: FormatError.notRecognized(magic: 0x2321_2F62)) { try BinaryFile.parse(Array("#!/bin/sh\n".utf8)) }
    #expect(throws: FormatError.tooShort(count: 2)) { try BinaryFile.parse([0xCF, 0xFA]) }
  }

  // MARK: Universal headers

  /// A universal file with a fat_arch table of `arches` (offset, size) around copies of `slice`.
  /// Entry N claims `cpus[N]` (x86_64, arm64, i386 unless `sameCPU`).
  static func fat(_ arches: [(offset: UInt64, size: UInt64)], is64Bit: Bool = false, count: UInt32? = nil,
                  slice: [UInt8], fileSize: Int, sameCPU: Bool = false) -> [UInt8] {
    let cpus: [(UInt32, UInt32)] = [(0x0100_0007, 3), (0x0100_000C, 0), (7, 3)]
    var bytes = [UInt8](repeating: 0, count: fileSize)
    put32(&bytes, at: 0, is64Bit ? 0xCAFE_BABF : 0xCAFE_BABE, bigEndian: true)
    put32(&bytes, at: 4, count ?? UInt32(arches.count), bigEndian: true)
    for (index, arch) in arches.enumerated() {
      let entry = 8 + index * (is64Bit ? 32 : 20)
      let cpu = cpus[sameCPU ? 0 : index % cpus.count]
      put32(&bytes, at: entry, cpu.0, bigEndian: true)
      put32(&bytes, at: entry + 4, cpu.1, bigEndian: true)
      if is64Bit {
        put64BE(&bytes, at: entry + 8, arch.offset)
        put64BE(&bytes, at: entry + 16, arch.size)
        put32(&bytes, at: entry + 24, 12, bigEndian: true)
      } else {
        put32(&bytes, at: entry + 8, UInt32(truncatingIfNeeded: arch.offset), bigEndian: true)
        put32(&bytes, at: entry + 12, UInt32(truncatingIfNeeded: arch.size), bigEndian: true)
        put32(&bytes, at: entry + 16, 12, bigEndian: true)
      }
      if arch.offset < UInt64(fileSize), arch.offset + UInt64(slice.count) <= UInt64(fileSize), arch.offset >= UInt64(8 + arches.count * (is64Bit ? 32 : 20)) {
        bytes.replaceSubrange(Int(arch.offset)..<Int(arch.offset) + slice.count, with: slice)
      }
    }
    return bytes
  }

  func fatFailures(_ bytes: [UInt8]) throws -> (FatFile, [FormatError]) {
    guard case .fat(let fat) = try BinaryFile.parse(bytes) else { throw CancellationError() }
    return (fat, fat.failures.map(\.error))
  }

  @Test func fatAbsurdCount() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let bytes = Self.fat([], count: 0x1000_0000, slice: slice, fileSize: 8192 + slice.count)
    #expect(throws: FormatError.fat("nfat_arch 268435456 needs 5368709128 header bytes, the file has \(bytes.count)")) {
      try BinaryFile.parse(bytes)
    }
  }

  /// An empty universal header (`nfat_arch` 0), 32 and 64-bit magic: an error, not an empty file.
  @Test(arguments: [[0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 0], [0xCA, 0xFE, 0xBA, 0xBF, 0, 0, 0, 0]] as [[UInt8]])
  func fatWithNoArchitectures(bytes: [UInt8]) {
    #expect(throws: FormatError.fat("lists no architectures (nfat_arch 0)")) { try BinaryFile.parse(bytes) }
    #expect(throws: FormatError.fat("lists no architectures (nfat_arch 0)")) { try BinaryFile.parse(bytes + [UInt8](repeating: 0, count: 4096)) }
  }

  @Test func fatTruncated() {
    #expect(throws: FormatError.fat("truncated: 8 bytes needed, 6 in the file")) {
      try BinaryFile.parse([0xCA, 0xFE, 0xBA, 0xBE, 0, 0])
    }
  }

  @Test func fatSlicePastTheEndIsThatSliceOnly() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let size = 4096 + slice.count
    let bytes = Self.fat([(4096, UInt64(slice.count)), (4096, 100_000)], slice: slice, fileSize: size)
    let (fat, failures) = try fatFailures(bytes)
    #expect(failures == [.fat("slice 1 offset 4096 + size 100000 extends past the end of the file (\(size) bytes)")])
    #expect(fat.slices.count == 1)
    #expect(fat.slices.first?.fileOffset == 4096)
    #expect(fat.failures.first?.index == 1 && fat.failures.first?.architecture == "arm64")
  }

  @Test func fatSliceOverlapsHeader() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let (_, failures) = try fatFailures(Self.fat([(8, 16)], slice: slice, fileSize: 4096 + slice.count))
    #expect(failures == [.fat("slice 0 offset 8 overlaps the universal header (28 bytes)")])
  }

  @Test func fatSlicesOverlapEachOther() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let (fat, failures) = try fatFailures(Self.fat([(4096, UInt64(slice.count)), (8192, 64)], slice: slice,
                                                   fileSize: 4096 + slice.count))
    #expect(failures == [.fat("slice 1 overlaps slice 0")])
    #expect(fat.slices.count == 1)
  }

  @Test func fatSliceMisaligned() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let (_, failures) = try fatFailures(Self.fat([(4100, 64)], slice: slice, fileSize: 8192))
    #expect(failures == [.fat("slice 0 offset 4100 is not aligned to 2^12")])
  }

  @Test func fatRepeatedArchitecture() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let (fat, failures) = try fatFailures(Self.fat([(4096, UInt64(slice.count)), (12288, UInt64(slice.count))],
                                                   slice: slice, fileSize: 12288 + slice.count, sameCPU: true))
    #expect(failures == [.fat("slice 1 repeats the architecture of slice 0 (cputype 16777223 cpusubtype 3)")])
    #expect(fat.slices.count == 1)
  }

  @Test func fat64OffsetPlusSizeOverflows() throws {
    let slice = try MachOFixtures.bytes(Self.base)
    let (_, failures) = try fatFailures(Self.fat([(0xFFFF_FFFF_FFFF_F000, 0x2000)], is64Bit: true, slice: slice,
                                                 fileSize: 4096))
    #expect(failures == [.fat("slice 0 offset 0xfffffffffffff000 + size 0x2000 overflows")])
  }

  @Test func fatSliceThatIsNotMachO() throws {
    let (_, failures) = try fatFailures(Self.fat([(4096, 64)], slice: Array("!<arch>\n".utf8), fileSize: 8192))
    #expect(failures == [.fat("slice 0 is not a Mach-O file (magic 0x213c6172)")])
  }

  @Test func fatSliceWithBadLoadCommandIsThatSliceOnly() throws {
    var bad = try MachOFixtures.bytes(Self.base)
    Self.put32(&bad, at: 36, 0)  // cmdsize of the first command
    let good = try MachOFixtures.bytes(Self.base)
    var bytes = Self.fat([(4096, UInt64(good.count)), (12288, UInt64(bad.count))], slice: good, fileSize: 12288 + bad.count)
    bytes.replaceSubrange(12288..<12288 + bad.count, with: bad)
    let (fat, failures) = try fatFailures(bytes)
    #expect(failures == [.loadCommand(0, "cmdsize 0 is less than 8")])
    #expect(fat.slices.map(\.fileOffset) == [4096])
  }

  // MARK: Mutations

  /// Truncations, bit flips and 32-bit overwrites of every Mach-O fixture: only values or FormatError.
  @Test func mutationsOnlyThrowFormatErrors() throws {
    var generator = SeededGenerator(seed: 0x4D41_4348_4F21)
    func next() -> UInt64 { generator.next() }
    var outcomes = (values: 0, errors: 0)
    for name in MachOFixtures.names {
      let original = try MachOFixtures.bytes(name)
      for round in 0..<1_000 {
        var bytes = original
        // Most edits land in the header and load commands, where the reader's decisions are.
        let hot = min(bytes.count, 4096)
        switch round % 3 {
        case 0: bytes = Array(bytes.prefix(Int(next() % UInt64(bytes.count + 1))))
        case 1:
          for _ in 0..<(1 + next() % 4) { bytes[Int(next() % UInt64(hot))] ^= UInt8(1) << (next() % 8) }
        default:
          let at = Int(next() % UInt64(max(1, hot - 4)))
          let values: [UInt32] = [0, 1, 8, 0x7FFF_FFFF, 0xFFFF_FFFF, UInt32(truncatingIfNeeded: next())]
          Self.put32(&bytes, at: at, values[Int(next() % 6)], bigEndian: next() % 2 == 0)
        }
        do {
          let file = try BinaryFile.parse(bytes)
          _ = file.slices
          if case .machO(let macho) = file, case .success(let signature)? = macho.codeSignature {
            _ = try? signature.decodedEntitlements()
          }
          outcomes.values += 1
        } catch {
          outcomes.errors += 1
        }
      }
    }
    #expect(outcomes.values > 0 && outcomes.errors > 0)
  }

  /// Bit flips and overwrites inside the signed fixture's SuperBlob (blob index, CodeDirectory, both
  /// entitlements blobs): the file still reads, and the signature and entitlements are values or FormatError.
  @Test func signatureMutationsOnlyThrowFormatErrors() throws {
    let name = "fixture-arm64-ios-signed"
    let original = try MachOFixtures.bytes(name)
    guard case .machO(let file) = try BinaryFile.parse(original), let range = file.codeSignatureRange else {
      Issue.record("no signature"); return
    }
    var state: UInt64 = 0x5349_474E
    func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    let start = Int(range.dataOffset)
    // The index, the CodeDirectory header and the blobs up to the code hashes hold every decision.
    let hot = min(Int(range.dataSize), 2048)
    var outcomes = (good: 0, bad: 0)
    for round in 0..<5_000 {
      var bytes = original
      if round % 2 == 0 {
        for _ in 0..<(1 + next() % 3) { bytes[start + Int(next() % UInt64(hot))] ^= UInt8(1) << (next() % 8) }
      } else {
        let values: [UInt32] = [0, 8, 12, 0x7FFF_FFFF, 0xFFFF_FFFF, UInt32(truncatingIfNeeded: next())]
        Self.put32(&bytes, at: start + Int(next() % UInt64(hot - 4)), values[Int(next() % 6)], bigEndian: true)
      }
      guard case .machO(let mutated) = try BinaryFile.parse(bytes) else { Issue.record("not thin"); return }
      #expect(mutated.uuid == file.uuid)
      switch mutated.codeSignature {
      case .success(let signature)?:
        do { _ = try signature.decodedEntitlements(); outcomes.good += 1 } catch { outcomes.bad += 1 }
      default: outcomes.bad += 1
      }
    }
    #expect(outcomes.good > 0 && outcomes.bad > 0)
  }
}
