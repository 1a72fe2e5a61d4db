import Glibc
import ImageLogTestSupport
import Testing

/// `droppedUserProblem`, which the tests that drop root to user 65534 skip by: in a folder that user
/// cannot enter (as `mktemp -d` makes them, 0700), a file it must read is named, and so is a command that
/// must read one; once the folder lets everyone in, neither is. What the check says is what running the
/// same as that user does.
@Suite struct DroppedUserTests {
  @Test(.enabled(if: geteuid() == 0 && haveTool("setpriv"), "needs root and setpriv (util-linux)"))
  func closedFolderIsNamed() throws {
    let folder = try makeTemporaryDirectory("imagelog-dropped-user")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let data = folder + "/data"
    try writeFile(data, "x\n")
    try #require(chmod(data, 0o644) == 0 && chmod(folder, 0o700) == 0)
    #expect(droppedUserProblem(running: ["true"], reading: [data])
            == "user 65534 cannot read \(data): a folder above it is closed to that user")
    #expect(droppedUserProblem(running: ["cat", data]) == "user 65534 cannot run cat \(data)")
    #expect(try runChild(droppedUserPrefix + ["cat", data]).exitCode != 0)
    try #require(chmod(folder, 0o755) == 0)
    #expect(droppedUserProblem(running: ["cat", data], reading: [data]) == nil)
    #expect(try runChild(droppedUserPrefix + ["cat", data]).output == "x\n")
  }
}
