import Glibc
import ImageLog
import ImageLogTestSupport
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders
import Testing

/// Where DWARF lives, with files made by the real tools: `objcopy --only-keep-debug` and
/// `--add-gnu-debuglink` (gdb's three places, the CRC-32 checked), `.build-id` trees, and `dwz -m`
/// supplementary files. The debuginfod server test is in ImageLogCLITests (it runs the CLI in a private
/// network namespace).
@Suite struct DebugFileLocatorTests {
  /// Two small C programs with debug info, built once per test into `directory`.
  static func buildPrograms(in directory: String) throws -> (first: String, second: String) {
    let source = directory + "/prog.c"
    try writeFile(source, """
      #include <stdio.h>
      #include <stdlib.h>
      struct shared_point { int x, y; };
      static int scale(struct shared_point p, int by) { return (p.x + p.y) * by; }
      int main(int argc, char **argv) { struct shared_point p = { argc, 2 }; printf("%d\\n", scale(p, VARIANT)); return 0; }
      """)
    let first = directory + "/first", second = directory + "/second"
    for (output, variant) in [(first, "1"), (second, "2")] {
      let result = try runChild(["cc", "-g", "-O1", "-DVARIANT=" + variant, "-Wl,--build-id", source, "-o", output])
      guard result.exitCode == 0 else { throw TestSupportError("cc: \(result.error)") }
    }
    return (first, second)
  }

  static func buildID(_ path: String) throws -> BuildID {
    let file = try #require(try SymbolFile.load(path: path, withSymbols: false).first)
    return try #require(file.buildID)
  }

  /// The file the DWARF comes from: a separate one, or the file that also gives the names.
  static func dwarfPath(_ file: SymbolFile) -> String? {
    file.hasDebugInfo ? file.debugInfoPath ?? file.path : nil
  }

  static func image(_ path: String, _ id: BuildID) -> ProcessSnapshot.Image {
    ProcessSnapshot.Image(name: String(path.split(separator: "/").last ?? ""), path: path, loadAddress: 0x5555_0000_0000,
                      endAddress: nil, identity: ImageIdentity(id), architecture: nil)
  }

