#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// A hand-made ELF core (little-endian; x86_64 or i386): a note segment with two `NT_PRSTATUS`, an
/// `NT_PRPSINFO`, an `NT_SIGINFO`, an `NT_AUXV` and an `NT_FILE`, and three `PT_LOAD`s: a library's
/// first page (ELF header, program headers and build-id note; more memory than file bytes), a
/// segment the writer left out (`p_filesz` 0) and a stack. Offsets are kept so a test can break one field.
struct ELFCoreTestImage {
  var is64Bit: Bool
  var bytes: [UInt8] = []
  var noteOffset = 0
  var noteSize = 0
  var libraryPageOffset = 0
  /// Where each note's descriptor starts, relative to the note segment, by type.
  var descriptorOffsets: [UInt32: Int] = [:]

  static let libraryAddress: UInt64 = 0x10000, leftOutAddress: UInt64 = 0x20000, stackAddress: UInt64 = 0x30000
  static let buildID: [UInt8] = [0xC0, 0xDE, 0xC0, 0xDE, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06]
  static let tids: [Int32] = [4242, 4243]

  var word: Int { is64Bit ? 8 : 4 }

  init(is64Bit: Bool = true, prstatusSize: Int? = nil) {
    self.is64Bit = is64Bit
    let headerSize = is64Bit ? 64 : 52, phdrSize = is64Bit ? 56 : 32
    var notes: [UInt8] = []
    func note(_ type: UInt32, _ descriptor: [UInt8], name: String = "CORE") {
      let nameBytes = Array(name.utf8) + [0]
      notes += le32(UInt32(nameBytes.count)) + le32(UInt32(descriptor.count)) + le32(type)
      notes += nameBytes + [UInt8](repeating: 0, count: (4 - nameBytes.count % 4) % 4)
      descriptorOffsets[type] = descriptorOffsets[type] ?? notes.count
      notes += descriptor + [UInt8](repeating: 0, count: (4 - descriptor.count % 4) % 4)
    }
    for (index, tid) in Self.tids.enumerated() {
      // struct elf_prstatus: pr_info, pr_cursig, masks, pr_pid..., times, pr_reg, pr_fpvalid.
      let pidOffset = is64Bit ? 32 : 24, registerOffset = is64Bit ? 112 : 72
      let registerCount = is64Bit ? 27 : 17
      var status = [UInt8](repeating: 0, count: prstatusSize ?? (is64Bit ? 336 : 144))
      func put(_ value: [UInt8], at offset: Int) {
        for (i, byte) in value.enumerated() where offset + i < status.count { status[offset + i] = byte }
      }
      put(le32(11), at: 0)
      put(le32(1), at: 4)
      put([11, 0], at: 12)
      put(le32(UInt32(bitPattern: tid)), at: pidOffset)
      put(le32(1), at: pidOffset + 4)
      for register in 0..<registerCount {
        let value = UInt64(0x1000 * (index + 1) + register)
        put(is64Bit ? le64(value) : le32(UInt32(value)), at: registerOffset + register * word)
      }
      note(ELFCore.prstatusType, status)
    }
    var info = [UInt8](repeating: 0, count: is64Bit ? 136 : 124)
    let nameOffset = is64Bit ? 40 : 28
    info.replaceSubrange((is64Bit ? 24 : 12)..<(is64Bit ? 28 : 16), with: le32(4242))
    info.replaceSubrange(nameOffset..<nameOffset + 4, with: Array("prog".utf8))
    let arguments = Array("prog --flag ".utf8)
    info.replaceSubrange(nameOffset + 16..<nameOffset + 16 + arguments.count, with: arguments)
    note(ELFCore.prpsinfoType, info)
    var siginfo = le32(11) + le32(0) + le32(1) + [UInt8](repeating: 0, count: is64Bit ? 116 : 116)
    siginfo.replaceSubrange((is64Bit ? 16 : 12)..<(is64Bit ? 24 : 16), with: wordBytes(0x10))
    note(ELFCore.siginfoType, siginfo)
    note(ELFCore.auxvType, wordBytes(ELFCore.auxPHDR) + wordBytes(Self.libraryAddress + UInt64(headerSize))
                          + wordBytes(ELFCore.auxPageSize) + wordBytes(4096) + wordBytes(0) + wordBytes(0))
    var files = wordBytes(3) + wordBytes(4096)
    files += wordBytes(Self.libraryAddress) + wordBytes(Self.libraryAddress + 0x1000) + wordBytes(0)
    files += wordBytes(Self.libraryAddress + 0x1000) + wordBytes(Self.libraryAddress + 0x3000) + wordBytes(1)
    files += wordBytes(Self.leftOutAddress) + wordBytes(Self.leftOutAddress + 0x1000) + wordBytes(0)
    files += Array("/lib/libx.so\0/lib/libx.so\0/usr/share/data\0".utf8)
    note(ELFCore.fileType, files)
    note(2, [UInt8](repeating: 0xAA, count: 16))  // NT_PRFPREG: skipped
    note(3, [1, 2, 3, 4], name: "LINUX")  // another owner: skipped

    // The library's first page, as the kernel dumps it: ELF header, two program headers, the build-id note.
    var page = [UInt8](repeating: 0, count: 0x1000)
    var library = [0x7F, 0x45, 0x4C, 0x46, is64Bit ? 2 : 1, 1, 1, 0] + [UInt8](repeating: 0, count: 8)
    library += le16(3) + le16(is64Bit ? 62 : 3) + le32(1) + wordBytes(0) + wordBytes(UInt64(headerSize)) + wordBytes(0)
    library += le32(0) + le16(UInt16(headerSize)) + le16(UInt16(phdrSize)) + le16(2) + le16(0) + le16(0) + le16(0)
    library += programHeader(type: 1, flags: 5, offset: 0, address: 0, fileSize: 0x3000, memorySize: 0x3000, align: 0x1000)
    library += programHeader(type: 4, flags: 4, offset: 0x200, address: 0x200, fileSize: 16 + 10 + 2, memorySize: 28, align: 4)
    page.replaceSubrange(0..<library.count, with: library)
    let buildIDNote = le32(4) + le32(UInt32(Self.buildID.count)) + le32(3) + Array("GNU\0".utf8) + Self.buildID
    page.replaceSubrange(0x200..<0x200 + buildIDNote.count, with: buildIDNote)

    // The core: header, program headers, notes, then the memory.
    let phnum = 4
    noteOffset = headerSize + phnum * phdrSize
    noteSize = notes.count
    libraryPageOffset = (noteOffset + noteSize + 0xFFF) & ~0xFFF
    let stackOffset = libraryPageOffset + page.count
    var core = [0x7F, 0x45, 0x4C, 0x46, is64Bit ? 2 : 1, 1, 1, 0] + [UInt8](repeating: 0, count: 8)
    core += le16(4) + le16(is64Bit ? 62 : 3) + le32(1) + wordBytes(0) + wordBytes(UInt64(headerSize)) + wordBytes(0)
    core += le32(0) + le16(UInt16(headerSize)) + le16(UInt16(phdrSize)) + le16(UInt16(phnum)) + le16(0) + le16(0) + le16(0)
    core += programHeader(type: 4, flags: 0, offset: UInt64(noteOffset), address: 0, fileSize: UInt64(noteSize), memorySize: 0, align: 1)
    core += programHeader(type: 1, flags: 5, offset: UInt64(libraryPageOffset), address: Self.libraryAddress,
                          fileSize: 0x1000, memorySize: 0x3000, align: 0x1000)
    core += programHeader(type: 1, flags: 4, offset: UInt64(stackOffset), address: Self.leftOutAddress,
                          fileSize: 0, memorySize: 0x1000, align: 0x1000)
    core += programHeader(type: 1, flags: 6, offset: UInt64(stackOffset), address: Self.stackAddress,
                          fileSize: 0x100, memorySize: 0x100, align: 0x1000)
    core += notes
    core += [UInt8](repeating: 0, count: libraryPageOffset - core.count)
    core += page
    core += (0..<0x100).map { UInt8(truncatingIfNeeded: $0) }
    bytes = core
  }

