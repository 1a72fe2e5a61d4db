import Foundation
import ImageLogTestSupport
import Testing

/// `imagelog symbolicate --search` over an Apple `.crash` report of the Mach-O debug fixture, whose
/// dSYM dsymutil-14 made (Scripts/make-fixtures): every frame's function and file:line:column are
/// `llvm-symbolizer-14 --obj=<the dSYM's DWARF file>`'s for the same link-time address.
@Suite(.enabled(if: ["llvm-symbolizer-14", "llvm-otool-14", "llvm-dwarfdump-14", "llvm-symbolizer"].allSatisfy(haveTool),
                "needs llvm-symbolizer-14, llvm-otool-14, llvm-dwarfdump-14 and llvm-symbolizer"))
struct SymbolicateDSYMTests {
  static let fixtures = packageRoot + "/Tests/ImageReadersTests/Fixtures/macho"
  static let binary = fixtures + "/debugfixture"
  static let dwarf = fixtures + "/debugfixture.dSYM/Contents/Resources/DWARF/debugfixture"

  @Test func crashReportThroughTheCLI() throws {
    let uuidLine = try runChild(["llvm-dwarfdump-14", "--uuid", Self.binary]).output.split(separator: " ")
    try #require(uuidLine.count >= 3 && uuidLine[0] == "UUID:")
    let uuid = uuidLine[1].lowercased().filter { $0 != "-" }
    // __TEXT's vmaddr and __text's addr and size, from llvm-otool-14 -l.
    let otool = try runChild(["llvm-otool-14", "-l", Self.binary]).output.split(separator: "\n")
      .map { $0.split(separator: " ").map(String.init) }
    func value(after marker: [String], _ field: String) throws -> UInt64 {
      let at = try #require(otool.firstIndex(of: marker), "no \(marker) in llvm-otool-14 -l")
      let line = try #require(otool[at...].first { $0.first == field }, "no \(field) after \(marker)")
      return try #require(UInt64(line.last?.dropFirst(2) ?? "", radix: 16))
    }
    let textSegment = try value(after: ["segname", "__TEXT"], "vmaddr")
    let textStart = try value(after: ["sectname", "__text"], "addr")
    let textSize = try value(after: ["sectname", "__text"], "size")
    let addresses = Array(stride(from: textStart, to: textStart + textSize, by: 4))
    try #require(addresses.count > 4)
    let load: UInt64 = 0x1_0400_0000
    var report = "Process:             debugfixture [77]\nPath:                /Applications/Gone.app/debugfixture\n"
    report += "Code Type:           ARM-64 (Native)\nOS Version:          macOS 14.0 (23A344)\nCrashed Thread:  0\n\n"
    report += "Thread 0 Crashed:\n"
    for (index, address) in addresses.enumerated() {
      let name = "debugfixture".padding(toLength: 30, withPad: " ", startingAt: 0)
      report += "\(index)".padding(toLength: 4, withPad: " ", startingAt: 0) + name
        + "\t0x\(String(load + address - textSegment, radix: 16)) 0x\(String(load, radix: 16)) + \(address - textSegment)\n"
    }
    report += "\nBinary Images:\n       0x\(String(load, radix: 16)) -        0x\(String(load + 0xFFFF, radix: 16)) "
      + "debugfixture arm64  <\(uuid)> /Applications/Gone.app/debugfixture\n"
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-dsym")
    try writeFile(directory + "/debugfixture.crash", report)

    // Frames below the first are return addresses: looked up one byte back.
    let lookups = addresses.enumerated().map { $0.offset == 0 ? $0.element : $0.element - 1 }
    let symbolizer = try runChild(["llvm-symbolizer-14", "--no-inlines", "--obj=" + Self.dwarf]
                                  + lookups.map { "0x" + String($0, radix: 16) }).output.split(separator: "\n")
    try #require(symbolizer.count == 2 * lookups.count)
    let expected = stride(from: 0, to: symbolizer.count, by: 2).map { index -> (String, String, Int, Int) in
      let parts = symbolizer[index + 1].split(separator: ":", omittingEmptySubsequences: false)
      return (String(symbolizer[index]), parts.dropLast(2).joined(separator: ":"), Int(parts[parts.count - 2]) ?? 0,
              Int(parts[parts.count - 1]) ?? -1)
    }
    #expect(expected.allSatisfy { $0.2 > 0 }, "llvm-symbolizer-14 gave no line for some address")

    let json = try runChild([builtProduct("imagelog"), "symbolicate", "--no-system-debug", "--search", Self.fixtures,
                             "--format", "json", directory + "/debugfixture.crash"])
    #expect(json.exitCode == 0, "\(json.error)")
    let document = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
    let frames = try #require(document["frames"] as? [[String: Any]])
    #expect(frames.count == expected.count)
    for (index, (frame, location)) in zip(frames, expected).enumerated() {
      #expect(frame["status"] as? String == "symbolicated", "frame \(index)")
      #expect(frame["symbol"] as? String == location.0, "frame \(index)")
      #expect(frame["file"] as? String == location.1, "frame \(index)")
      #expect(frame["line"] as? Int == location.2, "frame \(index)")
      #expect(frame["column"] as? Int == location.3, "frame \(index)")
    }
    #expect((document["notes"] as? [Any])?.isEmpty == true)

    // The report's own layout: `name + offset (debug.c:LINE)` on each frame line.
    let text = try runChild([builtProduct("imagelog"), "symbolicate", "--no-system-debug", "--search", Self.fixtures,
                             directory + "/debugfixture.crash"])
    #expect(text.exitCode == 0, "\(text.error)")
    let frameLines = text.output.split(separator: "\n").filter { $0.contains("debugfixture") && $0.contains("\t0x") }
    #expect(frameLines.count == expected.count)
    for (line, location) in zip(frameLines, expected) {
      let file = location.1.split(separator: "/").last.map(String.init) ?? location.1
      #expect(line.contains(" \(location.0) + ") && line.hasSuffix(" (\(file):\(location.2))"), "\(line)")
    }
    #expect(text.output.contains("-- symbolicated by imagelog: \(expected.count) of \(expected.count) frames; 1 of 1 images found"))
  }
}
