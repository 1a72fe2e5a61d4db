#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
import ImageReaders
import ImageLog

/// `imagelog file`, run as a process: standard output, standard error and the exit status, on the
/// committed fixtures, folders, a FIFO, an empty file, a text file and a truncated binary.
@Suite struct FileCommandTests {
  static let root = packageRoot
  static let binary = builtProduct("imagelog")
  static let fixtures = root + "/Tests/ImageReadersTests/Fixtures/elf"
  static var haveBinary: Bool { access(binary, X_OK) == 0 }

  struct Run {
    var status: Int32
    var stdout: String
    var stderr: String
    var outLines: [String] { stdout.split(separator: "\n").map(String.init) }
    var errLines: [String] { stderr.split(separator: "\n").map(String.init) }
  }

  /// Runs `imagelog` with `arguments`, standard output and error captured.
  static func imagelog(_ arguments: [String]) throws -> Run {
    try spawn([binary] + arguments)
  }

  static func spawn(_ arguments: [String]) throws -> Run {
    let result = try runChild(arguments)
    return Run(status: result.exitCode ?? 128 + (result.signal ?? 0), stdout: result.output, stderr: result.error)
  }

  /// True when `tool` is on PATH.
  static func have(_ tool: String) -> Bool {
    haveTool(tool)
  }

  struct CLIError: Error, CustomStringConvertible { var description: String }

  static func text(_ path: String) throws -> String {
    String(decoding: try bytes(path), as: UTF8.self)
  }

  static func temporaryFolder() throws -> String { try makeTemporaryDirectory("imagelog-file-test") }

  static func remove(_ folder: String) {
    _ = try? spawn(["rm", "-rf", folder])
  }

  static func write(_ path: String, _ bytes: [UInt8]) {
    guard let file = fopen(path, "wb") else { return }
    _ = fwrite(bytes, 1, bytes.count, file)
    fclose(file)
  }

  static func decode(_ path: String) throws -> ELFFile {
    guard case .elf(let file) = try BinaryFile.parse(try Self.bytes(path)) else { throw CLIError(description: "not ELF") }
    return file
  }

