import ImageLogTestSupport
import Testing
@testable import ImageReaders
@testable import SnapshotFormatting

/// Seeded truncations, bit flips and field overwrites over every committed fixture (all formats,
/// recursively): `BinaryFile.parse` must return a value or throw `FormatError`, never trap or hang.
/// A trap would kill the test process, so reaching the end is the assertion; the counts are checked
/// so the test cannot pass by doing nothing.
@Suite struct MutationTests {
  static let perFixture = 600

  /// Values that break readers most often: zero, all ones, sign bits, just past common sizes.
  static let extremes: [UInt64] = [0, 1, 0xFF, 0xFFFF, 0xFFFF_FFFF, 0x7FFF_FFFF, 0x8000_0000, UInt64.max,
                                   UInt64.max - 1, 0x8000_0000_0000_0000, 0x1000, 0x10000, 0xFFFF_FFF0]

  enum Mutation: CaseIterable { case truncate, flipBits, overwrite, overwriteHeader, combined }

  static func mutate(_ original: [UInt8], _ kind: Mutation, _ rng: inout SeededGenerator) -> [UInt8] {
    var bytes = original
    func overwrite(near limit: Int) {
      guard !bytes.isEmpty else { return }
      let width = [1, 2, 4, 8].randomElement(using: &rng)!
      let position = Int.random(in: 0..<max(1, min(limit, bytes.count)), using: &rng) & ~(width - 1)
      let value = Bool.random(using: &rng) ? extremes.randomElement(using: &rng)! : rng.next()
      for index in 0..<width where position + index < bytes.count {
        let shift = Bool.random(using: &rng) ? index * 8 : (width - 1 - index) * 8  // either byte order
        bytes[position + index] = UInt8(truncatingIfNeeded: value >> UInt64(shift))
      }
    }
    switch kind {
    case .truncate:
      bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng)))
    case .flipBits:
      for _ in 0..<Int.random(in: 1...8, using: &rng) where !bytes.isEmpty {
        let index = Int.random(in: 0..<bytes.count, using: &rng)
        bytes[index] ^= 1 << UInt8.random(in: 0...7, using: &rng)
      }
    case .overwrite:
      for _ in 0..<Int.random(in: 1...3, using: &rng) { overwrite(near: bytes.count) }
    case .overwriteHeader:
      // Headers and tables sit near the start (ELF header, program headers, Mach-O load commands).
      overwrite(near: 512)
    case .combined:
      overwrite(near: 512)
      overwrite(near: bytes.count)
      if Bool.random(using: &rng) { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng))) }
    }
    return bytes
  }

  /// Parses and then touches everything a caller would: summaries, and for ELF every section's contents.
  static func exercise(_ bytes: [UInt8]) -> Bool {
    do {
      let binary = try BinaryFile.parse(bytes)
      for slice in binary.slices {
        _ = slice.buildID?.uuid
        _ = slice.textVMRange.upperBound - slice.textVMRange.lowerBound  // not .count: it traps past Int.max
        _ = slice.loadVMRange.upperBound - slice.loadVMRange.lowerBound
      }
      if case .elf(let file) = binary {
        bytes.withUnsafeBytes { raw in
          for section in file.sections { _ = try? file.contents(of: section, in: ByteReader(raw)) }
        }
      }
      return true
    } catch {
      return false  // typed throws: the error can only be a FormatError
    }
  }

  @Test func everyFixtureSurvivesMutations() throws {
    let names = Fixtures.all
    try #require(!names.isEmpty, "no fixtures found under \(Fixtures.directory)")
    var rng = SeededGenerator(seed: 0x1D1D_2026)
    var parsed = 0
    var rejected = 0
    for name in names {
      let original = try Fixtures.bytes(name)
      for round in 0..<Self.perFixture {
        let kind = Mutation.allCases[round % Mutation.allCases.count]
        if Self.exercise(Self.mutate(original, kind, &rng)) { parsed += 1 } else { rejected += 1 }
      }
    }
    #expect(parsed + rejected == names.count * Self.perFixture)
    #expect(rejected > 0 && parsed > 0, "mutations should both break and spare files (\(parsed) parsed, \(rejected) rejected)")
  }

  /// The DWARF reader over a file: its index, then every indexed address and a neighbour. False when
  /// anything threw (a `FormatError`: typed throws).
  static func exerciseDWARF(_ bytes: [UInt8]) -> (answered: Int, threw: Bool) {
    bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      guard let file = try? ELFFile(reader),
            let sections = try? DWARFSections.elf(file, bytes: reader, owner: nil, decompress: nil),
            let dwarf = try? DWARFReader(sections) else { return (0, true) }
      var answered = 0, threw = false
      for address in dwarf.indexedAddresses.prefix(200) {
        for probe in [address, address &+ 3] {
          do { if !(try dwarf.frames(at: probe)).isEmpty { answered += 1 } } catch { threw = true }
        }
      }
      return (answered, threw)
    }
  }

  /// Seeded mutations inside the debug sections of the DWARF fixtures (a cut becomes zeros to the
  /// section's end, so the ELF file around stays readable): the reader answers or throws, never traps
  /// or hangs; some mutations must break it and some spare it.
  @Test func dwarfFixturesSurviveMutationsOfTheirDebugSections() throws {
    try Self.mutateDebugSections(seed: 0xD3A2_F2026, what: "answers nothing") { bytes in
      let result = Self.exerciseDWARF(bytes)
      return (result.answered > 0, result.threw)
    }
  }

  /// Seeded mutations inside the debug sections of each DWARF fixture (a cut becomes zeros to the
  /// section's end, so the ELF file around stays readable), each file given to `exercise` (is there an
  /// answer, did it throw): the unmutated fixtures must answer (else "FIXTURE: the unmutated fixture
  /// `what`"), and some mutations must break the DWARF and some spare it.
  static func mutateDebugSections(seed: UInt64, what: String,
                                  _ exercise: ([UInt8]) -> (answered: Bool, threw: Bool)) throws {
    let names = Fixtures.all.filter { $0.hasPrefix("dwarf/") }
    try #require(names.count >= 2, "no DWARF fixtures under \(Fixtures.directory)/dwarf")
    var rng = SeededGenerator(seed: seed)
    var spared = 0, broken = 0
    for name in names {
      let original = try Fixtures.bytes(name)
      #expect(exercise(original).answered, "\(name): the unmutated fixture \(what)")
      let ranges: [Range<Int>] = try original.withUnsafeBytes { raw in
        try ELFFile(ByteReader(raw)).sections.filter { $0.name.hasPrefix(".debug_") }.compactMap(\.fileRange)
      }
      try #require(!ranges.isEmpty)
      for round in 0..<perFixture {
        var bytes = original
        let range = ranges[round % ranges.count]
        let kind = Mutation.allCases[(round / ranges.count) % Mutation.allCases.count]
        var section = mutate(Array(original[range]), kind, &rng)
        if section.count < range.count { section += [UInt8](repeating: 0, count: range.count - section.count) }
        bytes.replaceSubrange(range, with: section.prefix(range.count))
        if exercise(bytes).threw { broken += 1 } else { spared += 1 }
      }
    }
    #expect(spared + broken == names.count * perFixture)
    #expect(broken > 0 && spared > 0, "mutations should both break and spare the DWARF (\(spared) spared, \(broken) broken)")
  }

  @Test func everyTruncationOfOneFixtureOnlyThrows() throws {
    // Every prefix of a small shared library: each table and note cut at every byte.
    let original = try Fixtures.bytes("elf/libfixture-x86_64.so")
    var rejected = 0
    for length in 0..<original.count where !Self.exercise(Array(original.prefix(length))) { rejected += 1 }
    #expect(rejected > original.count / 2)
  }
}