  func wordBytes(_ value: UInt64) -> [UInt8] { is64Bit ? le64(value) : le32(UInt32(truncatingIfNeeded: value)) }

  func programHeader(type: UInt32, flags: UInt32, offset: UInt64, address: UInt64, fileSize: UInt64,
                     memorySize: UInt64, align: UInt64) -> [UInt8] {
    if is64Bit {
      return le32(type) + le32(flags) + le64(offset) + le64(address) + le64(address) + le64(fileSize) + le64(memorySize) + le64(align)
    }
    return le32(type) + le32(UInt32(offset)) + le32(UInt32(address)) + le32(UInt32(address)) + le32(UInt32(fileSize))
      + le32(UInt32(memorySize)) + le32(flags) + le32(UInt32(align))
  }

  /// Overwrites `value` (little-endian) at `offset`.
  mutating func patch(_ value: [UInt8], at offset: Int) {
    bytes.replaceSubrange(offset..<offset + value.count, with: value)
  }
}

func le16(_ value: UInt16) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
func le64(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }

/// Decodes `bytes` as a core and calls `body` with the value and the bytes' reader.
func withCore<R>(_ bytes: [UInt8], _ body: (ELFCore, ByteReader) throws -> R) throws -> R {
  try bytes.withUnsafeBytes { raw in
    let reader = ByteReader(raw)
    return try body(try ELFCore(source: reader), reader)
  }
}

