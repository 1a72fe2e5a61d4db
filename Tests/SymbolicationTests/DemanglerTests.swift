import ImageLogTestSupport
import Testing
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication

/// The Swift runtime's demanglers against the toolchain's `swift demangle` and binutils' `c++filt`
/// on real names taken from libswiftCore.so and libstdc++ with `llvm-nm`.
@Suite(.enabled(if: haveTool("llvm-nm") && haveTool("swift-demangle") && haveTool("c++filt"),
                "needs llvm-nm, swift-demangle and c++filt"))
struct DemanglerTests {
  static func names(_ library: String, prefix: String, every: Int) throws -> [String] {
    let output = try runChild(["llvm-nm", "--defined-only", "-D", library]).output
    let all = output.split(separator: "\n").compactMap { line -> String? in
      let words = line.split(separator: " ")
      guard words.count == 3, words[2].hasPrefix(prefix) else { return nil }
      return String(words[2])
    }
    return stride(from: 0, to: all.count, by: max(1, all.count / every)).map { all[$0] }
  }

  static func tool(_ arguments: [String], _ names: [String]) throws -> [String] {
    try runChild(arguments + names).output.split(separator: "\n", omittingEmptySubsequences: false).prefix(names.count).map(String.init)
  }

  @Test func swiftNamesMatchSwiftDemangle() throws {
    let names = try Self.names("/opt/swift/usr/lib/swift/linux/libswiftCore.so", prefix: "$s", every: 200)
    try #require(names.count >= 100)
    let simplified = Demangler(style: .simplified)
    let full = Demangler(style: .full)
    let none = Demangler(style: .none)
    #expect(names.map { simplified.demangle($0) } == (try Self.tool(["swift-demangle", "--simplified", "--compact"], names)))
    // The runtime's swift_demangle writes types without sugar (`Swift.Dictionary<A, B>`, not `[A : B]`).
    #expect(names.map { full.demangle($0) } == (try Self.tool(["swift-demangle", "--compact", "--no-sugar"], names)))
    #expect(names.map { none.demangle($0) } == names)
  }

  @Test func cppNamesMatchCxxfilt() throws {
    let library = try runChild(["sh", "-c", "ls /usr/lib/*/libstdc++.so.6 | head -1"]).output.split(separator: "\n").first.map(String.init)
    let names = try Self.names(try #require(library), prefix: "_ZN", every: 100)
    try #require(names.count >= 50)
    let expected = try Self.tool(["c++filt"], names)
    #expect(names.map { Demangler(style: .full).demangle($0) } == expected)
    #expect(names.map { Demangler(style: .simplified).demangle($0) } == expected)
  }

  @Test func plainNamesStay() {
    let demangler = Demangler(style: .simplified)
    for name in ["main", "_start", "$notmangled", "_Zgarbage", "$s"] { #expect(demangler.demangle(name) == name) }
  }
}
