import ImageLogTestSupport
import Testing

/// `imagelog symbolicate` and `Scripts/symbolicate` as a user runs them: output, errors, exit status.
@Suite struct SymbolicateCommandTests {
  static let libswiftCore = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"
  static let haveTools = haveTool("llvm-nm") && haveTool("llvm-symbolizer")

  @Test func helpIsTheSameBothWays() throws {
    let direct = try runChild([SymbolicateCLI.executable, "symbolicate", "--help"])
    let viaHelp = try runChild([SymbolicateCLI.executable, "help", "symbolicate"])
    #expect(direct.exitCode == 0)
    #expect(direct.output == viaHelp.output)
    #expect(direct.output.contains("USAGE: imagelog symbolicate"))
  }

  @Test(arguments: [
    [String](), ["--format", "bogus", "report.txt"], ["--image", "no-address", "0x1"], ["--demangle", "odd", "r"],
    ["a.crash", "b.crash"], ["--bogus", "r"],
  ])
  func usageErrors(arguments: [String]) throws {
    let result = try runChild([SymbolicateCLI.executable, "symbolicate"] + arguments)
    #expect(result.exitCode == 64)
    #expect(result.error.hasPrefix("Error: "))
    #expect(result.output.isEmpty)
  }

  /// A universal file given with `--image` and bare addresses (no architecture anywhere): one line
  /// saying it is universal, its architectures (as llvm-lipo lists them) and that `--arch` picks one;
  /// status 1. With `--arch` the slice is found; an `--arch` it lacks is named. (It said
  /// "[image file not found]" and exited 0.)
  @Test(.enabled(if: haveTool("llvm-lipo-14"), "needs llvm-lipo-14 (Debian llvm-14)"))
  func universalImageWithoutArch() throws {
    let path = packageRoot + "/Tests/ImageReadersTests/Fixtures/macho/universal-macos"
    let archs = try runChild(["llvm-lipo-14", "-archs", path]).output.split(whereSeparator: { $0 == " " || $0 == "\n" })
      .map(String.init)
    try #require(archs.count == 2)
    let image = ["--image", path + "@0x100000000", "0x100000f00"]
    let without = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-lines"] + image)
    #expect(without.exitCode == 1)
    #expect(without.error == "imagelog: \(path): a universal file (\(archs.joined(separator: ", "))): "
            + "give --arch <name> to pick the slice that was loaded\n")
    let chosen = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-lines", "--arch", archs[0]] + image)
    #expect(chosen.exitCode == 0)
    #expect(chosen.error == "")
    #expect(chosen.output.contains("1 of 1 images found"))
    let absent = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-lines", "--arch", "armv7k"] + image)
    #expect(absent.exitCode == 1)
    #expect(absent.error == "imagelog: \(path): no armv7k slice in this universal file (it has \(archs.joined(separator: ", ")))\n")
  }

  @Test func unreadableReportsFailWithOneLine() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    let garbage = directory + "/garbage.txt"
    try writeFile(garbage, "this is\nnot a crash report\n\u{1}\u{2}\u{3}")
    // .ips files whose body holds nothing: the same status as text without frames (they exited 0).
    let emptyObject = directory + "/empty-object.ips", emptyArray = directory + "/empty-array.ips"
    try writeFile(emptyObject, "{\"bug_type\":\"309\",\"os_version\":\"macOS 14.0\"}\n{}\n")
    try writeFile(emptyArray, "{\"bug_type\":\"309\"}\n[]\n")
    for (path, message) in [(garbage, "not a crash report"), (directory + "/missing.crash", "No such file or directory"),
                            (directory, "is a directory"), (emptyObject, "not a crash report"),
                            (emptyArray, "not a crash report")] {
      let result = try runChild([SymbolicateCLI.executable, "symbolicate", path])
      #expect(result.exitCode == 1)
      #expect(result.error.hasPrefix("imagelog: \(path): "))
      #expect(result.error.contains(message))
      #expect(result.error.split(separator: "\n").count == 1)
    }
  }

  /// Bare addresses in one large Swift library, symbol tables only: the function of each agrees with
  /// llvm-symbolizer's on the same addresses.
  @Test(.enabled(if: haveTools && haveTool(libswiftCore), "needs llvm-nm, llvm-symbolizer and libswiftCore.so"))
  func bareAddressesAgreeWithLLVMSymbolizer() throws {
    let symbols = try SymbolicateCLI.functionSymbols(Self.libswiftCore)
    try #require(symbols.count > 1000)
    let picked = stride(from: 0, to: symbols.count, by: symbols.count / 60).map { symbols[$0].0 + 1 }
    let load: UInt64 = 0x7f00_0000_0000  // the library's first PT_LOAD is at 0
    let result = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-demangle", "--no-lines",
                                     "--image", "\(Self.libswiftCore)@0x\(String(load, radix: 16))"]
                                    + picked.map { "0x" + String($0 + load, radix: 16) })
    #expect(result.exitCode == 0, "\(result.error)")
    let ours = result.output.split(separator: "\n").prefix(picked.count).map { line -> String in
      let words = line.split(separator: " ")
      return words.count > 1 ? String(words[1]) : ""
    }
    let theirs = try SymbolicateCLI.llvmSymbolizerNames(Self.libswiftCore, picked)
    #expect(ours == theirs)

    // The same through an image list in imagelog's crash style (as `imagelog list --format crash`
    // writes it) and addresses after it on the command line: matched by build-id.
    let notes = try runChild(["readelf", "-n", Self.libswiftCore]).output
    let buildID = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last)
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    let list = directory + "/images.txt"
    try writeFile(list, "0x\(String(load, radix: 16)) - 0x\(String(load + 0xFFFFFFF, radix: 16)) libswiftCore.so x86_64  "
                                   + "<\(buildID.prefix(32))> \(Self.libswiftCore)\n")
    let viaList = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-demangle", "--no-lines", list]
                                     + picked.map { "0x" + String($0 + load, radix: 16) })
    #expect(viaList.exitCode == 0, "\(viaList.error)")
    #expect(viaList.output.split(separator: "\n").prefix(picked.count).map { String($0.split(separator: " ")[1]) } == theirs)
    #expect(viaList.output.contains("1 of 1 images found"))
  }

  /// An imagelog crash report over imagelog's own executable, recorded at a path that no longer exists:
  /// Scripts/symbolicate finds the binary by its build-id in the folder given, and the functions and
  /// lines agree with llvm-symbolizer's. A wrong build-id is reported as a mismatch instead.
  @Test(.enabled(if: haveTools && haveTool("readelf"), "needs llvm-nm, llvm-symbolizer and readelf"))
  func scriptSymbolicatesAnImagelogReport() throws {
    let binary = SymbolicateCLI.executable
    let notes = try runChild(["readelf", "-n", binary]).output
    let buildID = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last)
    let symbols = try SymbolicateCLI.functionSymbols(binary).filter { $0.1.hasPrefix("$s11ImageLogCLI") }
    try #require(symbols.count >= 5)
    let picked = (0..<5).map { symbols[$0 * (symbols.count / 5)].0 + 4 }
    let load: UInt64 = 0x5555_5555_4000
    let fileBase = try SymbolicateCLI.firstLoadAddress(binary)
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    try #require(try runChild(["mkdir", "-p", directory + "/builds/x"]).status == 0)
    try #require(try runChild(["cp", binary, directory + "/builds/x/imagelog"]).status == 0)
    func report(_ id: String) -> String {
      var text = """
        Process:         imagelog [4242]
        Path:            /gone/imagelog
        OS Version:      Linux 6.1.0 x86_64
        Exception Type:  SIGSEGV (SEGV_MAPERR)
        Exception Codes: signal 11, code 1, address 0x0000000000000000
        Crashed Thread:  0  tid 4242

        Thread 0 Crashed:

        """
      for (index, address) in picked.enumerated() {
        let offset = address - fileBase
        text += "\(index)   imagelog                      0x\(String(load + offset, radix: 16)) 0x\(String(load, radix: 16)) + \(offset)\n"
      }
      text += "\nBinary Images:\n0x\(String(load, radix: 16)) - 0x\(String(load + 0xFFFFFF, radix: 16)) +imagelog x86_64  <\(id)> /gone/imagelog\n"
      return text
    }
    let good = directory + "/good.crash"
    try writeFile(good, report(String(buildID.prefix(32))))
    let script = packageRoot + "/Scripts/symbolicate"
    let result = try runChild([script, "--format", "json", "--demangle", "none", good, directory + "/builds"],
                                    environment: ["IMAGELOG": binary])
    #expect(result.exitCode == 0, "\(result.error)")
    let frames = result.output.split(separator: "\n").filter { $0.hasPrefix("{\"thread\"") }
    try #require(frames.count == picked.count, "\(result.output)")
    let lookups = picked.enumerated().map { $0.offset == 0 ? $0.element : $0.element - 1 }
    let expected = try SymbolicateCLI.llvmSymbolizerNames(binary, lookups)
    for (frame, name) in zip(frames, expected) {
      #expect(frame.contains("\"symbol\":\"\(name)\""), "\(frame)")
      #expect(frame.contains("\"status\":\"symbolicated\""))
    }
    let lines = try runChild(["llvm-symbolizer", "--no-inlines", "--obj=" + binary] + lookups.map { "0x" + String($0, radix: 16) })
    let expectedLines = lines.output.split(separator: "\n").enumerated().filter { $0.offset % 2 == 1 }
      .map { $0.element.split(separator: ":").dropLast().last.map(String.init) ?? "" }
    for (frame, line) in zip(frames, expectedLines) where line != "0" {
      #expect(frame.contains("\"line\":\(line),"), "\(frame)")
    }

    let bad = directory + "/bad.crash"
    try writeFile(bad, report("0123456789abcdef0123456789abcdef"))
    let mismatch = try runChild([script, bad, directory + "/builds"], environment: ["IMAGELOG": binary])
    #expect(mismatch.exitCode == 0)
    #expect(mismatch.output.contains("[UUID mismatch: report 0123456789abcdef0123456789abcdef, file \(buildID) \(directory)/builds/x/imagelog]"))
    #expect(mismatch.output.contains("  mismatch:   imagelog report <0123456789abcdef0123456789abcdef> file <\(buildID)>"))
  }

  /// `imagelog list --format crash|logger|unstrip` output (imagelog's own images in one run) followed
  /// by addresses in imagelog's executable: each resolves to llvm-symbolizer's function.
  @Test(.enabled(if: haveTools && haveTool("readelf"), "needs llvm-nm, llvm-symbolizer and readelf"),
        arguments: ["crash", "logger", "unstrip"])
  func imageListFromTheFormatter(style: String) throws {
    let binary = SymbolicateCLI.executable
    let list = try runChild([binary, "list", "--format", style])
    try #require(list.exitCode == 0, "\(list.error)")
    let mainLine = try #require(list.output.split(separator: "\n").first { $0.contains(binary) })
    let loadText = mainLine.split(whereSeparator: { $0 == " " || $0 == "+" })[style == "logger" ? 1 : 0]
    let load = try #require(UInt64(loadText.dropFirst(2), radix: 16))
    let symbols = try SymbolicateCLI.functionSymbols(binary).filter { $0.1.hasPrefix("$s11ImageLogCLI") }
    try #require(symbols.count > 10)
    let picked = stride(from: 0, to: symbols.count, by: symbols.count / 10).map { symbols[$0].0 + 1 }
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    try writeFile(directory + "/images.txt", list.output)
    let fileBase = try SymbolicateCLI.firstLoadAddress(binary)
    let result = try runChild([binary, "symbolicate", "--demangle", "none", "--no-lines", directory + "/images.txt"]
                                    + picked.map { "0x" + String($0 - fileBase + load, radix: 16) })
    #expect(result.exitCode == 0, "\(result.error)")
    let ours = result.output.split(separator: "\n").prefix(picked.count).map { String($0.split(separator: " ")[1]) }
    #expect(ours == (try SymbolicateCLI.llvmSymbolizerNames(binary, picked)))
  }

  /// A missing --search folder is an error (exit 1, one line naming it) that stops nothing else; `-`
  /// reads the report from standard input.
  @Test(.enabled(if: haveTool(libswiftCore), "needs libswiftCore.so"))
  func missingSearchPathAndStandardInput() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    let addresses = directory + "/addresses.txt"
    try writeFile(addresses, "0x7f0000200000\n")
    let image = "--image=\(Self.libswiftCore)@0x7f0000000000"
    let result = try runChild(["sh", "-c", "\"$0\" symbolicate --no-lines --search /nonexistent/folder \"$1\" - < \"$2\"",
                                     SymbolicateCLI.executable, image, addresses])
    #expect(result.exitCode == 1)
    #expect(result.error == "imagelog: /nonexistent/folder: no such file or directory\n")
    #expect(result.output.hasPrefix("0x00007f0000200000 "))
    #expect(result.output.contains("(in libswiftCore.so)"))
  }

  @Test func scriptHelpAndErrors() throws {
    let script = packageRoot + "/Scripts/symbolicate"
    let help = try runChild([script, "--help"])
    #expect(help.exitCode == 0)
    #expect(help.output.contains("USAGE: Scripts/symbolicate"))
    #expect(try runChild([script]).exitCode == 64)
    #expect(try runChild([script, "/nonexistent/crash.txt"]).exitCode == 1)
  }
}
