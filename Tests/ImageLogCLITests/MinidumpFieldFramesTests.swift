import ImageLogTestSupport
@testable import ImageReaders
@testable import SnapshotFormatting
import Testing

/// Every thread's frames of every field dump (Tests/ImageReadersTests/Fixtures/minidump-field: Breakpad's
/// and rust-minidump's test data, written on Windows, Linux, macOS and iOS, read here without one of
/// their modules' files) as `imagelog symbolicate --format stackwalk-json` gives them, held to
/// `minidump-stackwalk --json --symbols-path` 0.25 frame by frame: module, module offset and trust, the
/// function and the offset in it wherever minidump-stackwalk names the frame, and the same number of
/// frames. Before this suite 30 of the 50 threads agreed (564 of 673 frames at the
/// same position): scanning read code the dump kept around a pc and words outside the thread's stack,
/// skipped a repeated word, ran i386 frame records through amd64's checks, walked the thread that wrote
/// the dump, and placed a return address one past a module's end outside it.
///
/// The one difference allowed, a rule of how minidump-stackwalk works:
/// - A module whose `.sym` minidump-stackwalk cannot parse (its JSON says `corrupt_symbols`; Breakpad's
///   `linux_inline` symbols end without a newline, which rust-minidump's parser refuses) is to it a
///   module without symbols, so its scan takes words there that no `FUNC` or `PUBLIC` names, where
///   imagelog, which reads the file, does not (`instruction_seems_valid_by_symbols`). Such a dump is
///   compared with neither tool given the stores, and, with them, up to the first frame scanned in
///   that module.
@Suite struct MinidumpFieldFramesTests {
  static let canRun = MinidumpCLI.stackwalk != nil
  static let stores = ["breakpad", "rust-minidump"].map { MinidumpFieldCLITests.fieldFolder + "/" + $0 + "/symbols" }

  /// A frame as both tools' stackwalk JSON gives it.
  struct Frame: Equatable, CustomStringConvertible {
    var module: String?
    var offset: String?
    var trust: String?
    /// The function and the offset in it, where the frame is named.
    var function: String?
    var functionOffset: String?
    var description: String { "\(module ?? "-") \(offset ?? "-") \(trust ?? "-")\(function.map { " " + $0 + " + " + (functionOffset ?? "?") } ?? "")" }
  }

  /// The stackwalk JSON of `dump`, from minidump-stackwalk (`theirs`) or imagelog.
  static func walk(_ dump: String, theirs: Bool, stores: [String]) throws -> JSONValue {
    let arguments = theirs
      ? [try #require(MinidumpCLI.stackwalk), "--json"] + stores.flatMap { ["--symbols-path", $0] } + [dump]
      : [MinidumpCLI.imagelog, "symbolicate", "--format", "stackwalk-json"] + stores.flatMap { ["--symbols", $0] } + [dump]
    let run = try runChild(arguments)
    try #require(run.exitCode == 0, "\(arguments[0]): \(run.error)")
    return try JSONValue.parse(run.output[...])
  }

  static func threads(_ json: JSONValue) -> [[Frame]] {
    (json["threads"]?.array ?? []).map { thread in
      (thread["frames"]?.array ?? []).map { frame in
        Frame(module: frame["module"]?.string, offset: (frame["module_offset"] ?? frame["offset"])?.string,
              trust: frame["trust"]?.string, function: frame["function"]?.string,
              functionOffset: frame["function_offset"]?.string)
      }
    }
  }

  /// The modules whose symbols minidump-stackwalk found but could not parse.
  static func corruptSymbols(_ json: JSONValue) -> Set<String> {
    Set((json["modules"]?.array ?? []).compactMap { module in
      module["corrupt_symbols"] == .bool(true) ? module["filename"]?.string : nil
    })
  }

  /// Compares every thread; `upTo(theirFrames)` gives how many frames of a thread must agree (`nil`:
  /// all of them, and their count).
  static func expectSameFrames(ours: JSONValue, theirs: JSONValue, _ label: String,
                               upTo: ([Frame]) -> Int? = { _ in nil },
                               sourceLocation: SourceLocation = #_sourceLocation) {
    let ourThreads = threads(ours), theirThreads = threads(theirs)
    #expect(ourThreads.count == theirThreads.count, "\(label): thread count", sourceLocation: sourceLocation)
    for (index, (mine, other)) in zip(ourThreads, theirThreads).enumerated() {
      let limit = upTo(other)
      let text = "\(label) thread \(index)\n ours:   \(mine)\n theirs: \(other)"
      #expect(limit.map { mine.count >= $0 } ?? (mine.count == other.count), "\(text)", sourceLocation: sourceLocation)
      for (number, (a, b)) in zip(mine, other).enumerated().prefix(limit ?? .max) {
        // Named as minidump-stackwalk names it wherever it names the frame.
        if b.function != nil {
          #expect(a.function == b.function && a.functionOffset == b.functionOffset, "frame \(number): \(text)",
                  sourceLocation: sourceLocation)
        }
        if a.module == b.module && a.offset == b.offset && a.trust == b.trust { continue }
        Issue.record("frame \(number): \(a) against \(b)\n\(text)", sourceLocation: sourceLocation)
        break
      }
    }
  }

