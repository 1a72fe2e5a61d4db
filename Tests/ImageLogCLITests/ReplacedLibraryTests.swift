import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// Issue 39, deleted and replaced files: replaced-library.c opens its library (replaced-lib.c), then
/// renames another build over it, as a package upgrade does (or deletes it), and waits or crashes in
/// it. `/proc/PID/maps` then says `(deleted)`, and the file at the path is another build whose offsets
/// name other functions. While the process lives, imagelog reads the loaded file through its mapping
/// (`/proc/PID/map_files`): `pid --threads` names the frames as `eu-stack -p` does, and the crash
/// report of `run --crash-dir` names them too and says the file on disk is another build; later, a file
/// elsewhere with the same build-id (`--search`) names them.
@Suite struct ReplacedLibraryTests {
  /// The kernel opens `/proc/PID/map_files` entries only for `CAP_SYS_ADMIN` (or `CAP_CHECKPOINT_RESTORE`):
  /// tried on our own first mapping.
  static let canOpenMappings: Bool = {
    let folder = "/proc/self/map_files"
    guard let first = directoryEntries(folder).first(where: { !$0.hasPrefix(".") }) else { return false }
    let descriptor = open(folder + "/" + first, O_RDONLY | O_CLOEXEC)
    if descriptor >= 0 { close(descriptor) }
    return descriptor >= 0
  }()
  static let haveTools = haveTool("cc") && haveTool("readelf")
  static let reason = "needs cc, readelf and the right to open /proc/PID/map_files (CAP_SYS_ADMIN)"

  /// Both builds of the library, the program, and the original build kept aside for `--search`.
  struct Built {
    var directory: String
    var program: String
    var library: String
    var newBuild: String
    var kept: String
    var buildID: String
    var newBuildID: String
  }

  static func buildID(_ path: String) throws -> String {
    let notes = try runChild(["readelf", "-n", path])
    guard let line = notes.output.split(separator: "\n").first(where: { $0.contains("Build ID:") }),
          let id = line.split(separator: " ").last else { throw TestSupportError("readelf -n \(path): no build-id") }
    return String(id)
  }

  static func build() throws -> Built {
    let directory = try makeTemporaryDirectory("imagelog-replaced")
    let source = packageRoot + "/Tests/Programs/"
    let library = directory + "/libreplaced.so", newBuild = directory + "/libreplaced-new.so"
    mkdir(directory + "/kept", 0o755)
    let kept = directory + "/kept/libreplaced.so"
    let program = directory + "/replaced-library"
    for command in [["cc", "-g", "-shared", "-fPIC", "-Wl,--build-id=sha1", source + "replaced-lib.c", "-o", library],
                    ["cc", "-g", "-shared", "-fPIC", "-Wl,--build-id=sha1", "-DOTHER_BUILD", source + "replaced-lib.c", "-o", newBuild],
                    ["cp", library, kept],
                    ["cc", "-g", source + "replaced-library.c", "-o", program, "-ldl"]] {
      let result = try runChild(command)
      guard result.exitCode == 0 else { throw TestSupportError("\(command.joined(separator: " ")): \(result.error)") }
    }
    let built = Built(directory: directory, program: program, library: library, newBuild: newBuild, kept: kept,
                      buildID: try buildID(library), newBuildID: try buildID(newBuild))
    guard built.buildID != built.newBuildID else { throw TestSupportError("the two builds have one build-id") }
    return built
  }

  /// The summary's note for the library: what happened to its file, and where the symbols came from.
  static func note(_ text: String, _ built: Built) -> String? {
    text.split(separator: "\n").first { $0.hasPrefix("  note: \(built.library): not used: ") }.map(String.init)
  }

