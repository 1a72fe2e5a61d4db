import Glibc
import ImageLog
import ImageLogTestSupport
import Testing

/// Issue 39: a call into a plugin after `dlclose`. crash-program.c's "unloaded" mode (the crash handler's
/// C, its table fed as the Swift observers feed it) opens Tests/Programs/unloaded-plugin.c, closes it and
/// calls the pointer it kept: the in-process report lists the plugin under Unloaded Images with the
/// build-id `readelf -n` gives, and names it in the crashing frame, with when and by which thread it
/// went.
@Suite struct UnloadedImageTests {
  /// crash-program.c's "unloaded" mode (with `other`: CRASH_OTHER too), dead of `signal`: its result,
  /// report (path, text, parsed) and plugin.
  static func inProcessCrash(mode: String = "unloaded", other: Bool = false, signal: Int32 = SIGSEGV) throws
    -> (result: CrashTestSupport.ProcessResult, reportPath: String, text: String, report: ParsedCrashReport, plugin: UnloadedPlugin) {
    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let plugin = try UnloadedPlugin.build(in: directory, compiler: try #require(CrashHandlerTests.compiler),
                                          readelf: try #require(CrashHandlerTests.readelf))
    let reportPath = "\(directory)/report.crash"
    let result = try CrashTestSupport.run(program, [mode, reportPath, "\(directory)/maps"],
                                          environment: ["CRASH_PLUGIN": plugin.path].merging(other ? ["CRASH_OTHER": plugin.other] : [:]) { $1 },
                                          timeoutSeconds: 60)
    #expect(!result.timedOut, "the crash handler hung")
    #expect(result.terminationSignal == signal, "\(result.stdout)\(result.stderr)")
    let text = try #require(readFile(reportPath))
    return (result, reportPath, text, try ParsedCrashReport(text), plugin)
  }

  @Test(.enabled(if: CrashHandlerTests.compiler != nil && CrashHandlerTests.readelf != nil, "needs cc and readelf"))
  func inProcessReportNamesTheUnloadedPlugin() throws {
    let (result, reportPath, text, report, plugin) = try Self.inProcessCrash()
    // The pointer the program called, as it printed it: frame 0's pc.
    let called = try #require(result.stdout.split(separator: " ").last.flatMap { UInt64($0.dropFirst(2).dropLast(), radix: 16) })

    #expect(report.unloadedImages.count == 1, "\(text)")
    let line = try #require(report.unloadedImages.first)
    let tokens = line.split(separator: " ", omittingEmptySubsequences: false)
    #expect(tokens.count > 7 && tokens[3] == "libplugin.so" && tokens[6] == "<\(plugin.buildID)>", "\(line)")
    #expect(line.contains("> \(plugin.path)  unloaded "), "\(line)")
    #expect(line.contains(" ms before the crash by thread \(result.pid), loaded for "), "\(line)")
    let base = try #require(ParsedCrashReport.hex(tokens[0]))
    let last = try #require(ParsedCrashReport.hex(tokens[2]))
    #expect(base <= called && called <= last, "the called pc 0x\(String(called, radix: 16)) is in the plugin's range")

    let frame = try #require(report.frames.first)
    #expect(frame.address == called)
    #expect(frame.imageName == "libplugin.so" && frame.loadAddress == base, "\(text)")
    #expect(frame.unloaded?.hasPrefix("unloaded ") == true
            && frame.unloaded?.hasSuffix(" ms before the crash by thread \(result.pid)") == true, "\(text)")
    // Nothing of the plugin is mapped any more: it is not among the Binary Images.
    #expect(!report.images.contains { $0.name == "libplugin.so" })
    // imagelog symbolicate reads the section back and names the frame from the plugin's file.
    if let imagelog = CrashHandlerTests.imagelogWithSymbolicate {
      let symbolicated = try CrashTestSupport.run(imagelog, ["symbolicate", reportPath], environment: ["DEBUGINFOD_URLS": ""])
      #expect(symbolicated.exitCode == 0, "\(symbolicated.stderr)")
      #expect(symbolicated.stdout.contains("0x\(String(called, radix: 16).leftPadded(16)) plugin_work + 0  (unloaded "),
              "\(symbolicated.stdout)")
      #expect(symbolicated.stdout.contains("\nUnloaded Images:\n\(line)\n"), "\(symbolicated.stdout)")
    } else {
      Issue.record("imagelog symbolicate is not built beside the tests")
    }
  }

  /// A thread the plugin started and did not stop (crash-program.c's "unloaded-thread"): the plugin is
  /// closed while the thread waits in read(2), then the read is answered and the thread returns into
  /// unmapped memory. The crashed thread is that one, its frame 0 in the unloaded plugin, named from the
  /// plugin's file by `imagelog symbolicate` as `nm -D` places `plugin_thread`.
  @Test(.enabled(if: CrashHandlerTests.compiler != nil && CrashHandlerTests.readelf != nil, "needs cc and readelf"))
  func inProcessReportNamesThePluginsThread() throws {
    let (result, reportPath, text, report, plugin) = try Self.inProcessCrash(mode: "unloaded-thread")
    let function = try #require(result.stdout.split(separator: " ").last.flatMap { UInt64($0.dropFirst(2).dropLast(), radix: 16) },
                                "\(result.stdout)")
    #expect(!text.contains("Thread 0 Crashed:") && text.contains("\nThread 1 Crashed:  tid "), "the plugin's thread crashed: \(text)")
    #expect(report.unloadedImages.count == 1, "\(text)")
    let line = try #require(report.unloadedImages.first)
    let tokens = line.split(separator: " ", omittingEmptySubsequences: false)
    #expect(tokens.count > 7 && tokens[3] == "libplugin.so" && tokens[6] == "<\(plugin.buildID)>", "\(line)")
    #expect(line.contains(" ms before the crash by thread \(result.pid), loaded for "), "closed by the main thread: \(line)")
    let base = try #require(ParsedCrashReport.hex(tokens[0]))
    let frame = try #require(report.frames.first)
    #expect(frame.imageName == "libplugin.so" && frame.loadAddress == base, "\(text)")
    #expect(frame.unloaded?.hasSuffix(" ms before the crash by thread \(result.pid)") == true, "\(text)")
    // In plugin_thread, past its first byte: the thread ran there (it said so) before the plugin went.
    let nm = try runChild(["nm", "-D", plugin.path])
    let symbol = try #require(nm.output.split(separator: "\n").first { $0.hasSuffix(" plugin_thread") }?.split(separator: " ").first
      .flatMap { UInt64($0, radix: 16) })
    #expect(symbol == function - base, "nm -D: plugin_thread is where the program found it")
    #expect(frame.address > function && frame.address - function < 256, "\(text)")
    let imagelog = try #require(CrashHandlerTests.imagelogWithSymbolicate, "imagelog symbolicate is not built beside the tests")
    let symbolicated = try CrashTestSupport.run(imagelog, ["symbolicate", reportPath], environment: ["DEBUGINFOD_URLS": ""])
    #expect(symbolicated.exitCode == 0, "\(symbolicated.stderr)")
    #expect(symbolicated.stdout.contains(" 0x\(String(frame.address, radix: 16).leftPadded(16)) plugin_thread + \(frame.address - function)  (unloaded "),
            "\(symbolicated.stdout)")
  }

  /// Another library opened after the plugin was closed, mapped where it was (unloaded-other.c, int3
  /// where plugin_work was): the frame is in the mapped library, and the report says the plugin was there.
  @Test(.enabled(if: CrashHandlerTests.compiler != nil && CrashHandlerTests.readelf != nil, "needs cc and readelf"))
  func inProcessReportSaysWhatWasThereBefore() throws {
    let (result, _, text, report, plugin) = try Self.inProcessCrash(other: true, signal: SIGTRAP)
    let frame = try #require(report.frames.first)
    let other = try #require(report.images.first { $0.name == "libother.so" }, "\(text)")
    #expect(frame.imageName == "libother.so" && frame.loadAddress == other.start, "\(text)")
    #expect(frame.unloaded?.hasPrefix("libplugin.so was here, unloaded ") == true
            && frame.unloaded?.hasSuffix(" ms before the crash by thread \(result.pid)") == true, "\(text)")
    #expect(report.unloadedImages.count == 1 && report.unloadedImages.first?.contains("<\(plugin.buildID)>") == true, "\(text)")
  }

  /// The report's Image Timeline (issue 39): crash-program.c's "timeline" mode opens the plugin and
  /// libother.so, closes them in the same order, then dies. The timeline has those four events and no
  /// image of the program's start, oldest first, each before the crash and after the program began, by
  /// the main thread, each unload's "loaded for" the time between its two events.
  @Test(.enabled(if: CrashHandlerTests.compiler != nil && CrashHandlerTests.readelf != nil, "needs cc and readelf"))
  func inProcessReportHasTheTimeline() throws {
    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let plugin = try UnloadedPlugin.build(in: directory, compiler: try #require(CrashHandlerTests.compiler),
                                          readelf: try #require(CrashHandlerTests.readelf))
    let reportPath = "\(directory)/report.crash"
    var started = timespec(), ended = timespec()
    clock_gettime(CLOCK_MONOTONIC, &started)
    let result = try CrashTestSupport.run(program, ["timeline", reportPath, "\(directory)/maps"],
                                          environment: ["CRASH_PLUGIN": plugin.path, "CRASH_OTHER": plugin.other],
                                          timeoutSeconds: 60)
    clock_gettime(CLOCK_MONOTONIC, &ended)
    #expect(result.terminationSignal == SIGSEGV, "\(result.stdout)\(result.stderr)")
    let text = try #require(readFile(reportPath))
    let bases = result.stdout.split(separator: "\n").first { $0.hasPrefix("bases ") }?.split(separator: " ")
      .dropFirst().compactMap { UInt64($0.dropFirst(2), radix: 16) } ?? []
    try #require(bases.count == 2, "\(result.stdout)")
    let lines = try #require(TimelineLine.parse(report: text), "\(text)")
    let elapsed = Double(ended.tv_sec - started.tv_sec) * 1000 + Double(ended.tv_nsec - started.tv_nsec) / 1e6
    let problems = TimelineLine.problems(lines, first: "libplugin.so", firstBase: bases[0], second: "libother.so",
                                         secondBase: bases[1], tid: result.pid, withinMilliseconds: elapsed)
    #expect(problems.isEmpty, "\(problems)\n\(text)")
    // The section follows Unloaded Images.
    let unloaded = text.ranges(of: "\nUnloaded Images:\n").first, timeline = text.ranges(of: "\nImage Timeline:\n").first
    #expect(unloaded != nil && timeline != nil && unloaded!.upperBound < timeline!.lowerBound, "\(text)")
  }
}

