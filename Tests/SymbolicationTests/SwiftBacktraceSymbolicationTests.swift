import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders

/// Crashes real Swift programs with Swift's backtracer set to `symbolicate=off`, symbolicates the
/// report with imagelog, and checks the crashed thread against the backtracer's own
/// `symbolicate=full` output for the same crash: function names, offsets, and file:line:column.
@Suite(.enabled(if: CrashPrograms.haveCompilers, "needs swiftc and clang to build the crash program"))
struct SwiftBacktraceSymbolicationTests {
  @Test(arguments: CrashPrograms.modes)
  func matchesTheBacktracer(mode: String) throws {
    let unsymbolicated = try CrashPrograms.crash(mode, symbolicate: "off")
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash(mode, symbolicate: "full"))
    try #require(!expected.isEmpty, "the backtracer printed no symbolicated frames")

    let report = try ReportParser.parse(unsymbolicated)
    #expect(report.format == .swiftBacktrace)
    #expect(report.problems.isEmpty, "\(report.problems)")
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    let crashed = try #require(report.crashedThreadNumber)

    var actual: [CrashPrograms.ExpectedFrame] = []
    for (frame, answer) in zip(report.frames, result.frames) where frame.thread == crashed {
      guard let real = answer.functions.last else { continue }
      var location: String?
      if let file = real.file, let line = real.line { location = "\(file):\(line):\(real.column ?? 0)" }
      actual.append(.init(index: frame.index, name: real.name ?? "???", offset: Int(real.offset ?? 0), location: location))
    }
    #expect(actual.map(\.name) == expected.map(\.name))
    #expect(actual.map(\.offset) == expected.map(\.offset))
    for (ours, theirs) in zip(actual, expected) where theirs.location != nil {
      #expect(sameLocation(ours.location, theirs.location), "frame \(ours.index)")
    }