  /// Every field dump with both stores: every thread's frames equal to minidump-stackwalk's, under the
  /// rules above.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"),
        arguments: MinidumpFieldCLITests.fieldDumps)
  func everyThreadWalksAsMinidumpStackwalkWalksIt(_ name: String) throws {
    let dump = MinidumpFieldCLITests.fieldFolder + "/" + name
    let theirs = try Self.walk(dump, theirs: true, stores: Self.stores)
    let ours = try Self.walk(dump, theirs: false, stores: Self.stores)
    let corrupt = Self.corruptSymbols(theirs)
    if corrupt.isEmpty {
      Self.expectSameFrames(ours: ours, theirs: theirs, name)
      return
    }
    // With the stores: equal up to the first frame minidump-stackwalk scanned in such a module.
    Self.expectSameFrames(ours: ours, theirs: theirs, name + " (stores)") { frames in
      frames.firstIndex { $0.trust == "scan" && $0.module.map(corrupt.contains) == true }
    }
    // Without them both walk every module without symbols: equal throughout.
    let theirsBare = try Self.walk(dump, theirs: true, stores: [])
    let oursBare = try Self.walk(dump, theirs: false, stores: [])
    Self.expectSameFrames(ours: oursBare, theirs: theirsBare, name + " (no stores)")
  }

  /// A store folder is listed once and only the modules named there are looked for, unless it holds
  /// more names than a listing is worth (1024): then each module's folder is opened, as before. The
  /// macOS dump's 53 modules, one of them in rust-minidump's store, give the same document both ways,
  /// its crash-client frames named from the store.
  @Test func aLargeStoreIsSearchedAsASmallOne() throws {
    let directory = try makeTemporaryDirectory("imagelog-large-store")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let large = directory + "/symbols"
    _ = try runChild(["cp", "-R", MinidumpFieldCLITests.fieldFolder + "/rust-minidump/symbols", large])
    _ = try runChild(["mkdir"] + (0..<1_100).map { "\(large)/module-\($0)" })
    let dump = MinidumpFieldCLITests.fieldFolder + "/rust-minidump/pipeline-inlines-macos-segv.dmp"
    func document(_ store: String) throws -> String {
      let run = try runChild([MinidumpCLI.imagelog, "symbolicate", "--no-cache", "--format", "stackwalk-json",
                              "--symbols", store, dump])
      try #require(run.exitCode == 0, "\(run.error)")
      return run.output
    }
    let listed = try document(MinidumpFieldCLITests.fieldFolder + "/rust-minidump/symbols")
    #expect(try document(large) == listed)
    let named = try JSONValue.parse(listed[...])["threads"]?.array?.flatMap { $0["frames"]?.array ?? [] }
      .filter { $0["module"]?.string == "crash-client" && $0["function"]?.string != nil }
    #expect((named?.count ?? 0) > 10, "\(named?.count ?? 0) crash-client frames named")
  }

  // MARK: 32-bit ARM

  /// Neither Breakpad's nor rust-minidump's test data holds a 32-bit ARM (or arm64) minidump, only
  /// microdumps (text, which minidump-stackwalk does not read): the ARM dumps are made here, with
  /// `MinidumpWriter` (Breakpad's `MDRawContextARM`, which Crashpad's `MinidumpContextARM` shares), and a
  /// store whose `.sym` has `STACK CFI` records as dump_syms writes them for arm.
  static let app = (base: UInt64(0x10000), buildID: [UInt8](repeating: 0xA1, count: 16))
  static let library = (base: UInt64(0x40000), buildID: [UInt8](repeating: 0xB2, count: 16))
  static let bare = (base: UInt64(0x80000), buildID: [UInt8](repeating: 0xC3, count: 16))

  /// A store in `directory` holding, for each module (name, build-id), a `.sym` of `architecture`
  /// whose `MODULE` line precedes `records`, where a store keeps it (`NAME/DEBUGID/NAME.sym`).
  static func madeStore(in directory: String, architecture: String, _ symbols: [(name: String, buildID: [UInt8], records: String)]) throws -> String {
    let store = directory + "/symbols"
    for (name, buildID, records) in symbols {
      let id = BuildID(buildID).breakpadDebugID()
      _ = try runChild(["mkdir", "-p", "\(store)/\(name)/\(id)"])
      try writeFile("\(store)/\(name)/\(id)/\(name).sym", "MODULE Linux \(architecture) \(id) \(name)\n\(records)")
    }
    return store
  }

  /// A store for the ARM dumps: `app` with three functions, two with CFI (a push of r7 and lr; a push of
  /// r4-r6 and lr, thumb code, whose next row starts at the instruction after its call, 0x2010: the rule
  /// for a return to 0x2011 is the row before, inside the call), and `libfoo.so` naming one function only (a scanned word elsewhere in it
  /// is no return address to either tool).
  static func armStore(in directory: String) throws -> String {
    try madeStore(in: directory, architecture: "arm", [
      ("app", app.buildID, """
        FUNC 1000 100 0 inner
        FUNC 2000 100 0 middle
        FUNC 3000 100 0 outer
        STACK CFI INIT 1000 100 .cfa: sp 0 + .ra: lr
        STACK CFI 1004 .cfa: sp 8 + .ra: .cfa -4 + ^ r7: .cfa -8 + ^
        STACK CFI INIT 2000 100 .cfa: sp 0 + .ra: lr
        STACK CFI 2004 .cfa: sp 16 + .ra: .cfa -4 + ^ r4: .cfa -16 + ^ r5: .cfa -12 + ^ r6: .cfa -8 + ^
        STACK CFI 2010 .cfa: sp 48 + .ra: .cfa -4 + ^

        """),
      ("libfoo.so", library.buildID, """
        FUNC 1000 200 0 foo_function

        """),
    ])
  }

  /// A thread of a made dump: pc, sp, lr, the frame pointer (r11, x29), and stack words from sp.
  typealias MadeThread = (pc: UInt64, sp: UInt64, lr: UInt64, fp: UInt64, words: [Int: UInt64])

  /// A Linux (`platformID` 0x8201), Windows (2) or iOS (0x8102) dump with a context of `layout` (`.arm`, `.arm64` or
  /// `.amd64`, whose pc, sp and frame pointer are rip, rsp and rbp) for each of `threads`, the first
  /// crashed by SIGSEGV, and the modules app, libfoo.so and libbare.so.
  static func madeDump(_ layout: MinidumpContext.Layout, platformID: UInt32 = 0x8201, threads: [MadeThread]) throws -> [UInt8] {
    let word = layout == .arm ? 4 : 8
    var system = MinidumpWriter.SystemInfo(processorArchitecture: layout == .arm ? 5 : layout == .amd64 ? 9 : 12)
    system.platformID = platformID
    system.osVersion = platformID == 0x8201 ? (5, 10, 0) : platformID == 2 ? (10, 0, 19042) : (9, 3, 5)
    let dumpThreads = threads.enumerated().map { index, thread in
      var stack = [UInt8](repeating: 0, count: 128 * word)
      for (slot, value) in thread.words {
        for byte in 0..<word { stack[slot * word + byte] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(byte))) }
      }
      let registers: [String: UInt64] = layout == .amd64
        ? ["rip": thread.pc, "rsp": thread.sp, "rbp": thread.fp, "rbx": 0x444]
        : ["pc": thread.pc, "sp": thread.sp, "lr": thread.lr, "fp": thread.fp, "r4": 0x444, "x19": 0x1919]
      let context = MinidumpContext(layout: layout, registers: registers)
      return MinidumpWriter.Thread(tid: UInt32(100 + index), context: .registers(context), stackAddress: thread.sp, stack: stack)
    }
    let modules = [MinidumpWriter.Module(baseAddress: app.base, size: 0x4000, path: "/opt/app/app", buildID: app.buildID,
                                         isMainExecutable: true),
                   MinidumpWriter.Module(baseAddress: library.base, size: 0x4000, path: "/opt/app/libfoo.so", buildID: library.buildID),
                   MinidumpWriter.Module(baseAddress: bare.base, size: 0x4000, path: "/opt/app/libbare.so", buildID: bare.buildID)]
    return try MinidumpWriter.write(MinidumpWriter.Contents(
      timeDateStamp: 1_700_000_000, systemInfo: system, threads: dumpThreads, modules: modules,
      exception: MinidumpWriter.Exception(tid: 100, signal: 11, code: 1, address: 0x10)))
  }

  /// 32-bit ARM threads walked as minidump-stackwalk walks them: by `STACK CFI` (a function that pushed
  /// lr; a leaf whose return address is still in lr, its caller at the same sp; thumb return
  /// addresses), then scanning within Breakpad's window, a word taken only inside a function where the
  /// module has symbols, any word inside a module without them (module offsets `ip - 2`, as arm.rs gives
  /// them); r11's frame records are not followed on Linux. Before, an ARM thread had frame 0 only.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func armThreadsWalkAsMinidumpStackwalkWalksThem() throws {
    let directory = try makeTemporaryDirectory("imagelog-arm-walk")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let store = try Self.armStore(in: directory)
    let (app, library, bare) = (Self.app.base, Self.library.base, Self.bare.base)
    let sp: UInt64 = 0x7F00_0000
    let threads: [MadeThread] = [
      // inner (after its push) <- middle (thumb) <- outer by CFI, its call outer's last instruction (the
      // return address one past the function: named by the call); then scanning: libfoo outside its
      // function, an address in no module, libfoo's function, libbare, and one past the 40-word window.
      (app + 0x1010, sp, 0x5555, sp + 64,
       [0: 0x777, 1: app + 0x2011, 5: app + 0x3101, 7: library + 0x1801, 8: 0x30000, 9: library + 0x1101,
        12: bare + 0x501, 13 + 45: bare + 0x601]),
      // A leaf at inner's first instruction: its caller is in lr, at the same sp.
      (app + 0x1000, sp + 0x10000, app + 0x2011, 0, [3: app + 0x3021, 6: bare + 0x201]),
      // No CFI: scanning from frame 0 over a word app's symbols do not name.
      (bare + 0x100, sp + 0x20000, 0, sp + 0x20008, [1: app + 0x2345, 2: sp + 0x20020, 3: bare + 0x201]),
    ]
    let path = directory + "/arm.dmp"
    try writeFile(path, bytes: try Self.madeDump(.arm, threads: threads))
    let theirs = try Self.walk(path, theirs: true, stores: [store])
    let ours = try Self.walk(path, theirs: false, stores: [store])
    #expect(theirs["system_info"]?["cpu_arch"]?.string == "arm")
    // The walk is the one meant: CFI twice, then scanning, on the crashed thread.
    let crashed = try #require(Self.threads(theirs).first)
    #expect(crashed.map(\.trust) == ["context", "cfi", "cfi", "scan", "scan"], "\(crashed)")
    Self.expectSameFrames(ours: ours, theirs: theirs, "arm")
  }

  /// On iOS, minidump-stackwalk's arm.rs follows r11's frame records (and nowhere else): so does
  /// imagelog, up to a record whose r11 is 0.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func armFrameRecordsOnIOS() throws {
    let directory = try makeTemporaryDirectory("imagelog-arm-walk")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let bare = Self.bare.base
    let sp: UInt64 = 0x7F00_0000
    let path = directory + "/arm-ios.dmp"
    try writeFile(path, bytes: try Self.madeDump(.arm, platformID: 0x8102, threads: [
      (bare + 0x100, sp, 0, sp + 8, [2: sp + 24, 3: bare + 0x301, 6: 0, 7: bare + 0x401, 9: bare + 0x501]),
    ]))
    let theirs = try Self.walk(path, theirs: true, stores: [])
    let ours = try Self.walk(path, theirs: false, stores: [])
    #expect(theirs["system_info"]?["os"]?.string == "iOS")
    let frames = try #require(Self.threads(theirs).first)
    #expect(frames.map(\.trust) == ["context", "frame_pointer", "frame_pointer"], "\(frames)")
    Self.expectSameFrames(ours: ours, theirs: theirs, "arm iOS")
  }

  // MARK: arm64 without the code

  /// arm64 threads whose modules' code is not at hand, walked as minidump-stackwalk's arm64.rs walks
  /// them: `STACK CFI` (a leaf's caller in x30 at the same sp), x29's frame records checked only for a
  /// pc in 0x1000...0xfffffffffffff (one outside every module is a frame), x29 0 ending the walk, and
  /// scanning within Breakpad's window for a word in a module (unaligned ones too, inside a function
  /// where the module has symbols), the scanned caller with pc and sp only (no frame record after it).
  /// Before, scanning took any aligned word for 1,024 words whatever the symbols said, followed the
  /// callee's stale x29 after a scan, and a record's pc had to be in a module.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func arm64ThreadsWithoutTheCodeWalkAsMinidumpStackwalkWalksThem() throws {
    let directory = try makeTemporaryDirectory("imagelog-arm64-walk")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let store = try Self.madeStore(in: directory, architecture: "arm64", [
      ("app", Self.app.buildID, """
        FUNC 1000 100 0 inner
        FUNC 2000 100 0 middle
        FUNC 3000 100 0 outer
        STACK CFI INIT 1000 100 .cfa: sp 0 + .ra: x30
        STACK CFI 1004 .cfa: sp 16 + .ra: .cfa -8 + ^ x29: .cfa -16 + ^

        """),
    ])
    let (app, bare) = (Self.app.base, Self.bare.base)
    let sp: UInt64 = 0x7FFF_0000_0000
    let threads: [MadeThread] = [
      // inner by CFI <- middle, then two frame records, one returning outside every module, then x29 0.
      (app + 0x1010, sp, 0x5555, sp + 0x100,
       [0: sp + 0x40, 1: app + 0x2014, 8: sp + 0x80, 9: 0x30000, 16: 0, 17: bare + 0x404]),
      // x29 unreadable: scanning past a word app's symbols do not name and one in no module to an
      // unaligned word in libbare, then (no record to follow) to outer, then nothing within 40 words.
      (bare + 0x100, sp + 0x10000, 0, 0x1234_0000,
       [1: app + 0x2345, 2: 0x30000, 3: bare + 0x502, 5: app + 0x3018, 6 + 45: bare + 0x700]),
      // A leaf at inner's first instruction: its caller in x30 at the same sp, then x29's record.
      (app + 0x1000, sp + 0x20000, app + 0x2014, sp + 0x20020, [4: 0, 5: bare + 0x604]),
    ]
    let path = directory + "/arm64.dmp"
    try writeFile(path, bytes: try Self.madeDump(.arm64, threads: threads))
    let theirs = try Self.walk(path, theirs: true, stores: [store])
    let ours = try Self.walk(path, theirs: false, stores: [store])
    #expect(theirs["system_info"]?["cpu_arch"]?.string == "arm64")
    let walked = Self.threads(theirs)
    #expect(walked.first?.map(\.trust) == ["context", "cfi", "frame_pointer", "frame_pointer"], "\(walked)")
    #expect(walked.dropFirst().first?.map(\.trust) == ["context", "scan", "scan"], "\(walked)")
    Self.expectSameFrames(ours: ours, theirs: theirs, "arm64")
  }

  // MARK: stacks at one address

  /// Two threads whose stack descriptors name the same start address with different bytes (each its
  /// own range of the file) are each walked over their own bytes, as minidump-stackwalk reads a thread's
  /// stack from its descriptor. Before, stacks were found by address, and the second thread was walked
  /// over the first one's bytes.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func threadsNamingOneStackAddressEachWalkTheirOwnBytes() throws {
    let directory = try makeTemporaryDirectory("imagelog-same-stack")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let bare = Self.bare.base
    let sp: UInt64 = 0x7FFF_0000_0000
    let path = directory + "/same-stack.dmp"
    try writeFile(path, bytes: try Self.madeDump(.arm64, threads: [
      (bare + 0x100, sp, 0, sp + 0x10, [2: 0, 3: bare + 0x404]),
      (bare + 0x200, sp, 0, sp + 0x10, [2: 0, 3: bare + 0x808]),
    ]))
    let theirs = try Self.walk(path, theirs: true, stores: [])
    let ours = try Self.walk(path, theirs: false, stores: [])
    let walked = Self.threads(theirs)
    #expect(walked.count == 2 && walked.first?.dropFirst().first?.offset != walked.last?.dropFirst().first?.offset, "\(walked)")
    Self.expectSameFrames(ours: ours, theirs: theirs, "one stack address")
  }

  // MARK: x86_64: CFI ending the walk

  /// amd64.rs takes CFI's caller unchecked and ends the walk when its pc is in the first page (0 too)
  /// or its sp is not above the callee's: no frame record or scan is tried after it. Before, imagelog
  /// went on by rbp's frame record and scanning, and took a CFI caller at the same sp as a frame.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func amd64CFIReturningToTheFirstPageEndsTheWalk() throws {
    let directory = try makeTemporaryDirectory("imagelog-amd64-cfi-end")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let store = try Self.madeStore(in: directory, architecture: "x86_64", [
      ("app", Self.app.buildID, """
        FUNC 1000 100 0 inner
        FUNC 2000 100 0 flat
        STACK CFI INIT 1000 100 .cfa: $rsp 8 + .ra: .cfa -8 + ^
        STACK CFI INIT 2000 100 .cfa: $rsp 0 + .ra: .cfa ^

        """),
    ])
    let (app, bare) = (Self.app.base, Self.bare.base)
    let sp: UInt64 = 0x7FFF_0000_0000
    let path = directory + "/amd64-cfi.dmp"
    try writeFile(path, bytes: try Self.madeDump(.amd64, threads: [
      // CFI's return address 0x800, rbp's frame record to libbare, a libbare word to scan.
      (app + 0x1010, sp, 0, sp + 0x20, [0: 0x800, 2: bare + 0x201, 4: sp + 0x40, 5: bare + 0x404]),
      // CFI's return address 0.
      (app + 0x1020, sp + 0x10000, 0, sp + 0x10020, [0: 0, 2: bare + 0x201, 4: sp + 0x10040, 5: bare + 0x404]),
      // CFI's caller at the callee's own sp.
      (app + 0x2010, sp + 0x20000, 0, sp + 0x20020, [0: bare + 0x301, 2: bare + 0x201, 4: sp + 0x20040, 5: bare + 0x404]),
    ]))
    let theirs = try Self.walk(path, theirs: true, stores: [store])
    let ours = try Self.walk(path, theirs: false, stores: [store])
    #expect(theirs["system_info"]?["cpu_arch"]?.string == "amd64")
    #expect(Self.threads(theirs).map { $0.map(\.trust) } == [["context"], ["context"], ["context"]], "\(Self.threads(theirs))")
    Self.expectSameFrames(ours: ours, theirs: theirs, "amd64 CFI to the first page")
  }

  // MARK: arm64 pointer authentication

  /// arm64.rs strips pointer-authentication bits (every bit past the highest module's end, at least 47
  /// bits kept) from a frame record's pc and fp and from the pc, lr and x29 that CFI gives. Before,
  /// a signed return address was no pc (past 0xfffffffffffff) and the walk scanned instead, and a
  /// signed pc from CFI lay in no module.
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func arm64PointerAuthenticationBitsAreStripped() throws {
    let directory = try makeTemporaryDirectory("imagelog-arm64-pac")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let store = try Self.madeStore(in: directory, architecture: "arm64", [
      ("app", Self.app.buildID, """
        FUNC 1000 100 0 inner
        FUNC 2000 100 0 middle
        STACK CFI INIT 1000 100 .cfa: sp 16 + .ra: .cfa -8 + ^ x29: .cfa -16 + ^

        """),
    ])
    let (app, bare) = (Self.app.base, Self.bare.base)
    let sp: UInt64 = 0x7FFF_0000_0000
    let signed: UInt64 = 0x0023_0000_0000_0000
    let path = directory + "/arm64-pac.dmp"
    try writeFile(path, bytes: try Self.madeDump(.arm64, threads: [
      // Frame records whose pc and fp are signed; libbare words to scan if they were refused.
      (bare + 0x100, sp, 0, sp + 0x10,
       [1: bare + 0x201, 2: (sp + 0x40) | signed, 3: (bare + 0x404) | signed, 5: bare + 0x301,
        8: 0, 9: (bare + 0x808) | signed]),
      // CFI's pc and x29 signed, then x29's record.
      (app + 0x1010, sp + 0x10000, 0, 0, [0: (sp + 0x10020) | signed, 1: (app + 0x2014) | signed, 3: bare + 0x201,
                                          4: 0, 5: (bare + 0x604) | signed]),
    ]))
    let theirs = try Self.walk(path, theirs: true, stores: [store])
    let ours = try Self.walk(path, theirs: false, stores: [store])
    let walked = Self.threads(theirs)
    #expect(walked.first?.map(\.trust) == ["context", "frame_pointer", "frame_pointer"], "\(walked)")
    #expect(walked.last?.dropFirst().first?.trust == "cfi" && walked.last?.dropFirst().first?.module == "app", "\(walked)")
    Self.expectSameFrames(ours: ours, theirs: theirs, "arm64 pointer authentication")
  }

  // MARK: Windows amd64 frame records

  /// minidump-stackwalk 0.25's amd64.rs follows no rbp frame record on Windows (rbp may point into the
  /// middle of a frame there; only UNWIND_INFO says where): the caller a record would give is found by
  /// scanning, if at all. Before, imagelog took the record. (0.26 tries 16 offsets above rbp instead;
  /// the oracle here is 0.25.)
  @Test(.enabled(if: canRun, "needs minidump-stackwalk (Scripts/install-test-tools)"))
  func windowsAmd64FollowsNoFrameRecord() throws {
    let directory = try makeTemporaryDirectory("imagelog-windows-amd64-fp")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let bare = Self.bare.base
    let sp: UInt64 = 0x7FFF_0000_0000
    let path = directory + "/windows-amd64.dmp"
    // rbp's record: the caller's rbp and a return address into libbare, then another record.
    try writeFile(path, bytes: try Self.madeDump(.amd64, platformID: 2, threads: [
      (bare + 0x100, sp, 0, sp + 0x20, [4: sp + 0x40, 5: bare + 0x404, 8: 0, 9: bare + 0x808]),
    ]))
    let theirs = try Self.walk(path, theirs: true, stores: [])
    let ours = try Self.walk(path, theirs: false, stores: [])
    #expect(theirs["system_info"]?["os"]?.string == "Windows NT")
    let walked = Self.threads(theirs)
    #expect(walked.first?.dropFirst().allSatisfy { $0.trust == "scan" } == true && (walked.first?.count ?? 0) > 1, "\(walked)")
    Self.expectSameFrames(ours: ours, theirs: theirs, "Windows amd64")
  }
}