@Suite struct ELFCoreTests {
  @Test(arguments: [true, false])
  func decodesEveryNote(is64Bit: Bool) throws {
    let image = ELFCoreTestImage(is64Bit: is64Bit)
    try withCore(image.bytes) { (core: ELFCore, _: ByteReader) throws in
      #expect(core.architecture == (is64Bit ? "x86_64" : "i386"))
      #expect(core.threads.map(\.tid) == ELFCoreTestImage.tids)
      #expect(core.threads.allSatisfy { $0.signal == 11 && $0.signalCode == 1 && $0.parentPID == 1 })
      let registers = try #require(core.threads[1].registers)
      #expect(registers.architecture == (is64Bit ? .x86_64 : .i386))
      // Register i of thread 1 holds 0x2000 + i: rip is 16th (x86_64) and eip 12th (i386) in pr_reg.
      #expect(registers.pc == (is64Bit ? 0x2010 : 0x200C))
      #expect(registers.sp == (is64Bit ? 0x2013 : 0x200F))
      #expect(registers.values.prefix(Registers.kernelCount(registers.architecture)).allSatisfy { $0 != nil })
      #expect(core.process == ELFCore.ProcessInfo(pid: 4242, parentPID: 0, uid: 0, name: "prog", arguments: "prog --flag"))
      #expect(core.signalInfo == ELFCore.SignalInfo(signal: 11, errno: 0, code: 1, faultAddress: 0x10))
      #expect(core.signal == 11)
      #expect(core.crashedThreadIndex == 0)
      #expect(core.auxiliaryValue(ELFCore.auxPageSize) == 4096)
      let files = try #require(core.mappedFiles)
      #expect(files.pageSize == 4096)
      #expect(files.mappings.map(\.path) == ["/lib/libx.so", "/lib/libx.so", "/usr/share/data"])
      #expect(files.mappings[1].fileOffset == 0x1000)
      #expect(files.mappings[1].vmRange == 0x11000..<0x13000)
    }
  }

  @Test func memoryIsWhatTheCoreHoldsAndNothingElse() throws {
    let image = ELFCoreTestImage()
    try withCore(image.bytes) { (core: ELFCore, reader: ByteReader) throws in
      #expect(core.segments.count == 3)
      let library = ELFCoreTestImage.libraryAddress
      let header = try #require(try core.memory(at: library, length: 4, in: reader))
      #expect(try header.peek(UInt32.self, at: 0) == ELFHeader.magic)
      #expect(try core.memory(at: library + 0xFFF, length: 1, in: reader) != nil)
      // Past p_filesz inside p_memsz: not zeros, unavailable.
      #expect(try core.memory(at: library + 0xFFF, length: 2, in: reader) == nil)
      #expect(try core.memory(at: library + 0x1000, length: 1, in: reader) == nil)
      // p_filesz 0: the writer left it out.
      #expect(try core.memory(at: ELFCoreTestImage.leftOutAddress, length: 1, in: reader) == nil)
      // Unmapped.
      #expect(try core.memory(at: 0x5000, length: 1, in: reader) == nil)
      let stack = try #require(try core.memory(at: ELFCoreTestImage.stackAddress + 0x10, length: 4, in: reader))
      #expect(try stack.peek(UInt32.self, at: 0) == 0x1312_1110)
      #expect(core.availableBytes(from: library + 0x800) == 0x800)
    }
  }

