import Glibc
import ImageLogTestSupport
import Testing

/// The symbol cache beyond one report (#28): an `--output-dir` batch and `pid --threads` fill it and
/// answer from it as `symbolicate` does, and a cache folder the user cannot write is read, not written,
/// at no cost but speed. That a run answered from an entry is seen in its system calls: it opened the
/// entry (`strace`). Each test has its own `XDG_CACHE_HOME`.
@Suite struct SymbolCacheUseTests {
  static let program = SymbolCacheCLITests.program
  static let base = SymbolCacheCLITests.base

  /// The `.ilsc` files a run of `arguments` opened (`strace -f -z`: only opens that succeeded; `-y`:
  /// the path of the descriptor returned, as an entry is opened in its folder's descriptor), and the
  /// run's result.
  static func entriesOpened(_ arguments: [String], cache: String, log: String) throws -> (ChildResult, [String]) {
    let run = try runChild(["strace", "-f", "-qq", "-z", "-y", "-e", "trace=openat", "-o", log] + arguments,
                           environment: ["XDG_CACHE_HOME": cache])
    let opened = (readFile(log) ?? "").split(separator: "\n").compactMap { line -> String? in
      guard let result = line.range(of: ") = ", options: .backwards), let open = line[result.upperBound...].firstIndex(of: "<"),
            let close = line.lastIndex(of: ">"), open < close else { return nil }
      let path = String(line[line.index(after: open)..<close])
      return path.hasSuffix(".ilsc") ? path : nil
    }
    return (run, opened)
  }