  static func bytes(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw CLIError(description: "cannot read \(path)") }
    defer { fclose(file) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = fread(&buffer, 1, buffer.count, file)
      if count <= 0 { break }
      result += buffer[0..<count]
    }
    return result
  }

  static let sample = ["libfixture-x86_64.so", "prog-ppc64", "libdep-mips.so", "static-i386", "libfixture-aarch64.so"]
  static let noBuildID = "libnobuildid-x86_64.so"

  @Test(.enabled(if: haveBinary, "needs the built imagelog (swift build)"))
  func crashLinesForFixtures() throws {
    let paths = (Self.sample + [Self.noBuildID]).map { Self.fixtures + "/" + $0 }
    let run = try Self.imagelog(["file"] + paths)
    #expect(run.status == 0)
    #expect(run.stderr == "")
    #expect(run.outLines.count == paths.count)
    for (line, path) in zip(run.outLines, paths) {
      let file = try Self.decode(path)
      let name = String(path[path.index(after: path.lastIndex(of: "/")!)...])
      let end = file.textVMRange.upperBound - 1
      let uuid = file.buildID.map { $0.compactUUID } ?? String(repeating: "0", count: 32)
      #expect(line == "0x\(hexDigits(file.textVMRange.lowerBound)) - 0x\(hexDigits(end)) \(name) \(file.architecture)  <\(uuid)> \(path)")
    }
  }

  /// The crash lines are written as bytes by `imagelog file`; they must be exactly what
  /// `ImageFormatter(style: .crash)` (the `imagelog list` formatter) writes for the same slice: ELF and
  /// Mach-O fixtures (every slice of the universal ones) and paths whose names are not ASCII (the
  /// image name is the Characters after the last "/", which a combining mark can join to it).
  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func crashLinesAreImageFormattersLines() throws {
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    let machO = Self.root + "/Tests/ImageReadersTests/Fixtures/macho"
    var paths = (Self.sample + [Self.noBuildID]).map { Self.fixtures + "/" + $0 }
    paths += ["universal-ios.dylib", "universal64-macos.dylib", "fixture-x86_64-macos", "handmade-ppc.dylib"]
      .map { machO + "/" + $0 }
    mkdir(folder + "/caf\u{E9}", 0o700)
    for name in ["caf\u{E9}/lib\u{E9}.so", "\u{301}lib.so", "caf\u{E9}/\u{301}x.so"] {
      Self.write(folder + "/" + name, try Self.bytes(Self.fixtures + "/libfixture-x86_64.so"))
      paths.append(folder + "/" + name)
    }
    let run = try Self.imagelog(["file"] + paths)
    #expect(run.status == 0)
    #expect(run.stderr == "")
    let formatter = ImageFormatter(style: .crash)
    var expected: [String] = []
    for path in paths {
      for slice in try BinaryFile.parse(try Self.bytes(path)).slices {
        let image = Image(path: path, loadAddress: slice.textVMRange.lowerBound, loadBias: 0,
                          textRange: slice.textVMRange, loadRange: slice.loadVMRange, buildID: slice.buildID,
                          architecture: slice.architecture, isMainExecutable: false)
        expected.append(formatter.format(image))
      }
    }
    #expect(expected.count > paths.count, "universal files give a line per slice")
    #expect(run.outLines == expected)
  }

  @Test(.enabled(if: haveBinary && FileCommandTests.have("readelf"), "needs the built imagelog and readelf"))
  func uuidLinesCarryReadelfsBuildID() throws {
    let paths = Self.sample.map { Self.fixtures + "/" + $0 } + [Self.fixtures + "/libnobuildid-x86_64.so"]
    let run = try Self.imagelog(["file", "--uuid"] + paths)
    #expect(run.status == 0)
    // No line for the file without a build-id, as llvm-dwarfdump --uuid prints none without LC_UUID.
    #expect(run.outLines.count == Self.sample.count)
    for (line, path) in zip(run.outLines, paths) {
      let notes = try Self.spawn(["readelf", "-n", path]).stdout
      let hex = notes.split(separator: "\n").compactMap { line -> String? in
        guard let range = line.firstRange(of: "Build ID: ") else { return nil }
        return String(line[range.upperBound...])
      }.first ?? ""
      // llvm-dwarfdump's form: the first 16 bytes, uppercase, dashed 8-4-4-4-12.
      var dashed = ""
      for (index, character) in hex.prefix(32).uppercased().enumerated() {
        if [8, 12, 16, 20].contains(index) { dashed.append("-") }
        dashed.append(character)
      }
      let arch = try Self.decode(path).architecture
      #expect(line == "UUID: \(dashed) (\(arch)) \(path)")
    }
  }

  @Test(.enabled(if: haveBinary && FileCommandTests.have("python3"), "needs the built imagelog and python3 (JSON oracle)"))
  func jsonIsValidAndCarriesTheFields() throws {
    let path = Self.fixtures + "/libfixture-x86_64.so"
    let run = try Self.imagelog(["file", "--format", "json", path, Self.fixtures + "/prog-x86_64"])
    #expect(run.status == 0)
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    Self.write(folder + "/out.json", Array(run.stdout.utf8))
    let script = "import json,sys; d=json.load(open(sys.argv[1])); s=d[0]; "
      + "print(len(d), s['elf']['soname'], ','.join(s['dependencies']), s['elf']['runpath'], s['buildID'], s['textSize'], d[1]['elf']['interpreter'], d[1]['fileType'], d[1]['uuid'], d[1]['textEnd'])"
    let parsed = try Self.spawn(["python3", "-c", script, folder + "/out.json"])
    #expect(parsed.status == 0, "python3 could not load the JSON: \(parsed.stderr)")
    let file = try Self.decode(path)
    let prog = try Self.decode(Self.fixtures + "/prog-x86_64")
    let expected = "2 \(file.soname ?? "") \(file.needed.joined(separator: ",")) \(file.runpath ?? "") "
      + "\(file.buildID?.hex ?? "") \(file.textSize) \(prog.interpreter ?? "") pie \(prog.buildID?.uuid ?? "") "
      + "0x\(hexDigits(prog.textVMRange.upperBound))\n"
    #expect(parsed.stdout == expected)
  }

  /// The JSON view's segments (hex offsets and addresses, decimal sizes, flags) against `readelf -lW`'s
  /// program headers, for every ELF fixture and a few system libraries of different sizes.
  @Test(.enabled(if: haveBinary && FileCommandTests.have("python3") && FileCommandTests.have("readelf"),
                 "needs the built imagelog, python3 (JSON oracle) and readelf"))
  func jsonSegmentsMatchReadelf() throws {
    var paths = Self.sample.map { Self.fixtures + "/" + $0 }
    for name in ["libc.so.6", "libz.so.1", "libstdc++.so.6", "libm.so.6"] {
      let path = "/usr/lib/x86_64-linux-gnu/" + name
      if access(path, R_OK) == 0 { paths.append(path) }
    }
    let run = try Self.imagelog(["file", "--format", "json"] + paths)
    #expect(run.status == 0)
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    Self.write(folder + "/out.json", Array(run.stdout.utf8))
    // One line per segment: type offset vaddr filesz memsz flags, numbers as plain hex.
    let script = "import json,sys\nfor e in json.load(open(sys.argv[1])):\n for g in e['elf']['segments']:\n"
      + "  print(e['path'], g['type'], g['offset'][2:], g['vmAddress'][2:], '%x' % g['fileSize'], '%x' % g['vmSize'], g['flags'].replace('-', ''))"
    let parsed = try Self.spawn(["python3", "-c", script, folder + "/out.json"])
    #expect(parsed.status == 0, "python3 could not load the JSON: \(parsed.stderr)")
    var expected: [String] = []
    for path in paths {
      let readelf = try Self.spawn(["readelf", "-lW", path])
      for line in readelf.stdout.split(separator: "\n") {
        // "  LOAD  0x000000 0x0000000000000000 0x0000000000000000 0x0004e8 0x0004e8 R   0x1000"
        let words = line.split(separator: " ")
        guard words.count >= 7, words[1].hasPrefix("0x"), words[0].uppercased() == words[0],
              let offset = UInt64(words[1].dropFirst(2), radix: 16), let address = UInt64(words[2].dropFirst(2), radix: 16),
              let fileSize = UInt64(words[4].dropFirst(2), radix: 16), let memorySize = UInt64(words[5].dropFirst(2), radix: 16)
        else { continue }
        // The flags are one to three words of R, W and E (readelf's X); the alignment follows.
        let flags = words[6...].prefix { $0.allSatisfy { "RWE".contains($0) } }.joined().replacingOccurrences(of: "E", with: "X")
        expected.append([path, String(words[0]), String(offset, radix: 16), String(address, radix: 16),
                         String(fileSize, radix: 16), String(memorySize, radix: 16), flags].joined(separator: " "))
      }
    }
    // Processor-specific types (MIPS REGINFO, ABIFLAGS) are hex numbers in the JSON: compared without them.
    let named: Set<String> = ["PHDR", "INTERP", "LOAD", "DYNAMIC", "NOTE", "TLS", "GNU_EH_FRAME", "GNU_STACK",
                              "GNU_RELRO", "GNU_PROPERTY"]
    func namedOnly(_ lines: [String]) -> [String] { lines.filter { named.contains(String($0.split(separator: " ")[1])) } }
    #expect(namedOnly(expected).count > 20, "readelf listed program headers")
    #expect(namedOnly(parsed.stdout.split(separator: "\n").map(String.init)) == namedOnly(expected))
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func badInputsGiveOneLineEachAndStatusOne() throws {
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    let good = Self.fixtures + "/libdep-x86_64.so"
    let original = try Self.bytes(good)
    Self.write(folder + "/empty", [])
    Self.write(folder + "/text", Array("just some text\n".utf8))
    Self.write(folder + "/truncated.so", Array(original.prefix(1000)))
    mkfifo(folder + "/fifo", 0o600)
    mkdir(folder + "/dir", 0o700)
    let paths = ["empty", "text", "fifo", "dir", "truncated.so", "missing"].map { folder + "/" + $0 }
    let run = try Self.imagelog(["file", good] + paths)
    #expect(run.status == 1)
    #expect(run.outLines.count == 1 && run.outLines.first?.hasSuffix(" " + good) == true)
    #expect(run.errLines.count == 6)
    let errors = Dictionary(uniqueKeysWithValues: zip(paths, run.errLines))
    #expect(errors[folder + "/empty"] == "imagelog: \(folder)/empty: empty file")
    #expect(errors[folder + "/text"] == "imagelog: \(folder)/text: not an ELF or Mach-O file (magic 0x6a757374)")
    #expect(errors[folder + "/fifo"] == "imagelog: \(folder)/fifo: is a FIFO, not a regular file")
    #expect(errors[folder + "/dir"] == "imagelog: \(folder)/dir: is a directory, not a regular file")
    #expect(errors[folder + "/missing"] == "imagelog: \(folder)/missing: cannot open: No such file or directory")
    // The truncated library's section headers (at its end) are past the 1000 bytes left.
    let truncated = errors[folder + "/truncated.so"] ?? ""
    #expect(truncated.hasPrefix("imagelog: \(folder)/truncated.so: section header table"))
    #expect(truncated.hasSuffix("past end (1000 bytes)"))
  }

  /// As root every file is readable, so the run drops to user nobody (65534) through setpriv, which
  /// must be able to run imagelog and read the readable fixture.
  @Test(.enabled(if: haveBinary, "needs the built imagelog"),
        .droppedUserReaches(running: [binary, "--version"], reading: [fixtures + "/libdep-x86_64.so"]))
  func unreadableFileIsReported() throws {
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    chmod(folder, 0o755)
    Self.write(folder + "/secret", try Self.bytes(Self.fixtures + "/libdep-x86_64.so"))
    chmod(folder + "/secret", 0)
    let good = Self.fixtures + "/libdep-x86_64.so"
    let prefix = geteuid() == 0 ? droppedUserPrefix : []
    let run = try Self.spawn(prefix + [Self.binary, "file", folder + "/secret", good])
    #expect(run.status == 1)
    #expect(run.stderr == "imagelog: \(folder)/secret: cannot open: Permission denied\n")
    #expect(run.outLines.count == 1)
  }

  @Test(.enabled(if: haveBinary && have("script"), "needs the built imagelog and script(1) for a terminal"))
  func progressLineOnlyOnATerminal() throws {
    // script(1) gives the command a pseudo-terminal for standard error; the delay is lowered to 0 so
    // the test does not depend on how long the run takes.
    let folder = Self.root + "/Tests/ImageReadersTests/Fixtures"
    let command = "IMAGELOG_PROGRESS_DELAY_MS=0 \(Self.binary) file -r \(folder)"
    let run = try Self.spawn(["script", "-q", "-e", "-c", command, "/dev/null"])
    #expect(run.status == 0)
    #expect(run.stdout.contains("\r\u{1B}[K[1/"), "no progress line on the terminal")
    let plain = try Self.spawn(["sh", "-c", command])
    #expect(plain.stderr == "")
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func recursiveWalkSkipsNonBinariesAndLinkLoops() throws {
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    mkdir(folder + "/sub", 0o700)
    Self.write(folder + "/sub/liba.so", try Self.bytes(Self.fixtures + "/libdep-x86_64.so"))
    Self.write(folder + "/b-prog", try Self.bytes(Self.fixtures + "/prog-mips"))
    Self.write(folder + "/readme.txt", Array("not a binary\n".utf8))
    Self.write(folder + "/empty", [])
    mkfifo(folder + "/sub/fifo", 0o600)
    symlink("..", folder + "/sub/loop")            // a loop back to the top
    symlink(folder + "/sub", folder + "/sub-link") // the same folder by another name
    let run = try Self.imagelog(["file", "-r", folder])
    #expect(run.status == 0)
    #expect(run.stderr == "")
    #expect(run.outLines.count == 2, "each binary once: \(run.outLines)")
    #expect(run.outLines.first?.hasSuffix(" \(folder)/b-prog") == true)
    #expect(run.outLines.last?.hasSuffix(" \(folder)/sub/liba.so") == true)

    // A broken binary found by the walk is still reported.
    Self.write(folder + "/sub/broken.so", Array(try Self.bytes(Self.fixtures + "/libdep-x86_64.so").prefix(200)))
    let broken = try Self.imagelog(["file", "-r", folder])
    #expect(broken.status == 1)
    #expect(broken.errLines.count == 1 && broken.errLines.first?.hasPrefix("imagelog: \(folder)/sub/broken.so: ") == true)
    #expect(broken.outLines.count == 2)
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func archSelectsSlices() throws {
    let arm = Self.fixtures + "/libfixture-aarch64.so", x86 = Self.fixtures + "/libfixture-x86_64.so"
    let run = try Self.imagelog(["file", "--arch", "arm64", arm, x86])
    #expect(run.status == 1)
    #expect(run.outLines.count == 1 && run.outLines.first?.contains(" arm64  <") == true)
    #expect(run.stderr == "imagelog: \(x86): no slice for architecture arm64 (has x86_64)\n")
    let alias = try Self.imagelog(["file", "--arch", "aarch64", arm])
    #expect(alias.status == 0 && alias.outLines.count == 1)
  }

  @Test(.enabled(if: haveBinary && FileCommandTests.have("readelf"), "needs the built imagelog and readelf"))
  func detailedViewShowsELFFacts() throws {
    let path = Self.fixtures + "/prog-x86_64"
    let run = try Self.imagelog(["file", "--format", "detailed", path])
    #expect(run.status == 0)
    let program = try Self.spawn(["readelf", "-lW", path]).stdout
    let interpreter = program.split(separator: "\n").compactMap { line -> String? in
      guard let range = line.firstRange(of: "[Requesting program interpreter: ") else { return nil }
      return String(line[range.upperBound...].dropLast())
    }.first
    #expect(run.outLines.first == "\(path):")
    #expect(run.outLines.contains("  interpreter:   \(interpreter ?? "?")"))
    #expect(run.outLines.contains("  type:          pie"))
    #expect(run.outLines.contains { $0.hasPrefix("    LOAD ") })
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func usageErrorsAndHelp() throws {
    let none = try Self.imagelog(["file"])
    #expect(none.status == 64)
    #expect(none.errLines.first == "Error: Missing expected argument '<path> ...'")
    let bad = try Self.imagelog(["file", "--format", "xml", "x"])
    #expect(bad.status == 64)
    let unknown = try Self.imagelog(["file", "--bogus", "x"])
    #expect(unknown.status == 64)
    let help = try Self.imagelog(["help", "file"])
    let flag = try Self.imagelog(["file", "--help"])
    #expect(help.status == 0 && help.stdout == flag.stdout && help.stdout.hasPrefix("OVERVIEW: "))
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func noProgressLineWhenStandardErrorIsNotATerminal() throws {
    let run = try Self.imagelog(["file", "-r", Self.root + "/Tests/ImageReadersTests/Fixtures"])
    #expect(run.status == 0)
    #expect(run.stderr == "")
    #expect(run.outLines.count >= 30)
  }
}

extension FileCommandTests {
  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func dSYMBundleListsItsDWARFFiles() throws {
    // The bundle layout is what matters here (the macho fixtures hold real Mach-O dSYMs): any binary
    // in Contents/Resources/DWARF is read, other files in the bundle are not.
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    let bundle = folder + "/libfixture.so.dSYM"
    for part in ["", "/Contents", "/Contents/Resources", "/Contents/Resources/DWARF"] { mkdir(bundle + part, 0o700) }
    Self.write(bundle + "/Contents/Info.plist", Array("<plist/>\n".utf8))
    Self.write(bundle + "/Contents/Resources/DWARF/libfixture.so", try Self.bytes(Self.fixtures + "/libsplit-x86_64.debug"))
    let run = try Self.imagelog(["file", "--uuid", bundle])
    let file = try Self.decode(Self.fixtures + "/libsplit-x86_64.debug")
    #expect(run.status == 0)
    #expect(run.stdout == "UUID: \(file.buildID?.uuid ?? "?") (\(file.architecture)) \(bundle)/Contents/Resources/DWARF/libfixture.so\n")

    let empty = folder + "/Empty.dSYM"
    for part in ["", "/Contents", "/Contents/Resources", "/Contents/Resources/DWARF"] { mkdir(empty + part, 0o700) }
    let none = try Self.imagelog(["file", empty])
    #expect(none.status == 1)
    #expect(none.stderr == "imagelog: \(empty): no DWARF files in the dSYM bundle\n")
  }

  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func entitlementsOfAnELFFileIsAnError() throws {
    let path = Self.fixtures + "/libdep-x86_64.so"
    let run = try Self.imagelog(["file", "--entitlements", path])
    #expect(run.status == 1)
    #expect(run.stderr == "imagelog: \(path): entitlements are stored only in Mach-O code signatures\n")
  }
}

extension FileCommandTests {
  /// `.loaderList`: no test loads or unloads a library (or removes its file) while the images are read.
  @Test(.loaderList) func fileViewMatchesTheInProcessImages() throws {
    // Every file-backed image loaded in this test process, read again from its file: the link-time
    // text and load spans shifted by the load bias, and the build-id, must be what the loader shows.
    var compared = 0
    let images = LoadedImages.snapshot().filter { $0.path.hasPrefix("/") }
    for image in images {
      guard case .elf(let file) = try BinaryFile.parse(try Self.bytes(image.path)) else {
        Issue.record("\(image.path) is not read as an ELF file")
        continue
      }
      #expect(file.textVMRange.lowerBound &+ image.loadBias == image.textRange.lowerBound, "\(image.path): text start")
      #expect(file.textSize == image.textSize, "\(image.path): text size")
      #expect(file.loadVMRange.upperBound &+ image.loadBias == image.loadRange.upperBound, "\(image.path): load end")
      #expect(file.buildID == image.buildID, "\(image.path): build-id")
      #expect(file.architecture == image.architecture, "\(image.path): architecture")
      compared += 1
    }
    #expect(compared == images.count && compared >= 3)
  }
}

extension FileCommandTests {
  static let machO = root + "/Tests/ImageReadersTests/Fixtures/macho"

  static func machOFixtures() -> [String] {
    guard let directory = opendir(machO) else { return [] }
    defer { closedir(directory) }
    var paths: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
      if !name.hasPrefix(".") { paths.append(machO + "/" + name) }
    }
    return paths.sorted()
  }

  @Test(.enabled(if: haveBinary && have("llvm-dwarfdump-14") && !machOFixtures().isEmpty,
                 "needs the built imagelog, llvm-dwarfdump-14 and the Mach-O fixtures"))
  func uuidLinesEqualLLVMDwarfdumpForMachO() throws {
    // Thin and universal files and a .dSYM bundle: exactly llvm-dwarfdump's lines, in its order.
    let paths = Self.machOFixtures()
    let ours = try Self.imagelog(["file", "--uuid"] + paths)
    let theirs = try Self.spawn(["llvm-dwarfdump-14", "--uuid"] + paths)
    #expect(ours.status == 0)
    #expect(ours.outLines.count == theirs.outLines.count && ours.outLines.count >= paths.count)
    for (line, expected) in zip(ours.outLines, theirs.outLines) {
      if expected.contains(" () ") {
        // llvm-dwarfdump-14 has no name for some CPU subtypes (ppc7400) and prints "()": the UUID and
        // the path must still agree.
        #expect(line.prefix(42) == expected.prefix(42) && line.split(separator: " ").last == expected.split(separator: " ").last)
      } else {
        #expect(line == expected)
      }
    }
  }

  @Test(.enabled(if: haveBinary && have("python3") && access(machO + "/fixture-arm64-ios-signed", R_OK) == 0,
                 "needs the built imagelog, python3 and the signed Mach-O fixture"))
  func entitlementsAsStoredAndAsJSON() throws {
    let path = Self.machO + "/fixture-arm64-ios-signed"
    let source = Self.root + "/Scripts/fixtures-src/entitlements.plist"
    let xml = try Self.imagelog(["file", "--entitlements", path])
    #expect(xml.status == 0)
    #expect(xml.stdout == (try Self.text(source)))
    // The JSON form against python's plistlib reading the same plist.
    let json = try Self.imagelog(["file", "--entitlements", "--format", "json", path])
    #expect(json.status == 0)
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    Self.write(folder + "/e.json", Array(json.stdout.utf8))
    let script = "import json,plistlib,sys; a=json.load(open(sys.argv[1])); b=plistlib.load(open(sys.argv[2],'rb')); "
      + "print('same' if a==b else 'differ', len(a))"
    let compared = try Self.spawn(["python3", "-c", script, folder + "/e.json", source])
    #expect(compared.stdout.hasPrefix("same "), "\(compared.stdout) \(compared.stderr)")
  }

  @Test(.enabled(if: haveBinary && access(machO + "/universal-macos", R_OK) == 0, "needs the universal fixture"))
  func brokenUniversalSliceIsReportedAndTheOthersShown() throws {
    let original = try Self.bytes(Self.machO + "/universal-macos")
    guard case .fat(let fat) = try BinaryFile.parse(original), fat.members.count == 2 else {
      Issue.record("universal-macos is not a two-slice universal file")
      return
    }
    // Overwrite the second slice's Mach-O magic.
    var bytes = original
    let second = Int(fat.members[1].fileOffset)
    for index in 0..<4 { bytes[second + index] = 0x41 }
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    let path = folder + "/universal"
    Self.write(path, bytes)
    let run = try Self.imagelog(["file", path])
    #expect(run.status == 1)
    #expect(run.outLines.count == 1 && run.outLines.first?.contains(" \(fat.members[0].architecture)  <") == true)
    #expect(run.errLines.count == 1 && run.errLines.first?.hasPrefix("imagelog: \(path) (\(fat.members[1].architecture)): ") == true)
  }
}

extension FileCommandTests {
  @Test(.enabled(if: haveBinary, "needs the built imagelog"))
  func javaClassFilesAreNotUniversalBinaries() throws {
    // cafebabe, minor 0, major 52 (Java 8): what file(1) calls "compiled Java class data".
    let folder = try Self.temporaryFolder()
    defer { Self.remove(folder) }
    Self.write(folder + "/Hello.class", [0xCA, 0xFE, 0xBA, 0xBE, 0x00, 0x00, 0x00, 0x34] + [UInt8](repeating: 0, count: 64))
    let walk = try Self.imagelog(["file", "-r", folder])
    #expect(walk.status == 0 && walk.stdout == "" && walk.stderr == "")
    let named = try Self.imagelog(["file", folder + "/Hello.class"])
    #expect(named.status == 1)
    #expect(named.stderr == "imagelog: \(folder)/Hello.class: not an ELF or Mach-O file (magic 0xcafebabe)\n")
  }
}
