import FoundationEssentials
import Glibc
import ImageReaders
import ImageLogTestSupport
import Testing
@testable import ImageLog

/// The dashed uppercase UUID of a hex build-id's first 16 bytes (zero-padded), written independently
/// of `BuildID` so the formatter is checked against readelf's text.
func dashedUUID(fromHex hex: String) -> String {
  let digits = Array((hex + String(repeating: "0", count: 32)).prefix(32)).map(String.init)
  return [digits[0..<8], digits[8..<12], digits[12..<16], digits[16..<20], digits[20..<32]]
    .map { $0.joined() }.joined(separator: "-").uppercased()
}

struct JSONImage: Decodable, Equatable {
  var event: String
  var path: String
  var name: String
  var loadAddress: String
  var loadBias: String
  var textStart: String
  var textEnd: String
  var textSize: UInt64
  var loadEnd: String
  var loadSize: UInt64
  var fileMappedEnd: String
  var buildID: String?
  var uuid: String?
  var debugID: String?
  var buildIDAddress: String?
  var architecture: String
  var isMainExecutable: Bool
}

/// Formats the images loaded in this process and compares them with their files and eu-unstrip:
/// `.loaderList` keeps tests that load or unload libraries from running meanwhile.
@Suite("ImageFormatter", .loaderList)
struct FormatterTests {
  let images = LoadedImages.snapshot()

  @Test(.enabled(if: haveTool("readelf"), "readelf is not installed"))
  func crashStyleShapeAndValues() throws {
    for image in images {
      let line = ImageFormatter(style: .crash).format(image)
      #expect(!line.contains("\n"))
      // 0xSTART - 0xEND [+]name arch  <32 hex> path
      let parts = line.split(separator: " ", maxSplits: 6, omittingEmptySubsequences: false)
      try #require(parts.count == 7, "\(line)")
      #expect(parseHex(parts[0]) == image.loadAddress && parts[0].hasPrefix("0x"))
      #expect(parts[1] == "-")
      #expect(parseHex(parts[2]) == image.textRange.upperBound - 1, "END is the last byte, inclusive")
      #expect(parts[3] == (image.isMainExecutable ? "+" : "") + image.name)
      #expect(parts[4] == image.architecture)
      #expect(parts[5] == "", "two spaces before <")
      let rest = parts[6]
      let close = try #require(rest.firstIndex(of: ">"))
      let id = rest[rest.index(after: rest.startIndex)..<close]
      #expect(id.count == 32 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase })
      #expect(rest[rest.index(close, offsetBy: 2)...] == image.path[...])
      if image.path.hasPrefix("/"), let readelf = try readelfBuildID(image.path) {
        #expect(String(id) == String(readelf.prefix(32)))
        let full = ImageFormatter(style: .crash, fullBuildIDs: true).format(image)
        #expect(full.contains("  <\(readelf)> "))
      }
    }
    #expect(ImageFormatter(style: .crash).format(images[0]).contains(" +"))
  }

  @Test(.enabled(if: haveTool("readelf"), "readelf is not installed"))
  func loggerStyle() throws {
    for image in images where image.path.hasPrefix("/") {
      let readelf = try #require(try readelfBuildID(image.path))
      let expected = "Added: 0x\(String(image.loadAddress, radix: 16)) (0x\(String(image.textSize, radix: 16))) "
        + "\(image.path) <\(dashedUUID(fromHex: readelf))>"
      #expect(ImageFormatter(style: .logger).format(image) == expected)
      #expect(ImageFormatter(style: .logger).format(image, event: .removed) == "Removed:" + expected.dropFirst("Added:".count))
    }
  }

  @Test(.enabled(if: haveTool("eu-unstrip"), "eu-unstrip (elfutils) is not installed"))
  func unstripStyleMatchesElfutilsFirstTwoColumns() throws {
    let result = try runTool(["eu-unstrip", "-n", "-p", String(getpid())])
    try #require(result.status == 0, "eu-unstrip failed: \(result.error)")
    var elfutils: [UInt64: (String, String)] = [:]
    for line in result.output.split(separator: "\n") {
      let columns = line.split(separator: " ")
      guard columns.count >= 2, let plus = columns[0].firstIndex(of: "+"), let start = parseHex(columns[0][..<plus]) else { continue }
      elfutils[start] = (String(columns[0]), String(columns[1]))
    }
    let current = withUnchangedLoaderList { LoadedImages.snapshot() }
    #expect(current == images, "no library was loaded or unloaded since eu-unstrip read the maps")
    for image in current {
      guard let (range, id) = elfutils[image.loadAddress] else {
        Issue.record("\(image.path) at 0x\(hexDigits(image.loadAddress)) is not in eu-unstrip's list")
        continue
      }
      let columns = ImageFormatter(style: .unstrip).format(image).split(separator: " ")
      #expect(String(columns[0]) == range, "\(image.path)")
      #expect(String(columns[1]) == id, "\(image.path)")
    }
    #expect(current.contains { $0.path == "[vdso]" && elfutils[$0.loadAddress] != nil }, "the vDSO is listed")
  }

