import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// Programs built here (gcc, g++), whose `imagelog symbols` records and `imagelog symbolicate` answers
/// are held to llvm-symbolizer's for the same addresses: C++ user-defined literals in INLINE_ORIGIN
/// names, functions whose first addresses (or all of them) are covered by a line-table row that
/// starts before them, a function two compilation units claim.
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

  /// A function two units claim, the lower one (first in `.debug_info`) without a DIE for it, as
  /// ceph-osd's GCC thunks are (an assembler thunk without a DIE in one unit, a thunk with a DIE and
  /// inlined calls in another, the linker keeping the first copy and pointing the other unit's DWARF
  /// at it): a comdat function assembled from g++'s assembly (`gcc -g` on a `.s` file: a unit with the
  /// `.s` lines and `.debug_aranges`; gas's subprogram DIE made a label), linked before a unit that
  /// has the same function with its DIE. The `.sym`'s lines are those of the unit llvm-symbolizer and
  /// `symbolicate` pick (the lower, as LLVM's `DWARFDebugAranges` does); the writer once took them from
  /// the unit with the DIE, whose copy of the code was discarded.
  @Test func functionClaimedByTwoUnits() throws {
    let folder = try makeTemporaryDirectory("sym-claimed")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    try writeFile(folder + "/shared.h", "__attribute__((noinline)) inline int shared(int n) { return n * 7 + 3; }\n")
    try writeFile(folder + "/a.cpp", """
      #include "shared.h"
      int useA(int n) { return shared(n) - 1; }
      int useB(int n);
      int main(int argc, char **) { return useA(argc) + useB(argc); }

      """)
    try writeFile(folder + "/b.cpp", "#include \"shared.h\"\nint useB(int n) { return shared(n) + 1; }\n")
    try Self.compile(["g++", "-O2", "-S", folder + "/a.cpp", "-o", folder + "/a.s"])
    try Self.compile(["gcc", "-g", "-c", folder + "/a.s", "-o", folder + "/a.o"])
    try Self.compile(["objcopy", "--dump-section", ".debug_abbrev=" + folder + "/abbrev", folder + "/a.o"])
    var abbreviations = try #require(readFileBytes(folder + "/abbrev"))
    try Self.retag(&abbreviations, from: 0x2e, to: 0x0a)  // DW_TAG_subprogram -> DW_TAG_label
    try writeFile(folder + "/abbrev", bytes: abbreviations)
    try Self.compile(["objcopy", "--update-section", ".debug_abbrev=" + folder + "/abbrev", folder + "/a.o",
                      folder + "/a-without-function.o"])
    try Self.compile(["g++", "-g", "-O2", "-c", folder + "/b.cpp", "-o", folder + "/b.o"])
    let program = folder + "/claimed"
    try Self.compile(["g++", folder + "/a-without-function.o", folder + "/b.o", "-o", program])

    let text = try BreakpadOracle.ours(program, inlines: true).text
    let file = try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    let shared = try #require(file.functions.first { $0.name == "shared(int)" }, "no FUNC for shared(int)")
    let addresses = try DWARFOracle.instructionAddresses(program).filter { shared.contains($0) }
    try #require(addresses.count >= 2, "instructions of shared(int): \(addresses)")
    let oracle = try Self.symbolize(program, addresses)
    let symbolicated = try Self.symbolicate(program, addresses)
    // The oracle answers from the assembled unit: the case the test is about.
    #expect(oracle.first?.first?.file.hasSuffix("/a.s") == true, "llvm-symbolizer at shared(int): \(oracle.first ?? [])")
    for (index, address) in addresses.enumerated() {
      let expected = try #require(oracle[index].first, "llvm-symbolizer has no frame at 0x\(String(address, radix: 16))")
      let ours = file.frames(at: address).map { Frame(function: $0.function, file: $0.file ?? "", line: Int($0.line ?? 0)) }
      #expect(ours == [expected], "0x\(String(address, radix: 16)): .sym \(ours), llvm-symbolizer \(oracle[index])")
      #expect(symbolicated[index] == [expected],
              "0x\(String(address, radix: 16)): symbolicate \(symbolicated[index]), llvm-symbolizer \(oracle[index])")
    }
  }

  /// Gives every abbreviation with tag `from` in a `.debug_abbrev` section the tag `to`. For gas's small
  /// tables only: every code, tag, attribute and form one byte long, no implicit constants.
  static func retag(_ bytes: inout [UInt8], from: UInt8, to: UInt8) throws {
    var index = 0, changed = 0
    while index < bytes.count, bytes[index] != 0 {
      guard index + 2 < bytes.count, bytes[index] < 0x80, bytes[index + 1] < 0x80 else {
        throw TestSupportError("abbreviation at \(index): not a one-byte code and tag")
      }
      if bytes[index + 1] == from { bytes[index + 1] = to; changed += 1 }
      index += 3
      while index + 1 < bytes.count, bytes[index] != 0 || bytes[index + 1] != 0 {
        guard bytes[index] < 0x80, bytes[index + 1] < 0x80, bytes[index + 1] != 0x21 else {
          throw TestSupportError("abbreviation attribute at \(index): not one byte each")
        }
        index += 2
      }
      index += 2
    }
    guard changed > 0 else { throw TestSupportError("no abbreviation with tag 0x\(String(from, radix: 16))") }
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
