import Glibc
import ImageLogTestSupport


enum SymbolicateCLI {
  /// The built `imagelog`, next to the test bundle.
  static let executable = builtProduct("imagelog")

  /// Function symbols (`T`/`t`) of `path` from `llvm-nm --defined-only`, as (address, name) pairs.
  static func functionSymbols(_ path: String) throws -> [(UInt64, String)] {
    let nm = try runChild(["llvm-nm", "--defined-only", path])
    var result: [(UInt64, String)] = []
    for line in nm.output.split(separator: "\n") {
      let words = line.split(separator: " ", maxSplits: 2)
      guard words.count == 3, words[1] == "T" || words[1] == "t", let address = UInt64(words[0], radix: 16) else { continue }
      result.append((address, String(words[2])))
    }
    return result
  }

  /// The virtual address of the first PT_LOAD segment of `path` (`readelf -lW`): where the load address
  /// of a crash report's image line sits in the file's own addresses (0 for a PIE or a shared object,
  /// 0x400000 for a classic x86-64 executable such as imagelog itself).
  static func firstLoadAddress(_ path: String) throws -> UInt64 {
    let headers = try runChild(["readelf", "-lW", path])
    for line in headers.output.split(separator: "\n") {
      let words = line.split(separator: " ")
      if words.first == "LOAD", words.count > 3, let address = UInt64(words[2].dropFirst(2), radix: 16) { return address }
    }
    throw TestSupportError("readelf -lW \(path) lists no LOAD segment")
  }

  /// `llvm-symbolizer`'s answers for `addresses` in `object`: the function (linkage name) of each.
  static func llvmSymbolizerNames(_ object: String, _ addresses: [UInt64]) throws -> [String] {
    let arguments = ["llvm-symbolizer", "--no-demangle", "--functions=linkage", "--no-inlines", "--obj=" + object]
      + addresses.map { "0x" + String($0, radix: 16) }
    let result = try runChild(arguments)
    return result.output.split(separator: "\n", omittingEmptySubsequences: true).enumerated()
      .filter { $0.offset % 2 == 0 }.map { String($0.element) }
  }
}
