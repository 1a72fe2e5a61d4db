#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog symbolicate` and `imagelog file` on a Windows dump Breakpad's client wrote (Breakpad's
/// `minidump2.dmp`, in Tests/ImageReadersTests/Fixtures/minidump-field with its store), held to
/// `minidump-stackwalk --json --symbols-path STORE`: the platform and the crash as Windows means them,
/// the module named after its backslash, and its `.sym` found in the store by the debug file name and
/// debug id the dump's CodeView record gives (`test_app.pdb/5A9832E5…1/test_app.sym`). Before, the dump
/// read as `Linux 5.1.2600`, `signal -1073741819` at the faulting instruction, and the store was never
/// consulted (no identity).
@Suite struct MinidumpFieldCLITests {
  static let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field/breakpad"
  static let dump = folder + "/minidump2.dmp"
  static let store = folder + "/symbols"
  static let canRun = MinidumpCLI.stackwalk != nil

  /// Frame 0 of the crashed thread: in the same module, and named from the store's `.sym` as
  /// minidump-stackwalk names it.
  static func expectFrameZeroNamedAlike(_ ours: JSONValue, _ theirs: JSONValue,
                                        sourceLocation: SourceLocation = #_sourceLocation) throws {
    let crashed = try #require(theirs["crash_info"]?["crashing_thread"]?.integer, sourceLocation: sourceLocation)
    let theirThreads = theirs["threads"]?.array ?? []
    try #require(crashed < theirThreads.count, sourceLocation: sourceLocation)
    let theirFrame = try #require(theirThreads[crashed]["frames"]?.array?.first, sourceLocation: sourceLocation)
    let ourFrame = try #require(ours["frames"]?.array?.first { $0["thread"]?.integer == crashed && $0["frame"]?.integer == 0 },
                                sourceLocation: sourceLocation)
    #expect(ourFrame["image"]?.string == theirFrame["module"]?.string, sourceLocation: sourceLocation)
    #expect(ourFrame["status"]?.string == "symbolicated", sourceLocation: sourceLocation)
    #expect(ourFrame["symbol"]?.string == theirFrame["function"]?.string, sourceLocation: sourceLocation)
  }

  static func theirs() throws -> JSONValue {
    let run = try runChild([try #require(MinidumpCLI.stackwalk), "--json", "--symbols-path", store, dump])
    try #require(run.exitCode == 0, "minidump-stackwalk: \(run.error)")
    return try JSONValue.parse(run.output[...])
  }

  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func windowsDumpWithAStore() throws {
    let theirs = try Self.theirs()
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "json", "--symbols", Self.store, Self.dump])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let ours = try JSONValue.parse(run.output[...])
    let system = theirs["system_info"]
    #expect(ours["os"]?.string == "\(system?["os"]?.string ?? "?") \(system?["os_ver"]?.string ?? "?")")
    #expect(ours["exception"]?["reason"]?.string == theirs["crash_info"]?["type"]?.string)
    #expect(MinidumpCLI.hex(ours["exception"]?["address"]) == MinidumpCLI.hex(theirs["crash_info"]?["address"]))
    try Self.expectFrameZeroNamedAlike(ours, theirs)
    // The module as the store knows it.
    let module = try #require(theirs["modules"]?.array?.first { $0["filename"]?.string == "test_app.exe" })
    let image = try #require(ours["images"]?.array?.first { $0["name"]?.string == "test_app.exe" })
    #expect(image["debugFile"]?.string == module["debug_file"]?.string)
    #expect(image["debugID"]?.string == module["debug_id"]?.string)
    #expect(image["codeID"]?.string == module["code_id"]?.string)
    #expect(image["status"]?.string == "found")
  }

  /// A macOS dump (Breakpad's writer: Mach-O UUIDs in PDB 7.0 records) with a store: the module's
  /// `.sym` is found by its debug file name and debug id, and frame 0 is named as minidump-stackwalk
  /// names it; the crash is `EXC_BAD_ACCESS / KERN_INVALID_ADDRESS`. Before, the UUIDs were dropped and
  /// the store never consulted.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func macOSDumpWithAStore() throws {
    let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field/rust-minidump"
    let dump = folder + "/pipeline-inlines-macos-segv.dmp"
    let stackwalk = try runChild([try #require(MinidumpCLI.stackwalk), "--json", "--symbols-path", folder + "/symbols", dump])
    try #require(stackwalk.exitCode == 0, "minidump-stackwalk: \(stackwalk.error)")
    let theirs = try JSONValue.parse(stackwalk.output[...])
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "json", "--symbols", folder + "/symbols", dump])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let ours = try JSONValue.parse(run.output[...])
    #expect(ours["exception"]?["reason"]?.string == theirs["crash_info"]?["type"]?.string)
    #expect(ours["os"]?.string == "Mac OS X \(theirs["system_info"]?["os_ver"]?.string ?? "?")")
    try Self.expectFrameZeroNamedAlike(ours, theirs)
    let image = try #require(ours["images"]?.array?.first { $0["name"]?.string == "crash-client" })
    #expect(image["status"]?.string == "found")
    let module = try #require(theirs["modules"]?.array?.first { $0["filename"]?.string == "crash-client" })
    #expect(image["debugID"]?.string == module["debug_id"]?.string)
    #expect(image["codeID"]?.string == module["code_id"]?.string)
  }

  static let fieldFolder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field"
  static let fieldDumps = ["breakpad", "rust-minidump"].flatMap { sub in
    directoryNames(fieldFolder + "/" + sub).filter { $0.hasSuffix(".dmp") }.sorted().map { sub + "/" + $0 }
  }

  /// Every field dump through `imagelog symbolicate --format json` with both stores: the OS line, the
  /// crash (named, or a signal by number), its address, the crashing or requesting thread, the threads'
  /// ids, and frame 0 of that thread: its module, and its name wherever minidump-stackwalk names it.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"), arguments: fieldDumps)
  func fieldDumpAsMinidumpStackwalkSeesIt(_ name: String) throws {
    let stores = ["breakpad", "rust-minidump"].map { Self.fieldFolder + "/" + $0 + "/symbols" }
    let dump = Self.fieldFolder + "/" + name
    let stackwalk = try runChild([try #require(MinidumpCLI.stackwalk), "--json"] + stores.flatMap { ["--symbols-path", $0] } + [dump])
    try #require(stackwalk.exitCode == 0, "minidump-stackwalk: \(stackwalk.error)")
    let theirs = try JSONValue.parse(stackwalk.output[...])
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--format", "json"] + stores.flatMap { ["--symbols", $0] } + [dump])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let ours = try JSONValue.parse(run.output[...])
    let os = theirs["system_info"]?["os"]?.string ?? "?"
    if os == "Linux" {
      #expect(ours["os"]?.string?.hasPrefix("Linux ") == true)
    } else {
      #expect(ours["os"]?.string == "\(os) \(theirs["system_info"]?["os_ver"]?.string ?? "?")")
    }
    let crash = theirs["crash_info"]
    if let type = crash?["type"]?.string {
      if let reason = ours["exception"]?["reason"]?.string {
        #expect(reason == type)
      } else {
        let signal = ours["exception"]?["signal"]?.integer
        #expect(signal.map { MinidumpCLI.signalNumbers[String(type.split(separator: " ").first ?? "")] == $0 } == true, "\(type)")
      }
      #expect(MinidumpCLI.hex(ours["exception"]?["address"]) == MinidumpCLI.hex(crash?["address"]))
    } else {
      #expect(ours["exception"] == nil)
    }
    let ourThreads = ours["threads"]?.array ?? []
    let theirThreads = theirs["threads"]?.array ?? []
    #expect(ourThreads.map { $0["tid"]?.unsigned } == theirThreads.map { $0["thread_id"]?.unsigned })
    let index = ourThreads.firstIndex { $0["crashed"] == .bool(true) || $0["requestedDump"] == .bool(true) }
    #expect(index == crash?["crashing_thread"]?.integer)
    guard let index, index < theirThreads.count, let theirFrame = theirThreads[index]["frames"]?.array?.first else { return }
    let ourFrame = try #require(ours["frames"]?.array?.first { $0["thread"]?.integer == index && $0["frame"]?.integer == 0 })
    #expect(ourFrame["image"]?.string == theirFrame["module"]?.string)
    if let function = theirFrame["function"]?.string { #expect(ourFrame["symbol"]?.string == function) }
  }

  /// The macOS dump names its other threads with empty strings (minidump-stackwalk's JSON: `""`, its
  /// text: nothing between `Thread 1` and the tid): the report gives them no name line, where it printed
  /// `Thread 1 name:  ` with nothing after it; the named thread keeps its line.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func emptyThreadNamesGiveNoNameLine() throws {
    let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field/rust-minidump"
    let dump = folder + "/pipeline-inlines-macos-segv.dmp"
    let stackwalk = try runChild([try #require(MinidumpCLI.stackwalk), "--json", dump])
    try #require(stackwalk.exitCode == 0, "minidump-stackwalk: \(stackwalk.error)")
    let names = try JSONValue.parse(stackwalk.output[...])["threads"]?.array?.map { $0["thread_name"]?.string } ?? []
    try #require(names.count > 1 && names[0] == "main" && names.dropFirst().allSatisfy { $0 == "" }, "\(names)")
    let run = try runChild([MinidumpCLI.imagelog, "symbolicate", dump])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let nameLines = run.output.split(separator: "\n").filter { $0.hasPrefix("Thread ") && $0.contains(" name:") }
    #expect(nameLines == ["Thread 0 name:  main"], "\(nameLines)")
  }

  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func fileDescribesTheWindowsDump() throws {
    let theirs = try Self.theirs()
    let run = try runChild([MinidumpCLI.imagelog, "file", "--format", "detailed", Self.dump])
    try #require(run.exitCode == 0, "imagelog: \(run.error)")
    let system = theirs["system_info"]
    #expect(run.output.contains("  os:            \(system?["os"]?.string ?? "?") \(system?["os_ver"]?.string ?? "?")\n"),
            "\(run.output)")
    let address = try #require(MinidumpCLI.hex(theirs["crash_info"]?["address"]))
    #expect(run.output.contains("  exception:     \(theirs["crash_info"]?["type"]?.string ?? "?"), address 0x\(hexDigits(address, width: 16))\n"),
            "\(run.output)")
    for module in theirs["modules"]?.array ?? [] {
      let name = module["filename"]?.string ?? "?"
      // Each module's line names it after its last backslash; its identity follows on the next line.
      #expect(run.output.contains(" \(name) i386  ") || run.output.contains("+\(name) i386  "), "\(name)")  // + marks the executable
      guard let id = module["debug_id"]?.string, id != String(repeating: "0", count: 33) else { continue }
      #expect(run.output.contains("      debug file \(module["debug_file"]?.string ?? "?"), debug id \(id), code id \(module["code_id"]?.string ?? "?")\n"),
              "\(name)")
    }
  }
}