  @Test(.enabled(if: haveTools && haveTool("eu-stack") && canOpenMappings, .init(stringLiteral: reason + " and eu-stack")))
  func replacedWhileWaitingIsNamedFromTheMappingAsEuStackNamesIt() throws {
    let built = try Self.build()
    defer { _ = try? runChild(["rm", "-rf", built.directory]) }
    let child = try RunningChild([built.program, built.library, built.newBuild, "wait"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 1)
    #expect((readFile("/proc/\(child.pid)/maps") ?? "").contains("\(built.library) (deleted)"))

    // The frames in the library, named as eu-stack (which reads the mapping too) names them.
    let report = try PidThreadsCommandTests().expectSameStacksAsEuStack(child.pid, "replaced library")
    let names = report.frames.filter { $0.image == "libreplaced.so (deleted)" }.map(\.symbol)
    #expect(names == ["replaced_inner", "replaced_outer"], "\(report.frames.map { ($0.image, $0.symbol) })")

    // The text report: lines from the mapping's DWARF, and the note saying the disk holds another build.
    let text = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid)],
                                  environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(text.exitStatus == 0, "\(text.error)")
    #expect(text.output.contains(" replaced_inner + ") && text.output.contains("(replaced-lib.c:"), "\(text.output)")
    let note = try #require(Self.note(text.output, built), "\(text.output)")
    #expect(note.contains("replaced after it was loaded by another build (build-id \(built.newBuildID)); the loaded one has \(built.buildID): "
                          + "symbols from the mapping (/proc/\(child.pid)/map_files/"), "\(note)")
    // JSON: the image found through the mapping, named as the mapping it was opened through.
    let json = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid), "--format", "json"],
                                  environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    let document = try JSONValue.parse(json.output[...])
    let image = document["images"]?.array?.first { $0["name"]?.string == "libreplaced.so (deleted)" }
    #expect(image?["status"]?.string == "found" && image?["via"]?.string == "the mapping"
            && image?["file"]?.string?.hasPrefix("/proc/\(child.pid)/map_files/") == true, "\(json.output.prefix(3000))")
  }

  /// Without the right to open `/proc/PID/map_files` (as root: the program and imagelog both run as user
  /// 65534): the frames are not named from the other build on disk, and the note says why the mapping
  /// was not read.
  @Test(.droppedUserReaches(running: [processTestImagelog, "--version"]),
        .enabled(if: haveTools, "needs cc and readelf"))
  func withoutTheRightToOpenTheMappingTheNoteSaysWhy() throws {
    let built = try Self.build()
    defer { _ = try? runChild(["rm", "-rf", built.directory]) }
    let prefix = getuid() == 0 ? droppedUserPrefix : []
    chmod(built.directory, 0o777)  // the program, as that user, renames the new build over the library
    let child = try RunningChild(prefix + [built.program, built.library, built.newBuild, "wait"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 1)
    let text = try runProcessTest(prefix + [processTestImagelog, "pid", "--threads", String(child.pid)],
                                  environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(text.exitStatus == 0, "\(text.error)")
    #expect(!text.output.contains("replaced_inner") && !text.output.contains("replaced_new_feature"), "\(text.output)")
    let note = try #require(Self.note(text.output, built), "\(text.output)")
    #expect(note.contains("replaced after it was loaded by another build (build-id \(built.newBuildID)); ")
            && note.contains(": no file with its identity found; the mapping: /proc/\(child.pid)/map_files/")
            && note.hasSuffix(": cannot open: Operation not permitted (the kernel opens it for CAP_SYS_ADMIN only)"), "\(note)")
  }

  /// The library replaced by a copy of the same build: the file at its path is used, and the note says so.
  @Test(.enabled(if: haveTools && canOpenMappings, .init(stringLiteral: reason)))
  func replacedBySameBuildIsReadFromItsPath() throws {
    let built = try Self.build()
    defer { _ = try? runChild(["rm", "-rf", built.directory]) }
    let copy = built.directory + "/libreplaced-copy.so"
    #expect(try runChild(["cp", built.library, copy]).exitCode == 0)
    let child = try RunningChild([built.program, built.library, copy, "wait"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 1)
    let text = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid)],
                                  environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(text.output.contains(" replaced_inner + "), "\(text.output)")
    let note = try #require(Self.note(text.output, built), "\(text.output)")
    #expect(note.hasSuffix(": not used: replaced after it was loaded by a file of the same build: symbols from \(built.library) (recorded path)"),
            "\(note)")
  }

  @Test(.enabled(if: haveTools && canOpenMappings, .init(stringLiteral: reason)))
  func deletedWhileWaitingIsNamedFromTheMapping() throws {
    let built = try Self.build()
    defer { _ = try? runChild(["rm", "-rf", built.directory]) }
    let child = try RunningChild([built.program, built.library, "-", "wait"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 1)
    #expect(access(built.library, F_OK) != 0)
    let text = try runProcessTest([processTestImagelog, "pid", "--threads", String(child.pid)],
                                  environment: ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""]))
    #expect(text.exitStatus == 0, "\(text.error)")
    let lines = text.output.split(separator: "\n")
    #expect(lines.contains { $0.hasPrefix("1   libreplaced.so (deleted) ") && $0.contains(" replaced_inner + ") }, "\(text.output)")
    #expect(lines.contains { $0.hasPrefix("2   libreplaced.so (deleted) ") && $0.contains(" replaced_outer + ") }, "\(text.output)")
    let note = try #require(Self.note(text.output, built), "\(text.output)")
    #expect(note.contains(": not used: deleted after it was loaded: symbols from the mapping (/proc/\(child.pid)/map_files/"), "\(note)")
  }

  /// `core-handler` while the process it is given lives (as the kernel holds a dumping one; here a gcore
  /// of the waiting program, as CoreHandlerTests feed it): the frames named from the mapping, the note
  /// saying the disk holds another build.
  @Test(.enabled(if: haveTools && canOpenMappings && CoreFileTests.haveGcore, .init(stringLiteral: reason + " and gcore (gdb)")))
  func coreHandlerNamesFromTheMappingWhileTheProcessLives() throws {
    let built = try Self.build()
    defer { _ = try? runChild(["rm", "-rf", built.directory]) }
    let child = try RunningChild([built.program, built.library, built.newBuild, "wait"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 1)
    let core = try CoreFileTests.gcore(child.pid, in: built.directory)
    let reports = built.directory + "/reports"
    mkdir(reports, 0o755)
    let run = try CoreHandlerTests.handle(core, pid: child.pid, into: reports, ["--demangle", "none"])
    #expect(run.exitCode == 0, "\(run.error)")
    let report = try CoreHandlerTests.report(in: reports)
    let lines = report.split(separator: "\n")
    #expect(lines.contains { $0.hasPrefix("1   libreplaced.so (deleted) ") && $0.contains(" replaced_inner + ") }, "\(report)")
    #expect(lines.contains { $0.hasPrefix("2   libreplaced.so (deleted) ") && $0.contains(" replaced_outer + ") }, "\(report)")
    let note = try #require(Self.note(report, built), "\(report)")
    #expect(note.contains("replaced after it was loaded by another build (build-id \(built.newBuildID)); the loaded one has \(built.buildID): "
                          + "symbols from the mapping (/proc/\(child.pid)/map_files/"), "\(note)")
  }

  /// The crash under `run --crash-dir` (the program let go before symbolication, as by default: the
  /// mapping is held open by the helper): frames named, the note saying the disk holds another build.
  /// Then the minidump, read after the program is gone: named from the kept copy of the loaded build
  /// found with `--search` by its build-id, and without it, not named from the other build on disk.
  @Test(.enabled(if: haveTools && canOpenMappings, .init(stringLiteral: reason)))
  func replacedThenCrashingUnderRunIsNamed() throws {
    let built = try Self.build()
    defer { _ = try? runChild(["rm", "-rf", built.directory]) }
    let crashes = built.directory + "/crashes"
    mkdir(crashes, 0o755)
    let result = try runChild([processTestImagelog, "run", "--output", built.directory + "/log", "--crash-dir", crashes, "--",
                               built.program, built.library, built.newBuild, "crash"],
                              environment: ["DEBUGINFOD_URLS": ""], timeoutSeconds: 120)
    #expect(result.signal == SIGSEGV, "\(result.error)")
    let files = try finishedCrashDirectory(crashes, helperWrote: result.error.contains("report written to"))
    let report = try #require(files.first { $0.hasSuffix(".crash") }.flatMap { readFile(crashes + "/" + $0) }, "\(files) \(result.error)")
    let lines = report.split(separator: "\n", omittingEmptySubsequences: false)
    let crashed = try #require(lines.firstIndex { $0.hasPrefix("Thread 0 Crashed:") }, "\(report)")
    #expect(lines[crashed + 1].hasPrefix("0   libreplaced.so (deleted) ") && lines[crashed + 1].contains(" replaced_inner + ")
            && lines[crashed + 1].contains("(replaced-lib.c:"), "\(report)")
    #expect(lines[crashed + 2].hasPrefix("1   libreplaced.so (deleted) ") && lines[crashed + 2].contains(" replaced_outer + "), "\(report)")
    let note = try #require(Self.note(report, built), "\(report)")
    #expect(note.contains("replaced after it was loaded by another build (build-id \(built.newBuildID)); the loaded one has \(built.buildID): "
                          + "symbols from the mapping (/proc/"), "\(note)")

    // Later, from the minidump: the other build on disk is refused, the kept copy found by build-id.
    let dump = crashes + "/" + (try #require(files.first { $0.hasSuffix(".dmp") }, "\(files)"))
    let environment = ImageLogTestSupport.environment(applying: ["DEBUGINFOD_URLS": ""])
    let alone = try runProcessTest([processTestImagelog, "symbolicate", dump], environment: environment)
    #expect(!alone.output.contains("replaced_inner") && !alone.output.contains("replaced_new_feature"), "\(alone.output)")
    let aloneNote = try #require(Self.note(alone.output, built), "\(alone.output)")
    #expect(aloneNote.hasSuffix(": no file with its identity found"), "\(aloneNote)")
    let searched = try runProcessTest([processTestImagelog, "symbolicate", "--search", built.directory + "/kept", dump],
                                      environment: environment)
    #expect(searched.output.contains(" replaced_inner + ") && searched.output.contains(" replaced_outer + "), "\(searched.output)")
    let searchedNote = try #require(Self.note(searched.output, built), "\(searched.output)")
    #expect(searchedNote.hasSuffix(": symbols from \(built.kept) (--search)"), "\(searchedNote)")
  }
}
