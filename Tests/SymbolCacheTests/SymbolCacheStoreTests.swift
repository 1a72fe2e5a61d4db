import Glibc
import ImageLogTestSupport
import ImageReaders
@testable import Symbolication
import Testing

/// The cache folder: entries written whole and used next time, bad entries rebuilt, an unwritable
/// folder harmless, the size bound kept by evicting the least recently used. Each test has its own
/// folder.
@Suite struct SymbolCacheStoreTests {
  static func fixture(_ name: String) throws -> CacheFixture {
    try #require(CacheFixtures.all.first { $0.name == name })
  }

  static func open(_ fixture: CacheFixture, _ settings: SymbolCacheSettings) throws -> DebugInfoFile {
    let digits = Array(fixture.identity.utf8)
    let identity = BuildID(stride(from: 0, to: digits.count - 1, by: 2).compactMap {
      UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)
    })
    return try DebugInfoFile.open(path: fixture.path, architecture: nil, supplementaryPath: fixture.supplementaryPath,
                                  identity: identity, symbolCache: settings)
  }

  static func entryPath(_ fixture: CacheFixture, _ settings: SymbolCacheSettings) throws -> String {
    let name = try #require(SymbolCacheStore.entryName(identity: fixture.identity, fingerprint: try CacheFixtures.fingerprint(fixture)))
    return settings.directory + "/" + name
  }

  /// True when the file answers from a symbol cache, not from its DWARF.
  static func fromCache(_ file: DebugInfoFile) -> Bool {
    if case .symbolCache = file.answers { return true }
    return false
  }

  /// `file` answers as the fixture's DWARF does at the probes; the first differences otherwise.
  static func differences(_ file: DebugInfoFile, _ fixture: CacheFixture) throws -> [String] {
    let oracle = try CacheFixtures.dwarf(fixture)
    let table = try CacheFixtures.dwarf(fixture).answerTable()
    var found: [String] = []
    for address in CacheFixtures.probes(table, random: 500, seed: 0xCAFE) {
      let expected = CacheFixtures.answer { try oracle.frames(at: address) }
      let answered = CacheFixtures.answer { try file.frames(at: address) }
      if expected != answered && found.count < 5 { found.append("0x\(String(address, radix: 16)): \(expected) != \(answered)") }
    }
    return found
  }

  static func names(_ directory: String) -> [String] { directoryNames(directory) }

  /// The first run builds and writes the entry (and answers from it); the next maps it.
  @Test func firstRunWritesTheNextReads() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let settings = SymbolCacheSettings(directory: folder + "/imagelog")
    let fixture = try Self.fixture("gcc-cxx-O2-dwarf5")
    let cold = try Self.open(fixture, settings)
    #expect(Self.fromCache(cold))
    #expect(try Self.differences(cold, fixture).isEmpty)
    let path = try Self.entryPath(fixture, settings)
    #expect(Self.names(settings.directory) == [String(path.split(separator: "/").last ?? "")])
    let written = try #require(readFileBytes(path))
    #expect(written == (try CacheFixtures.cacheBytes(fixture)))
    let warm = try Self.open(fixture, settings)
    #expect(Self.fromCache(warm))
    #expect(try Self.differences(warm, fixture).isEmpty)
  }

  enum Damage: String, CaseIterable, CustomStringConvertible {
    case tampered, truncated, foreign, olderVersion, notACache
    var description: String { rawValue }
  }

  /// An entry that is damaged, cut short, another file's, of an older format or not a cache at all
  /// is not believed: the answers are the DWARF's, and the entry is rebuilt.
  @Test(arguments: Damage.allCases)
  func badEntryIsRebuilt(damage: Damage) throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let settings = SymbolCacheSettings(directory: folder)
    let fixture = try Self.fixture("gcc-c-O2-dwarf5")
    let good = try CacheFixtures.cacheBytes(fixture)
    var bad: [UInt8]
    switch damage {
    case .tampered:
      bad = good
      bad[bad.count / 2] ^= 0x01
    case .truncated:
      bad = Array(good.prefix(good.count - 100))
    case .foreign:
      bad = try CacheFixtures.cacheBytes(try Self.fixture("gcc-cxx-O2-dwarf4"))
    case .olderVersion:
      bad = good
      try SymbolCacheFormatTests.forge(&bad, SymbolCacheFormat.version - 1, at: 4)
    case .notACache:
      bad = Array("imagelog symbol cache? no\n".utf8)
    }
    let path = try Self.entryPath(fixture, settings)
    try writeFile(path, bytes: bad)
    let file = try Self.open(fixture, settings)
    #expect(Self.fromCache(file))
    #expect(try Self.differences(file, fixture).isEmpty)
    #expect(readFileBytes(path) == good, "the entry was not rebuilt")
  }

  /// A cache folder that cannot be made (its parent is a regular file) changes nothing but speed: the
  /// answers are right and nothing is written.
  @Test func unwritableFolderOnlyCostsSpeed() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/file", "not a folder\n")
    let settings = SymbolCacheSettings(directory: folder + "/file/imagelog")
    let fixture = try Self.fixture("gcc-cxx-O2-dwarf5")
    let file = try Self.open(fixture, settings)
    #expect(try Self.differences(file, fixture).isEmpty)
    #expect(Self.names(folder) == ["file"])
  }

  /// A read-only folder holding a good entry: it is used. (Root writes anyway, so this only tells
  /// something for other users.)
  @Test(.enabled(if: geteuid() != 0, "root ignores a folder's permissions"))
  func readOnlyFolderIsRead() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { chmod(folder, 0o755); _ = try? runChild(["rm", "-rf", folder]) }
    let settings = SymbolCacheSettings(directory: folder)
    let fixture = try Self.fixture("gcc-cxx-O2-dwarf5")
    _ = try Self.open(fixture, settings)
    chmod(folder, 0o555)
    let file = try Self.open(fixture, settings)
    #expect(Self.fromCache(file))
    #expect(try Self.differences(file, fixture).isEmpty)
  }

  /// An entry that checks (identity, fingerprint and checksum all right) but answers as another
  /// program does: what another user who could write the folder or the entry would plant.
  static func forgedEntry(_ fixture: CacheFixture) throws -> [UInt8] {
    let other = try CacheFixtures.dwarf(try Self.fixture("gcc-cxx-O2-dwarf4")).answerTable()
    return try #require(SymbolCacheFormat.bytes(of: other, identity: fixture.identity, fingerprint: try CacheFixtures.fingerprint(fixture)))
  }

  /// Plants the forged entry of `fixture` in `settings`' folder, made (mode 0700) when missing, and
  /// shows that, in a private folder, it would be used and answer wrong.
  static func plantForged(_ fixture: CacheFixture, _ settings: SymbolCacheSettings) throws -> (path: String, bytes: [UInt8]) {
    let forged = try forgedEntry(fixture)
    let path = try entryPath(fixture, settings)
    if access(settings.directory, F_OK) != 0 { #expect(mkdir(settings.directory, 0o700) == 0) }
    try writeFile(path, bytes: forged)
    #expect(chmod(path, 0o644) == 0)
    let believed = try open(fixture, settings)
    let wrong = try differences(believed, fixture)
    #expect(fromCache(believed) && !wrong.isEmpty, "the forged entry answers as its fixture")
    return (path, forged)
  }

  /// An entry in a folder others may write (a shared or pre-made XDG_CACHE_HOME), or an entry others
  /// may write: not used (the answers are the DWARF's, as with --no-cache), and nothing is written
  /// into such a folder.
  @Test func entriesOthersMayWriteAreNotUsed() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let fixture = try Self.fixture("gcc-c-O2-dwarf5")
    for (index, mode) in [0o777, 0o775, 0o1777].enumerated() {
      let settings = SymbolCacheSettings(directory: folder + "/shared-\(index)")
      let (path, forged) = try Self.plantForged(fixture, settings)
      #expect(chmod(settings.directory, mode_t(mode)) == 0)
      let file = try Self.open(fixture, settings)
      #expect(try Self.differences(file, fixture).isEmpty, "folder mode \(String(mode, radix: 8))")
      #expect(readFileBytes(path) == forged, "written into a folder of mode \(String(mode, radix: 8))")
    }
    for mode in [0o666, 0o646, 0o664] {
      let settings = SymbolCacheSettings(directory: folder + "/entry-\(String(mode, radix: 8))")
      let (path, _) = try Self.plantForged(fixture, settings)
      #expect(chmod(path, mode_t(mode)) == 0)
      let file = try Self.open(fixture, settings)
      #expect(try Self.differences(file, fixture).isEmpty, "entry mode \(String(mode, radix: 8))")
      // The folder is the user's: the right entry replaces the planted one, mode 0600.
      #expect(readFileBytes(path) == (try CacheFixtures.cacheBytes(fixture)))
      var info = stat()
      #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600, "mode \(String(info.st_mode & 0o777, radix: 8))")
    }
  }

  /// As root, a folder or an entry of another user (65534), private to that user: not used either.
  @Test(.enabled(if: geteuid() == 0, "only root can give a file to another user"))
  func entriesOfAnotherUserAreNotUsed() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let fixture = try Self.fixture("gcc-c-O2-dwarf5")
    let theirs = SymbolCacheSettings(directory: folder + "/theirs")
    let (path, forged) = try Self.plantForged(fixture, theirs)
    #expect(chown(path, 65534, 65534) == 0 && chown(theirs.directory, 65534, 65534) == 0)
    #expect(try Self.differences(try Self.open(fixture, theirs), fixture).isEmpty)
    #expect(readFileBytes(path) == forged, "written into another user's folder")

    let ours = SymbolCacheSettings(directory: folder + "/ours")
    let (entry, _) = try Self.plantForged(fixture, ours)
    #expect(chown(entry, 65534, 65534) == 0)
    #expect(try Self.differences(try Self.open(fixture, ours), fixture).isEmpty)
    var info = stat()
    #expect(stat(entry, &info) == 0 && info.st_uid == 0, "the planted entry is not replaced by root's")
  }

  /// Over the bound, the least recently used entries go: A and B written, A used again, C written with
  /// room for two: B goes.
  @Test func boundEvictsTheLeastRecentlyUsed() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let (a, b, c) = (try Self.fixture("gcc-c-O2-dwarf4"), try Self.fixture("gcc-c-O2-dwarf5"), try Self.fixture("gcc-cxx-O2-dwarf5"))
    let sizes = try [a, b, c].map { UInt64(try CacheFixtures.cacheBytes($0).count) }
    let settings = SymbolCacheSettings(directory: folder, sizeLimit: sizes[0] + sizes[1] + sizes[2] - 1)
    _ = try Self.open(a, settings)
    _ = try Self.open(b, settings)
    // Times an hour apart, in the past: file times are too coarse to order writes made a moment apart.
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    for (fixture, hoursAgo) in [(a, 3), (b, 2)] {
      var times = [timespec(tv_sec: now.tv_sec - hoursAgo * 3600, tv_nsec: 0), timespec(tv_sec: now.tv_sec - hoursAgo * 3600, tv_nsec: 0)]
      #expect(utimensat(AT_FDCWD, try Self.entryPath(fixture, settings), &times, 0) == 0)
    }
    #expect(Self.fromCache(try Self.open(a, settings)))  // a use: A is now the most recent
    _ = try Self.open(c, settings)
    let left = Set(Self.names(folder))
    #expect(left == Set(try [a, c].map { String(try Self.entryPath($0, settings).split(separator: "/").last ?? "") }))
  }

  /// A writer that died mid-write leaves its temporary file (writeFileAtomically's `.NAME.XXXXXX`):
  /// the next write removes it once it is an hour old, and leaves a younger one (it may be in use).
  @Test func abandonedTemporaryFilesGo() throws {
    let folder = try makeTemporaryDirectory("symbol-cache")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let settings = SymbolCacheSettings(directory: folder)
    let (a, b) = (try Self.fixture("gcc-c-O2-dwarf4"), try Self.fixture("gcc-c-O2-dwarf5"))
    _ = try Self.open(a, settings)
    let entry = String(try Self.entryPath(a, settings).split(separator: "/").last ?? "")
    let (old, young) = (folder + "/." + entry + ".Xb12Zq", folder + "/." + entry + ".Yc34Wr")
    try writeFile(old, "half")
    try writeFile(young, "half")
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var times = [timespec(tv_sec: now.tv_sec - 2 * 3600, tv_nsec: 0), timespec(tv_sec: now.tv_sec - 2 * 3600, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, old, &times, 0) == 0)
    _ = try Self.open(b, settings)
    #expect(Set(Self.names(folder)) == Set([entry, String(try Self.entryPath(b, settings).split(separator: "/").last ?? ""),
                                             "." + entry + ".Yc34Wr"]))
  }

  @Test func sizesParse() {
    #expect(SymbolCacheSettings.size("1048576") == 1 << 20)
    #expect(SymbolCacheSettings.size("64K") == 64 << 10)
    #expect(SymbolCacheSettings.size("200M") == 200 << 20)
    #expect(SymbolCacheSettings.size("2g") == 2 << 30)
    for bad in ["", "M", "-1", "1.5G", "12T", "99999999999999999999", "17179869184G"] {
      #expect(SymbolCacheSettings.size(bad) == nil, "\(bad)")
    }
  }
}
