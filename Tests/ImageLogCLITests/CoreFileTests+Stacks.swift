#if canImport(Glibc)
import Glibc
#endif
import ImageLog
import ImageLogTestSupport
@testable import ImageReaders
import Testing

extension CoreFileTests {
  /// A library replaced on disk after the core was written: the core's build-id is listed, the
  /// mismatch is said on standard error, and the file is not read in its place.
  @Test(.enabled(if: haveGcore && haveTool("cc") && haveTool("readelf"), "gcore, eu-unstrip, cc or readelf missing"))
  func aLibraryChangedSinceIsReported() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-changed")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let library = "\(directory)/libcorechanged.so"
    func buildLibrary(_ value: Int, into path: String) throws {
      let source = "int core_changed_value(void) { return \(value); }"
      try #require(try runTool(["sh", "-c", "echo '\(source)' | cc -shared -fPIC -Wl,--build-id -x c - -o '\(path)'"]).status == 0)
    }
    func buildID(_ path: String) throws -> String {
      let notes = try runTool(["readelf", "-n", path]).output
      return try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init))
    }
    try buildLibrary(1, into: library)
    let program = "\(directory)/uses-library"
    let main = "int core_changed_value(void); int main(void) { if (core_changed_value() != 1) return 1; "
      + "puts(\"ready\"); fflush(stdout); for (;;) pause(); }"
    let build = try runTool(["sh", "-c", "printf '#include <stdio.h>\\n#include <unistd.h>\\n%s\\n' '\(main)' | "
                               + "cc -x c - -o '\(program)' -L'\(directory)' -lcorechanged -Wl,-rpath,'\(directory)'"])
    try #require(build.status == 0, "cc failed: \(build.error)")
    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")
    let core = try Self.gcore(child.pid, in: directory)
    let before = try buildID(library)
    try buildLibrary(2, into: "\(library).new")
    try #require(rename("\(library).new", library) == 0)
    let after = try buildID(library)
    try #require(before != after)

    let run = try Self.imagelog(["file", "--format", "unstrip", core])
    #expect(run.exitCode == 0)
    #expect(run.output.contains(" \(before)@"), "the core's build-id is listed: \(run.output)")
    #expect(!run.output.contains(after))
    #expect(run.error == "imagelog: \(core): \(library): build-id \(before) in the core, \(after) on disk: "
              + "the file changed since the core was written; not read in its place\n")
    try Self.expectMatchesUnstrip(core, "core with a replaced library")
    // symbolicate says it too, and the library's frames are not named from the other build.
    let report = try Self.imagelog(["symbolicate", core])
    #expect(report.error.hasPrefix("imagelog: \(core): \(library): build-id \(before) in the core, \(after) on disk: "),
            "\(report.error)")
  }

  /// A kernel core cut short keeps its notes (written first): the images whose first pages were cut
  /// off come from their files, checked against the core's mappings, so the list is the whole core's
  /// (but for the vDSO, which has no file).
  /// A gcore core keeps its notes last: cut short, it has none, and that is one line naming the file.
  @Test(.enabled(if: haveGcore && kernelWritesCores && haveTool("cc") && haveTool("truncate"),
                 "gcore, eu-unstrip, cc or truncate missing, or the kernel cannot write cores here"))
  func truncatedCores() throws {
    let directory = try makeTemporaryDirectory("imagelog-core-truncated")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    let program = try Self.buildThreadsProgram(in: directory)
    let core = try Self.kernelCore([program, "crash"], in: directory)
    let whole = try Self.imagelog(["file", "--format", "unstrip", core])
    try #require(whole.exitCode == 0)
    var info = stat()
    try #require(stat(core, &info) == 0)
    for fraction in [2, 4, 20] {
      let cut = "\(directory)/cut-\(fraction)"
      try #require(try runTool(["cp", core, cut]).status == 0)
      try #require(truncate(cut, info.st_size / off_t(fraction)) == 0)
      let run = try Self.imagelog(["file", "--format", "unstrip", cut])
      #expect(run.exitCode == 0, "\(run.error)")
      // The vDSO has no file to stand in for it: it goes when its page is cut off.
      let expected = whole.output.split(separator: "\n").filter { !$0.hasSuffix(" [vdso]") }
      let got = run.output.split(separator: "\n").filter { !$0.hasSuffix(" [vdso]") }
      #expect(got == expected, "cut to 1/\(fraction)")
      // The vDSO's bytes are read from what is left: cut off or partly there, symbolicate neither traps nor fails.
      let report = try Self.imagelog(["symbolicate", cut])
      #expect(report.exitCode == 0 && report.output.contains("Binary Images:"), "cut to 1/\(fraction): \(report.error)")
    }

    let child = try RunningChild([program, "sleep"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let gcoreFile = try Self.gcore(child.pid, in: directory)
    try #require(stat(gcoreFile, &info) == 0)
    try #require(truncate(gcoreFile, info.st_size / 2) == 0)
    let run = try Self.imagelog(["file", gcoreFile])
    #expect(run.exitCode == 1)
    #expect(run.output.isEmpty)
    let lines = run.error.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].hasPrefix("imagelog: \(gcoreFile): PT_NOTE (the core is truncated or damaged) 0x"),
            "\(run.error)")
    let report = try Self.imagelog(["symbolicate", gcoreFile])
    #expect(report.exitCode == 1)
    #expect(report.output.isEmpty)
    #expect(report.error == run.error, "symbolicate says what file says")
  }

  /// A regular binary has no images to list in eu-unstrip's form, and no report to print unsymbolicated.
  @Test func unstripFormatNeedsACore() throws {
    let library = "\(packageRoot)/Tests/ImageReadersTests/Fixtures/elf/libfixture-x86_64.so"
    let run = try Self.imagelog(["file", "--format", "unstrip", library])
    #expect(run.exitCode == 1)
    #expect(run.error == "imagelog: \(library): not a core file (--format unstrip lists a core's images)\n")
    let symbolicate = try Self.imagelog(["symbolicate", "--no-symbolicate", library])
    #expect(symbolicate.exitCode == 1)
    #expect(symbolicate.error == "imagelog: \(library): not a core file (--no-symbolicate prints a core's report as built)\n")
  }

  // MARK: symbolicate CORE against eu-stack --core

  /// Each thread's function names by tid, as `imagelog symbolicate --format json --demangle none CORE`
  /// gives them (the function each frame is in, not the inlined ones), with each frame's image file;
  /// `inVDSO` marks a frame in the vDSO, whose symbols come from the core's memory (it has no file).
  static func ourStacks(_ core: String) throws -> [Int: [(name: String?, file: String?, inVDSO: Bool)]] {
    let run = try imagelog(["symbolicate", "--format", "json", "--demangle", "none", core])
    try #require(run.exitCode == 0, "symbolicate failed: \(run.error)")
    if CrashDocumentSchema.unavailableReason == nil { #expect(try CrashDocumentSchema.problems(run.output) == [], "\(core)") }
    let document = try JSONValue.parse(run.output[...])
    var tids: [Int: Int] = [:]
    for thread in document["threads"]?.array ?? [] {
      if let index = thread["index"]?.integer, let tid = thread["tid"]?.integer { tids[index] = tid }
    }
    var files: [String: String] = [:]
    for image in document["images"]?.array ?? [] {
      if let name = image["name"]?.string, let file = image["file"]?.string { files[name] = file }
    }
    var stacks: [Int: [(name: String?, file: String?, inVDSO: Bool)]] = [:]
    for frame in document["frames"]?.array ?? [] {
      guard let index = frame["thread"]?.integer, let tid = tids[index] else { continue }
      let name = frame["mangledSymbol"]?.string ?? frame["symbol"]?.string
      let inVDSO = frame["image"]?.string == "[vdso]"
      stacks[tid, default: []].append((name, frame["image"]?.string.flatMap { files[$0] }, inVDSO))
    }
    return stacks
  }

  /// Each thread's function names by tid, as `eu-stack --core CORE` prints them (nil where it has none).
  static func theirStacks(_ core: String) throws -> [Int: [String?]] {
    let run = try runTool(["eu-stack", "--core", core])
    var stacks: [Int: [String?]] = [:]
    var tid: Int?
    for line in run.output.split(separator: "\n") {
      let fields = line.split(separator: " ")
      if fields.first == "TID", fields.count == 2 { tid = Int(fields[1].dropLast()); continue }
      guard let tid, let first = fields.first, first.hasPrefix("#"), fields.count >= 2 else { continue }
      stacks[tid, default: []].append(fields.count >= 3 ? String(fields[2]) : nil)
    }
    return stacks
  }

  /// The name without a symbol version (`@@GLIBC_2.34`) and without glibc's hidden-alias prefix (`__GI_`).
  static func plainName(_ name: String) -> String {
    var name = name.split(separator: "@", maxSplits: 1).first.map(String.init) ?? name
    if name.hasPrefix("__GI_") { name.removeFirst(5) }
    return name
  }

  /// Every symbol's address in `file` and in its separate debug file under /usr/lib/debug, by name
  /// (readelf), to tell aliases of one function apart from different functions.
  static func symbolAddresses(_ file: String) throws -> [String: Set<String>] {
    var files = [file]
    let notes = try runTool(["readelf", "-n", file]).output
    if let id = notes.split(separator: "\n").first(where: { $0.contains("Build ID:") })?.split(separator: " ").last, id.count > 2 {
      files.append("/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug")
    }
    var addresses: [String: Set<String>] = [:]
    for path in files where access(path, R_OK) == 0 {
      for line in try runTool(["readelf", "-sW", "--dyn-syms", path]).output.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 8, fields[0].hasSuffix(":"), fields[3] == "FUNC" || fields[3] == "IFUNC" else { continue }
        addresses[plainName(String(fields[7])), default: []].insert(String(fields[1]))
      }
    }
    return addresses
  }

  /// Our stacks against eu-stack's: the same threads by tid, and in each the same functions in the
  /// same order (a name eu-stack prints and ours may differ only as aliases of one address in the same
  /// file: `read` and `__read`). A frame in the vDSO (read from the core's memory, as eu-stack reads
  /// it: i386 threads block in `__kernel_vsyscall`) must have eu-stack's very name. Returns how many
  /// vDSO frames were compared.
  @discardableResult
  static func expectSameStacks(_ core: String, _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    try expectSameStacks(try ourStacks(core), as: core, comment, sourceLocation: sourceLocation)
  }

  /// `ours` (each thread's functions by tid, as `ourStacks` gives them) against `eu-stack --core CORE`.
  @discardableResult
  static func expectSameStacks(_ ours: [Int: [(name: String?, file: String?, inVDSO: Bool)]], as core: String,
                               _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    let theirs = try theirStacks(core)
    #expect(!theirs.isEmpty, "\(comment): eu-stack printed no thread", sourceLocation: sourceLocation)
    #expect(Set(ours.keys) == Set(theirs.keys), "\(comment): threads \(ours.keys.sorted()) vs eu-stack's \(theirs.keys.sorted())",
            sourceLocation: sourceLocation)
    var aliases: [String: [String: Set<String>]] = [:]
    var vdsoFrames = 0
    for (tid, their) in theirs {
      let our = ours[tid] ?? []
      let ourNames = our.map { $0.name.map(plainName) ?? "?" }
      let theirNames = their.map { $0.map(plainName) ?? "?" }
      guard ourNames.count == theirNames.count else {
        Issue.record("\(comment): thread \(tid): \(ourNames) vs eu-stack's \(theirNames)", sourceLocation: sourceLocation)
        continue
      }
      for (index, (mine, other)) in zip(ourNames, theirNames).enumerated() {
        if our[index].inVDSO {
          vdsoFrames += 1
          // The x86_64 vDSO exports each function twice at one address: `__vdso_clock_gettime` and `clock_gettime`.
          let vdsoName = { (name: String) in name.hasPrefix("__vdso_") ? String(name.dropFirst(7)) : name }
          #expect(vdsoName(mine) == vdsoName(other) && mine != "?", "\(comment): thread \(tid) frame \(index) in the vDSO: \(mine) vs eu-stack's \(other)",
                  sourceLocation: sourceLocation)
          continue
        }
        guard mine != other else { continue }
        var same = false
        if let file = our[index].file {
          if aliases[file] == nil { aliases[file] = try symbolAddresses(file) }
          let table = aliases[file] ?? [:]
          same = !(table[mine] ?? []).isDisjoint(with: table[other] ?? [])
        }
        #expect(same, "\(comment): thread \(tid) frame \(index): \(mine) vs eu-stack's \(other)\n\(ourNames)\n\(theirNames)",
                sourceLocation: sourceLocation)
      }
    }
    return vdsoFrames
  }
}
