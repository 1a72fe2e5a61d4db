import Glibc
import ImageLogTestSupport
import Testing

/// The shared test machinery (Tests/ImageLogTestSupport) under the names these tests use.
typealias ProcessResult = ChildResult
typealias TestError = TestSupportError

/// Runs `arguments` (searched on PATH) with extra environment variables, capturing both outputs.
func runProcess(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildResult {
  try runChild(arguments, environment: environment)
}

/// Whole-file reads and writes for test inputs made by patching fixtures.
enum SymbolFileBytes {
  static func read(_ path: String) throws -> [UInt8] {
    guard let bytes = readFileBytes(path) else { throw TestError("cannot read \(path)") }
    return bytes
  }

  static func write(_ bytes: [UInt8], to path: String) throws {
    guard let file = fopen(path, "wb") else { throw TestError("cannot write \(path)") }
    defer { fclose(file) }
    guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw TestError("short write to \(path)") }
  }
}
