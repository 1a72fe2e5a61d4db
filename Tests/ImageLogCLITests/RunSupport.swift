// Support for the process command tests (pid, watch, run): starting programs, running the built
// imagelog, building the C test programs. Names are prefixed so they stay out of other suites' way;
// what all test targets share is ImageLogTestSupport's, used under its own names.
import Glibc
import ImageLogTestSupport
import Testing

/// The built `imagelog`, next to this test bundle in .build/<triple>/debug.
let processTestImagelog = builtProduct("imagelog")

/// What a finished program did: exit status or terminating signal, standard output and error.
struct ProcessTestResult {
  var rawStatus: Int32
  var output: String
  var error: String
  var exitStatus: Int32? { rawStatus & 0x7f == 0 ? (rawStatus >> 8) & 0xff : nil }
  var signal: Int32? { rawStatus & 0x7f == 0 ? nil : rawStatus & 0x7f }
}

/// Runs a program to completion: standard output through a pipe, standard error through a file.
func runProcessTest(_ arguments: [String], environment: [String]? = nil) throws -> ProcessTestResult {
  let errorPath = try makeTemporaryDirectory("imagelog-process-test") + "/stderr"
  defer { unlink(errorPath) }
  let program = try RunningChild(arguments, environment: environment, errorPath: errorPath)
  let lines = program.readAll()
  program.reap()
  return ProcessTestResult(rawStatus: program.rawStatus, output: lines.map { $0 + "\n" }.joined(),
                           error: (readFile(errorPath) ?? ""))
}

/// A temporary directory with the dlopen test program (`loop`) and two tiny libraries
/// (`liba.so`, `libb.so`, each with a build-id and a constructor). Removed by `remove()`.
struct ProcessTestPrograms {
  let directory: String
  var loop: String { directory + "/loop" }
  var libraryA: String { directory + "/liba.so" }
  var libraryB: String { directory + "/libb.so" }

  init() throws {
    directory = try makeTemporaryDirectory("imagelog-process")
    let source = packageRoot + "/Tests/Programs/process-dlopen-loop.c"
    let script = """
      set -e
      cd '\(directory)'
      cc -O1 -o loop '\(source)' -ldl
      printf 'static int v; __attribute__((constructor)) static void init(void) { v = 1; } int a(void) { return v; }\\n' > a.c
      printf 'static int v; __attribute__((constructor)) static void init(void) { v = 2; } int b(void) { return v; }\\n' > b.c
      cc -shared -fPIC -Wl,--build-id -o liba.so a.c
      cc -shared -fPIC -Wl,--build-id -o libb.so b.c
      """
    let built = try runProcessTest(["sh", "-c", script])
    guard built.exitStatus == 0 else { throw TestSupportError("building test programs failed: \(built.error)") }
  }

  func remove() { _ = try? runProcessTest(["rm", "-rf", directory]) }
}

let processTestHaveCC = haveTool("cc")

/// Where `needle` first occurs in `text` (no Foundation here).
func processTestRange(of needle: String, in text: Substring) -> Range<String.Index>? {
  var index = text.startIndex
  while index < text.endIndex {
    if text[index...].hasPrefix(needle) {
      return index..<text.utf8.index(index, offsetBy: needle.utf8.count)
    }
    index = text.index(after: index)
  }
  return nil
}