extension MutationTests {
  /// For `rounds` seeded mutations of each fixture in `names` (every kind in turn), `decode` and
  /// `reference` give the same text; some mutations must break the file and some must spare it, so a
  /// comparison of two always-failing (or never-failing) decodes cannot pass. Texts starting
  /// "error: " are failures.
  static func expectSameUnderMutation(_ names: [String], seed: UInt64, rounds: Int = 200,
                                      decode: ([UInt8]) -> String, reference: ([UInt8]) -> String) throws {
    try #require(!names.isEmpty)
    var rng = SeededGenerator(seed: seed)
    var compared = 0
    var errors = 0
    for name in names {
      let original = try Fixtures.bytes(name)
      for round in 0..<rounds {
        let kind = Mutation.allCases[round % Mutation.allCases.count]
        let bytes = mutate(original, kind, &rng)
        let expected = reference(bytes)
        #expect(decode(bytes) == expected, "\(name) round \(round)")
        compared += 1
        if expected.hasPrefix("error: ") { errors += 1 }
      }
    }
    #expect(compared == names.count * rounds)
    #expect(errors > 0 && errors < compared, "mutations should both break and spare files (\(errors) of \(compared) failed)")
  }
}

extension MutationTests {
  /// The minidump reader over `bytes` and what its callers touch: every thread's context and stack,
  /// memory at each register that points into the dump, each module's identifiers, the Linux and
  /// Crashpad streams. 0 when it threw, 1 when it read with problems named, 2 when it read cleanly.
  static func exerciseMinidump(_ bytes: [UInt8]) -> Int {
    bytes.withUnsafeBytes { raw in
      let source = ByteReader(raw)
      guard let dump = try? MinidumpFile(source: source) else { return 0 }
      for thread in dump.threads {
        _ = try? dump.stack(of: thread, in: source)
        for value in thread.context?.values ?? [] where dump.memoryRange(containing: value) != nil {
          _ = try? dump.memory(at: value, length: 16, in: source)
          _ = dump.availableBytes(from: value)
        }
      }
      // The stacks as a snapshot holds them: each range of the file once, no more than the file in all.
      let held = MinidumpShapes.heldBytes(dump.stackCopies(in: source).stacks.map { $0?.bytes })
      #expect(held.distinct <= bytes.count, "stack copies hold \(held.distinct) bytes of a \(bytes.count)-byte dump")
      for module in dump.modules { _ = (module.debugIdentifier, module.codeIdentifier(platformID: dump.systemInfo?.platformID), module.debugFileName, module.addressRange) }
      _ = (dump.linux.arguments, dump.linux.environmentEntries, dump.linux.procStatusValue("Pid"))
      _ = (dump.crashpadInfo?.reportIDString, dump.systemInfo?.x86VendorID, dump.systemInfo?.armCPUID)
      _ = dump.exception?.context?.pc
      _ = (dump.exception?.reason(dump.systemInfo), dump.exception?.crashAddress(dump.systemInfo), dump.systemInfo?.osVersionText)
      return dump.problems.isEmpty ? 2 : 1
    }
  }

