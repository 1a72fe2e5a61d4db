import Glibc
import Runtime
import ImageReaders
import ImageLogTestSupport
import Testing
@testable import ImageLog

/// One line of /proc/self/maps.
struct MapsEntry {
  var start: UInt64
  var end: UInt64
  var permissions: String
  var offset: UInt64
  var path: String

  static func read() throws -> [MapsEntry] {
    try readTextFile("/proc/self/maps").split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
      guard fields.count >= 5 else { return nil }
      let range = fields[0].split(separator: "-")
      guard range.count == 2, let start = parseHex(range[0]), let end = parseHex(range[1]),
            let offset = parseHex(fields[2]) else { return nil }
      let path = fields.count == 6 ? fields[5].trimmingCharacters() : ""
      return MapsEntry(start: start, end: end, permissions: String(fields[1]), offset: offset, path: path)
    }
  }

  /// A file-backed executable mapping, or the vDSO: what must lie in some image's text range.
  var isExecutableImageMapping: Bool {
    permissions.dropFirst(2).first == "x" && (path.hasPrefix("/") || path == "[vdso]")
  }
}

extension Substring {
  func trimmingCharacters() -> String {
    String(drop(while: { $0 == " " }))
  }
}

/// `readelf -lW` PT_LOAD lines: (vaddr, memsz, flags, align).
func readelfLoads(_ path: String) throws -> [(vaddr: UInt64, memsz: UInt64, executable: Bool, align: UInt64)] {
  let result = try runTool(["readelf", "-lW", path])
  guard result.status == 0 else { throw TestSupportError("readelf -lW \(path): \(result.error)") }
  return result.output.split(separator: "\n").compactMap { line in
    let tokens = line.split(separator: " ")
    guard tokens.first == "LOAD", tokens.count >= 8, let vaddr = parseHex(tokens[2]), let memsz = parseHex(tokens[5]),
          let align = parseHex(tokens[tokens.count - 1]) else { return nil }
    let flags = tokens[6..<(tokens.count - 1)].joined()
    return (vaddr, memsz, flags.contains("E"), align)
  }
}

/// The build-id `readelf -n` prints, or nil.
func readelfBuildID(_ path: String) throws -> String? {
  let result = try runTool(["readelf", "-nW", path])
  guard result.status == 0 else { throw TestSupportError("readelf -n \(path): \(result.error)") }
  for line in result.output.split(separator: "\n") {
    let tokens = line.split(separator: " ")
    if let index = tokens.firstIndex(of: "ID:"), index > 0, tokens[index - 1] == "Build", index + 1 < tokens.count {
      return String(tokens[index + 1])
    }
  }
  return nil
}

