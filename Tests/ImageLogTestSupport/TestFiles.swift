import Glibc

/// The package's root folder, from this file's path (Tests/ImageLogTestSupport/ -> ../..).
public let packageRoot: String = {
  var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
  parts.removeLast(3)
  return parts.joined(separator: "/")
}()

/// The full path of `tool` on PATH, or nil. Mirrors `command -v`.
public func which(_ tool: String) -> String? {
  if tool.contains("/") { return access(tool, X_OK) == 0 ? tool : nil }
  let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
  for directory in path.split(separator: ":") {
    let candidate = "\(directory)/\(tool)"
    if access(candidate, X_OK) == 0 { return candidate }
  }
  return nil
}

/// True when `tool` is on PATH.
public func haveTool(_ tool: String) -> Bool { which(tool) != nil }

/// True when `gcc -m32` links a threaded C program against a 32-bit glibc (Debian's gcc-12-multilib) and
/// the kernel runs it (IA-32 emulation): what the i386 unwinding tests need. Checked once, on a
/// program of its own, so a test's own build failing is that test's failure, not a skip.
public let canRun32BitLibcPrograms: Bool = {
  guard haveTool("gcc"), let directory = try? makeTemporaryDirectory("imagelog-m32") else { return false }
  defer { _ = try? runTool(["rm", "-rf", directory]) }
  let source = "\(directory)/probe.c"
  guard (try? writeFile(source, "#include <pthread.h>\n#include <stdio.h>\nstatic void *run(void *a) { return a; }\n"
                          + "int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_join(t, 0); "
                          + "puts(\"ok\"); return 0; }\n")) != nil,
        (try? runTool(["gcc", "-m32", "-pthread", source, "-o", "\(directory)/probe"]))?.status == 0,
        let run = try? runTool(["\(directory)/probe"]) else { return false }
  return run.status == 0 && run.output == "ok\n"
}()

/// The newest `llvm-symbolizer` here: the one beside the Swift toolchain's `clang` (current LLVM), else
/// the first on PATH. DWARF paths are compared with it: LLVM 14 (Debian 12's), binutils and elfutils
/// put the compilation directory before a relative DWARF 5 directory 0 a second time
/// (`./nptl/./nptl/pthread_create.c`); current LLVM and gdb do not, as DWARF 5 (6.2.4.1) says entry 0
/// is the compilation directory.
public let currentLLVMSymbolizer: String? = {
  for clang in [which("swiftc"), which("clang")].compactMap({ $0 }) {
    var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard realpath(clang, &resolved) != nil else { continue }
    let path = String(decoding: resolved.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let candidate = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
      + "/llvm-symbolizer"
    if access(candidate, X_OK) == 0 { return candidate }
  }
  return which("llvm-symbolizer")
}()

/// A new empty folder named after `label` (mkdtemp, mode 0700), in this test process's one temporary parent
/// (`temporaryParent`), so it is removed when the process exits: a whole test run leaves nothing in /tmp.
/// Each call makes a folder of its own, so tests do not see each other's files; a child process the test
/// starts finds the folder while the test process runs.
public func makeTemporaryDirectory(_ label: String = "imagelog-test") throws -> String {
  let parent = try temporaryParent.get().path
  guard let made = madeTemporaryFolder("\(parent)/\(label)") else {
    throw TestSupportError("mkdtemp \(parent)/\(label).XXXXXX: \(String(cString: strerror(errno)))")
  }
  return made
}

/// A new folder `PREFIX.XXXXXX` made by mkdtemp (mode 0700), or nil (`errno` says why).
private func madeTemporaryFolder(_ prefix: String) -> String? {
  var template = Array("\(prefix).XXXXXX".utf8CString)
  guard template.withUnsafeMutableBufferPointer({ buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }) != nil else { return nil }
  return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The folder holding every temporary folder of this test process: /tmp/imagelog-tests.XXXXXX, made by
/// mkdtemp at the first `makeTemporaryDirectory`, mode 0711 (a user a test drops to reaches a folder inside
/// that the test opened to it, and lists nothing), removed with all it holds at exit (atexit) by the process
/// that made it only: a forked child that calls exit removes nothing. Children started through
/// `environment(applying:)` are told it (`temporaryParentVariable`): a test process started by a test (the
/// crashing children, which never reach exit) makes its own parent inside it and leaves the removal to the
/// process that made the outer one. A test process killed by a signal leaves its parent behind.
let temporaryParent: Result<TemporaryParent, TemporaryParentError> = {
  if let inherited = getenv(temporaryParentVariable).map({ String(cString: $0) }), isTemporaryParent(inherited) {
    if let path = madeTemporaryFolder("\(inherited)/imagelog-tests"), chmod(path, 0o711) == 0 {
      return .success(TemporaryParent(path: path, owner: 0))
    }
  }
  guard let path = madeTemporaryFolder("/tmp/imagelog-tests") else {
    return .failure(TemporaryParentError("mkdtemp /tmp/imagelog-tests.XXXXXX: \(String(cString: strerror(errno)))"))
  }
  guard chmod(path, 0o711) == 0 else { return .failure(TemporaryParentError("chmod \(path): \(String(cString: strerror(errno)))")) }
  atexit { removeTemporaryParent() }
  return .success(TemporaryParent(path: path, owner: getpid()))
}()

/// The variable that tells a test's child processes `temporaryParent`.
let temporaryParentVariable = "IMAGELOG_TEST_TEMPORARY_PARENT"

/// True when `path` is a folder (not a link to one) named as `temporaryParent` names them, of this user.
private func isTemporaryParent(_ path: String) -> Bool {
  var status = stat()
  return path.hasPrefix("/tmp/imagelog-tests.") && lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
    && status.st_uid == geteuid()
}

struct TemporaryParent: Sendable {
  var path: String
  /// The process that made it, the only one that removes it (0: a parent's, removed with that one).
  var owner: pid_t
}

struct TemporaryParentError: Error, CustomStringConvertible, Sendable {
  var description: String
  init(_ description: String) { self.description = description }
}

private func removeTemporaryParent() {
  guard case .success(let parent) = temporaryParent, parent.owner == getpid() else { return }
  var status = stat()
  guard lstat(parent.path, &status) == 0 else { return }
  parent.path.withCString { removeTree($0, in: AT_FDCWD, device: status.st_dev, depth: 0) }
}

/// Removes `name` (in the folder `parent`, a descriptor) and, when it is a folder, all it holds, as
/// `rm -r --one-file-system` does: a symbolic link is removed, never followed (each entry's kind from
/// fstatat with AT_SYMLINK_NOFOLLOW, each folder opened O_NOFOLLOW), and a file system mounted inside is
/// left alone (its folder's removal then fails, EBUSY). Names are passed as bytes: tests make names that
/// are not UTF-8.
private func removeTree(_ name: UnsafePointer<CChar>, in parent: Int32, device: dev_t, depth: Int) {
  var status = stat()
  guard fstatat(parent, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return }
  guard status.st_mode & S_IFMT == S_IFDIR else {
    unlinkat(parent, name, 0)
    return
  }
  guard status.st_dev == device, depth < 256 else { return }
  var descriptor = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
  if descriptor < 0 && errno == EACCES && fchmodat(parent, name, 0o700, 0) == 0 {  // not root: a folder a test closed
    descriptor = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
  }
  guard descriptor >= 0 else { return }
  guard let directory = fdopendir(descriptor) else {
    close(descriptor)
    return
  }
  var names: [[CChar]] = []
  while let entry = readdir(directory) {
    let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in raw.prefix { $0 != 0 }.map { CChar(bitPattern: $0) } }
    if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }  // "." and ".."
    names.append(bytes + [0])
  }
  for child in names {
    child.withUnsafeBufferPointer { buffer in
      if let child = buffer.baseAddress { removeTree(child, in: descriptor, device: device, depth: depth + 1) }
    }
  }
  closedir(directory)
  unlinkat(parent, name, AT_REMOVEDIR)
}

