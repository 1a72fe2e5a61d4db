#if canImport(Glibc)
import Glibc
#endif
@testable import ImageLog
import ImageLogTestSupport
@testable import ImageReaders
@testable import SnapshotSources
import Snapshot
import Testing

/// glibc's abort message as imagelog finds it: `__abort_msg` in libc's `.dynsym` where readelf sees
/// it, and the `abort_msg_s` it points to read within bounds from memory that may lie.
@Suite struct AbortMessageReaderTests {
  static let libc: String? = {
    let candidates: [String] = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6"]
    return candidates.first { readFileBytes($0) != nil }
  }()

  /// The symbol's link-time address is the one `readelf --dyn-syms` gives.
  @Test(.enabled(if: libc != nil && haveTool("readelf"), "needs glibc's libc.so.6 and readelf"))
  func abortMessageSymbolIsReadelfs() throws {
    let path = try #require(Self.libc)
    let listing = try runChild(["readelf", "--dyn-syms", "-W", path])
    let line = try #require(listing.output.split(separator: "\n").first { $0.hasSuffix(" __abort_msg@@GLIBC_PRIVATE") },
                            "readelf lists no __abort_msg")
    let expected = try #require(line.split(separator: " ").dropFirst().first.flatMap { UInt64($0, radix: 16) })
    let found = try MappedFile(path: path).withReader { bytes throws(FormatError) in
      try ELFFile(bytes).dataSymbolAddress(named: "__abort_msg", in: bytes)
    }
    #expect(found == expected)
    // A code symbol is no data object.
    let code = try MappedFile(path: path).withReader { bytes throws(FormatError) in
      try ELFFile(bytes).dataSymbolAddress(named: "abort", in: bytes)
    }
    #expect(code == nil)
  }

  /// Little-endian words.
  static func word(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
  static func word32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

  /// A pointer at 0x1000 to a message at 0x2000 (`size`, then the text), as glibc lays it out.
  static func memory(pointer: UInt64 = 0x2000, size: UInt32, text: String) -> BufferMemory {
    var bytes = word(pointer) + [UInt8](repeating: 0, count: 0x1000 - 8)
    bytes += word32(size) + Array(text.utf8)
    return BufferMemory(bytes, at: 0x1000)
  }

  @Test func readsTheMessageWithinItsSize() {
    let text = "prog: prog.c:6: main: Assertion `0' failed.\n"
    let memory = Self.memory(size: UInt32(4 + text.utf8.count + 1), text: text + "\0")
    #expect(ProcessSnapshot.abortMessage(at: 0x1000, is64Bit: true, endian: .little, in: memory)
            == "prog: prog.c:6: main: Assertion `0' failed.")
  }

  @Test func liesGiveNoMessage() {
    // Not set: a null pointer.
    #expect(ProcessSnapshot.abortMessage(at: 0x1000, is64Bit: true, endian: .little, in: Self.memory(pointer: 0, size: 8, text: "x")) == nil)
    // A size of 4 GiB over a few bytes: read at most 4096, which the memory does not hold.
    #expect(ProcessSnapshot.abortMessage(at: 0x1000, is64Bit: true, endian: .little,
                                         in: Self.memory(size: .max, text: "short")) == nil)
    // A size that holds nothing but itself.
    #expect(ProcessSnapshot.abortMessage(at: 0x1000, is64Bit: true, endian: .little, in: Self.memory(size: 4, text: "")) == nil)
    // A pointer whose message would start past the end of the address space.
    #expect(ProcessSnapshot.abortMessage(at: 0x1000, is64Bit: true, endian: .little,
                                         in: Self.memory(pointer: .max - 1, size: 16, text: "x")) == nil)
    // The pointer itself unreadable.
    #expect(ProcessSnapshot.abortMessage(at: 0x9000, is64Bit: true, endian: .little, in: Self.memory(size: 8, text: "abc")) == nil)
  }

  /// A message longer than the cap is cut at it (no NUL in the first 4096 bytes).
  @Test func longMessagesAreCut() {
    let text = String(repeating: "a", count: 5000)
    let memory = Self.memory(size: UInt32(4 + text.utf8.count), text: text)
    #expect(ProcessSnapshot.abortMessage(at: 0x1000, is64Bit: true, endian: .little, in: memory)?.utf8.count
            == ProcessSnapshot.maximumAbortMessageBytes)
  }
}
