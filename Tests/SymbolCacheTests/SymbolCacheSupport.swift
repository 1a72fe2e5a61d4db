import Glibc
import ImageLogTestSupport
import ImageReaders
@testable import Symbolication

/// One DWARF file of Scripts/make-dwarf-fixtures (SymbolicationTests' fixtures), as the cache sees it.
struct CacheFixture: CustomStringConvertible, Sendable {
  var name: String
  /// The file whose DWARF is read.
  var path: String
  /// dwz's supplementary file, for the dwz programs.
  var supplementaryPath: String?
  /// The build-id or UUID, in hex (zeros for a file without one).
  var identity: String

  var description: String { name }
}

enum CacheFixtures {
  static let directory = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf"

  /// Every fixture with DWARF: the compiler matrix, the split debug file, the dwz programs (with their
  /// common file), Swift, and the Mach-O programs' dSYM DWARF files.
  static let all: [CacheFixture] = {
    var fixtures: [CacheFixture] = []
    for name in directoryNames(directory) {
      let path = directory + "/" + name
      var fixture: CacheFixture
      if name.hasPrefix("gcc-") || name.hasPrefix("clang") || name.hasPrefix("swift-") {
        fixture = CacheFixture(name: name, path: path, identity: "")
      } else if name.hasPrefix("split-") && name.hasSuffix(".debug") {
        fixture = CacheFixture(name: name, path: path, identity: "")
      } else if name.hasPrefix("dwz-") && !name.contains(".") {
        fixture = CacheFixture(name: name, path: path, supplementaryPath: directory + "/dwz-common.debug", identity: "")
      } else if name.hasPrefix("macho-") && !name.hasSuffix(".dSYM") {
        fixture = CacheFixture(name: name, path: "\(path).dSYM/Contents/Resources/DWARF/\(name)", identity: "")
      } else {
        continue
      }
      // clang's programs here are linked without a build-id: the format tests give them one of zeros
      // (the store leaves files without one alone).
      fixture.identity = (try? SymbolFile.load(path: fixture.path, withSymbols: false))?.first?.buildID?.hex
        ?? String(repeating: "0", count: 40)
      fixtures.append(fixture)
    }
    return fixtures
  }()

  /// The running system's libc debug file from libc6-dbg (found by build-id), when installed.
  static let libcDebugFile: CacheFixture? = {
    guard let libc = (try? SymbolFile.load(path: "/lib/x86_64-linux-gnu/libc.so.6", withSymbols: false))?.first,
          let id = libc.buildID?.hex, id.count > 2 else { return nil }
    let path = "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
    return access(path, R_OK) == 0 ? CacheFixture(name: "libc6-dbg", path: path, identity: id) : nil
  }()

  /// A reader of the fixture's DWARF (the oracle the cache is compared with).
  static func dwarf(_ fixture: CacheFixture) throws -> DWARFReader {
    try DWARFReader(DebugInfoFile.dwarfSections(path: fixture.path, supplementaryPath: fixture.supplementaryPath))
  }

  /// The fixture's fingerprint, as the store computes it.
  static func fingerprint(_ fixture: CacheFixture) throws -> UInt64 {
    guard let value = SymbolCacheStore.fingerprint(path: fixture.path, architecture: nil,
                                                   supplementaryPath: fixture.supplementaryPath) else {
      throw TestSupportError("\(fixture.path): no fingerprint")
    }
    return value
  }

  /// The cache file's bytes for the fixture, built from its DWARF.
  static func cacheBytes(_ fixture: CacheFixture) throws -> [UInt8] {
    let table = try dwarf(fixture).answerTable()
    guard let bytes = SymbolCacheFormat.bytes(of: table, identity: fixture.identity, fingerprint: try fingerprint(fixture)) else {
      throw TestSupportError("\(fixture.name): the table does not fit the format")
    }
    return bytes
  }

  /// Addresses to ask: each range's start and the address before it, and `random` addresses drawn
  /// uniformly from a little before the first range to a little after the last (seeded).
  static func probes(_ table: DWARFAnswerTable, random: Int, seed: UInt64) -> [UInt64] {
    var addresses: [UInt64] = []
    for start in table.starts {
      addresses.append(start)
      if start > 0 { addresses.append(start - 1) }
    }
    guard let first = table.starts.first, let last = table.starts.last else { return addresses }
    var generator = SeededGenerator(seed: seed)
    let low = first >= 64 ? first - 64 : 0, high = last &+ 64
    for _ in 0..<random { addresses.append(UInt64.random(in: low...max(low, high), using: &generator)) }
    return addresses
  }

  /// The answers of `frames` for `addresses`, or the error, as text for `#expect` messages.
  static func answer(_ frames: () throws -> [DWARFFrame]) -> String {
    do {
      return try frames().map { "\($0.function ?? "??") \($0.file):\($0.line):\($0.column)\($0.isInlined ? " (inlined)" : "")" }
        .joined(separator: " <- ")
    } catch {
      return "error: \(error)"
    }
  }
}
