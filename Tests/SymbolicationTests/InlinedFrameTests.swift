import ImageLogTestSupport
import Testing
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication
import ImageReaders

/// A C function inlined at -O2: every address of its caller gets the same chain of functions and
/// file:line:column as `llvm-symbolizer --inlines` gives.
@Suite(.enabled(if: haveTool("clang") && haveTool("llvm-symbolizer") && haveTool("llvm-nm"),
                "needs clang, llvm-symbolizer and llvm-nm"))
struct InlinedFrameTests {
  @Test func chainsAgreeWithLLVMSymbolizer() throws {
    let directory = try makeTemporaryDirectory()
    let program = directory + "/symbolicate-inlined"
    let build = try runChild(["clang", "-g", "-O2", "-Wl,--build-id", packageRoot + "/Tests/Programs/symbolicate-inlined.c",
                                "-o", program])
    try #require(build.status == 0, "\(build.error)")
    let nm = try runChild(["llvm-nm", "-S", "--defined-only", program]).output
    let outer = try #require(nm.split(separator: "\n").first { $0.hasSuffix(" symbolicate_outer") }?.split(separator: " "))
    let start = try #require(UInt64(outer[0], radix: 16))
    let size = try #require(UInt64(outer[1], radix: 16))
    let addresses = Array(start..<(start + size))

    let load: UInt64 = 0x5555_0000_0000
    let files = try SymbolFile.load(path: program)
    let image = ProcessSnapshot.Image(name: "symbolicate-inlined", path: program, loadAddress: load, endAddress: nil,
                                  identity: files[0].buildID.map(ImageIdentity.init), architecture: nil)
    let report = try ReportParser.parse(addresses.map { "0x" + String($0 + load, radix: 16) }.joined(separator: " "),
                                        images: [image])
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    #expect(result.resolutions.first?.status == .found(path: program, how: "recorded path"))

    let output = try runChild(["llvm-symbolizer", "--inlines", "--obj=" + program] + addresses.map { "0x" + String($0, radix: 16) }).output
    let answers = output.split(separator: "\n\n", omittingEmptySubsequences: false).map { block in
      block.split(separator: "\n").map(String.init)
    }
    var sawInlined = false
    for (index, answer) in result.frames.enumerated() {
      let expected = answers[index]
      let ours = answer.functions.flatMap { function in
        [function.name ?? "??", "\(function.file ?? "??"):\(function.line ?? 0):\(function.column ?? 0)"]
      }
      #expect(ours == expected, "0x\(String(addresses[index], radix: 16))")
      sawInlined = sawInlined || answer.functions.count > 1
      #expect(answer.functions.last?.offset == UInt64(index))
    }
    #expect(sawInlined)
  }
}
