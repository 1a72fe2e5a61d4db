import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog symbolicate` on inputs made to exhaust memory, run as a process under an address-space
/// limit (`prlimit --as`) with its peak resident size taken by `/usr/bin/time`: the exit status, the
/// one-line error, and a peak that stays within the bound README's "Limits" states. No timings.
@Suite struct SymbolicateMemoryTests {
  static let haveTools = haveTool("prlimit") && access("/usr/bin/time", X_OK) == 0
  /// The address-space limit: the whole of what the command may reserve (the old code needed 1.8 GB
  /// for 48 MiB of `0x1 ` and died here with "Fatal error: failed to allocate").
  static let addressSpace = 1 << 30
  static let libswiftCore = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"
  static let fixtureLibrary = packageRoot + "/Tests/ImageReadersTests/Fixtures/elf/libfixture-x86_64.so"
  static let mebibyte = 1 << 20
  /// README's stated bound for what symbolicate keeps a frame (measured: about 400 bytes).
  static let bytesPerFrame = 512

  struct Measured {
    var status: Int32?
    var output: String
    var error: String
    /// Peak resident set size in bytes (`/usr/bin/time`'s `%M`).
    var peak: Int
  }

  /// Runs `imagelog symbolicate arguments` under the limit, measured.
  static func measure(_ arguments: [String], in folder: String) throws -> Measured {
    let timeFile = folder + "/time.txt"
    let run = try runChild(["/usr/bin/time", "-o", timeFile, "-f", "%M", "prlimit", "--as=\(addressSpace)",
                            builtProduct("imagelog"), "symbolicate"] + arguments)
    let report = readFile(timeFile) ?? ""
    let kibibytes = report.split(separator: "\n").last.flatMap { Int($0) }
    let peak = try #require(kibibytes, "/usr/bin/time wrote \(report)") * 1024
    return Measured(status: run.exitCode, output: run.output, error: run.error, peak: peak)
  }

  /// 48 MiB of `0x1 ` on one line (12 million addresses), written into `folder`.
  static func manyAddressesOnOneLine(in folder: String) throws -> String {
    let path = folder + "/ones.txt"
    let chunk = String(repeating: "0x1 ", count: 1 << 16)
    guard let file = fopen(path, "w") else { throw TestSupportError("cannot write \(path)") }
    for _ in 0..<(48 * mebibyte / chunk.utf8.count) { fputs(chunk, file) }
    fclose(file)
    return path
  }

  @Test(.enabled(if: haveTools, "needs prlimit (util-linux) and /usr/bin/time (time)"))
  func addressesWithoutImagesFailAtOnce() throws {
    let folder = try makeTemporaryDirectory("imagelog-memory")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let path = try Self.manyAddressesOnOneLine(in: folder)
    let run = try Self.measure([path], in: folder)
    #expect(run.status == 1)
    #expect(run.output.isEmpty)
    #expect(run.error == "imagelog: \(path): addresses without images: give --image PATH@LOADADDR or image lines in "
            + "imagelog's formats\n")
    // The report is read (its bytes, then its text): two copies of 48 MiB and the process itself.
    #expect(run.peak < 2 * 48 * Self.mebibyte + 64 * Self.mebibyte, "peak \(run.peak / Self.mebibyte) MiB")
  }

  @Test(.enabled(if: haveTools, "needs prlimit (util-linux) and /usr/bin/time (time)"))
  func tooManyAddressesAreRefusedBeforeTheyAreKept() throws {
    let folder = try makeTemporaryDirectory("imagelog-memory")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let path = try Self.manyAddressesOnOneLine(in: folder)
    let run = try Self.measure(["--image", Self.fixtureLibrary + "@0x0", path], in: folder)
    #expect(run.status == 1)
    #expect(run.output.isEmpty)
    #expect(run.error == "imagelog: \(path): more than 2000000 addresses: symbolicate them in parts (the limit bounds memory)\n")
    // The report's bytes and text, and its one line split off: three copies of 48 MiB and the process.
    #expect(run.peak < 3 * 48 * Self.mebibyte + 64 * Self.mebibyte, "peak \(run.peak / Self.mebibyte) MiB")
  }

  /// 200,000 addresses in libswiftCore.so, as JSON (the style that held its whole output in memory):
  /// the peak grows with the frames kept, within README's stated bytes per frame.
  @Test(.enabled(if: haveTools && access(libswiftCore, R_OK) == 0, "needs prlimit, /usr/bin/time and libswiftCore.so"))
  func longListsStayWithinTheStatedBound() throws {
    let folder = try makeTemporaryDirectory("imagelog-memory")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let count = 200_000
    let path = folder + "/addresses.txt"
    var text = ""
    text.reserveCapacity(count * 15)
    for index in 0..<count { text += "0x" + String(0x7f00_0010_0000 + (index &* 7919) % 0x30_0000, radix: 16) + "\n" }
    try writeFile(path, text)
    let image = ["--image", Self.libswiftCore + "@0x7f0000000000", "--no-lines", "--no-system-debug"]
    let small = try Self.measure(image + ["--format", "json", "0x7f0000100000"], in: folder)
    let run = try Self.measure(image + ["--format", "json", path], in: folder)
    #expect(small.status == 0 && run.status == 0)
    #expect(run.output.hasPrefix("{\"format\":\"addresses\",\"frames\":[") && run.output.hasSuffix("}\n"))
    // The head, a line a frame, the thread's head, a line a frame again (the crash document's thread), "],images", the
    // image, "]...binaryImages", the image, the end.
    #expect(run.output.split(separator: "\n").count == 2 * count + 8)
    let perFrame = (run.peak - small.peak) / count
    #expect(perFrame < Self.bytesPerFrame, "\(perFrame) bytes a frame: peak \(run.peak / Self.mebibyte) MiB, one address \(small.peak / Self.mebibyte) MiB")
  }
}
