import Glibc
import ImageLogTestSupport
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageReaders

/// The `make bench` workload, smaller: thousands of addresses in one large Swift library. The fast
/// paths (symbols found in address order, names demangled from the symbol table's bytes into a reused
/// buffer, in parallel chunks above a threshold, output written as bytes) give the answers
/// `llvm-symbolizer`, `swift demangle` and the one-name-at-a-time `Demangler` give.
private let libswiftCore = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"

@Suite(.enabled(if: access(libswiftCore, R_OK) == 0 && haveTool("llvm-symbolizer")
                  && haveTool("swift-demangle"), "needs libswiftCore.so, llvm-symbolizer and swift-demangle"))
struct LongAddressListTests {
  static let library = libswiftCore
  static let load: UInt64 = 0x7f00_0000_0000  // the library's first PT_LOAD is at 0

  /// 6,000 link-time addresses in 3,000 distinct functions (above the parallel threshold), each
  /// function hit twice, far apart in the list.
  static func addresses(_ file: SymbolFile) -> [UInt64] {
    let symbols = file.symbols.symbols.filter { $0.size > 1 }
    let picked = (0..<3000).map { symbols[($0 &* 7919) % symbols.count] }
    return picked.map(\.address) + picked.reversed().map { $0.address + $0.size / 2 }
  }

  @Test func namesMatchLLVMSymbolizerAndSwiftDemangle() throws {
    let file = try #require(try SymbolFile.load(path: Self.library).first)
    let addresses = Self.addresses(file)
    let image = ProcessSnapshot.Image(name: "libswiftCore.so", path: Self.library, loadAddress: Self.load, endAddress: nil,
                                  identity: file.buildID.map(ImageIdentity.init), architecture: nil)
    let text = addresses.map { "0x" + String($0 + Self.load, radix: 16) }.joined(separator: "\n")
    let report = try ReportParser.parse(text, images: [image])
    var options = SymbolicationOptions()
    options.lineInfo = false
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    #expect(result.frames.count == addresses.count)
    #expect(result.frames.allSatisfy { $0.status == .symbolicated })

    // Raw names: llvm-symbolizer's choice among aliases too.
    let llvm = try runChild(["llvm-symbolizer", "--no-demangle", "--no-inlines", "--functions=linkage", "--obj=" + Self.library]
                              + addresses.map { "0x" + String($0, radix: 16) }).output
    let llvmNames = llvm.split(separator: "\n").enumerated().filter { $0.offset % 2 == 0 }.map { String($0.element) }
    let raw = result.frames.map { $0.function?.rawName ?? "" }
    #expect(raw == llvmNames)

    // Demangled names: the toolchain's `swift demangle` for Swift names, the one-name-at-a-time path for all.
    let names = result.frames.map { $0.function?.name ?? "" }
    let one = Demangler(style: .simplified)
    #expect(names == raw.map { one.demangle($0) })
    let swiftIndices = raw.indices.filter { raw[$0].hasPrefix("$s") }
    try #require(swiftIndices.count > 1000)
    let expected = try runChild(["swift-demangle", "--simplified", "--compact"] + swiftIndices.map { raw[$0] })
      .output.split(separator: "\n", omittingEmptySubsequences: false).prefix(swiftIndices.count).map(String.init)
    #expect(swiftIndices.map { names[$0] } == expected)

    // The address list written back: one line per address, in the list's order, then the summary.
    let lines = result.formatted(.report).split(separator: "\n", omittingEmptySubsequences: false)
    #expect(lines.count == addresses.count + 3)
    for (index, line) in lines.prefix(addresses.count).enumerated() {
      let offset = try #require(result.frames[index].function?.offset)
      let expectedLine = "0x" + String(repeating: "0", count: 16 - String(addresses[index] + Self.load, radix: 16).count)
        + String(addresses[index] + Self.load, radix: 16) + " " + names[index] + " + \(offset) (in libswiftCore.so)"
      if line != expectedLine { Issue.record("line \(index): \(line) != \(expectedLine)"); break }
    }
    #expect(lines[addresses.count + 1] == "-- symbolicated by imagelog: 6000 of 6000 frames; 1 of 1 images found, 0 missing, 0 mismatched")
    #expect(result.formattedUTF8(.report) == Array(result.formatted(.report).utf8))
  }

