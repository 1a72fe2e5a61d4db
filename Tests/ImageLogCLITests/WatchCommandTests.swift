import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog watch`: a C program that dlopens and dlcloses slowly, seen from outside.
@Suite(.serialized) struct WatchCommandTests {
  @Test(.enabled(if: processTestHaveCC, "no C compiler (cc)"))
  func seesLibrariesComeAndGoThenExitsWithTheProcess() throws {
    let programs = try ProcessTestPrograms()
    defer { programs.remove() }
    // The program takes each step (dlopen, dlclose, exit) on SIGUSR1, sent once the watch has shown
    // the previous one: nothing depends on how fast either runs.
    let target = try RunningChild([programs.loop, "step", programs.libraryA, programs.libraryB])
    try target.wait(for: "ready")
    let watch = try RunningChild([processTestImagelog, "watch", String(target.pid), "--interval", "0.02",
                                        "--format", "unstrip"])
    let first = try #require(watch.readLine())
    #expect(first.hasPrefix("Added: 0x"))
    var lines = [first]
    /// Reads the watch's lines until one is `verb`'s line for `library`.
    func readUntil(_ verb: String, _ library: String) throws {
      while let line = watch.readLine() {
        lines.append(line)
        if line.hasPrefix(verb + ": ") && line.contains(library) { return }
      }
      throw TestSupportError("watch ended before its \(verb) line for \(library):\n\(lines.joined(separator: "\n"))")
    }
    for library in [programs.libraryA, programs.libraryB] {
      target.signal(SIGUSR1)
      try readUntil("Added", library)
      target.signal(SIGUSR1)
      try readUntil("Removed", library)
    }
    target.signal(SIGUSR1)
    let targetOutput = target.readAll()  // until the program exits
    #expect(targetOutput.last == "done")
    target.reap()
    lines += watch.readAll()
    watch.reap()
    #expect(watch.rawStatus == 0, "watch exits 0 when the process exits")
    // The initial images, the main executable among them.
    #expect(lines.contains { $0.hasPrefix("Added: ") && $0.contains(" \(programs.loop) ") })
    #expect(lines.contains { $0.hasPrefix("Added: ") && $0.contains(" [vdso] ") })
    let events = lines.filter { $0.contains(programs.libraryA) || $0.contains(programs.libraryB) }
      .map { line -> String in
        let verb = line.hasPrefix("Added: ") ? "Added" : "Removed"
        return verb + " " + (line.contains("liba.so") ? "a" : "b")
      }
    #expect(events == ["Added a", "Removed a", "Added b", "Removed b"])
    // A removal of an image added during the watch says how long it was loaded (issue 39); the initial
    // images were not timed.
    let removals = lines.filter { $0.hasPrefix("Removed: ") && ($0.contains(programs.libraryA) || $0.contains(programs.libraryB)) }
    #expect(removals.count == 2 && removals.allSatisfy { $0.contains(" ms)") && $0.ranges(of: "  (loaded for ").count == 1 },
            "\(removals)")
    // Each event line is the unstrip line of that image: the build-id readelf reports.
    let readelf = try runProcessTest(["readelf", "-n", programs.libraryA]).output
    let buildID = readelf.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last
    if let buildID { #expect(lines.contains { $0.contains(programs.libraryA) && $0.contains(" \(buildID)@0x") }) }
  }

  @Test func stopsCleanlyOnInterrupt() throws {
    let target = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    try target.wait(for: "ready")
    try waitUntilSleeping(target.pid, in: "sleep")  // the exec and the loader are done
    let watch = try RunningChild([processTestImagelog, "watch", String(target.pid), "--interval", "5"])
    #expect(watch.readLine()?.hasPrefix("Added: 0x") == true)
    watch.signal(SIGINT)  // arrives during the 5-second sleep: must end it, not wait it out
    _ = watch.readAll()
    watch.reap()
    #expect(watch.rawStatus == 0)
  }

  @Test func errorsAndUsage() throws {
    let missing = try runProcessTest([processTestImagelog, "watch", "99999999"])
    #expect(missing.exitStatus == 1)
    #expect(missing.error == "imagelog: pid 99999999: no such process\n")
    #expect(try runProcessTest([processTestImagelog, "watch", "1", "--interval", "0"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "watch", "1", "--interval", "soon"]).exitStatus == 64)
    #expect(try runProcessTest([processTestImagelog, "watch"]).exitStatus == 64)
    let help = try runProcessTest([processTestImagelog, "watch", "--help"]).output
    #expect(help.contains("an image loaded and unloaded within one interval is missed"))
  }
}