    // The in-place rendering prints the same frame text as the backtracer does.
    let rendered = CrashPrograms.crashedThreadFrames(result.formatted(.report))
    #expect(rendered.map(\.name) == expected.map(\.name))
    #expect(rendered.map(\.offset) == expected.map(\.offset))
    #expect(zip(rendered, expected).allSatisfy { sameLocation($0.location, $1.location) })
    #expect(result.formatted(.report).contains("0 missing, 0 mismatched"))
  }

  /// imagelog's own report layout (the README's crash report section), written from the same crash: Binary Images carry the
  /// 16-byte UUID prefix of each 20-byte build-id, frames are `0xBASE + decimal offset`.
  @Test func imagelogReportOfTheSameCrash() throws {
    let unsymbolicated = try CrashPrograms.crash("null", symbolicate: "off")
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash("null", symbolicate: "full"))
    let backtrace = try ReportParser.parse(unsymbolicated)
    let text = imagelogReport(from: backtrace)
    let report = try ReportParser.parse(text)
    #expect(report.format == .imagelog)
    #expect(report.images.count == backtrace.images.count)
    #expect(report.problems.isEmpty, "\(report.problems)")
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    #expect(result.frames.map { $0.functions.last?.name ?? "???" } == expected.map(\.name))
    let rendered = result.formatted(.report)
    // Apple's layout: `name + offset (file:line)`, the offset from the return address itself.
    for (frame, expectation) in zip(report.frames, expected) {
      let shown = expectation.location.map { location -> String in
        let parts = location.split(separator: ":")
        return " (\(parts[0].split(separator: "/").last ?? ""):\(parts[1]))"
      } ?? ""
      let offset = expectation.offset + (frame.isReturnAddress ? 1 : 0)
      #expect(rendered.contains("\(expectation.name) + \(offset)\(shown)"), "\(rendered)")
    }
  }

  /// The backtracer's JSON format: frames filled in exactly as `symbolicate=full,format=json` fills them.
  @Test func jsonFormatMatchesTheBacktracer() throws {
    let off = try CrashPrograms.crash("index", symbolicate: "off,format=json")
    let full = try CrashPrograms.crash("index", symbolicate: "full,format=json")
    let report = try ReportParser.parse(off)
    #expect(report.format == .swiftBacktraceJSON)
    #expect(report.problems.isEmpty, "\(report.problems)")
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let ours = try SwiftBacktraceJSONParser.parse(Symbolicator.symbolicated(report, options: options).formatted(.report)).document?.swiftDocument
    let theirs = try SwiftBacktraceJSONParser.parse(full).document?.swiftDocument
    func frames(_ document: JSONValue?) -> [JSONValue] {
      (document?["threads"]?.array?.first { $0["crashed"] == .bool(true) }?["frames"]?.array ?? []).map { frame in
        var copy = frame
        copy.remove("address")  // each run has its own addresses
        if case .object(let location)? = frame["sourceLocation"], case .string(let file)? = frame["sourceLocation"]?["file"] {
          // llvm-symbolizer joins a relative DW_AT_name to DW_AT_comp_dir; the backtracer does not.
          copy.set("sourceLocation", .object(location.map { $0.0 == "file" ? ("file", .string(file.split(separator: "/").suffix(3).joined(separator: "/"))) : $0 }))
        }
        return copy
      }
    }
    let expected = frames(theirs)
    try #require(!expected.isEmpty)
    #expect(frames(ours) == expected)
  }

  /// An image list as imagelog's formatter writes it (crash, logger and unstrip styles) followed by
  /// bare addresses: the same names as the backtracer's.
  @Test(arguments: ["crash", "logger", "unstrip"])
  func formatterImageListWithAddresses(style: String) throws {
    let backtrace = try ReportParser.parse(try CrashPrograms.crash("null", symbolicate: "off"))
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash("null", symbolicate: "full"))
    var text = ""
    for image in backtrace.images {
      let id = try #require(image.identity)
      let end = image.endAddress ?? image.loadAddress
      let path = image.path ?? image.name
      switch style {
      case "crash": text += "0x\(hexDigits(image.loadAddress)) - 0x\(hexDigits(end)) \(image.name) x86_64  <\(BuildID(id.bytes).compactUUID)> \(path)\n"
      case "logger": text += "Added: 0x\(hexDigits(image.loadAddress)) (0x\(hexDigits(end - image.loadAddress + 1))) \(path) <\(BuildID(id.bytes).uuid)>\n"
      default: text += "0x\(hexDigits(image.loadAddress))+0x\(hexDigits(end - image.loadAddress + 1)) \(id.hex)@0x\(hexDigits(image.loadAddress + 0x318)) \(path) - \(path)\n"
      }
    }
    // Lookups are as for a PC: give the return addresses' calls (address - 1), as a script would.
    for frame in backtrace.frames where frame.thread == backtrace.crashedThreadNumber {
      text += "0x" + hexDigits(frame.isReturnAddress ? frame.address - 1 : frame.address) + "\n"
    }
    let report = try ReportParser.parse(text)
    #expect(report.format == .addresses)
    #expect(report.images.count == backtrace.images.count)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    #expect(result.resolutions.allSatisfy { if case .found = $0.status { true } else { false } })
    #expect(result.frames.map { $0.functions.last?.name ?? "???" } == expected.map(\.name))
  }

  /// A report image whose identity differs from the file at its path: never used, reported with both ids.
  @Test func wrongIdentityIsAMismatch() throws {
    let unsymbolicated = try CrashPrograms.crash("null", symbolicate: "off")
    var backtrace = try ReportParser.parse(unsymbolicated)
    let real = try #require(backtrace.images[0].identity)
    backtrace.images[0].identity = ImageIdentity("0123456789abcdef0123456789abcdef")
    let report = try ReportParser.parse(imagelogReport(from: backtrace))
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    for (frameIndex, answer) in result.frames.enumerated() {
      guard case let .mismatch(reportID, fileID, _) = answer.status else {
        Issue.record("frame \(frameIndex) is \(answer.status), not a mismatch")
        continue
      }
      #expect(reportID == "0123456789abcdef0123456789abcdef")
      #expect(fileID == real.hex)
    }
    let rendered = result.formatted(.report)
    #expect(rendered.contains("[UUID mismatch: report 0123456789abcdef0123456789abcdef, file \(real.hex)"))
    #expect(rendered.contains("  mismatch:   symbolicate-crasher report <0123456789abcdef0123456789abcdef> file <\(real.hex)>"))
    #expect(rendered.contains("1 mismatched"))
  }

  /// The report's binary is stripped; the symbols and lines come from its separate debug file, found in a
  /// `.build-id` tree by the build-id alone, in the debuginfod client cache, and in a `--search` folder.
  @Test(.enabled(if: haveTool("llvm-objcopy-14") || haveTool("objcopy"), "needs objcopy"))
  func strippedBinaryWithSeparateDebugFile() throws {
    let original = try CrashPrograms.crasher.get()
    let expected = CrashPrograms.crashedThreadFrames(try CrashPrograms.crash("null", symbolicate: "full"))
    let directory = try makeTemporaryDirectory()
    let objcopy = haveTool("llvm-objcopy-14") ? "llvm-objcopy-14" : "objcopy"
    let stripped = directory + "/symbolicate-crasher"
    let debug = directory + "/crasher.debug"
    #expect(try runChild([objcopy, "--only-keep-debug", original, debug]).status == 0)
    #expect(try runChild([objcopy, "--strip-all", original, stripped]).status == 0)
    let result0 = try runChild([stripped, "null"], environment: ["SWIFT_BACKTRACE": "enable=yes,interactive=no,symbolicate=off,color=no"])
    let report = try ReportParser.parse(result0.error)
    let crasherImage = try #require(report.images.first { $0.name == "symbolicate-crasher" })
    let identity = try #require(crasherImage.identity)

    // A .build-id tree: xx/yyyy.debug
    let tree = directory + "/debugroot"
    let hex = identity.hex
    #expect(try runChild(["mkdir", "-p", tree + "/.build-id/" + hex.prefix(2)]).status == 0)
    #expect(try runChild(["cp", debug, tree + "/.build-id/" + hex.prefix(2) + "/" + hex.dropFirst(2) + ".debug"]).status == 0)
    let cache = directory + "/debuginfod_client"
    #expect(try runChild(["mkdir", "-p", cache + "/" + hex]).status == 0)
    #expect(try runChild(["cp", debug, cache + "/" + hex + "/debuginfo"]).status == 0)
    // A debug link beside the binary: `objcopy --add-gnu-debuglink`, as distributions ship.
    let linked = directory + "/linked"
    #expect(try runChild(["mkdir", "-p", linked + "/.debug"]).status == 0)
    #expect(try runChild(["cp", debug, linked + "/.debug/crasher.debug"]).status == 0)
    #expect(try runChild([objcopy, "--add-gnu-debuglink=" + debug, stripped, linked + "/symbolicate-crasher"]).status == 0)
    for place in ["tree", "debuginfod", "search", "debuglink"] {
      var options = SymbolicationOptions()
      if place == "tree" {
        options.buildIDDirectories = [tree]
        options.debuginfodCaches = []
      } else if place == "debuginfod" {
        options.buildIDDirectories = []
        options.debuginfodCaches = [cache]
      } else if place == "debuglink" {
        options.systemDirectories = false
      } else {
        options.systemDirectories = false
        let search = directory + "/search"
        #expect(try runChild(["mkdir", "-p", search + "/deep/er"]).status == 0)
        #expect(try runChild(["cp", debug, search + "/deep/er/crasher.debug"]).status == 0)
        options.searchPaths = [search]
      }
      var placed = report
      if place == "debuglink" {
        for index in placed.images.indices where placed.images[index].name == "symbolicate-crasher" {
          placed.images[index].path = linked + "/symbolicate-crasher"
        }
      }
      let result = Symbolicator.symbolicated(placed, options: options)
      let names = zip(report.frames, result.frames).filter { $0.0.thread == report.crashedThreadNumber }.map { $0.1.functions.last?.name ?? "???" }
      #expect(names == expected.map(\.name), "\(place)")
      let lines = result.frames.compactMap { $0.functions.last?.line }
      #expect(lines.count == expected.compactMap(\.location).count, "\(place)")
    }
  }

  /// The backtracer prints a relative DW_AT_name as it is; llvm-symbolizer joins it to DW_AT_comp_dir.
  func sameLocation(_ ours: String?, _ theirs: String?) -> Bool {
    guard let ours, let theirs else { return ours == theirs }
    return ours == theirs || (!theirs.hasPrefix("/") && ours.hasSuffix("/" + theirs))
  }

  func imagelogReport(from backtrace: ProcessSnapshot) -> String {
    var text = """
      Process:         symbolicate-crasher [12345]
      Path:            /tmp/symbolicate-crasher
      Date/Time:       2026-11-23 09:00:00 +0000
      OS Version:      Linux 6.1.0 x86_64
      Exception Type:  SIGSEGV (SEGV_MAPERR)
      Exception Codes: signal 11, code 1, address 0x0000000000000000
      Crashed Thread:  0  tid 12345

      Thread 0 Crashed:

      """
    for frame in backtrace.frames where frame.thread == backtrace.crashedThreadNumber {
      let image = backtrace.images[frame.imageIndex ?? 0]
      let name = image.name + String(repeating: " ", count: max(1, 30 - image.name.count))
      text += "\(frame.index)" + String(repeating: " ", count: 4 - "\(frame.index)".count) + name
      text += "0x" + hexDigits(frame.address, width: 16) + " 0x" + hexDigits(image.loadAddress)
      text += " + \(frame.address - image.loadAddress)\n"
    }
    text += "\nBinary Images:\n"
    for (index, image) in backtrace.images.enumerated() {
      let uuid = image.identity.map { BuildID($0.bytes).compactUUID } ?? String(repeating: "0", count: 32)
      text += "0x\(hexDigits(image.loadAddress)) - 0x\(hexDigits(image.endAddress ?? image.loadAddress)) "
      text += (index == 0 ? "+" : "") + image.name + " x86_64  <\(uuid)> \(image.path ?? "???")\n"
    }
    return text
  }
}