/// Runs `body` and fails the test when the loader's list changed meanwhile. Tests that compare the
/// list with anything carry `.loaderList`, so no test that loads or unloads libraries runs alongside:
/// a change here means one does so without the trait (a defect of that test, named here, not retried).
func withUnchangedLoaderList<T>(_ body: () throws -> T, sourceLocation: SourceLocation = #_sourceLocation) rethrows -> T {
  let before = LoaderCounters.current()
  let result = try body()
  let after = LoaderCounters.current()
  #expect(after == before, """
    the loader's list changed during the comparison (adds \(before.adds) -> \(after.adds), \
    removals \(before.subs) -> \(after.subs)): some test loads or unloads libraries without .loaderList
    """, sourceLocation: sourceLocation)
  return result
}

/// Every test here compares the loader's list with something: `.loaderList` keeps the tests that
/// load and unload libraries (in any suite) from running meanwhile.
@Suite("LoadedImages.snapshot", .loaderList)
struct SnapshotTests {
  /// A snapshot and /proc/self/maps taken with no loader change in between.
  func consistentSnapshotAndMaps() throws -> ([Image], [MapsEntry]) {
    try withUnchangedLoaderList { (LoadedImages.snapshot(), try MapsEntry.read()) }
  }

  @Test func mainExecutableAndVDSO() throws {
    let images = LoadedImages.snapshot()
    let main = try #require(images.first)
    #expect(main.isMainExecutable)
    #expect(main.path == canonicalPath("/proc/self/exe"))
    #expect(images.filter(\.isMainExecutable).count == 1)
    let vdso = try #require(images.first { $0.path == "[vdso]" })
    #expect(vdso.name == "[vdso]")
    #expect(try MapsEntry.read().first { $0.path == "[vdso]" }?.start == vdso.loadAddress)
    #expect(images.allSatisfy { $0.architecture == "x86_64" || $0.architecture == "arm64" })
  }

  @Test func everyExecutableMappingIsInExactlyOneTextRange() throws {
    let (images, maps) = try consistentSnapshotAndMaps()
    let page = UInt64(sysconf(Int32(_SC_PAGESIZE)))
    for mapping in maps where mapping.isExecutableImageMapping {
      let owners = images.filter { image in
        image.textRange.contains(mapping.start)
          && mapping.end <= (image.textRange.upperBound + page - 1) & ~(page - 1)
      }
      #expect(owners.count == 1, "\(mapping.path) 0x\(hexDigits(mapping.start))-0x\(hexDigits(mapping.end)): \(owners.map(\.path))")
    }
  }

  @Test func noImageIsMissingAndEveryImageIsMapped() throws {
    let (images, maps) = try consistentSnapshotAndMaps()
    // Every image's ELF header is a mapping of its own file (or the vDSO) at its load address.
    for image in images {
      let header = maps.first { $0.start == image.loadAddress }
      let expected = image.path == "[vdso]" ? "[vdso]" : canonicalPath(image.path)
      #expect(header?.path == expected, "\(image.path) at 0x\(hexDigits(image.loadAddress))")
      #expect(header?.offset == 0)
    }
    // Every file with an executable mapping is an image.
    let imagePaths = Set(images.map { $0.path == "[vdso]" ? "[vdso]" : canonicalPath($0.path) })
    for mapping in maps where mapping.isExecutableImageMapping {
      #expect(imagePaths.contains(mapping.path), "\(mapping.path) is mapped executable but not in the snapshot")
    }
  }

  @Test(.enabled(if: haveTool("readelf"), "readelf is not installed"))
  func buildIDsAndRangesAgreeWithReadelf() throws {
    let images = LoadedImages.snapshot()
    #expect(images.count > 3)
    for image in images where image.path.hasPrefix("/") {
      let buildID = try readelfBuildID(image.path)
      #expect(image.buildID?.hex == buildID, "\(image.path)")
      let loads = try readelfLoads(image.path)
      let first = try #require(loads.map { $0.vaddr & ~($0.align > 0 ? $0.align - 1 : 0) }.min())
      let textEnd = loads.filter(\.executable).map { $0.vaddr + $0.memsz }.max() ?? first
      let loadEnd = try #require(loads.map { $0.vaddr + $0.memsz }.max())
      #expect(image.loadAddress &- image.loadBias == first, "\(image.path)")
      #expect(image.textRange.upperBound &- image.loadBias == textEnd, "\(image.path)")
      #expect(image.loadRange.upperBound &- image.loadBias == loadEnd, "\(image.path)")
      if let address = image.buildIDAddress, let id = image.buildID {
        // The address really holds the build-id bytes.
        let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: UInt(address)), count: id.bytes.count)
        #expect(Array(bytes) == id.bytes)
      }
    }
  }

  @Test func theCachedSnapshotEqualsAFreshWalk() throws {
    let (cached, again, walked) = withUnchangedLoaderList {
      (LoadedImages.snapshot(), LoadedImages.snapshot(), LoaderView.capture())
    }
    #expect(cached == again)
    #expect(walked == cached, "a fresh walk builds the same values, in the same order")
  }

  @Test func imageContainingAnAddress() throws {
    let images = LoadedImages.snapshot()
    let libc = try #require(images.first { $0.name.hasPrefix("libc.so") })
    let address = UInt64(UInt(bitPattern: try #require(dlsym(nil, "getpid"))))
    let lookup = try #require(LoadedImages.image(containing: address))
    #expect(lookup.image == libc)
    #expect(lookup.symbolName?.contains("getpid") == true)
    #expect(lookup.symbolAddress == address)
    #expect(lookup.offsetInSymbol == 0)
    #expect(LoadedImages.image(containing: 0) == nil)
    // An address inside the main executable's text.
    let main = images[0]
    #expect(LoadedImages.image(containing: main.textRange.lowerBound + 16)?.image == main)
  }

  /// Swift's own backtracer (`Runtime.ImageMap`, which reads /proc/self/maps and each file's notes) is
  /// an independent oracle: every image it lists is in the snapshot with the same start, end of text
  /// and build-id. (It leaves out the vDSO, which the snapshot includes.) `ImageMap.capture()` reads
  /// every mapped ELF file's headers from memory without a lock, so a mapping that another suite
  /// unmaps meanwhile (FileBytesTests, the observer tests) crashes it: the comparison runs in a child
  /// process of this test bundle where it is the only test (`imageMapChild`).
  @Test func agreesWithSwiftsImageMap() throws {
    let executable = try #require(CrashReporterTests.selfExecutable())
    let result = try CrashTestSupport.run(executable, ["--testing-library", "swift-testing", "--filter", "imageMapChild"],
                                          environment: ["IMAGELOG_IMAGEMAP_CHILD": "1"])
    #expect(!result.timedOut)
    #expect(result.exitCode == 0, "\(result.stderr.suffix(3000))")
    // The child ran the comparison (a filter that matched nothing would also exit 0).
    #expect(result.stderr.contains("Test imageMapChild() passed"), "\(result.stderr.suffix(2000))")
  }
}

/// Runs only in the child process started by `agreesWithSwiftsImageMap`.
@Suite struct SnapshotImageMapChild {
  @Test(.enabled(if: getenv("IMAGELOG_IMAGEMAP_CHILD") != nil, "only in a child process"))
  func imageMapChild() throws {
    // The only test in its process: nothing loads or unloads meanwhile.
    let (images, map, maps) = try withUnchangedLoaderList { (LoadedImages.snapshot(), ImageMap.capture(), try MapsEntry.read()) }
    #expect(map.count >= images.count - 1)
    for entry in map {
      let start = try #require(UInt64(entry.baseAddress))
      let image = images.first { $0.loadAddress == start }
      guard let image else {
        // ImageMap lists every mapped ELF file, loaded or only mapped read-only (as FileBytes maps
        // files); a loaded image has an executable mapping in its span.
        let end = UInt64(entry.endOfText) ?? .max
        let loaded = maps.contains { $0.isExecutableImageMapping && $0.path == entry.path && $0.start >= start && $0.start < end }
        #expect(!loaded, "\(entry.path ?? "?") at 0x\(hexDigits(start)) is not in the snapshot")
        continue
      }
      #expect(UInt64(entry.endOfText) == image.textRange.upperBound, "\(image.path)")
      #expect(entry.uniqueID == image.buildID?.bytes, "\(image.path)")
      if let path = entry.path { #expect(canonicalPath(path) == canonicalPath(image.path)) }
    }
  }
}