  @Test func aTruncatedCoreHasLessMemoryNotZeros() throws {
    let image = ELFCoreTestImage()
    let cut = Array(image.bytes.prefix(image.libraryPageOffset + 0x400))
    try withCore(cut) { (core: ELFCore, reader: ByteReader) throws in
      let library = ELFCoreTestImage.libraryAddress
      #expect(try core.memory(at: library + 0x3FF, length: 1, in: reader) != nil)
      #expect(try core.memory(at: library + 0x400, length: 1, in: reader) == nil)
      #expect(try core.memory(at: ELFCoreTestImage.stackAddress, length: 1, in: reader) == nil)
      #expect(core.threads.count == 2)  // the notes come first and are whole
    }
  }

  @Test func imagesComeFromMemoryWithTheirBuildIDs() throws {
    let image = ELFCoreTestImage()
    try withCore(image.bytes) { (core: ELFCore, reader: ByteReader) throws in
      let images = core.images(in: reader)
      #expect(images.map(\.path) == ["/lib/libx.so", "/usr/share/data"])
      let library = images[0]
      #expect(library.loadAddress == ELFCoreTestImage.libraryAddress)
      #expect(library.mappings.count == 2)
      #expect(library.mappedEnd == ELFCoreTestImage.libraryAddress + 0x3000)
      let headers = try #require(library.headers)
      #expect(headers.buildID == BuildID(ELFCoreTestImage.buildID))
      #expect(headers.buildIDVMAddress == 0x200 + 16)
      #expect(headers.layout.loadEndVMAddress == 0x3000)
      #expect(headers.matches(library.mappings, loadAddress: library.loadAddress))
      // The data file's first page is not in the core: no headers, no problem; the caller decides.
      #expect(images[1].headers == nil && images[1].problem == nil)
    }
  }

  @Test func aFileThatMapsDifferentlyDoesNotMatch() throws {
    let image = ELFCoreTestImage()
    try withCore(image.bytes) { (core: ELFCore, reader: ByteReader) throws in
      let library = core.images(in: reader)[0]
      var moved = library.mappings
      moved[1].fileOffset = 0x2000  // the second mapping at another offset: another file
      #expect(try #require(library.headers).matches(moved, loadAddress: library.loadAddress) == false)
    }
  }

  /// A broken field and the error it must give, computed from the test image's own layout.
  static let malformed: [(String, @Sendable (inout ELFCoreTestImage) -> FormatError)] = [
    ("not a core", { image in
      image.patch(le16(3), at: 16)
      return .elf("e_type 3 is not ET_CORE (4): not a core file")
    }),
    ("notes past the end", { image in
      let size = UInt64(image.bytes.count)
      image.patch(le64(size), at: 64 + 32)  // the first program header's p_filesz
      return .fieldOutOfRange("PT_NOTE (the core is truncated or damaged)", offset: UInt64(image.noteOffset), size: size,
                              limit: image.bytes.count)
    }),
    ("no program headers", { image in
      image.patch(le16(0), at: 56)  // e_phnum
      return .elf("core has no program headers (e_phoff 64, e_phnum 0)")
    }),
    ("NT_FILE count", { image in
      let at = image.noteOffset + image.descriptorOffsets[ELFCore.fileType]!
      image.patch(le64(1_000_000), at: at)
      // 2 words, 3 mappings of 3 words, then the paths.
      let size = 16 + 3 * 24 + "/lib/libx.so\0/lib/libx.so\0/usr/share/data\0".utf8.count
      return .elf("note NT_FILE at offset \(image.descriptorOffsets[ELFCore.fileType]!): 1000000 mappings do not fit in its \(size) bytes")
    }),
    ("NT_PRSTATUS size", { image in
      image = ELFCoreTestImage(prstatusSize: 100)
      return .elf("note NT_PRSTATUS at offset \(image.descriptorOffsets[ELFCore.prstatusType]!): 100 bytes, too short for struct elf_prstatus (112 before pr_reg)")
    }),
  ]

