import ImageLogTestSupport
import Testing

/// `imagelog symbolicate` over a long list of bare addresses in one large Swift library, as `make bench`
/// runs it (there 20,000): the output (hundreds of kilobytes, written to a pipe in as many writes as it
/// takes) has one line per address in the list's order, with llvm-symbolizer's function for each and
/// names demangled as the toolchain's `swift demangle --simplified` writes them.
@Suite struct SymbolicateLongListTests {
  static let libswiftCore = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"
  static let haveTools = haveTool("llvm-nm") && haveTool("llvm-symbolizer")
    && haveTool("swift-demangle") && haveTool(libswiftCore)

  @Test(.enabled(if: haveTools, "needs llvm-nm, llvm-symbolizer, swift-demangle and libswiftCore.so"))
  func longListFromStandardInputAndFile() throws {
    let symbols = try SymbolicateCLI.functionSymbols(Self.libswiftCore)
    try #require(symbols.count > 10_000)
    // 5,000 addresses: 2,500 functions, each twice, far apart in the list.
    let functions = (0..<2500).map { symbols[($0 &* 7919) % symbols.count].0 }
    let addresses = functions.map { $0 + 1 } + functions.reversed().map { $0 + 2 }
    let load: UInt64 = 0x7f00_0000_0000  // the library's first PT_LOAD is at 0
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    let list = directory + "/addresses.txt"
    try writeFile(list, addresses.map { "0x" + String($0 + load, radix: 16) }.joined(separator: "\n") + "\n")
    let image = "\(Self.libswiftCore)@0x\(String(load, radix: 16))"

    let raw = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-lines", "--no-demangle", "--image", image, list])
    #expect(raw.exitCode == 0, "\(raw.error)")
    let rawLines = raw.output.split(separator: "\n")
    try #require(rawLines.count == addresses.count + 1, "\(raw.error)")
    let rawNames = rawLines.prefix(addresses.count).map { String($0.split(separator: " ")[1]) }
    #expect(rawNames == (try SymbolicateCLI.llvmSymbolizerNames(Self.libswiftCore, addresses)))
    #expect(rawLines.last == "-- symbolicated by imagelog: 5000 of 5000 frames; 1 of 1 images found, 0 missing, 0 mismatched")

    // Demangled (the default), from standard input: `sh -c` redirects the list.
    let demangled = try runChild(["sh", "-c", "\"$0\" symbolicate --no-lines --image \"$1\" - < \"$2\"",
                                        SymbolicateCLI.executable, image, list])
    #expect(demangled.exitCode == 0, "\(demangled.error)")
    let lines = demangled.output.split(separator: "\n", omittingEmptySubsequences: false)
    try #require(lines.count == addresses.count + 3)
    for (index, line) in lines.prefix(addresses.count).enumerated() {
      let address = addresses[index] + load
      let head = "0x" + String(repeating: "0", count: 16 - String(address, radix: 16).count) + String(address, radix: 16) + " "
      #expect(line.hasPrefix(head) && line.hasSuffix(" (in libswiftCore.so)"), "\(line)")
    }
    let swiftIndices = rawNames.indices.filter { rawNames[$0].hasPrefix("$s") }
    try #require(swiftIndices.count > 1000)
    let expected = try runChild(["swift-demangle", "--simplified", "--compact"] + swiftIndices.map { rawNames[$0] })
      .output.split(separator: "\n", omittingEmptySubsequences: false)
    try #require(expected.count >= swiftIndices.count)
    for (position, index) in swiftIndices.enumerated() {
      // `NAME + OFFSET (in libswiftCore.so)` after the address: the name ends at the last ` + `.
      let rest = lines[index].dropFirst(19)
      let name = rest[..<(rest.ranges(of: " + ").last?.lowerBound ?? rest.endIndex)]
      if name != expected[position] { Issue.record("line \(index): \(name) != \(expected[position])"); break }
    }
  }
}