  /// Seeded mutations of the committed minidumps (from `MinidumpWriter`), of the hostile shapes of issue
  /// 35 made from one of them (`MinidumpShapes`: many threads over one stack at one address, at many
  /// addresses, over overlapping ranges of the file; many modules) and, when Crashpad's handler is
  /// installed, of a real Crashpad dump made at test time: the reader returns or throws, never traps or
  /// hangs, and the stacks it copies hold no more than the file; mutations must make it throw, make it
  /// name problems, and spare it.
  @Test func minidumpsSurviveMutations() throws {
    var originals = try Fixtures.all(in: "minidump").map { (name: $0, bytes: try Fixtures.bytes($0)) }
    try #require(originals.count >= 4, "no minidump fixtures under \(Fixtures.directory)/minidump")
    let shapes = try Self.hostileMinidumpShapes()
    originals += shapes
    if MinidumpCrashpadTests.canRun, case .success(let crash) = MinidumpCrashpadTests.segv {
      originals.append(("Crashpad's dump", crash.bytes))
    }
    var rng = SeededGenerator(seed: 0x3D3D_2027)
    var outcomes = [0, 0, 0]
    for (name, original) in originals {
      // The shapes' MemoryList names the first stack's first bytes at another offset of the file: a problem.
      let clean = shapes.contains { $0.name == name } ? 1 : 2
      #expect(Self.exerciseMinidump(original) == clean, "\(name): the unmutated dump does not read as it should")
      for round in 0..<Self.perFixture {
        outcomes[Self.exerciseMinidump(Self.mutate(original, Mutation.allCases[round % Mutation.allCases.count], &rng))] += 1
      }
    }
    #expect(outcomes.reduce(0, +) == originals.count * Self.perFixture)
    #expect(outcomes.allSatisfy { $0 > 0 }, "threw, named problems, read cleanly: \(outcomes)")
  }

  /// The shapes of issue 35, from the committed x86_64 writer dump, small enough for hundreds of mutations.
  static func hostileMinidumpShapes() throws -> [(name: String, bytes: [UInt8])] {
    let base = try Fixtures.bytes("minidump/writer-x86_64.dmp")
    let shapes: [(String, [UInt8]?)] = [
      ("300 threads over one stack", MinidumpShapes.replicating(base, threads: 300, modules: 2, stackSize: 16 << 10)),
      ("300 stacks over one range of the file", MinidumpShapes.replicating(base, threads: 300, modules: 2, stackSize: 16 << 10,
                                                                           stackAddressStep: 16 << 10)),
      ("300 stacks over overlapping ranges", MinidumpShapes.replicating(base, threads: 300, modules: 2, stackSize: 16 << 10,
                                                                        stackShift: 8, stackAddressStep: 16 << 10)),
      ("500 threads and 500 modules", MinidumpShapes.replicating(base, threads: 500, modules: 500, stackSize: 4096)),
    ]
    return try shapes.map { name, bytes in (name, try #require(bytes, "\(name): the writer fixture has no thread or module")) }
  }

  /// Every prefix of one minidump: each structure cut at every byte.
  @Test func everyTruncationOfOneMinidumpOnlyThrowsOrNamesProblems() throws {
    let original = try Fixtures.bytes("minidump/writer-x86_64.dmp")
    var clean = 0
    for length in 0..<original.count where Self.exerciseMinidump(Array(original.prefix(length))) == 2 { clean += 1 }
    #expect(clean == 0, "\(clean) truncated dumps read as if whole")
  }
}
