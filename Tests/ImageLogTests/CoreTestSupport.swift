import Glibc
import ImageLogTestSupport
import Testing

/// The canonical path of `path` (symlinks resolved), or `path` itself when it cannot be resolved.
func canonicalPath(_ path: String) -> String {
  guard let resolved = realpath(path, nil) else { return path }
  defer { free(resolved) }
  return String(cString: resolved)
}

/// Reads a whole file (small text files under /proc included).
func readTextFile(_ path: String) throws -> String {
  guard let text = readFile(path) else { throw TestSupportError("cannot open \(path)") }
  return text
}

/// Parses lowercase or uppercase hex (without 0x).
func parseHex(_ text: some StringProtocol) -> UInt64? {
  UInt64(text.hasPrefix("0x") ? text.dropFirst(2) : text[...], radix: 16)
}

/// The small C libraries the observer tests load, built once per test run with cc:
/// `dir/libcore_first.so` (RUNPATH `$ORIGIN/deps`), `dir/deps/libcore_second.so`,
/// `dir/libcore_reenter.so` (RUNPATH `$ORIGIN/deps`, dlopens libcore_second.so from its constructor),
/// `dir/deps/libcore_ctorhook.so` and `dir/libcore_ctorcall.so` (its constructor calls the hook).
struct CoreTestLibraries: Sendable {
  var directory: String
  var first: String { directory + "/libcore_first.so" }
  var second: String { directory + "/deps/libcore_second.so" }
  var reenter: String { directory + "/libcore_reenter.so" }
  var ctorHook: String { directory + "/deps/libcore_ctorhook.so" }
  var ctorCall: String { directory + "/libcore_ctorcall.so" }

  static let built: Result<CoreTestLibraries, TestSupportError> = {
    do {
      let directory = try makeTemporaryDirectory("imagelog-core")
      let programs = packageRoot + "/Tests/Programs"
      let script = """
        set -e
        mkdir -p '\(directory)/deps'
        cc -shared -fPIC -o '\(directory)/deps/libcore_second.so' '\(programs)/core-second.c'
        cc -shared -fPIC -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/deps' -o '\(directory)/libcore_first.so' '\(programs)/core-first.c'
        cc -shared -fPIC -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/deps' -o '\(directory)/libcore_reenter.so' '\(programs)/core-reenter.c'
        cc -shared -fPIC -o '\(directory)/deps/libcore_ctorhook.so' '\(programs)/core-ctorhook.c'
        cc -shared -fPIC -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/deps' -o '\(directory)/libcore_ctorcall.so' '\(programs)/core-ctorcall.c' -L'\(directory)/deps' -lcore_ctorhook
        """
      let result = try runTool(["sh", "-c", script])
      guard result.status == 0 else { return .failure(TestSupportError("cc failed: \(result.error)")) }
      return .success(CoreTestLibraries(directory: directory))
    } catch let error as TestSupportError {
      return .failure(error)
    } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }()

  static func get() throws -> CoreTestLibraries { try built.get() }

  /// Copies the libraries into a fresh directory (so each test sees only its own images).
  static func fresh(_ tag: String) throws -> CoreTestLibraries {
    let source = try get()
    let directory = try makeTemporaryDirectory("imagelog-core-\(tag)")
    let copy = try runTool(["sh", "-c", "cp -R '\(source.directory)/.' '\(directory)/'"])
    guard copy.status == 0 else { throw TestSupportError("cp failed: \(copy.error)") }
    return CoreTestLibraries(directory: directory)
  }
}

let haveCC = haveTool("cc")
