import Symbolication
import ImageLogTestSupport
import ImageReaders
import Testing

/// The `.sym` file imagelog writes, read back with `BreakpadSymbolFile`, answers an address as
/// llvm-symbolizer answers it from the DWARF: for every instruction of the C fixtures, the same
/// inlined frames, innermost first, each with the same function, file and line (a path's `./`
/// folded, as dump_syms and imagelog write paths on Linux).
@Suite(.enabled(if: DWARFOracle.haveTools, "needs llvm-symbolizer and llvm-objdump-14"))
struct BreakpadSymbolsLookupTests {
  @Test(arguments: ["gcc-c-O2-dwarf5", "clang-c-O2-dwarf4", "gcc-c-O0-dwarf4"])
  func framesAgreeWithLLVMSymbolizer(_ name: String) throws {
    let path = BreakpadOracle.dwarfFixtures + "/" + name
    let text = try BreakpadOracle.ours(path, inlines: true).text
    let file = try ByteReader.reading(Array(text.utf8)) { reader throws(FormatError) in try BreakpadSymbolFile(reader) }
    let addresses = try DWARFOracle.instructionAddresses(path)
    let expected = try DWARFOracle.symbolize(path, addresses)
    var compared = 0, inlined = 0
    var mismatches: [String] = []
    for (address, frames) in zip(addresses, expected) where !frames.isEmpty && frames.allSatisfy({ $0.line > 0 }) {
      guard let function = file.function(containing: address) else { continue }  // code symbolic gives no FUNC
      let ours = file.frames(at: address)
      compared += 1
      if ours.count > 1 { inlined += 1 }
      let want = frames.map { "\($0.function ?? "?") \($0.file.replacing("/./", with: "/")):\($0.line)" }
      let got = ours.map { "\($0.function) \($0.file ?? "?"):\($0.line ?? 0)" }
      if want != got && mismatches.count < 10 {
        mismatches.append("\(String(address, radix: 16)) in \(function.name): llvm-symbolizer \(want), .sym \(got)")
      }
    }
    #expect(mismatches.isEmpty, "\(name):\n\(mismatches.joined(separator: "\n"))")
    #expect(compared > 100 && (name.contains("O0") || inlined > 10), "\(name): \(compared) compared, \(inlined) inlined")
  }
}
