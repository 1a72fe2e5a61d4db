import Glibc
import ImageLogTestSupport
import Testing


/// Whole-file reads and writes for test inputs made by patching fixtures.
enum SymbolFileBytes {
  static func read(_ path: String) throws -> [UInt8] {
    guard let bytes = readFileBytes(path) else { throw TestSupportError("cannot read \(path)") }
    return bytes
  }

  static func write(_ bytes: [UInt8], to path: String) throws {
    guard let file = fopen(path, "wb") else { throw TestSupportError("cannot write \(path)") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw TestSupportError("short write to \(path)") }
  }
}
