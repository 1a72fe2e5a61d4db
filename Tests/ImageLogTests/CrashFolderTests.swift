import Glibc
@testable import ImageLog
@testable import ProcessInspection
import ImageLogTestSupport
import Testing

/// The crash folder's names in a folder others can write: an entry planted under a crash's name after
/// the name was found free (a race the handler cannot close) moves the crash on to the next free name
/// when its file is linked; nothing is written through the entry.
@Suite struct CrashFolderTests {
  /// A stem's time read back is the time it was named for (the uploader's `crash_time` field); a stem
  /// not ending in `YYYYMMDDTHHMMSSZ` has none. 951782400 is 2000-02-29T00:00:00Z (`date -u -d @951782400`).
  @Test func stemTimeReadsBack() {
    for time: Int64 in [0, 951_782_400, 1_765_000_000, 4_102_444_799] {
      #expect(CrashFolder.time(ofStem: CrashFolder.stem(program: "my.app", pid: 42, time: time)) == time)
    }
    #expect(CrashFolder.stem(program: "p", pid: 1, time: 951_782_400) == "p.1.20000229T000000Z")
    for stem in ["p.1.20000229T000000", "p.1.2000022xT000000Z", "p.1", ""] { #expect(CrashFolder.time(ofStem: stem) == nil) }
  }

  @Test func aNamePlantedAfterItWasFoundFreeIsPassedOver() throws {
    let directory = try makeTemporaryDirectory("imagelog-crash-folder")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let folder = try CrashFolder(path: directory)
    var names = CrashFolder.CrashNames(in: folder, program: "app", pid: 42, time: 0, extensions: ["crash", "dmp"])
    #expect(names.stem == "app.42.19700101T000000Z")
    // Planted between the choice and the link: a dangling link, then (for the next file) a folder.
    #expect(symlink(directory + "/nowhere", directory + "/app.42.19700101T000000Z.crash") == 0)
    let report = try folder.write(Array("report\n".utf8), as: &names, extension: "crash", access: CrashFolder.Access())
    #expect(report.path == directory + "/app_2.42.19700101T000000Z.crash")
    #expect(mkdir(directory + "/app_2.42.19700101T000000Z.dmp", 0o755) == 0)
    let dump = try folder.write(Array("dump\n".utf8), as: &names, extension: "dmp", access: CrashFolder.Access())
    #expect(dump.path == directory + "/app_3.42.19700101T000000Z.dmp")
    #expect(readFile(report.path) == "report\n" && readFile(dump.path) == "dump\n")
    #expect(access(directory + "/nowhere", F_OK) != 0, "written through the planted link")
    var info = stat()
    #expect(stat(report.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    #expect(CrashFolder.isMarked(report.path, as: "app_2.42.19700101T000000Z.crash"))
  }
}
