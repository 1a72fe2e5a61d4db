#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing

/// README.md's "The crash pipeline" example: ReadmePipelineExample.swift is that block, byte for byte; it
/// runs against a live process (its names checked against eu-stack's), and compiles as a program outside
/// the package would compile it, where only `public` declarations are visible.
@Suite(.serialized) struct LibraryPipelineTests {
  static let examplePath = packageRoot + "/Tests/SymbolicationTests/ReadmePipelineExample.swift"

  /// The ```swift block under README.md's "### The crash pipeline" heading.
  static func readmeBlock() throws -> String {
    let readme = try #require(readFile(packageRoot + "/README.md"))
    var block: [Substring] = []
    var state = 0  // 0: before the heading, 1: before the block, 2: in it
    for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
      switch state {
      case 0: if line.hasPrefix("### The crash pipeline") { state = 1 }
      case 1: if line == "```swift" { state = 2 }
      default:
        if line == "```" { return block.map { $0 + "\n" }.joined() }
        block.append(line)
      }
    }
    throw TestSupportError("README.md has no ```swift block under '### The crash pipeline'")
  }

  @Test func theExampleIsTheReadmesBlock() throws {
    #expect(try Self.readmeBlock() == readFile(Self.examplePath))
  }

  @Test(.enabled(if: haveTool("cc") && haveTool("eu-stack"), "cc or eu-stack (elfutils) missing"))
  func theExampleExplainsALiveProcess() throws {
    let directory = try makeTemporaryDirectory("imagelog-library-pipeline")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let child = try RunningChild([try buildThreadsProgram(in: directory), "2"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 3)

    // What the example prints to standard output, caught in a file.
    let outputPath = directory + "/output"
    fflush(nil)
    let saved = dup(1)
    let file = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    try #require(saved >= 0 && file >= 0)
    dup2(file, 1)
    close(file)
    var thrown: (any Error)?
    do { try explain(pid: child.pid, reportText: "") } catch { thrown = error }
    fflush(nil)
    dup2(saved, 1)
    close(saved)
    #expect(thrown == nil, "\(String(describing: thrown))")
    let output = try #require(readFile(outputPath))
    let lines = output.split(separator: "\n", omittingEmptySubsequences: false)

    // Thread 0's frames: "NUMBER NAME LINE"; process-threads' main thread waits in pause under main_waits.
    let mainNames = lines.prefix { !$0.hasPrefix("Process:") }.compactMap { line -> String? in
      let words = line.split(separator: " ")
      return words.count == 3 ? String(words[1]) : nil
    }
    #expect(mainNames.starts(with: ["pause", "main_waits", "main"]), "\(output)")
    let euStack = try runTool(["eu-stack", "-p", "\(child.pid)"])
    let theirs = EuStackThread.parse(euStack.output).first { $0.tid == child.pid }
    let theirNames = theirs?.frames.prefix(3).map { $0.name.map(unversionedSymbol) } ?? []
    #expect(theirNames == mainNames.prefix(3).map { Optional($0) }, "\(euStack.output)")

    // The report, then the minidump's size.
    #expect(output.contains("Process:         process-threads [\(child.pid)]") && output.contains("\nBinary Images:\n"), "\(output)")
    let size = lines.last { !$0.isEmpty }.flatMap { Int($0) }
    #expect(size.map { $0 > 0 && $0 < 256 << 10 } == true, "\(output.suffix(200))")
    #expect(noThreadStopped(child.pid))
  }

  /// Type-checked as an outside program: the built modules, no package name.
  @Test(.enabled(if: haveTool("swiftc"), "swiftc missing"))
  func theExampleCompilesOutsideThePackage() throws {
    let built = String(builtProduct("x").dropLast(2))
    // Only the C modules ProcessInspection imports: the pipeline needs none of ImageLog's (CImageLog).
    let mapNames = ["CImageLogProcess", "CImageLogUnwind"]
    var arguments = ["swiftc", "-typecheck", "-I", built + "/Modules"]
    // A target with a module map of its own (CImageLogImage's leaves a header out) has no generated one.
    let maps = mapNames.map { name in
      let own = "\(packageRoot)/Sources/\(name)/include/module.modulemap"
      return access(own, R_OK) == 0 ? own : "\(built)/\(name).build/module.modulemap"
    }
    for (name, map) in zip(mapNames, maps) {
      arguments += ["-Xcc", "-fmodule-map-file=\(map)", "-Xcc", "-I\(packageRoot)/Sources/\(name)/include"]
    }
    try #require(maps.allSatisfy { access($0, R_OK) == 0 }, "the build's module maps are missing: \(maps)")
    let run = try runTool(arguments + [Self.examplePath])
    #expect(run.status == 0, "\(run.output)\(run.error)")
  }
}