  /// Each broken field throws its own one-line error.
  @Test(arguments: 0..<5)
  func rejectsMalformedCores(_ index: Int) throws {
    let (name, breakIt) = Self.malformed[index]
    var image = ELFCoreTestImage()
    let expected = breakIt(&image)
    var thrown: FormatError?
    do { _ = try withCore(image.bytes) { core, _ in core } } catch let error as FormatError { thrown = error }
    #expect(thrown == expected, "\(name)")
  }

  /// Seeded truncations, bit flips and field overwrites of the test cores: decoding, listing images and
  /// reading every segment may throw `FormatError` but never trap or hang. Reaching the end is the assertion.
  @Test func survivesMutations() throws {
    var rng = SeededGenerator(seed: 0xC0DE_2026)
    var decoded = 0, rejected = 0
    // The hand-made cores without NT_FILE (Scripts/make-core-fixtures) take the link_map path.
    let linkMapCores = try ["x86_64", "i386"].map { try Fixtures.bytes("cores/linkmap-\($0).core") }
    for original in [ELFCoreTestImage(is64Bit: true).bytes, ELFCoreTestImage(is64Bit: false).bytes] + linkMapCores {
      for round in 0..<1500 {
        let kind = MutationTests.Mutation.allCases[round % MutationTests.Mutation.allCases.count]
        if Self.exercise(MutationTests.mutate(original, kind, &rng)) { decoded += 1 } else { rejected += 1 }
      }
    }
    #expect(decoded > 0 && rejected > 0, "\(decoded) decoded, \(rejected) rejected")
  }

  /// Decodes a core and touches what the commands touch; false when it threw.
  static func exercise(_ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw)
      if let header = try? ELFHeader(reader), (try? ELFCore.streamProgramHeaderTable(header)) != nil,
         let headers = try? ELFCore.programHeaders(in: reader, header: header) {
        _ = try? ELFCore.streamSegments(headers)  // a core handler's first steps
      }
      guard let core = try? ELFCore(source: reader) else { return false }
      for image in core.images(in: reader) {
        _ = image.headers?.buildID?.hex
        if let headers = image.headers { _ = headers.matches(image.mappings, loadAddress: image.loadAddress) }
      }
      for segment in core.segments {
        _ = try? core.memory(at: segment.vmRange.lowerBound, length: Int(min(segment.availableSize, 64)), in: reader)
        _ = core.availableBytes(from: segment.vmRange.lowerBound)
      }
      _ = core.crashedThreadIndex
      for thread in core.threads { _ = thread.registers?.pc }
      return true
    }
  }

  /// Seeded mutations of a real kernel core's headers and notes (the core read in memory; a cut
  /// anywhere): decoding it, listing its images and reading its segments may throw `FormatError`,
  /// never trap or hang. Reaching the end is the assertion.
  @Test(.enabled(if: CoreFileProgram.kernelWritesCores && haveTool("cc"), "cc missing, or the kernel cannot write cores here"))
  func realCoreSurvivesMutations() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-mutations")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    var bytes = try #require(readFileBytes(try CoreFileProgram.kernelCore(in: directory)))
    let headerAndNotes: Int = try bytes.withUnsafeBytes { raw in
      let core = try ELFCore(source: ByteReader(raw))
      return Int(core.programHeaders.filter { $0.type == ProgramHeader.note }.map { $0.fileOffset + $0.fileSize }.max() ?? 4096)
    }
    var rng = SeededGenerator(seed: 0xC02E_2026)
    var decoded = 0, rejected = 0
    for round in 0..<400 {
      var saved: [(Int, UInt8)] = []
      for _ in 0..<(1 + round % 4) {
        let at = Int(rng.next() % UInt64(headerAndNotes))
        saved.append((at, bytes[at]))
        bytes[at] = round % 2 == 0 ? bytes[at] ^ UInt8(1 << (rng.next() % 8)) : UInt8(truncatingIfNeeded: rng.next())
      }
      let length = round % 3 == 0 ? Int(rng.next() % UInt64(bytes.count)) : bytes.count
      let survived: Bool = bytes.withUnsafeBytes { raw in
        let reader = ByteReader(UnsafeRawBufferPointer(rebasing: raw[0..<length]))
        guard let core = try? ELFCore(source: reader) else { return false }
        for image in core.images(in: reader) { _ = image.headers?.buildID }
        for segment in core.segments { _ = try? core.memory(at: segment.vmRange.lowerBound, length: 64, in: reader) }
        return true
      }
      if survived { decoded += 1 } else { rejected += 1 }
      for (at, byte) in saved.reversed() { bytes[at] = byte }
    }
    #expect(decoded > 0 && rejected > 0, "\(decoded) decoded, \(rejected) rejected")
  }
}

