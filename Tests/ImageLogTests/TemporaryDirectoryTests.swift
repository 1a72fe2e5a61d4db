import Glibc
import ImageLogTestSupport
import Testing

/// makeTemporaryDirectory's folders go with the test process that made them (ImageLogTestSupport's
/// TestFiles.swift): a test process, here this test binary started again as a child, removes its one parent
/// folder at exit without following the links in it; a child told its starter's parent keeps its folders in
/// it and removes nothing.
@Suite struct TemporaryDirectoryTests {
  /// Starts `TemporaryDirectoryChild` with `outside` (a folder of this test's) to link to and report into;
  /// returns the child's folder and the parent folder it lay in.
  static func runChild(outside: String, inheriting: Bool) throws -> (folder: String, parent: String) {
    let executable = try #require(CrashReporterTests.selfExecutable())
    var variables = environment(applying: ["IMAGELOG_TEMPORARY_CHILD": outside])
    if !inheriting { variables.removeAll { $0.hasPrefix("IMAGELOG_TEST_TEMPORARY_PARENT=") } }
    let result = try ImageLogTestSupport.runChild([executable, "--testing-library", "swift-testing",
                                                   "--filter", "TemporaryDirectoryChild"],
                                                  replacingEnvironment: variables)
    #expect(result.exitCode == 0, "\(result.output.suffix(2000))\(result.error.suffix(2000))")
    let lines = try #require(readFile(outside + "/child.txt"), "the child wrote no child.txt").split(separator: "\n")
    try #require(lines.count == 1)
    let folder = String(lines[0])
    let parent = String(folder[..<(folder.lastIndex(of: "/") ?? folder.startIndex)])
    return (folder, parent)
  }

  static func exists(_ path: String) -> Bool {
    var status = stat()
    return lstat(path, &status) == 0
  }

  @Test func aTestProcessRemovesItsFoldersAtExitAndNothingTheyLinkTo() throws {
    let outside = try makeTemporaryDirectory("imagelog-outside")
    try writeFile(outside + "/kept", "kept\n")
    let (folder, parent) = try Self.runChild(outside: outside, inheriting: false)
    #expect(parent.hasPrefix("/tmp/imagelog-tests."), "\(folder)")
    #expect(!Self.exists(folder), "\(folder) is still there after its process exited")
    #expect(!Self.exists(parent), "\(parent) is still there after its process exited")
    #expect(readFile(outside + "/kept") == "kept\n", "a file the child's folder linked to was removed")
    #expect(Self.exists(outside + "/linked-folder/inner"), "a folder the child's folder linked to was emptied")
  }

  @Test func aTestProcessStartedByATestKeepsItsFoldersInItsStartersParent() throws {
    let outside = try makeTemporaryDirectory("imagelog-outside")
    try writeFile(outside + "/kept", "kept\n")
    let ours = String(outside[..<(outside.lastIndex(of: "/") ?? outside.startIndex)])
    let (folder, parent) = try Self.runChild(outside: outside, inheriting: true)
    #expect(parent.hasPrefix(ours + "/imagelog-tests."), "\(folder) is not in \(ours)")
    #expect(Self.exists(folder), "the child removed \(folder), which its starter removes")
  }
}

/// Runs only in the child `TemporaryDirectoryTests` starts: makes a folder holding links out of it (to a
/// file and to a folder in IMAGELOG_TEMPORARY_CHILD), nested folders, a name that is not UTF-8 and a
/// folder closed to everyone, writes the folder's path to child.txt there and exits.
@Suite struct TemporaryDirectoryChild {
  @Test(.enabled(if: getenv("IMAGELOG_TEMPORARY_CHILD") != nil, "only in a child process"))
  func makeFoldersAndExit() throws {
    let outside = String(cString: try #require(getenv("IMAGELOG_TEMPORARY_CHILD")))
    let folder = try makeTemporaryDirectory("imagelog-child")
    #expect(mkdir(outside + "/linked-folder", 0o755) == 0)
    try writeFile(outside + "/linked-folder/inner", "inner\n")
    #expect(symlink(outside + "/kept", folder + "/link-to-file") == 0)
    #expect(symlink(outside + "/linked-folder", folder + "/link-to-folder") == 0)
    #expect(mkdir(folder + "/a", 0o755) == 0 && mkdir(folder + "/a/b", 0o755) == 0)
    try writeFile(folder + "/a/b/file", "x\n")
    let odd = Array((folder + "/a/b/").utf8CString.dropLast()) + [CChar(bitPattern: 0xFF), 0]
    let descriptor = open(odd, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    #expect(descriptor >= 0)
    close(descriptor)
    #expect(mkdir(folder + "/closed", 0o755) == 0)
    try writeFile(folder + "/closed/file", "x\n")
    #expect(chmod(folder + "/closed", 0) == 0)
    try writeFile(outside + "/child.txt", folder + "\n")
  }
}