  @Test func jsonLinesHaveStableFields() throws {
    for image in images {
      let line = ImageFormatter(style: .json).format(image)
      #expect(!line.contains("\n"))
      let decoded = try JSONDecoder().decode(JSONImage.self, from: Data(line.utf8))
      #expect(decoded.event == "added")
      #expect(decoded.path == image.path)
      #expect(decoded.name == image.name)
      #expect(parseHex(decoded.loadAddress) == image.loadAddress)
      #expect(parseHex(decoded.loadBias) == image.loadBias)
      #expect(parseHex(decoded.textStart) == image.textRange.lowerBound)
      #expect(parseHex(decoded.textEnd) == image.textRange.upperBound)
      #expect(decoded.textSize == image.textSize)
      #expect(parseHex(decoded.loadEnd) == image.loadRange.upperBound)
      #expect(decoded.loadSize == image.loadSize)
      #expect(parseHex(decoded.fileMappedEnd) == image.fileMappedRange.upperBound)
      #expect(decoded.buildID == image.buildID?.hex)
      #expect(decoded.buildIDAddress.flatMap(parseHex) == image.buildIDAddress)
      #expect(decoded.isMainExecutable == image.isMainExecutable)
      if let hex = decoded.buildID {
        #expect(decoded.uuid == dashedUUID(fromHex: hex))
        // debug-id: the first three UUID fields byte-swapped.
        let d = Array(hex.prefix(32))
        func swapped(_ range: Range<Int>) -> String {
          stride(from: range.upperBound - 2, through: range.lowerBound, by: -2).map { String(d[$0..<$0 + 2]) }.joined()
        }
        let expected = swapped(0..<8) + "-" + swapped(8..<12) + "-" + swapped(12..<16) + "-"
          + String(d[16..<20]) + "-" + String(d[20..<32])
        #expect(decoded.debugID == expected.uppercased())
      }
    }
    let removed = ImageFormatter(style: .json).format(images[0], event: .removed)
    #expect(try JSONDecoder().decode(JSONImage.self, from: Data(removed.utf8)).event == "removed")
  }

  @Test func jsonEscapesPathsAndImagesWithoutBuildIDs() throws {
    let odd = Image(path: "/tmp/a \"quoted\"\\dir/new\nline\u{1}.so", loadAddress: 0x1000, loadBias: 0x1000,
                    textRange: 0x1000..<0x2000, loadRange: 0x1000..<0x3000, buildID: nil,
                    architecture: "x86_64", isMainExecutable: false)
    let decoded = try JSONDecoder().decode(JSONImage.self, from: Data(ImageFormatter(style: .json).format(odd).utf8))
    #expect(decoded.path == odd.path)
    #expect(decoded.buildID == nil && decoded.uuid == nil && decoded.buildIDAddress == nil)
    #expect(ImageFormatter(style: .crash).format(odd).contains("  <00000000000000000000000000000000> "))
    #expect(ImageFormatter(style: .unstrip).format(odd).hasPrefix("0x1000+0x2000 - "))
    #expect(ImageFormatter(style: .logger).format(odd).hasSuffix(" <00000000-0000-0000-0000-000000000000>"))
  }

  /// An image whose path would clear the screen and forge a `Removed:` line: every text style shows
  /// it escaped on one line, and the path un-escapes to the original.
  @Test func textStylesEscapePathsAndNames() throws {
    let path = "/tmp/lib\u{1B}[2J\nRemoved: 0xdead (0x1) FORGED\u{9B}\\.so"
    let hostile = Image(path: path, loadAddress: 0x1000, loadBias: 0x1000, textRange: 0x1000..<0x2000,
                        loadRange: 0x1000..<0x3000, buildID: nil, architecture: "x86_64", isMainExecutable: false)
    let escapedPath = "/tmp/lib\\x1b[2J\\nRemoved: 0xdead (0x1) FORGED\\u{9b}\\\\.so"
    #expect(TextEscaping.unescaped(escapedPath) == Array(path.utf8))
    for style in [ImageFormatStyle.logger, .crash, .unstrip] {
      for event in [ImageEvent.added, .removed] {
        let line = ImageFormatter(style: style).eventLine(hostile, event: event, pid: 42,
                                                          timing: ImageTiming(sinceStart: 1_500_000, loadDuration: 2_000))
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(style)")
        #expect(line.contains(" " + escapedPath), "\(style): \(line)")
        #expect(line.hasPrefix("[pid 42] " + (event == .added ? "Added: " : "Removed: ")) || style == .logger)
        #expect(line.hasSuffix("  +1.500 ms (loaded in 0.002 ms)"), "\(style): \(line)")
      }
    }
    #expect(ImageFormatter(style: .crash).format(hostile).contains(" lib\\x1b[2J\\nRemoved: 0xdead (0x1) FORGED\\u{9b}\\\\.so x86_64  <"))
  }

  /// `pid` and `timing` are members of the JSON object (first, and last), not text spliced into it.
  @Test func jsonCarriesPidAndTiming() throws {
    let line = ImageFormatter(style: .json).eventLine(images[0], event: .removed, pid: 7,
                                                      timing: ImageTiming(sinceStart: 12, loadDuration: 3))
    let value = try JSONValue.parse(Substring(line))
    guard case .object(let members) = value else { Issue.record("not an object: \(line)"); return }
    #expect(members.first?.0 == "pid" && value["pid"]?.integer == 7)
    #expect(members.suffix(2).map(\.0) == ["addedAtNanoseconds", "loadNanoseconds"])
    #expect(value["addedAtNanoseconds"]?.integer == 12 && value["loadNanoseconds"]?.integer == 3)
    #expect(value["event"]?.string == "removed")
    #expect(ImageFormatter(style: .json).format(images[0]) == ImageFormatter(style: .json).eventLine(images[0], event: .added))
  }

  @Test func everyStyleHasARawValueForTheCommandLine() {
    #expect(ImageFormatStyle.allCases.map(\.rawValue) == ["logger", "crash", "unstrip", "json"])
  }
}
