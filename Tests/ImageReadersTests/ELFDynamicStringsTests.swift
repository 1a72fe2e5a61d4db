#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// DT_NEEDED and DT_SONAME are read from the part of the dynamic string table that holds them, not the
/// whole table: the names and errors must be the whole table's, whether a name ends inside that part
/// or runs past it, and readelf must agree on the names.
@Suite struct ELFDynamicStringsTests {
  /// A string table of `fillerCount` bytes of symbol-like names, then "libneeded.so.1", then `soname`
  /// (with its NUL unless `terminated` is false, when the table ends inside it); and where `soname` starts.
  static func image(fillerCount: Int, soname: String, terminated: Bool = true) -> (image: ELFTestImage, sonameOffset: Int) {
    var strings: [UInt8] = [0]
    var symbol = 0
    while strings.count < fillerCount {
      strings += Array("symbol_\(symbol)".utf8) + [0]
      symbol += 1
    }
    let neededOffset = strings.count
    strings += Array("libneeded.so.1".utf8) + [0]
    let sonameOffset = strings.count
    strings += Array(soname.utf8) + (terminated ? [0] : [])
    return (ELFTestImage(strings: strings, neededOffset: neededOffset, sonameOffset: sonameOffset), sonameOffset)
  }

  static func decodeRanged(_ bytes: [UInt8]) -> (text: String, requests: [Range<Int>]) {
    ELFRangedSourceTests.decodeRanged(bytes)
  }

  static func write(_ bytes: [UInt8], to path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    try #require(fd >= 0, "cannot write \(path)")
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    try #require(written == bytes.count, "short write to \(path)")
  }

  @Test func namesInsideAndPastTheReadPartAgreeWithReadelf() throws {
    try #require(haveTool("readelf"), "readelf (binutils) is not installed")
    let longName = "lib" + String(repeating: "x", count: 3 * ELFDynamicInfo.nameWindowSlack) + ".so.9"
    let cases = [("short", Self.image(fillerCount: 20_000, soname: "libsoname.so.2").image),
                 ("long", Self.image(fillerCount: 20_000, soname: longName).image),
                 ("small-table", Self.image(fillerCount: 0, soname: "libsoname.so.2").image)]
    let folder = try makeTemporaryDirectory("imagelog-dynstr")
    var paths: [String] = []
    for (name, image) in cases {
      let path = folder + "/" + name
      try Self.write(image.bytes, to: path)
      paths.append(path)
    }
    let facts = try ReadelfFacts.run(["-d"], paths: paths)
    for ((name, image), path) in zip(cases, paths) {
      let file = try image.bytes.withUnsafeBytes { raw throws(FormatError) in try ELFFile(ByteReader(raw)) }
      let readelf = try #require(facts[path], "\(name): readelf printed nothing")
      #expect(file.needed == readelf.needed, "\(name)")
      #expect(file.soname == readelf.soname, "\(name)")
      #expect(readelf.needed == ["libneeded.so.1"], "\(name)")
      // The ranged decode is the whole-file decode.
      #expect(Self.decodeRanged(image.bytes).text == ELFRangedSourceTests.decodeWhole(image.bytes), "\(name)")
    }
    for path in paths { unlink(path) }
    rmdir(folder)
  }

  @Test func aBigTableIsNotFetchedWholeWhenTheNamesEndInsideThePartRead() throws {
    let image = Self.image(fillerCount: 20_000, soname: "libsoname.so.2").image
    let table = image.dynamicStringsOffset..<image.dynamicStringsOffset + 20_000
    let ranged = Self.decodeRanged(image.bytes)
    #expect(!ranged.text.hasPrefix("error"), "\(ranged.text)")
    #expect(!ranged.requests.contains { $0.lowerBound <= table.lowerBound && $0.upperBound >= table.lowerBound + 20_000 },
            "requests: \(ranged.requests)")
    // A name longer than the part read is then read from the whole table.
    let long = Self.image(fillerCount: 20_000, soname: String(repeating: "y", count: 2 * ELFDynamicInfo.nameWindowSlack)).image
    let longRanged = Self.decodeRanged(long.bytes)
    #expect(longRanged.requests.contains { $0.lowerBound <= long.dynamicStringsOffset && $0.upperBound >= long.dynamicStringsOffset + 20_000 })
  }

  @Test func aNameRunningOffTheTableIsTheWholeTablesError() throws {
    // The table (DT_STRSZ) ends inside the SONAME, far from the table's start, with the NEEDED name
    // before it: the error names the SONAME's offset in the whole table, as a whole-table read does.
    for soname in ["libsoname.so.2", String(repeating: "z", count: 2 * ELFDynamicInfo.nameWindowSlack)] {
      let (image, sonameOffset) = Self.image(fillerCount: 5000, soname: soname, terminated: false)
      let whole = ELFRangedSourceTests.decodeWhole(image.bytes)
      #expect(whole == "error: \(FormatError.unterminatedString(at: sonameOffset))", "\(soname.count)")
      #expect(Self.decodeRanged(image.bytes).text == whole)
    }
  }
}
