import FoundationEssentials
import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// Runs the built `imagelog` (next to this test bundle in .build/<triple>/debug) with `arguments`.
fileprivate func runImagelog(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
  guard access(imagelogBinary, X_OK) == 0 else {
    throw ListTestError("\(imagelogBinary) is not built: run `swift build` (make test does) before these tests")
  }
  return try runListTool([imagelogBinary] + arguments)
}

fileprivate let imagelogBinary = builtProduct("imagelog")

fileprivate func runListTool(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
  let result = try runChild(arguments)
  return (result.exitCode ?? 128 + (result.signal ?? 0), result.output, result.error)
}

fileprivate struct ListTestError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

fileprivate func lines(_ text: String) -> [Substring] { text.split(separator: "\n") }

fileprivate func readelfBuildIDOf(_ path: String) throws -> String? {
  let result = try runListTool(["readelf", "-n", path])
  for line in lines(result.output) {
    let tokens = line.split(separator: " ")
    if let index = tokens.firstIndex(of: "ID:"), index > 0, tokens[index - 1] == "Build", index + 1 < tokens.count {
      return String(tokens[index + 1])
    }
  }
  return nil
}

fileprivate let haveReadelf = (try? runListTool(["sh", "-c", "command -v readelf"]).status) == 0

fileprivate struct ListedImage: Decodable {
  var event: String
  var path: String
  var name: String
  var loadAddress: String
  var textEnd: String
  var buildID: String?
  var architecture: String
  var isMainExecutable: Bool
}

@Suite("imagelog list")
struct ListCommandTests {
  /// `0xSTART - 0xEND [+]name arch  <32 hex> path`, split into its parts.
  fileprivate func crashFields(_ line: Substring) -> (start: UInt64, end: UInt64, name: String, id: String, path: String)? {
    let parts = line.split(separator: " ", maxSplits: 6, omittingEmptySubsequences: false)
    guard parts.count == 7, parts[1] == "-", parts[5] == "", parts[6].hasPrefix("<"),
          let close = parts[6].firstIndex(of: ">"),
          let start = UInt64(parts[0].dropFirst(2), radix: 16), let end = UInt64(parts[2].dropFirst(2), radix: 16)
    else { return nil }
    let id = String(parts[6][parts[6].index(after: parts[6].startIndex)..<close])
    return (start, end, String(parts[3]), id, String(parts[6][parts[6].index(close, offsetBy: 2)...]))
  }

  @Test func noArgumentsListsOwnImagesInCrashStyle() throws {
    let result = try runImagelog([])
    #expect(result.status == 0)
    #expect(result.error.isEmpty)
    let listed = lines(result.output)
    #expect(listed.count > 3)
    let fields = listed.compactMap(crashFields)
    #expect(fields.count == listed.count, "every line has the crash shape")
    let main = try #require(fields.first)
    #expect(main.name == "+imagelog")
    #expect(main.path == imagelogBinary)
    #expect(main.start < main.end)
    #expect(fields.filter { $0.name.hasPrefix("+") }.count == 1)
    #expect(fields.contains { $0.path == "[vdso]" && $0.name == "[vdso]" })
    #expect(fields.contains { $0.name.hasPrefix("libc.so") })
    #expect(fields.allSatisfy { $0.id.count == 32 })
    // The same images with the subcommand word.
    let named = try runImagelog(["list"])
    #expect(named.status == 0)
    #expect(lines(named.output).compactMap(crashFields).map(\.path) == fields.map(\.path))
  }

  @Test(.enabled(if: haveReadelf, "readelf is not installed"))
  func buildIDsAgreeWithReadelfAndFullBuildIDsPrintsThemWhole() throws {
    let short = lines(try runImagelog([]).output).compactMap(crashFields)
    let full = lines(try runImagelog(["--full-build-ids"]).output).compactMap(crashFields)
    #expect(short.count == full.count)
    for image in full where image.path.hasPrefix("/") {
      let readelf = try readelfBuildIDOf(image.path)
      #expect(image.id == readelf, "\(image.path)")
      #expect(short.first { $0.path == image.path }?.id == readelf.map { String($0.prefix(32)) })
    }
  }