  /// Imagelog reports of the fixture program loaded at `base`, each with some of `SymbolCacheCLITests`'
  /// addresses, naming the program by its build-id.
  static func reports(in folder: String, count: Int) throws -> [String] {
    let buildID = try #require(try runChild(["readelf", "-n", program]).output.split(separator: "\n")
      .first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init))
    let addresses = try SymbolCacheCLITests.arguments().filter { $0.hasPrefix("0x") }.compactMap { UInt64($0.dropFirst(2), radix: 16) }
    try #require(addresses.count >= count, "\(addresses.count) addresses in \(program)")
    let hex = { (value: UInt64) in
      let digits = String(value, radix: 16)
      return "0x" + String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }
    return try (0..<count).map { index in
      var text = "Process:         app [\(100 + index)]\nOS Version:      Linux 6.1.0 x86_64\nCrashed Thread:  0  tid 1\n\n"
      text += "Thread 0 Crashed:\n"
      for (frame, address) in addresses.enumerated().filter({ $0.offset % count == index }).map(\.element).enumerated() {
        text += "\(frame)".padding(toLength: 4, withPad: " ", startingAt: 0) + "gcc-cxx-O2-dwarf5".padding(toLength: 30, withPad: " ", startingAt: 0)
          + hex(address) + " " + hex(base) + " + \(address - base)\n"
      }
      text += "\nBinary Images:\n\(hex(base)) - \(hex(base + 0xFFFFF)) gcc-cxx-O2-dwarf5 x86_64  <\(buildID)> \(program)\n"
      let path = folder + "/report-\(index).crash"
      try writeFile(path, text)
      return path
    }
  }

  /// The files `--output-dir` wrote into `folder`, by name.
  static func written(_ folder: String) -> [String: String] {
    Dictionary(uniqueKeysWithValues: directoryNames(folder).map { ($0, readFile(folder + "/" + $0) ?? "") })
  }

  @Test(.enabled(if: haveTool("nm") && haveTool("strace") && haveTool("readelf"), "needs nm, readelf (binutils) and strace"))
  func outputDirBatchFillsAndReadsTheCache() throws {
    let folder = try makeTemporaryDirectory("symbol-cache-batch")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let reports = try Self.reports(in: folder, count: 3)
    let cache = folder + "/cache"
    let batch = { (output: String) in
      [builtProduct("imagelog"), "symbolicate", "--no-system-debug", "--output-dir", folder + "/" + output] + reports
    }
    let without = try runChild(batch("without") + ["--no-cache"], environment: ["XDG_CACHE_HOME": cache])
    #expect(without.exitCode == 0, "\(without.error)")
    let expected = Self.written(folder + "/without")
    #expect(expected.count == 3 && expected.values.contains { $0.contains(".cpp:") }, "\(expected)")
    #expect(directoryNames(cache).isEmpty, "--no-cache wrote \(directoryNames(cache))")

    let cold = try runChild(batch("cold"), environment: ["XDG_CACHE_HOME": cache])
    #expect(cold.exitCode == 0, "\(cold.error)")
    #expect(Self.written(folder + "/cold") == expected)
    try SymbolCacheCLITests.waitForOneEntry(cache)
    let entry = try #require(directoryNames(cache + "/imagelog").first)

    let (warm, opened) = try Self.entriesOpened(batch("warm"), cache: cache, log: folder + "/warm.strace")
    #expect(warm.exitCode == 0, "\(warm.error)")
    #expect(Self.written(folder + "/warm") == expected)
    #expect(opened == [cache + "/imagelog/" + entry], "opened \(opened)")
  }

  /// `pid --threads` on a live program built with -g: its frames' lines from the DWARF the first time,
  /// from the entry that run left the second; the same report each time (but the time it was taken).
  @Test(.enabled(if: haveTool("cc") && haveTool("strace"), "needs cc and strace"))
  func pidThreadsFillsAndReadsTheCache() throws {
    let folder = try makeTemporaryDirectory("symbol-cache-pid")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let child = try RunningChild([try buildThreadsProgram(in: folder), "3"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 4)
    let cache = folder + "/cache"
    let command = [builtProduct("imagelog"), "pid", "--threads", String(child.pid), "--no-system-debug"]
    let report = { (run: ChildResult) in
      // The capture's own time (Date/Time to the second, Stopped) differs between runs: a run that ends in
      // the next second is the same report.
      run.output.split(separator: "\n", omittingEmptySubsequences: false)
        .filter { !$0.hasPrefix("Stopped:") && !$0.hasPrefix("Date/Time:") }.joined(separator: "\n")
    }
    let without = try runChild(command + ["--no-cache"], environment: ["XDG_CACHE_HOME": cache])
    #expect(without.exitCode == 0, "\(without.error)")
    #expect(without.output.contains("process-threads.c:"), "\(without.output)")
    #expect(directoryNames(cache).isEmpty, "--no-cache wrote \(directoryNames(cache))")

    let cold = try runChild(command, environment: ["XDG_CACHE_HOME": cache])
    #expect(cold.exitCode == 0 && report(cold) == report(without), "\(cold.error)\n\(cold.output)")
    try SymbolCacheCLITests.waitForOneEntry(cache)
    let entry = try #require(directoryNames(cache + "/imagelog").first)

    let (warm, opened) = try Self.entriesOpened(command, cache: cache, log: folder + "/warm.strace")
    #expect(warm.exitCode == 0 && report(warm) == report(without),
            "\(warm.error)\n\(warm.output)\nwithout the cache:\n\(without.output)")
    #expect(opened == [cache + "/imagelog/" + entry], "opened \(opened)")
    #expect(noThreadStopped(child.pid))
  }

  /// A cache folder user 65534 may read but not write (a shared, prepared cache): with no entry the
  /// run answers from the DWARF, with no error; with root's entry in it, it answers from the entry.
  @Test(.enabled(if: haveTool("nm") && haveTool("strace"), "needs nm (binutils) and strace"),
        .droppedUserReaches(running: [builtProduct("imagelog"), "--version"], reading: [SymbolCacheUseTests.program]))
  func readOnlyFolderIsReadNotWritten() throws {
    let folder = try makeTemporaryDirectory("symbol-cache-read-only")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let cache = folder + "/cache"
    #expect(mkdir(cache, 0o755) == 0 && mkdir(cache + "/imagelog", 0o755) == 0)
    #expect(chmod(folder, 0o755) == 0)  // mkdtemp made it 0700
    let arguments = try SymbolCacheCLITests.arguments()
    let expected = try SymbolCacheCLITests.expected(arguments, cache: folder + "/unused")
    // As root (the user a test run is), the runs below drop to user 65534; as another user, they are
    // that user's, and the folder is made read-only for it instead.
    let asRoot = geteuid() == 0
    if !asRoot { #expect(chmod(cache, 0o555) == 0 && chmod(cache + "/imagelog", 0o555) == 0) }
    defer { chmod(cache, 0o755); chmod(cache + "/imagelog", 0o755) }
    let dropped = (asRoot ? droppedUserPrefix : []) + [builtProduct("imagelog")] + arguments

    let cold = try runChild(dropped, environment: ["XDG_CACHE_HOME": cache])
    #expect(cold.exitCode == 0 && cold.error.isEmpty, "\(cold.error)")
    #expect(cold.output == expected)

    if !asRoot { #expect(chmod(cache + "/imagelog", 0o755) == 0) }
    _ = try SymbolCacheCLITests.imagelog(arguments, cache: cache)
    try SymbolCacheCLITests.waitForOneEntry(cache)
    let entry = cache + "/imagelog/" + (try #require(directoryNames(cache + "/imagelog").first))
    #expect(chmod(entry, 0o644) == 0)
    if !asRoot { #expect(chmod(cache + "/imagelog", 0o555) == 0) }

    let (warm, opened) = try Self.entriesOpened(dropped, cache: cache, log: folder + "/warm.strace")
    #expect(warm.exitCode == 0 && warm.error.isEmpty, "\(warm.error)")
    #expect(warm.output == expected)
    #expect(opened == [entry], "opened \(opened)")
  }
}

extension SymbolCacheUseTests {
  /// A cache folder others may write (a shared or pre-made XDG_CACHE_HOME), or, as root, one another
  /// user owns: the entry in it, though it checks, is never opened, nothing is written there, and the
  /// answers are `--no-cache`'s.
  @Test(.enabled(if: haveTool("nm") && haveTool("strace"), "needs nm (binutils) and strace"))
  func folderOthersControlIsNotUsed() throws {
    let folder = try makeTemporaryDirectory("symbol-cache-others")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let arguments = try SymbolCacheCLITests.arguments()
    let expected = try SymbolCacheCLITests.expected(arguments, cache: folder + "/unused")
    // A good entry, built in a cache of the user's own, to be planted.
    let own = folder + "/own"
    _ = try SymbolCacheCLITests.imagelog(arguments, cache: own)
    try SymbolCacheCLITests.waitForOneEntry(own)
    let name = try #require(directoryNames(own + "/imagelog").first)
    let bytes = try #require(readFileBytes(own + "/imagelog/" + name))
    var cases: [(label: String, mode: mode_t, owner: uid_t?)] = [("others may write", 0o777, nil), ("its group may write", 0o770, nil),
                                                                 ("sticky, others may write", 0o1777, nil)]
    if geteuid() == 0 { cases.append(("user 65534's", 0o700, 65534)) }
    for (index, planted) in cases.enumerated() {
      let cache = folder + "/cache-\(index)"
      #expect(mkdir(cache, 0o755) == 0 && mkdir(cache + "/imagelog", 0o700) == 0)
      try writeFile(cache + "/imagelog/" + name, bytes: bytes)
      #expect(chmod(cache + "/imagelog", planted.mode) == 0)
      if let owner = planted.owner {
        #expect(chown(cache + "/imagelog", owner, owner) == 0 && chown(cache + "/imagelog/" + name, owner, owner) == 0)
      }
      let (run, opened) = try Self.entriesOpened([builtProduct("imagelog")] + arguments, cache: cache, log: folder + "/\(index).strace")
      #expect(run.exitCode == 0 && run.error.isEmpty, "\(planted.label): \(run.error)")
      #expect(run.output == expected, "\(planted.label)")
      #expect(opened.isEmpty, "\(planted.label): opened \(opened)")
      #expect(directoryNames(cache + "/imagelog") == [name], "\(planted.label): \(directoryNames(cache + "/imagelog"))")
    }
  }
}
