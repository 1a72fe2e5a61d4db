#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing

/// `imagelog symbolicate --symbols STORE DUMP` on Crashpad's dump of a crash three calls deep in a
/// gcc -O2 -fomit-frame-pointer library (MinidumpCrashpadCLITests' program), the program and the
/// library gone after the crash, against `minidump-stackwalk --symbols-path STORE` with dump_syms'
/// store: the library's `STACK CFI` from the store unwinds it (the same frames, every one by CFI), and
/// every frame in the gone files has the function minidump-stackwalk gives. And `minidump-stackwalk`
/// over `imagelog symbols`' store gives the same stacks as over dump_syms'.
@Suite(.serialized) struct SymbolStoreCrashpadCLITests {
  static let imagelog = builtProduct("imagelog")

  @Test(.enabled(if: MinidumpCrashpadCLITests.canRun, MinidumpCrashpadCLITests.reason))
  func dumpOfAProgramWhoseFilesAreGone() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbol-store-dump")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let library = directory + "/libminidump-crashpad.so", program = directory + "/minidump-crashpad"
    try MinidumpCrashpadCLITests.build(["gcc", "-O2", "-fomit-frame-pointer", "-g", "-shared", "-fPIC", "-Wl,--build-id",
                                        packageRoot + "/Tests/Programs/minidump-crashpad-lib.c", "-o", library])
    try MinidumpCrashpadCLITests.build(["gcc", "-O2", "-g", "-pthread", "-Wl,--build-id",
                                        packageRoot + "/Tests/Programs/minidump-crashpad.c", "-L" + directory,
                                        "-Wl,--no-as-needed", "-lminidump-crashpad", "-Wl,-rpath," + directory, "-o", program])
    let handler = try #require(MinidumpCLI.crashpadHandler)
    let (dump, _) = try MinidumpCLI.crashpadDump([program, handler, directory + "/database", "library"],
                                                 database: directory + "/database", signal: SIGSEGV)
    let modules = try MinidumpCLI.stackwalkView(dump).modules
    let (store, _) = try MinidumpCLI.symbolStore(for: modules, folders: [directory], in: directory)
    let ourStore = directory + "/imagelog-symbols"
    for file in MinidumpCLI.moduleFiles(for: modules, folders: [directory]) {
      // As dump_syms reads them: the files alone (libc's debug file would name more).
      let run = try runChild([Self.imagelog, "symbols", "--no-system-debug", "--store", ourStore, file])
      try #require(run.exitCode == 0, "imagelog symbols \(file): \(run.error)")
    }
    // Gone: only the stores know them now.
    #expect(rename(program, directory + "/gone-program") == 0 && rename(library, directory + "/gone-library") == 0)
    let gone: Set = ["minidump-crashpad", "libminidump-crashpad.so"]

    let theirs = try MinidumpCLI.stackwalkView(dump, symbols: store)
    let ours = try MinidumpCLI.imagelogView(dump, arguments: ["--symbols", store])
    let compared = MinidumpCLI.expectSameWalk(ours, theirs, "binaries gone")
    #expect(compared >= 20, "only \(compared) frames compared")
    let crashed = try #require(ours.threads.first { $0.tid == ours.crashedTID })
    #expect(crashed.frames.prefix(4).map(\.symbol) == ["library_third", "library_second", "library_first", "library_compare"],
            "\(crashed.frames)")
    #expect(crashed.frames.allSatisfy { $0.trust == nil }, "every frame by CFI: \(crashed.frames)")
    // Every frame in a gone file that minidump-stackwalk names (where it did not scan) has its name.
    var named = 0
    for (mine, other) in zip(ours.threads, theirs.threads) {
      for (a, b) in zip(mine.frames, other.frames.prefix { $0.trust != "scan" }) where gone.contains(b.module ?? "") {
        #expect(a.symbol == b.symbol, "tid \(other.tid): \(a) against \(b)")
        named += 1
      }
    }
    #expect(named >= 8, "only \(named) frames in the gone files")

    // Without the store the library is walked through by scanning: the store's CFI is what did it.
    let bare = try MinidumpCLI.imagelogView(dump)
    let bareCrashed = try #require(bare.threads.first { $0.tid == bare.crashedTID })
    #expect(bareCrashed.frames.count > 1 && bareCrashed.frames[1].trust != nil, "\(bareCrashed.frames)")

    // imagelog's own store: the same walk and names, for imagelog and for minidump-stackwalk.
    let oursFromOurs = try MinidumpCLI.imagelogView(dump, arguments: ["--symbols", ourStore])
    for (a, b) in zip(oursFromOurs.threads, ours.threads) {
      #expect(a.frames == b.frames, "tid \(a.tid)\n\(a.frames)\n\(b.frames)")
    }
    let theirsFromOurs = try MinidumpCLI.stackwalkView(dump, symbols: ourStore)
    #expect(theirsFromOurs.threads.count == theirs.threads.count)
    for (a, b) in zip(theirsFromOurs.threads, theirs.threads) {
      #expect(a.frames == b.frames, "minidump-stackwalk, tid \(a.tid)\nimagelog's .sym: \(a.frames)\ndump_syms': \(b.frames)")
    }
  }
}