/// The whole file at `path` as bytes, or nil when it cannot be opened.
public func readFileBytes(_ path: String) -> [UInt8]? {
  let fd = open(path, O_RDONLY | O_CLOEXEC)
  guard fd >= 0 else { return nil }
  defer { close(fd) }
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 65536)
  while true {
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if n < 0 && errno == EINTR { continue }
    guard n > 0 else { break }
    bytes += buffer[0..<n]
  }
  return bytes
}

/// The whole file at `path` decoded as UTF-8, or nil when it cannot be opened.
public func readFile(_ path: String) -> String? {
  readFileBytes(path).map { String(decoding: $0, as: UTF8.self) }
}

/// Writes `text` to `path`, replacing it.
public func writeFile(_ path: String, _ text: String) throws {
  try writeFile(path, bytes: Array(text.utf8))
}

/// Writes `bytes` to `path`, replacing it.
public func writeFile(_ path: String, bytes whole: [UInt8]) throws {
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
  guard fd >= 0 else { throw TestSupportError("cannot write \(path): \(String(cString: strerror(errno)))") }
  defer { close(fd) }
  var bytes = whole[...]
  while !bytes.isEmpty {
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    if written < 0 && errno == EINTR { continue }
    guard written > 0 else { throw TestSupportError("cannot write \(path): \(String(cString: strerror(errno)))") }
    bytes = bytes.dropFirst(written)
  }
}

/// The path of `name` built by the package next to the running test bundle (`.build/debug/imagelog`).
public func builtProduct(_ name: String) -> String {
  var buffer = [CChar](repeating: 0, count: 4096)
  let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
  let me = count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
  return String(me[..<(me.lastIndex(of: "/") ?? me.endIndex)]) + "/" + name
}

/// A small seeded generator, so a failing mutation reproduces.
public struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64
  public init(seed: UInt64) { state = seed }
  public mutating func next() -> UInt64 {  // SplitMix64
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// The folder `Scripts/install-test-tools` puts the crash-pipeline oracles in (`bin/minidump-stackwalk`,
/// `bin/dump_syms`, `bin/crashpad_handler` from their PyPI wheels, and `python/` with Sentry's `symbolic`):
/// `$IMAGELOG_TEST_TOOLS`, else `$XDG_CACHE_HOME/imagelog-test-tools`, else `~/.cache/imagelog-test-tools`.
public let pipelineToolsDirectory: String = {
  func variable(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
  }
  if let dir = variable("IMAGELOG_TEST_TOOLS") { return dir }
  if let cache = variable("XDG_CACHE_HOME") { return cache + "/imagelog-test-tools" }
  return (variable("HOME") ?? "/root") + "/.cache/imagelog-test-tools"
}()

/// The path of a crash-pipeline oracle (`minidump-stackwalk`, `dump_syms`, `crashpad_handler`) that
/// `Scripts/install-test-tools` installed, or nil when it is not there (the test skips, saying so).
public func pipelineTool(_ name: String) -> String? {
  let path = pipelineToolsDirectory + "/bin/" + name
  return access(path, X_OK) == 0 ? path : nil
}

/// The names in `folder` (without `.` and `..`), unsorted; empty when it cannot be opened.
public func directoryNames(_ folder: String) -> [String] {
  guard let handle = opendir(folder) else { return [] }
  defer { closedir(handle) }
  var names: [String] = []
  while let entry = readdir(handle) {
    let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    if name != "." && name != ".." { names.append(name) }
  }
  return names
}