/// `CrashReporter.install(helper:)` in a Swift program (this test binary, re-run as a child): the table the
/// library's observers keep records the plugin as it is closed, and the helper reads that history through
/// the crash record.
extension UnloadedImageTests {
  /// The child's helper report: the test binary re-run as `unloadedChild`, keeping `keep` removed images
  /// when given (`CrashReporter.keepUnloadedImages`).
  static func childReport(keep: Int? = nil) throws -> (text: String, plugin: UnloadedPlugin) {
    let executable = try #require(CrashReporterTests.selfExecutable())
    let directory = CrashTestSupport.makeTemporaryDirectory("imagelog-unloaded-swift")
    let plugin = try UnloadedPlugin.build(in: directory, compiler: try #require(CrashHandlerTests.compiler),
                                          readelf: try #require(CrashHandlerTests.readelf))
    let crashes = directory + "/crashes"
    mkdir(crashes, 0o755)
    var environment = ["IMAGELOG_UNLOADED_CHILD": crashes, "IMAGELOG_UNLOADED_PLUGIN": plugin.path, "DEBUGINFOD_URLS": "",
                       "SWIFT_BACKTRACE": "enable=no"]
    if let keep { environment["IMAGELOG_UNLOADED_KEEP"] = String(keep) }
    let result = try CrashTestSupport.run(executable, ["--testing-library", "swift-testing", "--filter", "unloadedChild"],
                                          environment: environment, timeoutSeconds: 300)
    #expect(!result.timedOut)
    #expect(result.terminationSignal == SIGSEGV, "\(result.stderr.suffix(2000))")
    let files = try finishedCrashDirectory(crashes, helperWrote: result.stderr.contains("report written to"))
    let report = try #require(files.first { $0.hasSuffix(".crash") }, "\(files)")
    return (try #require(readFile("\(crashes)/\(report)")), plugin)
  }

  @Test(.enabled(if: access(CrashHelperTests.imagelog, X_OK) == 0 && CrashHandlerTests.compiler != nil
                   && CrashHandlerTests.readelf != nil, "needs the built imagelog, cc and readelf"))
  func keepingNoUnloadedImagesListsNone() throws {
    let (text, _) = try Self.childReport(keep: 0)
    #expect(!text.contains("Unloaded Images:") && !text.contains("libplugin.so"), "\(text)")
    #expect(CrashReporter.keepUnloadedImages(65) == false && CrashReporter.keepUnloadedImages(-1) == false)
  }

  @Test(.enabled(if: access(CrashHelperTests.imagelog, X_OK) == 0 && CrashHandlerTests.compiler != nil
                   && CrashHandlerTests.readelf != nil, "needs the built imagelog, cc and readelf"))
  func helperReportOfTheLibraryNamesTheUnloadedPlugin() throws {
    let (text, plugin) = try Self.childReport()
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    let heading = try #require(lines.firstIndex(of: "Unloaded Images:"), "\(text)")
    let line = lines[heading + 1]
    let tokens = line.split(separator: " ", omittingEmptySubsequences: false)
    #expect(tokens.count > 7 && tokens[3] == "libplugin.so" && tokens[6] == "<\(plugin.buildID)>", "\(line)")
    #expect(line.contains("> \(plugin.path)  unloaded ") && line.contains(" ms before the crash by thread "), "\(line)")
    let crashed = try #require(lines.firstIndex { $0.hasPrefix("Thread ") && $0.contains(" Crashed:") }, "\(text)")
    let frame0 = lines[crashed + 1]
    #expect(frame0.hasPrefix("0   libplugin.so ") && frame0.contains(" plugin_work + 0  (unloaded "), "\(text)")
    // The Image Timeline (CrashReporter.install(helper:)): the plugin's load then its unload, at the
    // Unloaded Images line's address, before the crash and in order; no image of the test's start.
    let timeline = try #require(TimelineLine.parse(report: text), "\(text)")
    let base = try #require(tokens.first.flatMap { UInt64($0.dropFirst(2), radix: 16) })
    #expect(timeline.map { "\($0.kind) \($0.name)" } == ["loaded libplugin.so", "unloaded libplugin.so"]
            && timeline.allSatisfy { $0.base == base && $0.milliseconds <= 0 }
            && timeline.map(\.milliseconds) == timeline.map(\.milliseconds).sorted(), "\(text)")
  }
}

/// Runs only in the child started by `helperReportOfTheLibraryNamesTheUnloadedPlugin`.
@Suite struct UnloadedImageChild {
  @Test(.enabled(if: getenv("IMAGELOG_UNLOADED_CHILD") != nil, "only in a child process"))
  func unloadedChild() throws {
    try CrashReporter.install(helper: CrashHelperTests.imagelog,
                              crashDirectory: String(cString: getenv("IMAGELOG_UNLOADED_CHILD")!))
    if let keep = getenv("IMAGELOG_UNLOADED_KEEP").flatMap({ Int(String(cString: $0)) }) {
      #expect(CrashReporter.keepUnloadedImages(keep))
    }
    let handle = try #require(dlopen(getenv("IMAGELOG_UNLOADED_PLUGIN"), RTLD_NOW))
    let symbol = try #require(dlsym(handle, "plugin_work"))
    let work = unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
    dlclose(handle)
    _ = work(1)
  }
}

extension String {
  /// The string with leading zeros up to `width` characters.
  fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
