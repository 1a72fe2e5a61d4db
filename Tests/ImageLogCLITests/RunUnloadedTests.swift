import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// Issue 39 under `imagelog run --crash-dir`: run-crash.c's "unloaded" mode opens a plugin
/// (unloaded-plugin.c), closes it and calls the pointer it kept. The audit module keeps the plugin from
/// `la_objclose`; the helper reads that history through the crash record. The report lists the plugin
/// under Unloaded Images with the build-id `readelf -n` gives and names it in the crashing frame,
/// symbolicated from the plugin's file (still on disk) as `nm -D` names the called address; the
/// minidump holds it in its UnloadedModuleList, which minidump-stackwalk (rust-minidump) reads and
/// attributes frame 0 to, and imagelog's own reader reads back.
extension RunCrashTests {
  static let readelf = which("readelf")

  @Test(.enabled(if: processTestHaveCC && gcc != nil && readelf != nil && MinidumpCLI.stackwalk != nil,
                 "needs cc, gcc, readelf and minidump-stackwalk (Scripts/install-test-tools)"))
  func unloadedPluginIsNamedInReportAndMinidump() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-unloaded")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: "cc", readelf: try #require(Self.readelf))
    let run = try Self.crash("unloaded", extra: ["--crash-wait"], environment: ["CRASH_PLUGIN": plugin.path])
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    let called = try Self.printedAddress(run)

