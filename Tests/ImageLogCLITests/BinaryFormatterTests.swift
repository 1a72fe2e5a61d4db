import ImageLogTestSupport
import Testing
import ImageLog
import ImageReaders

/// `BinaryFormatter` is the library's side of `imagelog file`: a library user gets the very bytes the
/// CLI prints, for every fixture format (ELF, thin and universal Mach-O) and every view.
@Suite struct BinaryFormatterTests {
  static let paths = ["elf/libfixture-x86_64.so", "elf/prog-ppc64", "macho/libfixture-arm64-macos.dylib",
                      "macho/universal-macos", "macho/fixture-arm64-ios-signed", "hostile/libhostile-x86_64.so"]
    .map { packageRoot + "/Tests/ImageReadersTests/Fixtures/" + $0 }

  static func cli(_ arguments: [String]) throws -> String {
    let run = try runChild([builtProduct("imagelog"), "file"] + arguments)
    try #require(run.exitCode == 0, "imagelog file \(arguments) failed: \(run.error)")
    return run.output
  }

  @Test(arguments: paths)
  func libraryViewsEqualTheCommandLines(path: String) throws {
    let binary = try BinaryFile.parse(try #require(readFileBytes(path)))
    let slices = binary.slices
    var crash = "", detailed = "", json: [String] = [], uuid = ""
    for (index, slice) in slices.enumerated() {
      crash += String(decoding: BinaryFormatter.crashLine(slice, path: path), as: UTF8.self) + "\n"
      detailed += BinaryFormatter.detailedText(binary, slice: index, summary: slice, sliceCount: slices.count, path: path) + "\n"
      var writer = JSONWriter()
      BinaryFormatter.writeJSON(binary, slice: index, summary: slice, path: path, into: &writer)
      json.append(String(decoding: writer.bytes, as: UTF8.self))
    }
    for identity in binary.sliceIdentities {
      if let buildID = identity.buildID { uuid += BinaryFormatter.uuidLine(buildID, architecture: identity.architecture, path: path) + "\n" }
    }
    #expect(crash == (try Self.cli([path])))
    #expect(detailed == (try Self.cli(["--format", "detailed", path])))
    #expect("[\n" + json.joined(separator: ",\n") + "\n]\n" == (try Self.cli(["--format", "json", path])))
    #expect(uuid == (try Self.cli(["--uuid", path])))
  }
}
