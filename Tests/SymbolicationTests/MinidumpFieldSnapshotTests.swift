import ImageLog
import ImageLogTestSupport
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Testing

/// The minidumps other people's writers made (Tests/ImageReadersTests/Fixtures/minidump-field, from
/// Breakpad's and rust-minidump's test data) as imagelog's model holds them, against `minidump-stackwalk`
/// 0.25's `--json`: the OS as the dump states it, the crash as its platform names it and the address it
/// is about, the crashing (or dump-requesting) thread, every thread's id and name, and every module's
/// name (after a `\` too), base, end, debug file, debug id and code id.
@Suite struct MinidumpFieldSnapshotTests {
  static let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/minidump-field"
  static let dumps = ["breakpad", "rust-minidump"].flatMap { sub in
    directoryNames(folder + "/" + sub).filter { $0.hasSuffix(".dmp") }.sorted().map { sub + "/" + $0 }
  }
  static let stackwalk = pipelineTool("minidump-stackwalk")

  static func hex(_ value: JSONValue?) -> UInt64? {
    guard case .string(let text)? = value, text.hasPrefix("0x") else { return nil }
    return UInt64(text.dropFirst(2), radix: 16)
  }

  @Test func everyFieldDumpIsHere() {
    #expect(Self.dumps.count == 17, "\(Self.dumps)")
  }

  @Test(.enabled(if: stackwalk != nil, "needs minidump-stackwalk (Scripts/install-test-tools)"), arguments: dumps)
  func modelEqualsMinidumpStackwalk(_ name: String) throws {
    let path = Self.folder + "/" + name
    let run = try runTool([try #require(Self.stackwalk), "--json", "--symbols-path", Self.folder + "/breakpad/symbols", path])
    try #require(run.status == 0, "minidump-stackwalk: \(run.error)")
    let theirs = try JSONValue.parse(run.output[...])
    let snapshot = try ProcessSnapshot.minidump(try FileBytes(path: path))
    #expect(snapshot.problems.isEmpty, "\(name): \(snapshot.problems)")

    // The platform as the dump states it (Linux keeps the kernel's whole uname line).
    let os = try #require(theirs["system_info"]?["os"]?.string)
    let version = theirs["system_info"]?["os_ver"]?.string ?? ""
    if os == "Linux" {
      #expect(snapshot.process.osVersion?.hasPrefix("Linux ") == true, "\(name): \(snapshot.process.osVersion ?? "nil")")
    } else {
      #expect(snapshot.process.osVersion == os + " " + version, "\(name)")
    }

    // The crash as its platform names it, and the address it is about.
    let crash = theirs["crash_info"]
    if let type = crash?["type"]?.string {
      let exception = try #require(snapshot.exception, "\(name): no exception; minidump-stackwalk says \(type)")
      if let reason = exception.reason {
        #expect(reason == type, "\(name)")
      } else {
        // A signal: its name and si_code's, as minidump-stackwalk prints them (`SIGSEGV`, `SIGILL / ILL_ILLOPN`).
        let signal = ProcessSnapshot.signalName(exception.signal) ?? "?"
        #expect(type == signal || type.hasPrefix(signal + " / "), "\(name): \(type) vs signal \(exception.signal)")
      }
      #expect(exception.address == Self.hex(crash?["address"]), "\(name): address 0x\(hexDigits(exception.address))")
    } else {
      #expect(snapshot.exception == nil, "\(name)")
    }
    let index = snapshot.threads.firstIndex { $0.crashed || $0.requestedDump }
    #expect(index == crash?["crashing_thread"]?.integer, "\(name): crashing thread")

    // Threads.
    let threads = theirs["threads"]?.array ?? []
    #expect(snapshot.threads.map(\.tid) == threads.map { $0["thread_id"]?.unsigned }, "\(name): tids")
    #expect(snapshot.threads.map(\.name) == threads.map { $0["thread_name"]?.string }, "\(name): thread names")

    // Modules: where, which file, which debug file and identity.
    let modules = theirs["modules"]?.array ?? []
    try #require(snapshot.images.count == modules.count, "\(name): \(snapshot.images.count) images, \(modules.count) modules")
    for (image, module) in zip(snapshot.images, modules) {
      let what = "\(name): \(module["filename"]?.string ?? "?")"
      #expect(image.name == module["filename"]?.string, "\(what)")
      #expect(image.loadAddress == Self.hex(module["base_addr"]), "\(what)")
      #expect(image.endAddress.map { $0 + 1 } == Self.hex(module["end_addr"]), "\(what)")
      #expect((image.debugFileName ?? "") == module["debug_file"]?.string, "\(what)")
      #expect((image.debugID ?? String(repeating: "0", count: 33)) == module["debug_id"]?.string, "\(what)")
      #expect((image.codeID ?? "") == module["code_id"]?.string, "\(what)")
      // A module with a debug id has an identity a store or a file can be matched by.
      #expect((image.identity != nil) == (image.debugID != nil), "\(what)")
    }
  }
}