    // The report: the plugin under Unloaded Images with its whole build-id, and frame 0 in it.
    let lines = run.text.split(separator: "\n", omittingEmptySubsequences: false)
    let base = try Self.unloadedPluginBase(run, plugin)
    let crashed = try #require(lines.firstIndex { $0.hasPrefix("Thread 0 Crashed:") })
    let frame0 = lines[crashed + 1]
    // Symbolicated from the plugin's file, found by its build-id: plugin_work, at its first byte.
    #expect(frame0.hasPrefix("0   libplugin.so ") && frame0.contains(" 0x\(hexDigits(called, width: 16)) plugin_work + 0  (unloaded ")
            && frame0.hasSuffix(" ms before the crash by thread \(run.result.pid))"), "\(run.text)")
    #expect(try Self.dynamicSymbolOffset("plugin_work", in: plugin.path) == called - base,
            "nm -D: plugin_work is the called pc's offset in the plugin")

    // The minidump, as rust-minidump reads it.
    let dump = try Self.expectStackwalkAttributes(run, to: plugin, base: base, pc: called)

    // imagelog's own reader: the dump's unloaded module, and frame 0 in it.
    let read = try runProcessTest([processTestImagelog, "symbolicate", "--format", "json", dump],
                                  environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(read.exitStatus == 0, "\(read.error)")
    let document = try JSONValue.parse(read.output[...])
    let images = document["unloadedImages"]?.array ?? []
    #expect(images.count == 1 && images.first?["path"]?.string == plugin.path && MinidumpCLI.hex(images.first?["baseAddress"]) == base,
            "\(read.output.prefix(4000))")
    let first = document["frames"]?.array?.first
    #expect(first?["unloadedImage"]?.string == "libplugin.so" && first?["unloadedImageOffset"]?.unsigned == called - base)
  }

  /// A thread the plugin started and did not stop (run-crash.c's "unloaded-thread"): closed while the
  /// thread waits in read(2), the plugin's code is gone when the read returns. The crashed thread's
  /// frame 0 is attributed to the plugin and named from its file (`plugin_thread`, as `nm -D` places
  /// it); minidump-stackwalk reads the dump with the plugin in its unloaded modules and frame 0 in it.
  @Test(.enabled(if: processTestHaveCC && gcc != nil && readelf != nil && MinidumpCLI.stackwalk != nil,
                 "needs cc, gcc, readelf and minidump-stackwalk (Scripts/install-test-tools)"))
  func threadThePluginLeftRunningIsNamed() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-unloaded")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: "cc", readelf: try #require(Self.readelf))
    let run = try Self.crash("unloaded-thread", extra: ["--crash-wait"], environment: ["CRASH_PLUGIN": plugin.path])
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    let function = try Self.printedAddress(run)
    let lines = run.text.split(separator: "\n", omittingEmptySubsequences: false)
    let base = try Self.unloadedPluginBase(run, plugin)
    #expect(try Self.dynamicSymbolOffset("plugin_thread", in: plugin.path) == function - base,
            "nm -D: plugin_thread is where the program found it")
    // Not the main thread: the plugin's own.
    let crashed = try #require(lines.firstIndex { $0.hasPrefix("Thread ") && $0.contains(" Crashed:") }, "\(run.text)")
    #expect(!lines[crashed].hasPrefix("Thread 0 "), "\(run.text)")
    let frame0 = lines[crashed + 1].split(separator: " ", omittingEmptySubsequences: true)
    let pc = try #require(frame0.count > 5 ? UInt64(frame0[2].dropFirst(2), radix: 16) : nil, "\(run.text)")
    #expect(pc > function && pc - function < 256, "in plugin_thread, past its first byte: \(run.text)")
    #expect(lines[crashed + 1].hasPrefix("0   libplugin.so ") && lines[crashed + 1].contains(" plugin_thread + \(pc - function)  (unloaded ")
            && lines[crashed + 1].hasSuffix(" ms before the crash by thread \(run.result.pid))"), "\(run.text)")
    try Self.expectStackwalkAttributes(run, to: plugin, base: base, pc: pc)
  }

  /// The report's Image Timeline under `run --crash-dir` (issue 39): run-crash.c's "timeline" mode opens
  /// the plugin and libother.so after its start, closes them in the same order, then crashes. The audit
  /// module records the loads after `la_preinit` and the unloads from `la_objclose`; the helper reads them
  /// through the crash record. The report lists the four events, oldest first, before the crash and after
  /// the run began, by the main thread, with no image of the program's start; the JSON document carries
  /// the same events (valid under the schema) and `symbolicate` of that document writes the same section.
  @Test(.enabled(if: processTestHaveCC && gcc != nil && readelf != nil, "needs cc, gcc and readelf"))
  func timelineListsLoadsAndUnloadsInOrder() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-timeline")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: "cc", readelf: try #require(Self.readelf))
    var started = timespec(), ended = timespec()
    clock_gettime(CLOCK_MONOTONIC, &started)
    let run = try Self.crash("timeline", extra: ["--crash-wait", "--crash-document"],
                             environment: ["CRASH_PLUGIN": plugin.path, "CRASH_OTHER": plugin.other])
    clock_gettime(CLOCK_MONOTONIC, &ended)
    #expect(run.result.signal == SIGSEGV, "\(run.result.error)")
    let bases = run.result.output.split(separator: "\n").first { $0.hasPrefix("bases ") }?.split(separator: " ")
      .dropFirst().compactMap { UInt64($0.dropFirst(2), radix: 16) } ?? []
    try #require(bases.count == 2, "\(run.result.output)")
    let lines = try #require(TimelineLine.parse(report: run.text), "\(run.text)")
    let elapsed = Double(ended.tv_sec - started.tv_sec) * 1000 + Double(ended.tv_nsec - started.tv_nsec) / 1e6
    let problems = TimelineLine.problems(lines, first: "libplugin.so", firstBase: bases[0], second: "libother.so",
                                         secondBase: bases[1], tid: run.result.pid, withinMilliseconds: elapsed)
    #expect(problems.isEmpty, "\(problems)\n\(run.text)")

    let documentName = try #require(run.files.first { $0.hasSuffix(".json") }, "\(run.files)")
    let document = try #require(readFile(run.directory + "/" + documentName))
    if CrashDocumentSchema.unavailableReason == nil { #expect(try CrashDocumentSchema.problems(document) == []) }
    let events = try JSONValue.parse(document[...])["imageTimeline"]?.array ?? []
    #expect(events.map { $0["kind"]?.string ?? "" } == ["loaded", "loaded", "unloaded", "unloaded"]
            && events.map { $0["name"]?.string ?? "" } == ["libplugin.so", "libother.so", "libplugin.so", "libother.so"]
            && MinidumpCLI.hex(events.first?["baseAddress"]) == bases[0], "\(document.suffix(2000))")
    // Read back, the document writes the same section.
    let again = try runProcessTest([processTestImagelog, "symbolicate", run.directory + "/" + documentName],
                                   environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(again.exitStatus == 0, "\(again.error)")
    #expect(TimelineLine.parse(report: again.output) == lines, "\(again.output)")
  }

  /// The address the program printed last ("plugin_work 0x..." or "plugin_thread 0x...").
  static func printedAddress(_ run: Run) throws -> UInt64 {
    try #require(run.result.output.split(separator: " ").last.flatMap { UInt64($0.dropFirst(2).dropLast(), radix: 16) },
                 "\(run.result.output)")
  }

  /// The report's one Unloaded Images line, checked (the plugin's name, path, readelf's whole build-id,
  /// unloaded by the main thread), and the plugin's base address from it.
  static func unloadedPluginBase(_ run: Run, _ plugin: UnloadedPlugin) throws -> UInt64 {
    let lines = run.text.split(separator: "\n", omittingEmptySubsequences: false)
    let heading = try #require(lines.firstIndex(of: "Unloaded Images:"), "\(run.text)")
    let line = String(lines[heading + 1])
    let tokens = line.split(separator: " ", omittingEmptySubsequences: false)
    #expect(tokens.count > 7 && tokens[3] == "libplugin.so" && tokens[6] == "<\(plugin.buildID)>", "\(line)")
    #expect(line.contains("> \(plugin.path)  unloaded ") && line.contains(" ms before the crash by thread \(run.result.pid), loaded for "),
            "\(line)")
    #expect(lines.count > heading + 2 && lines[heading + 2].isEmpty, "one unloaded image: \(run.text)")
    return try #require(tokens.first.flatMap { UInt64($0.dropFirst(2), radix: 16) })
  }

  /// The value `nm -D` gives `symbol` in `path`.
  static func dynamicSymbolOffset(_ symbol: String, in path: String) throws -> UInt64 {
    let nm = try runProcessTest(["nm", "-D", path]).output
    return try #require(nm.split(separator: "\n").first { $0.hasSuffix(" " + symbol) }?.split(separator: " ").first
      .flatMap { UInt64($0, radix: 16) }, "\(nm)")
  }

  /// Walks the run's minidump with minidump-stackwalk (rust-minidump) and checks that it reads the plugin
  /// as its one unloaded module at `base`, and the crashing thread's frame 0 at `pc`, attributed to it.
  /// Returns the dump's path.
  @discardableResult
  static func expectStackwalkAttributes(_ run: Run, to plugin: UnloadedPlugin, base: UInt64, pc: UInt64) throws -> String {
    let dump = run.directory + "/" + (try #require(run.files.first { $0.hasSuffix(".dmp") }, "\(run.files)"))
    let walked = try runChild([try #require(MinidumpCLI.stackwalk), "--json", dump])
    try #require(walked.exitCode == 0, "\(walked.error)")
    let json = try JSONValue.parse(walked.output[...])
    let unloaded = json["unloaded_modules"]?.array ?? []
    #expect(unloaded.count == 1 && unloaded.first?["filename"]?.string == plugin.path
            && MinidumpCLI.hex(unloaded.first?["base_addr"]) == base, "\(walked.output.prefix(4000))")
    let frame = json["crashing_thread"]?["frames"]?.array?.first
    #expect(MinidumpCLI.hex(frame?["offset"]) == pc)
    let attributed = frame?["unloaded_modules"]?.array?.first
    #expect(attributed?["module"]?.string == plugin.path && attributed?["offsets"]?.array?.first.flatMap(MinidumpCLI.hex) == pc - base,
            "\(String(describing: frame))")
    return dump
  }

  /// When the helper cannot capture (ptrace refused), the audit module's own report lists the plugin and
  /// names the crashing frame after it, from the history it kept in `la_objclose`.
  @Test(.enabled(if: processTestHaveCC && gcc != nil && readelf != nil, "needs cc, gcc and readelf"))
  func moduleReportNamesTheUnloadedPlugin() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-unloaded")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: "cc", readelf: try #require(Self.readelf))
    let run = try Self.crash("unloaded", environment: ["CRASH_PLUGIN": plugin.path, "CRASH_FORBID_PTRACE": "1"])
    #expect(run.result.signal == SIGSEGV)
    #expect(run.result.error.contains("writing the report in process"), "\(run.result.error)")
    let called = try #require(run.result.output.split(separator: " ").last.flatMap { UInt64($0.dropFirst(2).dropLast(), radix: 16) },
                              "\(run.result.output)")
    let lines = run.text.split(separator: "\n", omittingEmptySubsequences: false)
    let heading = try #require(lines.firstIndex(of: "Unloaded Images:"), "\(run.text)")
    let tokens = lines[heading + 1].split(separator: " ", omittingEmptySubsequences: false)
    #expect(tokens.count > 7 && tokens[3] == "libplugin.so" && tokens[6] == "<\(plugin.buildID)>", "\(run.text)")
    let base = try #require(tokens.first.flatMap { UInt64($0.dropFirst(2), radix: 16) })
    let crashed = try #require(lines.firstIndex { $0.hasPrefix("Thread 0 Crashed:") }, "\(run.text)")
    #expect(lines[crashed + 1].hasPrefix("0   libplugin.so ")
            && lines[crashed + 1].contains(" 0x\(hexDigits(called, width: 16)) 0x\(hexDigits(base)) + \(called - base)  (unloaded ")
            && lines[crashed + 1].hasSuffix(" ms before the crash by thread \(run.result.pid))"), "\(run.text)")
  }

  /// `--unloaded-history 0` keeps none: the frame is in no image the report knows of. A count above 64
  /// is a usage error.
  @Test(.enabled(if: processTestHaveCC && gcc != nil && readelf != nil, "needs cc, gcc and readelf"))
  func unloadedHistoryCountIsTheUsers() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-unloaded")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: "cc", readelf: try #require(Self.readelf))
    let run = try Self.crash("unloaded", extra: ["--unloaded-history", "0", "--crash-wait"], environment: ["CRASH_PLUGIN": plugin.path])
    #expect(run.result.signal == SIGSEGV)
    #expect(!run.text.isEmpty && !run.text.contains("Unloaded Images:") && !run.text.contains("libplugin.so"), "\(run.text)")
    let usage = try runProcessTest([processTestImagelog, "run", "--unloaded-history", "65", "--", "true"])
    #expect(usage.exitStatus == 64)
    #expect(usage.error.hasPrefix("Error: '65' is not a count of images (0 to 64) for --unloaded-history\n"), "\(usage.error)")
  }

  /// Another library opened after the plugin was closed, mapped where it was (unloaded-other.c, int3
  /// where plugin_work was): frame 0 is named in that library, and the report says the plugin was there.
  @Test(.enabled(if: processTestHaveCC && gcc != nil && readelf != nil, "needs cc, gcc and readelf"))
  func libraryMappedWhereThePluginWasIsSaidBeside() throws {
    let directory = try makeTemporaryDirectory("imagelog-run-unloaded")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: "cc", readelf: try #require(Self.readelf))
    let run = try Self.crash("unloaded", extra: ["--crash-wait"], environment: ["CRASH_PLUGIN": plugin.path, "CRASH_OTHER": plugin.other])
    #expect(run.result.signal == SIGTRAP, "\(run.result.error)")
    let lines = run.text.split(separator: "\n", omittingEmptySubsequences: false)
    let crashed = try #require(lines.firstIndex { $0.hasPrefix("Thread 0 Crashed:") }, "\(run.text)")
    let frame0 = lines[crashed + 1]
    #expect(frame0.hasPrefix("0   libother.so ") && frame0.contains(" other_traps + ")
            && frame0.contains("  (libplugin.so was here, unloaded ")
            && frame0.hasSuffix(" ms before the crash by thread \(run.result.pid))"), "\(run.text)")
    #expect(run.text.contains("\nUnloaded Images:\n") && run.text.contains("<\(plugin.buildID)> \(plugin.path)  unloaded "), "\(run.text)")
  }
}