  /// Written in chunks of any size, the output is `formatted(style)`, piece by piece, in every style.
  @Test func chunkedOutputIsTheWholeOutput() throws {
    let file = try #require(try SymbolFile.load(path: Self.library).first)
    let addresses = Array(Self.addresses(file).prefix(300)) + [0x10]  // and one below every symbol
    let image = ProcessSnapshot.Image(name: "libswiftCore.so", path: Self.library, loadAddress: Self.load, endAddress: nil,
                                  identity: file.buildID.map(ImageIdentity.init), architecture: nil)
    let report = try ReportParser.parse(addresses.map { "0x" + String($0 + Self.load, radix: 16) }.joined(separator: " "),
                                        images: [image])
    var options = SymbolicationOptions()
    options.lineInfo = false
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    for style in ReportStyle.allCases {
      let whole = Array(result.formatted(style).utf8)
      #expect(result.formattedUTF8(style) == whole)
      for chunkSize in [1, 100, 1 << 16] {
        var bytes: [UInt8] = []
        var pieces = 0
        result.write(style, chunkSize: chunkSize) { piece in
          #expect(!piece.isEmpty)
          bytes += piece
          pieces += 1
        }
        #expect(bytes == whole, "\(style) \(chunkSize)")
        if style == .report, chunkSize == 1 { #expect(pieces == addresses.count + 1) }  // a line at a time, then the summary
      }
    }
  }

  /// Split over any number of chunks, the names come back the same and in order.
  @Test func parallelNamesEqualSequentialOnes() throws {
    let file = try #require(try SymbolFile.load(path: Self.library).first)
    let symbols = Array(stride(from: 0, to: file.symbols.count, by: 3))
    try #require(symbols.count >= Symbolicator.parallelNamesThreshold)
    let demangler = Demangler(style: .simplified)
    let parallel = Symbolicator.names(of: symbols, in: file.symbols, demangler: demangler)
    let sequential = symbols.map { Symbolicator.name(of: $0, in: file.symbols, demangler: demangler) }
    #expect(parallel.map(\.raw) == sequential.map(\.raw))
    #expect(parallel.map(\.name) == sequential.map(\.name))
    #expect(parallel.map(\.raw) == symbols.map { file.symbols.symbol(at: $0).name })
  }

  /// Names demangled from bytes into a buffer far too small for them: the buffer grows, the answers
  /// are those of the one-name-at-a-time path, Swift and C++ alike; plain names stay as they are.
  @Test func demanglerOutgrowsItsBuffer() throws {
    let names = ["$sSS5countSivg", "$sSa6appendyyxnF", "_ZNSt6vectorIiSaIiEE9push_backERKi",
                 "$s4main7CrasherC3runyS2iF", "main", "_start", "$notmangled", "_Zgarbage", "$s"]
    for style in Demangler.Style.allCases {
      let tiny = Demangler(style: style, initialBufferSize: 4)
      let reference = Demangler(style: style)
      for name in names + names {  // twice: the grown buffer is reused
        let bytes = Array(name.utf8) + [0]  // a NUL after the name, as in a symbol table
        let demangled = bytes.withUnsafeBytes { tiny.demangle(rawName: UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
        #expect((demangled ?? name) == reference.demangle(name), "\(style) \(name)")
        if demangled != nil { #expect(demangled != name) }
      }
    }
    #expect(Demangler(style: .simplified).demangle(rawName: UnsafeRawBufferPointer(start: nil, count: 0)) == nil)
  }

  /// Words of an address list on bytes: spaces, tabs and commas separate; `0X` counts; what is not an
  /// address (too long, not hex) is named as before.
  @Test func addressWords() throws {
    let image = ProcessSnapshot.Image(name: "lib", path: "/nonexistent/lib", loadAddress: 0x1000, endAddress: nil,
                                  identity: nil, architecture: nil)
    let report = try ReportParser.parse("0x10,0X2a\t0xFFFFFFFFFFFFFFFF  zz\r\n0x12345678901234567 0x\n,,0x3\n", images: [image])
    #expect(report.frames.map(\.address) == [0x10, 0x2a, 0xFFFF_FFFF_FFFF_FFFF, 0x3])
    #expect(report.frames.map(\.line) == [0, 0, 0, 2])
    #expect(report.problems == ["line 1: 'zz' is not an address", "line 2: '0x12345678901234567' is not an address",
                                "line 2: '0x' is not an address"])
    #expect(report.lines == ["0x10,0X2a\t0xFFFFFFFFFFFFFFFF  zz", "0x12345678901234567 0x", ",,0x3"])
  }
}