/// A real core for the mutation test: Tests/Programs/coredump-threads.c built without frame pointers,
/// crashed with core dumps allowed in a folder of the test's (CoreFileTests in ImageLogCLITests holds the
/// same program to eu-unstrip).
enum CoreFileProgram {
  /// True when /proc/sys/kernel/core_pattern is a plain name the kernel writes in the crashing
  /// process's folder (not a pipe to a helper, not another folder): the tests never change it.
  static let kernelWritesCores: Bool = {
    guard let pattern = readFile("/proc/sys/kernel/core_pattern") else { return false }
    return !pattern.hasPrefix("|") && !pattern.contains("/")
  }()

  /// Builds and crashes the program in `directory`; the path of the core the kernel wrote.
  static func kernelCore(in directory: String) throws -> String {
    let program = "\(directory)/coredump-threads"
    let build = try runTool(["cc", "-O2", "-fomit-frame-pointer", "-g", "-pthread",
                             "\(packageRoot)/Tests/Programs/coredump-threads.c", "-o", program])
    try #require(build.status == 0, "cc failed: \(build.error)")
    let child = try RunningChild(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && exec '\(program)' crash"])
    try child.wait(for: "ready")
    child.reap()
    let names = try runTool(["ls", directory]).output.split(separator: "\n").map(String.init)
    let core = try #require(names.first { $0 == "core" || $0.hasPrefix("core.") }, "no core in \(directory): \(names)")
    return "\(directory)/\(core)"
  }
}

/// Every thread's registers as we decode `NT_PRSTATUS`, held to `eu-readelf -n` on real cores: the
/// kernel's of an x86_64 program, QEMU's of an aarch64 one, the kernel's of an i386 one.
@Suite(.serialized) struct ELFCoreRegisterTests {
  /// `eu-readelf -n`'s registers by thread id: `name: value` pairs after each PRSTATUS's `pid:` line,
  /// values decimal (signed) or hex, renamed to the kernel's names we use.
  static func oracleRegisters(_ core: String, is64Bit: Bool) throws -> [Int32: [String: UInt64]] {
    let text = try runTool(["eu-readelf", "-n", core]).output
    let renames = ["rflags": "eflags", "fs.base": "fs_base", "gs.base": "gs_base", "x29": "fp", "x30": "lr"]
    var result: [Int32: [String: UInt64]] = [:]
    var tid: Int32?
    for line in text.split(separator: "\n") {
      let words = line.split(separator: " ").map(String.init)
      if words.first == "CORE" || words.first == "LINUX" { tid = nil; if words.last == "PRSTATUS" { tid = -1 }; continue }
      guard let current = tid else { continue }
      if current == -1, words.first == "pid:", words.count > 1 { tid = Int32(words[1].filter(\.isNumber)); continue }
      guard current > 0 else { continue }
      var index = 0
      while index + 1 < words.count {
        guard words[index].hasSuffix(":") else { index += 1; continue }
        let name = String(words[index].dropLast())
        let raw = words[index + 1].hasSuffix(",") ? String(words[index + 1].dropLast()) : words[index + 1]
        let value: UInt64?
        if raw.hasPrefix("0x") { value = UInt64(raw.dropFirst(2), radix: 16) }
        else if let signed = Int64(raw) { value = is64Bit ? UInt64(bitPattern: signed) : UInt64(UInt32(truncatingIfNeeded: signed)) }
        else { value = nil }
        if let value { result[current, default: [:]][renames[name] ?? name] = value }
        index += 2
      }
    }
    return result
  }

