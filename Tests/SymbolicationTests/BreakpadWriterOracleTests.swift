import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// Programs built here (gcc, g++), whose `imagelog symbols` records and `imagelog symbolicate` answers
/// are held to llvm-symbolizer's for the same addresses: C++ user-defined literals in INLINE_ORIGIN
/// names, functions whose first addresses (or all of them) are covered by a line-table row that
/// starts before them.
@Suite(.enabled(if: DWARFOracle.haveTools && haveTool("gcc") && haveTool("g++"), "needs gcc, g++, llvm-symbolizer, llvm-objdump-14"))
struct BreakpadWriterOracleTests {
  /// One frame as the three sides give it, innermost first.
  struct Frame: Equatable, CustomStringConvertible {
    var function: String
    var file: String
    var line: Int
    var description: String { "\(function) \(file):\(line)" }
  }

  /// `operator"" s` (libstdc++'s, a `[abi:cxx11]` name) and a literal operator of our own, inlined:
  /// their INLINE_ORIGIN names are the names llvm-symbolizer and `symbolicate` give (the writer once
  /// cut them at the space after `operator""`, leaving `s[abi:cxx11](char const*, unsigned long)`).
  @Test func literalOperatorNames() throws {
    let folder = try makeTemporaryDirectory("sym-literal")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/literal.cpp", """
      #include <string>
      using namespace std::string_literals;
      volatile int sink;
      namespace units {
      inline unsigned long long operator"" _km(unsigned long long value) { sink = 1; return value * 1000; }
      }
      using namespace units;
      __attribute__((noinline)) std::string make(int n) {
        std::string s = "a literal long enough to be kept on the heap"s;
        s += std::to_string(n);
        return s;
      }
      __attribute__((noinline)) unsigned long long distance(int n) { return 42_km + n; }
      int main(int argc, char **) { return (int)make(argc).size() + (int)distance(argc); }

      """)
    let program = folder + "/literal"
    try Self.compile(["g++", "-g", "-O2", folder + "/literal.cpp", "-o", program])
    let text = try BreakpadOracle.ours(program, inlines: true).text
    let file = try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    // Each call of a literal operator: the start of its first range.
    var addresses: [UInt64] = []
    for inline in file.inlines where file.inlineOrigins[inline.origin]?.contains("operator\"\"") == true {
      addresses.append(file.inlineRanges[inline.ranges][inline.ranges.lowerBound].lowerBound)
    }
    let suffixed = file.inlineOrigins.values.filter { $0.contains("_km(") || $0.contains("s[abi:cxx11](char const*") }
    try #require(addresses.count >= 2, "no INLINE_ORIGIN names a literal operator; the literals' origins: \(suffixed.sorted())")
    let oracle = try Self.symbolize(program, addresses)
    let symbolicated = try Self.symbolicate(program, addresses)
    func literals(_ frames: [Frame]) -> [String] { frames.map(\.function).filter { $0.contains("operator\"\"") } }
    for (index, address) in addresses.enumerated() {
      let expected = literals(oracle[index])
      #expect(!expected.isEmpty, "llvm-symbolizer names no literal operator at 0x\(String(address, radix: 16))")
      #expect(file.frames(at: address).map(\.function).filter { $0.contains("operator\"\"") } == expected,
              "0x\(String(address, radix: 16)): .sym \(file.frames(at: address).map(\.function))")
      #expect(literals(symbolicated[index]) == expected, "0x\(String(address, radix: 16)): symbolicate \(symbolicated[index])")
    }
  }

  /// A C program assembled with some `.loc` directives taken out: `second` has no row at its start
  /// (the last row of `first` runs into it), `third` none at all (the last row of `second` covers it).
  /// Every instruction of both gets, from the `.sym` and from `symbolicate`, the line llvm-symbolizer
  /// gives it (the writer once left those addresses, and all of `third`, without a line).
  @Test func rowsRunningIntoAFunction() throws {
    let folder = try makeTemporaryDirectory("sym-covered")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/covered.c", """
      volatile int sink;
      __attribute__((noinline)) int first(int n) { sink = n; return n + 1; }
      __attribute__((noinline)) int second(int n) { sink = n * 3; return n - 2; }
      __attribute__((noinline)) int third(int n) { return n * 5; }
      int main(int argc, char **argv) { return first(argc) + second(argc) + third(argc); }

      """)
    // -O0: no location lists, so no `.loc` defines a label something else refers to.
    try Self.compile(["gcc", "-g", "-O0", "-S", folder + "/covered.c", "-o", folder + "/covered.s"])
    let assembly = try #require(readFile(folder + "/covered.s"))
    var edited: [Substring] = []
    var function = ""
    var instructionsSeen = 0
    for line in assembly.split(separator: "\n", omittingEmptySubsequences: false) {
      if line.hasSuffix(":"), !line.hasPrefix("\t"), !line.hasPrefix(".") {
        function = String(line.dropLast())
        instructionsSeen = 0
      }
      let isLoc = line.hasPrefix("\t.loc ")
      if line.hasPrefix("\t"), !line.hasPrefix("\t.") { instructionsSeen += 1 }
      if isLoc && (function == "third" || (function == "second" && instructionsSeen == 0)) { continue }
      edited.append(line)
    }
    #expect(edited.count < assembly.split(separator: "\n", omittingEmptySubsequences: false).count)
    try writeFile(folder + "/edited.s", edited.joined(separator: "\n"))
    let program = folder + "/covered"
    try Self.compile(["gcc", "-g", folder + "/edited.s", "-o", program])

    let text = try BreakpadOracle.ours(program, inlines: true).text
    let file = try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    let second = try #require(file.functions.first { $0.name == "second" })
    let third = try #require(file.functions.first { $0.name == "third" })
    let addresses = try DWARFOracle.instructionAddresses(program).filter { second.contains($0) || third.contains($0) }
    try #require(addresses.count >= 6, "instructions of second and third: \(addresses)")
    let oracle = try Self.symbolize(program, addresses)
    let symbolicated = try Self.symbolicate(program, addresses)
    // The oracle does see a row from before `second` at its start: the case the test is about.
    #expect(oracle.first?.first?.line == 2, "llvm-symbolizer at second's start: \(oracle.first ?? [])")
    for (index, address) in addresses.enumerated() {
      let expected = try #require(oracle[index].first, "llvm-symbolizer has no frame at 0x\(String(address, radix: 16))")
      #expect(expected.line > 0)
      let frame = file.frames(at: address).first
      let ours = frame.map { Frame(function: $0.function, file: $0.file ?? "", line: Int($0.line ?? 0)) }
      #expect(ours == expected, "0x\(String(address, radix: 16)): .sym \(String(describing: ours)), llvm-symbolizer \(expected)")
      #expect(symbolicated[index].first == expected,
              "0x\(String(address, radix: 16)): symbolicate \(symbolicated[index]), llvm-symbolizer \(expected)")
    }
  }

  // MARK: The two other sides

  static func compile(_ command: [String]) throws {
    let result = try runChild(command)
    guard result.exitCode == 0 else { throw TestSupportError("\(command.joined(separator: " ")): \(result.error)") }
  }

  /// llvm-symbolizer's frames (demangled, innermost first) for each address, from one run.
  static func symbolize(_ program: String, _ addresses: [UInt64]) throws -> [[Frame]] {
    let input = program + ".addresses"
    try writeFile(input, addresses.map { "0x" + String($0, radix: 16) + "\n" }.joined())
    let result = try runChild(["sh", "-c", "exec \"$0\" \"$@\" < \"\(input)\"", DWARFOracle.symbolizer, "--inlines",
                               "--output-style=JSON", "--obj=" + program])
    guard result.exitCode == 0 else { throw TestSupportError("\(DWARFOracle.symbolizer): \(result.error)") }
    let lines = result.output.split(separator: "\n")
    guard lines.count == addresses.count else { throw TestSupportError("\(lines.count) answers for \(addresses.count) addresses") }
    return try lines.map { line -> [Frame] in
      let symbols: [JSONValue] = try JSONValue.parse(line)["Symbol"]?.array ?? []
      return symbols.map(Self.frame(function: "FunctionName", file: "FileName"))
    }
  }

  /// `imagelog symbolicate --format json`'s frames for each address (the program loaded at 0),
  /// innermost first.
  static func symbolicate(_ program: String, _ addresses: [UInt64]) throws -> [[Frame]] {
    let result = try runChild([builtProduct("imagelog"), "symbolicate", "--format", "json", "--no-cache", "--no-system-debug",
                               "--image", program + "@0"] + addresses.map { "0x" + String($0, radix: 16) })
    guard result.exitCode == 0 else { throw TestSupportError("imagelog symbolicate: \(result.error)") }
    let frames = try JSONValue.parse(result.output[...])["frames"]?.array ?? []
    guard frames.count == addresses.count else { throw TestSupportError("\(frames.count) frames for \(addresses.count) addresses") }
    return frames.map { frame -> [Frame] in
      let inlined: [JSONValue] = frame["inlined"]?.array ?? []
      return (inlined + [frame]).map(Self.frame(function: "symbol", file: "file"))
    }
  }

  /// A frame from a JSON object's fields (`line` is "Line" or "line" as the function's key is capitalized).
  static func frame(function: String, file: String) -> (JSONValue) -> Frame {
    let lineKey = function.first == "F" ? "Line" : "line"
    return { value in
      let name: String = value[function]?.string ?? ""
      let path: String = value[file]?.string ?? ""
      let line: Int = value[lineKey]?.integer ?? 0
      return Frame(function: name, file: path, line: line)
    }
  }
}