  /// A run over a few files is mostly start-up, so the executable keeps out what runs code at every
  /// start: libdispatch's initializer (it reads /sys/devices/system/cpu/possible twice), which comes
  /// with the Concurrency runtime (`ContinuousClock`, `Task`) or with Dispatch; and a dynamic symbol
  /// table of every Swift symbol, which the runtime's start-up dladdr scans.
  @Test(.enabled(if: haveReadelf, "readelf is not installed"))
  func executableLinksNeitherDispatchNorTheConcurrencyRuntime() throws {
    let symbols = try runListTool(["readelf", "-sW", imagelogBinary])
    try #require(symbols.status == 0)
    let names = Set(lines(symbols.output).compactMap { $0.split(separator: " ").last.map(String.init) })
    #expect(names.contains("main"))
    for unwanted in ["libdispatch_init", "dispatch_async_f", "swift_task_create", "swift_job_run"] {
      #expect(!names.contains(unwanted), "\(unwanted) is linked into \(imagelogBinary)")
    }
    // CommandLine's argv comes from CImageLogMain (argv.c): the runtime's member that scans
    // /proc/self/maps at every start (its static initializer) is not linked in.
    #expect(names.contains("_swift_stdlib_getUnsafeArgvArgc"))
    #expect(!names.contains("_GLOBAL__sub_I_CommandLine.cpp"), "the runtime's argv grabber is linked into \(imagelogBinary)")
    // Its dynamic symbol table (StaticLink/exports.map) defines the interposers and no Swift symbol.
    let dynamic = try runListTool(["readelf", "--dyn-syms", "-W", imagelogBinary])
    try #require(dynamic.status == 0)
    let defined = lines(dynamic.output).filter { !$0.contains(" UND ") }.compactMap { $0.split(separator: " ").last.map(String.init) }
    #expect(Set(["dlopen", "dlmopen", "dlclose"]).isSubset(of: Set(defined)))
    #expect(!defined.contains { $0.hasPrefix("$s") }, "\(defined.filter { $0.hasPrefix("$s") }.prefix(3))")
  }

  /// Every argument reaches the command as given (spaces, tabs, non-ASCII, empty, option-like after
  /// `--`), in order: CommandLine's argv comes from argv.c, not from the runtime's own grabber.
  @Test func argumentsArriveAsGiven() throws {
    let odd = ["/nonexistent/a b", "/nonexistent/tab\there", "/nonexistent/ünïcødé", "", "/nonexistent/" + String(repeating: "x", count: 300),
               "-looks-like-an-option"]
    let run = try runImagelog(["file", "--"] + odd)
    #expect(run.status == 1)
    // Diagnostics escape control characters (the tab) as every text style does; the rest arrives as given.
    #expect(lines(run.error) == odd.map { "imagelog: \(TextEscaping.escaped($0)): cannot open: No such file or directory" })
    #expect(lines(run.error)[1] == "imagelog: /nonexistent/tab\\there: cannot open: No such file or directory")
  }

  @Test func everyFormat() throws {
    let crash = lines(try runImagelog(["--format", "crash"]).output)
    #expect(crash.compactMap(crashFields).count == crash.count)

    let logger = try runImagelog(["--format", "logger"])
    #expect(logger.status == 0)
    let loggerLines = lines(logger.output)
    #expect(loggerLines.count == crash.count)
    #expect(loggerLines.allSatisfy { $0.hasPrefix("Added: 0x") && $0.contains(" (0x") && $0.hasSuffix(">") })
    #expect(loggerLines.first?.contains(" \(imagelogBinary) <") == true)

    let unstrip = try runImagelog(["--format=unstrip"])
    #expect(unstrip.status == 0)
    let unstripLines = lines(unstrip.output)
    #expect(unstripLines.count == crash.count)
    for line in unstripLines {
      let columns = line.split(separator: " ")
      #expect(columns.count == 5, "\(line)")
      #expect(columns[0].hasPrefix("0x") && columns[0].contains("+0x"))
      #expect(columns[1] == "-" || columns[1].contains("@0x"))
      #expect(columns[3] == "-")
    }

    let json = try runImagelog(["--format", "json"])
    #expect(json.status == 0)
    let decoded = try lines(json.output).map { try JSONDecoder().decode(ListedImage.self, from: Data($0.utf8)) }
    #expect(decoded.count == crash.count)
    #expect(decoded.first?.isMainExecutable == true && decoded.first?.path == imagelogBinary)
    #expect(decoded.dropFirst().allSatisfy { !$0.isMainExecutable && $0.event == "added" })
  }

  @Test func usageErrorsExit64() throws {
    for arguments in [["--bogus"], ["--format", "nope"], ["list", "extra"], ["--format"]] {
      let result = try runImagelog(arguments)
      #expect(result.status == 64, "\(arguments)")
      #expect(result.output.isEmpty, "\(arguments)")
      #expect(result.error.contains("Usage: imagelog"), "\(arguments)")
    }
    #expect(try runImagelog(["--bogus"]).error.hasPrefix("Error: Unknown option '--bogus'"))
  }

  @Test func helpAndVersion() throws {
    let help = try runImagelog(["list", "--help"])
    #expect(help.status == 0)
    #expect(help.output.contains("--format <style>"))
    #expect(help.output.contains("--full-build-ids"))
    #expect(try runImagelog(["help", "list"]).output == help.output)
    let version = try runImagelog(["--version"])
    #expect(version.status == 0 && !version.output.isEmpty)
  }
}