  static func expectRegistersMatch(_ path: String, architecture: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let bytes = try #require(readFileBytes(path))
    let core = try bytes.withUnsafeBytes { try ELFCore(source: ByteReader($0)) }
    #expect(core.architecture == architecture, sourceLocation: sourceLocation)
    let oracle = try oracleRegisters(path, is64Bit: core.header.is64Bit)
    #expect(Set(oracle.keys) == Set(core.threads.map(\.tid)), sourceLocation: sourceLocation)
    for thread in core.threads {
      let registers = try #require(thread.registers, "thread \(thread.tid) has no registers", sourceLocation: sourceLocation)
      let expected = oracle[thread.tid] ?? [:]
      var compared = 0
      for (register, value) in zip(registers.table, registers.values) {
        let name = register.name
        guard let value, let theirs = expected[name] else { continue }
        #expect(value == theirs, "\(path): thread \(thread.tid) \(name) 0x\(hexDigits(value)) vs eu-readelf 0x\(hexDigits(theirs))",
                sourceLocation: sourceLocation)
        compared += 1
      }
      #expect(compared >= 15, "\(path): thread \(thread.tid): only \(compared) registers compared", sourceLocation: sourceLocation)
    }
  }

  @Test(.enabled(if: CoreFileProgram.kernelWritesCores && haveTool("cc") && haveTool("eu-readelf"),
                 "cc or eu-readelf missing, or the kernel cannot write cores here"))
  func x86_64RegistersMatchEuReadelf() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-registers")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try Self.expectRegistersMatch(try CoreFileProgram.kernelCore(in: directory), architecture: "x86_64")
  }

  /// QEMU's user-mode emulator writes the guest's core (`qemu_PROGRAM_..._PID.core`) in its folder.
  @Test(.enabled(if: haveTool("aarch64-linux-gnu-gcc") && haveTool("qemu-aarch64") && haveTool("eu-readelf"),
                 "aarch64-linux-gnu-gcc, qemu-aarch64 (qemu-user) or eu-readelf missing"))
  func aarch64RegistersMatchEuReadelf() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-aarch64")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/coredump-threads"
    let build = try runTool(["aarch64-linux-gnu-gcc", "-static", "-O2", "-fomit-frame-pointer", "-pthread",
                             "\(packageRoot)/Tests/Programs/coredump-threads.c", "-o", program])
    try #require(build.status == 0, "aarch64-linux-gnu-gcc failed: \(build.error)")
    _ = try runTool(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && exec qemu-aarch64 '\(program)' crash"])
    let names = try runTool(["ls", directory]).output.split(separator: "\n")
    let core = try #require(names.first { $0.hasPrefix("qemu_") && $0.hasSuffix(".core") }, "QEMU wrote no core: \(names)")
    try Self.expectRegistersMatch("\(directory)/\(core)", architecture: "arm64")
  }

  @Test(.enabled(if: CoreFileProgram.kernelWritesCores && haveTool("gcc") && haveTool("eu-readelf"),
                 "gcc or eu-readelf missing, or the kernel cannot write cores here"))
  func i386RegistersMatchEuReadelf() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-i386")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = "\(directory)/sleeper32"
    let build = try runTool(["gcc", "-m32", "-nostdlib", "-static", "-fno-pic", "-no-pie",
                             "\(packageRoot)/Tests/Programs/process-elf32-sleeper.c", "-o", program])
    try #require(build.status == 0, "gcc -m32 failed: \(build.error)")
    let child = try RunningChild(["sh", "-c", "cd '\(directory)' && ulimit -c unlimited && exec '\(program)'"])
    // An IA-32 program needs the kernel's IA-32 emulation: without it, it never says "ready".
    try #require(child.readLine() == "ready", "the i386 program did not start (no IA-32 emulation?)")
    child.signal(SIGSEGV)
    child.reap()
    let names = try runTool(["ls", directory]).output.split(separator: "\n")
    let core = try #require(names.first { $0 == "core" || $0.hasPrefix("core.") }, "no core in \(directory): \(names)")
    try Self.expectRegistersMatch("\(directory)/\(core)", architecture: "i386")
  }
}

