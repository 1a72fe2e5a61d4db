import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog symbolicate` with the symbol cache (#28): the same output with and without it, cold and
/// warm (the entry is built by `imagelog cache-build` in the background), with two processes filling
/// it at once; `--no-cache` writes nothing. Each test has its own `XDG_CACHE_HOME`.
@Suite struct SymbolCacheCLITests {
  static let program = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf/gcc-cxx-O2-dwarf5"
  static let base: UInt64 = 0x5555_5555_4000

  /// A few bytes into each function `nm` lists in the program (loaded at `base`).
  static func arguments() throws -> [String] {
    let symbols = try runChild(["nm", "-S", "--defined-only", program])
    guard symbols.exitCode == 0 else { throw TestSupportError("nm \(program): \(symbols.error)") }
    var addresses: [String] = []
    for line in symbols.output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      guard fields.count == 4, "tTW".contains(fields[2]), let value = UInt64(fields[0], radix: 16),
            let size = UInt64(fields[1], radix: 16), size > 1 else { continue }
      addresses.append("0x" + String(base + value + min(4, size - 1), radix: 16))
    }
    return ["symbolicate", "--no-system-debug", "--image", "\(program)@0x\(String(base, radix: 16))"] + addresses
  }

  static func imagelog(_ arguments: [String], cache: String) throws -> ChildResult {
    try runChild([builtProduct("imagelog")] + arguments, environment: ["XDG_CACHE_HOME": cache])
  }

  /// The output without the cache: the DWARF reader's answers (compared with llvm-symbolizer's by
  /// SymbolicationTests' DWARFOracleTests).
  static func expected(_ arguments: [String], cache: String) throws -> String {
    let run = try imagelog(arguments + ["--no-cache"], cache: cache)
    #expect(run.exitCode == 0, "\(run.error)")
    #expect(run.output.contains(".cpp:"), "no file:line in \(run.output)")
    return run.output
  }

  /// Runs `body` with a fresh folder (removed after), the arguments and `--no-cache`'s output.
  static func withFolder(_ body: (String, [String], String) throws -> Void) throws {
    let folder = try makeTemporaryDirectory("symbol-cache-cli")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let arguments = try arguments()
    try body(folder, arguments, try expected(arguments, cache: folder))
  }

  /// Waits until the background builders are done: one entry in the cache folder and no temporary file.
  static func waitForOneEntry(_ folder: String) throws {
    try waitUntil("one entry in \(folder)/imagelog") {
      let names = directoryNames(folder + "/imagelog")
      return names.count == 1 && names.allSatisfy { $0.hasSuffix(".ilsc") }
    }
  }

  @Test(.enabled(if: haveTool("nm"), "nm (binutils) is not installed"))
  func coldAndWarmAnswerAsWithout() throws {
    try Self.withFolder { folder, arguments, expected in
      #expect(directoryNames(folder).isEmpty, "--no-cache wrote \(directoryNames(folder))")
      let cold = try Self.imagelog(arguments, cache: folder)
      #expect(cold.exitCode == 0 && cold.error.isEmpty, "\(cold.error)")
      #expect(cold.output == expected)
      try Self.waitForOneEntry(folder)
      let entries = directoryNames(folder + "/imagelog")
      let warm = try Self.imagelog(arguments, cache: folder)
      #expect(warm.output == expected)
      #expect(directoryNames(folder + "/imagelog") == entries)
    }
  }

  /// Two processes building the same entry at once: both answer right, one whole entry is left and
  /// no temporary file.
  @Test(.enabled(if: haveTool("nm"), "nm (binutils) is not installed"))
  func racingWritersAreHarmless() throws {
    try Self.withFolder { folder, arguments, expected in
      // A folder per round: a round's second builder may finish after its first has been awaited.
      for round in 0..<3 {
        let cache = folder + "/round-\(round)"
        let quoted = ([builtProduct("imagelog")] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let run = try runChild(["sh", "-c", "\(quoted) > '\(folder)/1' 2>&1 & \(quoted) > '\(folder)/2' 2>&1 & wait"],
                               environment: ["XDG_CACHE_HOME": cache])
        #expect(run.exitCode == 0)
        #expect(readFile(folder + "/1") == expected, "round \(round), first")
        #expect(readFile(folder + "/2") == expected, "round \(round), second")
        try Self.waitForOneEntry(cache)
        #expect(try Self.imagelog(arguments, cache: cache).output == expected, "round \(round), from the cache")
      }
    }
  }

  /// A cache folder that cannot be made: the same output, no error.
  @Test(.enabled(if: haveTool("nm"), "nm (binutils) is not installed"))
  func unwritableCacheFolder() throws {
    try Self.withFolder { folder, arguments, expected in
      try writeFile(folder + "/file", "not a folder\n")
      let run = try Self.imagelog(arguments, cache: folder + "/file")
      #expect(run.exitCode == 0 && run.error.isEmpty, "\(run.error)")
      #expect(run.output == expected)
    }
  }

  @Test func badSizeIsAUsageError() throws {
    let folder = try makeTemporaryDirectory("symbol-cache-cli")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let run = try runChild([builtProduct("imagelog"), "symbolicate", "0x1000"],
                           environment: ["XDG_CACHE_HOME": folder, "IMAGELOG_CACHE_SIZE": "lots"])
    #expect(run.exitCode == 64)
    #expect(run.error.hasPrefix("Error: IMAGELOG_CACHE_SIZE: 'lots' is not a size (bytes, or a number with K, M or G)\n"), "\(run.error)")
  }
}