  /// The check value every CRC-32 (IEEE) implementation is specified by, and the CRC that objcopy
  /// itself writes into `.gnu_debuglink` for a real debug file.
  @Test(.enabled(if: haveTool("objcopy") && haveTool("cc"), "needs objcopy and cc"))
  func crcMatchesObjcopy() throws {
    let check = Array("123456789".utf8)
    #expect(check.withUnsafeBytes { CRC32.checksum($0) } == 0xCBF4_3926)
    #expect([UInt8]().withUnsafeBytes { CRC32.checksum($0) } == 0)
    let directory = try makeTemporaryDirectory()
    let (program, _) = try Self.buildPrograms(in: directory)
    #expect(try runChild(["objcopy", "--only-keep-debug", program, directory + "/first.debug"]).exitCode == 0)
    #expect(try runChild(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + directory + "/first.debug", program,
                            directory + "/stripped"]).exitCode == 0)
    let stripped = try #require(try SymbolFile.load(path: directory + "/stripped").first)
    #expect(stripped.debugLink == "first.debug")
    let locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
    let crc = try #require(locator.checksum(directory + "/first.debug"))
    #expect(stripped.debugLinkCRC == crc)
    // Split in two, continued: the same value (the form for reading a file in pieces).
    let bytes = try SymbolFileBytes.read(directory + "/first.debug")
    let half = bytes.count / 2
    let head = bytes[..<half].withUnsafeBytes { CRC32.checksum($0) }
    #expect(bytes[half...].withUnsafeBytes { CRC32.checksum($0, continuing: head) } == crc)
  }

  /// A stripped binary whose DWARF is in a `.gnu_debuglink` file in each of gdb's three places; a
  /// debug file whose CRC differs (one byte appended) is refused and said so.
  @Test(.enabled(if: haveTool("objcopy") && haveTool("cc"), "needs objcopy and cc"))
  func debugLinkInGDBsPlacesWithCRC() throws {
    let directory = try makeTemporaryDirectory()
    let (program, _) = try Self.buildPrograms(in: directory)
    let id = try Self.buildID(program)
    let debug = directory + "/first.debug"
    #expect(try runChild(["objcopy", "--only-keep-debug", program, debug]).exitCode == 0)
    let root = directory + "/debugroot"
    for place in ["beside", "dot-debug", "debug-root", "tampered"] {
      let binFolder = directory + "/" + place + "/bin"
      #expect(try runChild(["mkdir", "-p", binFolder + "/.debug", root + binFolder]).exitCode == 0)
      let binary = binFolder + "/first"
      #expect(try runChild(["objcopy", "--strip-debug", "--strip-unneeded", "--add-gnu-debuglink=" + debug, program,
                              binary]).exitCode == 0)
      let target = switch place {
      case "dot-debug": binFolder + "/.debug/first.debug"
      case "debug-root": root + binFolder + "/first.debug"
      default: binFolder + "/first.debug"
      }
      #expect(try runChild(["cp", debug, target]).exitCode == 0)
      if place == "tampered" {
        var bytes = try SymbolFileBytes.read(target)
        bytes.append(0)  // still a valid ELF file with the same build-id: only the CRC tells
        try SymbolFileBytes.write(bytes, to: target)
      }
      let locator = DebugFileLocator(searchPaths: [], systemDirectories: false, buildIDDirectories: [root],
                                     debuginfodCaches: [])
      guard case .found(let file, let how) = locator.locate(Self.image(binary, id), architecture: nil) else {
        Issue.record("\(place): the stripped binary itself was not found")
        continue
      }
      if place == "tampered" {
        #expect(file.path == binary && how == "recorded path", "a debug file with another CRC must not be used")
        #expect(file.debugInfoPath == nil)
        #expect(!file.hasDebugInfo)
        let refusal = try #require(locator.refused.first)
        #expect(refusal.path == target)
        #expect(refusal.problem.hasPrefix("CRC-32 0x"))
        #expect(refusal.problem.hasSuffix("in the .gnu_debuglink of \(binary)"))
      } else {
        // The debug file has the full symbol table too, so it serves names and lines alike.
        #expect(Self.dwarfPath(file) == target, "\(place)")
        #expect(how == ".gnu_debuglink", "\(place)")
        #expect(file.hasDebugInfo, "\(place)")
        #expect(locator.refused.isEmpty, "\(place): \(locator.refused)")
      }
    }
  }

  /// A `.build-id` tree holding another program's debug file under this one's build-id: refused
  /// with both ids, never used.
  @Test(.enabled(if: haveTool("objcopy") && haveTool("cc"), "needs objcopy and cc"))
  func buildIDTreeWithAnotherFileIsRefused() throws {
    let directory = try makeTemporaryDirectory()
    let (first, second) = try Self.buildPrograms(in: directory)
    let id = try Self.buildID(first), otherID = try Self.buildID(second)
    #expect(id != otherID)
    let stripped = directory + "/first.stripped"
    #expect(try runChild(["objcopy", "--strip-debug", first, stripped]).exitCode == 0)
    let tree = directory + "/tree/.build-id/" + id.hex.prefix(2)
    #expect(try runChild(["mkdir", "-p", tree]).exitCode == 0)
    let slot = tree + "/" + id.hex.dropFirst(2) + ".debug"
    for (source, good) in [(second, false), (first, true)] {
      #expect(try runChild(["objcopy", "--only-keep-debug", source, slot]).exitCode == 0)
      let locator = DebugFileLocator(searchPaths: [], systemDirectories: false, buildIDDirectories: [directory + "/tree"],
                                     debuginfodCaches: [])
      guard case .found(let file, _) = locator.locate(Self.image(stripped, id), architecture: nil) else {
        Issue.record("the stripped binary itself was not found")
        continue
      }
      if good {
        #expect(Self.dwarfPath(file) == slot)
        #expect(locator.refused.isEmpty)
      } else {
        #expect(file.path == stripped && !file.hasDebugInfo)
        #expect(locator.refused.map(\.path) == [slot])
        #expect(locator.refused.first?.problem == "build-id \(otherID.hex) differs from \(id.hex) (\(directory)/tree/.build-id)")
      }
    }
  }

  /// `dwz -m`: two debug files share a supplementary file named in their `.gnu_debugaltlink`. It is
  /// found where the link says (relative to the debug file), then by its build-id in a `.build-id`
  /// tree once moved; a file with another build-id at the linked path is refused.
  @Test(.enabled(if: haveTool("dwz") && haveTool("readelf") && haveTool("cc"), "needs dwz, readelf and cc"))
  func dwzSupplementaryFile() throws {
    let directory = try makeTemporaryDirectory()
    let (first, second) = try Self.buildPrograms(in: directory)
    let id = try Self.buildID(first)
    // -M records the path relative to the debug files' folder, as Debian's dh_dwz records an absolute one.
    let dwz = try runChild(["dwz", "-m", directory + "/common.debug", "-M", "common.debug", first, second])
    try #require(dwz.exitCode == 0, "dwz: \(dwz.error)")
    let file = try #require(try SymbolFile.load(path: first).first)
    let link = try #require(file.debugAltLink)
    #expect(link.path == "common.debug")
    // readelf's own decoding of the section: the name, then the build-id as spaced hex bytes.
    let readelf = try runChild(["readelf", "--debug-dump=links", first])
    #expect(readelf.output.contains("Separate debug info file: common.debug"), "\(readelf.output)")
    #expect(readelf.output.filter { !$0.isWhitespace }.contains(link.buildID.hex), "\(readelf.output)")
    let supplementaryID = try Self.buildID(directory + "/common.debug")
    #expect(supplementaryID == link.buildID)

    var locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
    guard case .found(let found, _) = locator.locate(Self.image(first, id), architecture: nil) else {
      Issue.record("the dwz'd binary was not found"); return
    }
    #expect(found.supplementaryPath == directory + "/common.debug")

    // Moved into a .build-id tree: found by its build-id.
    let tree = directory + "/tree/.build-id/" + link.buildID.hex.prefix(2)
    #expect(try runChild(["mkdir", "-p", tree]).exitCode == 0)
    let slot = tree + "/" + link.buildID.hex.dropFirst(2) + ".debug"
    #expect(try runChild(["mv", directory + "/common.debug", slot]).exitCode == 0)
    // Another ELF file at the linked path: refused for its build-id.
    #expect(try runChild(["cp", second, directory + "/common.debug"]).exitCode == 0)
    locator = DebugFileLocator(searchPaths: [], systemDirectories: false, buildIDDirectories: [directory + "/tree"],
                               debuginfodCaches: [])
    guard case .found(let moved, _) = locator.locate(Self.image(first, id), architecture: nil) else {
      Issue.record("the dwz'd binary was not found"); return
    }
    #expect(moved.supplementaryPath == slot)
    #expect(locator.refused.map(\.path) == [directory + "/common.debug"])
    #expect(locator.refused.first?.problem.hasPrefix("build-id \(try Self.buildID(second).hex) differs from \(link.buildID.hex)") == true)

    // Gone everywhere: no supplementary path, and the note says which build-id is missing.
    #expect(try runChild(["rm", slot]).exitCode == 0)
    locator = DebugFileLocator(searchPaths: [], systemDirectories: false, buildIDDirectories: [directory + "/tree"],
                               debuginfodCaches: [])
    guard case .found(let orphan, _) = locator.locate(Self.image(first, id), architecture: nil) else {
      Issue.record("the dwz'd binary was not found"); return
    }
    #expect(orphan.supplementaryPath == nil)
    #expect(locator.refused.contains { $0.problem.hasPrefix("dwz supplementary file with build-id \(link.buildID.hex)") })
  }

  /// A dSYM bundle beside a Mach-O binary (`X.dSYM/Contents/Resources/DWARF/X`, where lldb looks) is
  /// found by the report's UUID alone; one whose UUID differs (llvm-dwarfdump says which) is refused.
  @Test(.enabled(if: haveTool("llvm-dwarfdump-14"), "needs llvm-dwarfdump-14"))
  func dSYMBesideTheBinary() throws {
    let fixtures = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf"
    let other = packageRoot + "/Tests/ImageReadersTests/Fixtures/macho/debugfixture.dSYM/Contents/Resources/DWARF/debugfixture"
    try #require(readFileBytes(fixtures + "/macho-c-O2") != nil, "the DWARF fixtures are missing")
    func uuid(_ path: String) throws -> String {
      let output = try runChild(["llvm-dwarfdump-14", "--uuid", path]).output
      return String(try #require(output.split(separator: " ").dropFirst().first))
    }
    let directory = try makeTemporaryDirectory()
    let binary = directory + "/macho-c-O2"
    let dwarf = binary + ".dSYM/Contents/Resources/DWARF/macho-c-O2"
    #expect(try runChild(["cp", "-R", fixtures + "/macho-c-O2", fixtures + "/macho-c-O2.dSYM", directory]).exitCode == 0)
    let identity = try #require(ImageIdentity(try uuid(binary)))
    let image = ProcessSnapshot.Image(name: "macho-c-O2", path: binary, loadAddress: 0x1_0000_0000, endAddress: nil,
                                  identity: identity, architecture: "arm64")
    var locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
    guard case .found(let file, _) = locator.locate(image, architecture: nil) else { Issue.record("not found"); return }
    #expect(Self.dwarfPath(file) == dwarf)
    #expect(locator.refused.isEmpty)

    #expect(try runChild(["cp", other, dwarf]).exitCode == 0)
    let otherUUID = try uuid(dwarf)
    #expect(otherUUID != identity.text)
    locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
    guard case .found(let alone, let how) = locator.locate(image, architecture: nil) else { Issue.record("not found"); return }
    #expect(alone.path == binary && how == "recorded path" && !alone.hasDebugInfo)
    #expect(locator.refused.map(\.path) == [dwarf])
    #expect(locator.refused.first?.problem == "UUID \(otherUUID) differs from \(identity.text)")
  }

  /// A universal binary with a universal dSYM beside it (clang, ld64.lld-14, dsymutil-14, llvm-lipo-14):
  /// each slice's image, named by its own UUID, gets the dSYM's slice with that UUID.
  @Test(.enabled(if: ["clang", "ld64.lld-14", "dsymutil-14", "llvm-lipo-14", "llvm-dwarfdump-14"].allSatisfy(haveTool),
                 "needs clang, ld64.lld-14, dsymutil-14, llvm-lipo-14 and llvm-dwarfdump-14"))
  func universalDSYMServesEverySlice() throws {
    let directory = try makeTemporaryDirectory()
    try writeFile(directory + "/u.c", "int helper(int x) { return x * 3; }\nint main(void) { return helper(2); }\n")
    let architectures = ["x86_64", "arm64"]
    for arch in architectures {
      let object = directory + "/u-\(arch).o", binary = directory + "/u-\(arch)"
      #expect(try runChild(["clang", "--target=\(arch)-apple-macos11", "-O1", "-g", "-c", directory + "/u.c", "-o", object]).exitCode == 0)
      #expect(try runChild(["ld64.lld-14", "-arch", arch, "-platform_version", "macos", "11.0", "12.0", "-execute", "-e", "_main",
                              "-undefined", "dynamic_lookup", object, "-o", binary]).exitCode == 0)
      #expect(try runChild(["dsymutil-14", binary, "-o", binary + ".dSYM"]).exitCode == 0)
    }
    let binary = directory + "/u", dwarf = directory + "/u.dSYM/Contents/Resources/DWARF/u"
    #expect(try runChild(["llvm-lipo-14", "-create"] + architectures.map { directory + "/u-\($0)" } + ["-output", binary]).exitCode == 0)
    #expect(try runChild(["mkdir", "-p", directory + "/u.dSYM/Contents/Resources/DWARF"]).exitCode == 0)
    #expect(try runChild(["llvm-lipo-14", "-create"]
                           + architectures.map { directory + "/u-\($0).dSYM/Contents/Resources/DWARF/u-\($0)" }
                           + ["-output", dwarf]).exitCode == 0)
    // llvm-dwarfdump's UUIDs of the universal binary: "UUID: <uuid> (<arch>) <path>".
    var uuids: [String: String] = [:]
    for line in try runChild(["llvm-dwarfdump-14", "--uuid", binary]).output.split(separator: "\n") {
      let words = line.split(separator: " ")
      if words.count >= 3 { uuids[String(words[2].dropFirst().dropLast())] = String(words[1]) }
    }
    try #require(Set(uuids.keys) == Set(architectures), "\(uuids)")
    for arch in architectures {
      let uuid = try #require(uuids[arch])
      let image = ProcessSnapshot.Image(name: "u", path: binary, loadAddress: 0x1_0000_0000, endAddress: nil,
                                    identity: ImageIdentity(uuid), architecture: arch)
      let locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
      guard case .found(let file, _) = locator.locate(image, architecture: nil) else { Issue.record("\(arch): not found"); continue }
      #expect(Self.dwarfPath(file) == dwarf, "\(arch)")
      #expect(file.architecture == arch)
      #expect(file.buildID?.uuid == uuid, "\(arch)")
      #expect(file.debugInfoPath == nil ? file.isUniversalSlice : file.debugInfoIsUniversal, "\(arch): a slice of the universal dSYM")
      #expect(locator.refused.isEmpty, "\(locator.refused)")
    }
  }

  // MARK: images no file holds (the vDSO)

  /// Our own vDSO as `pid --threads` and cores hand it over: its bytes copied from memory.
  static func ownVDSO() throws -> InMemoryImage {
    let copies = InMemoryImage.copies(of: LoadedImages.snapshot(), in: ProcessMemory(pid: getpid()))
    return try #require(copies.first { $0.path == "[vdso]" }, "no vDSO with a build-id in this process")
  }

  static func vdsoImage(_ id: BuildID) -> ProcessSnapshot.Image {
    ProcessSnapshot.Image(name: "[vdso]", path: "[vdso]", loadAddress: 0x7fff_0000_0000, endAddress: nil,
                      identity: ImageIdentity(id), architecture: nil)
  }

  /// The vDSO's symbols come from its bytes in memory when its build-id is the image's ("memory"), and
  /// are its symbol table as readelf reads it from those bytes written to a file: each function at its
  /// address, under one of the names readelf gives that address. Another build-id gets nothing.
  @Test(.enabled(if: haveTool("readelf"), "needs readelf (binutils)"))
  func vdsoSymbolsFromMemory() throws {
    let vdso = try Self.ownVDSO()
    let locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
    locator.symbolReading = .presence  // as for one report: the in-memory file's table is read anyway
    locator.inMemoryImages = [vdso]
    guard case .found(var file, let how) = locator.locate(Self.vdsoImage(vdso.buildID), architecture: nil) else {
      Issue.record("the vDSO was not found in memory")
      return
    }
    #expect(how == "memory" && file.path == "[vdso]" && !file.hasDebugInfo && file.presentSymbols == nil)
    let before = file.symbols.count
    try file.readSymbols(for: [0])  // nothing to read again: there is no file
    #expect(file.symbols.count == before && before > 0)

    let directory = try makeTemporaryDirectory()
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    try writeFile(directory + "/vdso.so", bytes: vdso.bytes)
    var names: [UInt64: Set<String>] = [:]
    for line in try runChild(["readelf", "-sW", "--dyn-syms", directory + "/vdso.so"]).output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count >= 8, fields[0].hasSuffix(":"), fields[3] == "FUNC", fields[6] != "UND",
            let value = UInt64(fields[1], radix: 16) else { continue }
      names[value, default: []].insert(String(fields[7].split(separator: "@").first ?? fields[7]))
    }
    #expect(!names.isEmpty)
    for (address, aliases) in names {
      let symbol = file.symbols.symbol(containing: address)
      #expect(symbol?.address == address && aliases.contains(symbol?.name ?? ""), "0x\(String(address, radix: 16)): \(aliases)")
    }

    var other = vdso.buildID.bytes
    other[0] ^= 0xFF
    guard case .missing = locator.locate(Self.vdsoImage(BuildID(other)), architecture: nil) else {
      Issue.record("an image with another build-id was given the vDSO's symbols")
      return
    }
  }

  /// Bytes that are truncated or damaged (a core cut short or corrupted) are refused or, where they
  /// still decode to the same build-id, used: never a trap, never another identity.
  @Test func damagedVDSOBytesAreRefusedNotTrusted() throws {
    let vdso = try Self.ownVDSO()
    var rng = SeededGenerator(seed: 0x5D_50)
    var refused = 0
    for round in 0..<300 {
      var bytes = Array(vdso.bytes.prefix(round % 3 == 0 ? Int.random(in: 0...vdso.bytes.count, using: &rng) : vdso.bytes.count))
      for _ in 0..<(round % 3 == 1 ? 8 : 1) where !bytes.isEmpty {
        bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
      }
      let locator = DebugFileLocator(searchPaths: [], systemDirectories: false)
      locator.inMemoryImages = [InMemoryImage(buildID: vdso.buildID, path: "[vdso]", bytes: bytes)]
      switch locator.locate(Self.vdsoImage(vdso.buildID), architecture: nil) {
      case .found(let file, _): #expect(file.buildID == vdso.buildID)
      case .missing: #expect(!locator.refused.isEmpty); refused += 1
      default: Issue.record("round \(round): neither found nor missing")
      }
    }
    #expect(refused > 0)
  }

  /// What a capture can do ahead, on another thread: each image as its report will be read back
  /// (`ProcessSnapshot.Image(loaded)`), located and its frames' symbols read (`prepareSymbols`). The
  /// report symbolicated with that locator reads no table again and says what a fresh search says; an
  /// image then given the vDSO's bytes is searched for again.
  @Test func symbolsPreparedAheadGiveTheSameReport() throws {
    let snapshot = LoadedImages.snapshot()
    let main = try #require(snapshot.first { $0.isMainExecutable })
    let libc = try #require(snapshot.first { $0.name.hasPrefix("libc.so") })
    let images = [main, libc]
    let addresses = images.flatMap { image in (1...3).map { image.textRange.lowerBound + UInt64($0) * 0x40 } }
    var written = ProcessSnapshot(
      format: .imagelog,
      process: .init(name: "prepared", pid: 1, path: images[0].path, osVersion: "Linux 6.1.0 x86_64", date: 0),
      threads: [.init(number: 0, tid: 1, frames: addresses.enumerated().map { .init(number: $0, address: $1, isReturnAddress: $0 > 0) })],
      images: images.map(ProcessSnapshot.Image.init))
    written.placeFrames()
    let report = try ReportParser.parse(written.imagelogReportText())
    #expect(written.images.map { image in
      var reported = image
      reported.loaded = nil
      return reported
    } == report.images)

    let options = SymbolicationOptions()
    let locator = Symbolicator.locator(forOneReport: options)
    for (index, image) in report.images.enumerated() {
      let offsets = report.frames.filter { $0.imageIndex == index }.map { frame in
        let offset = frame.address - image.loadAddress
        return frame.isReturnAddress && offset > 0 ? offset - 1 : offset
      }
      locator.prepareSymbols(ProcessSnapshot.Image(images[index]), architecture: nil, offsets: offsets)
      guard case .found(let file, _) = locator.locate(image, architecture: report.process.architecture) else {
        Issue.record("\(image.name): not found")
        continue
      }
      guard case .addresses(let read) = file.symbolsRead else {
        Issue.record("\(image.name): the located file has not the symbols prepared for its frames")
        continue
      }
      #expect(read == offsets.map { file.imageBaseVMAddress &+ $0 })
    }
    let ahead = Symbolicator.symbolicated(report, options: options, locator: locator)
    let fresh = Symbolicator.symbolicated(report, options: options)
    #expect(ahead.formatted(.report) == fresh.formatted(.report))
    #expect(ahead.formatted(.json) == fresh.formatted(.json))

    // Images read from memory may answer for an image no file did: what was found is asked again.
    locator.inMemoryImages = []
    guard case .found(let again, _) = locator.locate(report.images[1], architecture: report.process.architecture) else {
      Issue.record("libc: not found after the in-memory images changed")
      return
    }
    if case .addresses = again.symbolsRead { Issue.record("libc: the answer from before the in-memory images changed was kept") }
  }
}
