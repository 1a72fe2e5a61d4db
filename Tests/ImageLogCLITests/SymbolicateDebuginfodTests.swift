import Glibc
import ImageLogTestSupport
import Testing

/// `imagelog symbolicate` asks the debuginfod servers in `DEBUGINFOD_URLS` through `libdebuginfod.so.1`,
/// as gdb and eu-stack do: a real elfutils `debuginfod` serves a folder holding only the debug file of a
/// stripped program, and imagelog must find it there, by build-id alone, into the client's cache.
///
/// The server runs in a private network namespace (`unshare -rn`: only loopback exists) because
/// debuginfod 0.188 has no option to bind 127.0.0.1 only; imagelog runs in the same namespace, so
/// nothing leaves the machine. Skipped, with the reason, where a piece is missing.
@Suite struct SymbolicateDebuginfodTests {
  static let missing: String? = {
    for tool in ["debuginfod", "unshare", "objcopy", "cc", "nm", "readelf", "bash"] where !haveTool(tool) {
      return "\(tool) is not installed (Scripts/install-test-tools installs it)"
    }
    guard haveTool("ip") || haveTool("/usr/sbin/ip") || haveTool("/sbin/ip") else {
      return "ip (iproute2) is not installed: loopback cannot be brought up in the namespace"
    }
    // Not dlopen'ed here: a library loaded into the test process would show in other tests' snapshots.
    let library = (try? runChild(["sh", "-c", "ldconfig -p 2>/dev/null || /sbin/ldconfig -p"]).output) ?? ""
    guard library.contains("libdebuginfod.so.1") else { return "libdebuginfod.so.1 is not installed (libdebuginfod1)" }
    guard (try? runChild(["unshare", "-rn", "true"]).exitCode) == 0 else {
      return "unshare -rn cannot make a private network namespace here (user namespaces disabled)"
    }
    return nil
  }()

  @Test(.enabled(if: missing == nil, "\(missing ?? "")"))
  func findsTheDebugFileThroughALocalServer() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    let serve = directory + "/serve"
    #expect(try runChild(["mkdir", "-p", serve]).exitCode == 0)
    try writeFile(directory + "/p.c", """
      #include <stdio.h>
      static int __attribute__((noinline)) hidden_helper(int x) { return x * 7 + 3; }
      int main(int argc, char **argv) { printf("%d\\n", hidden_helper(argc)); return 0; }
      """)
    let program = directory + "/p"
    #expect(try runChild(["cc", "-g", "-O1", "-Wl,--build-id", directory + "/p.c", "-o", program]).exitCode == 0)
    #expect(try runChild(["objcopy", "--only-keep-debug", program, serve + "/p.debug"]).exitCode == 0)
    #expect(try runChild(["objcopy", "--strip-all", program, directory + "/p.stripped"]).exitCode == 0)
    // The oracles: readelf's build-id, nm's address of the static function (gone from the stripped file).
    let notes = try runChild(["readelf", "-n", program]).output
    let idLine = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") })
    let id = String(try #require(idLine.split(separator: " ").last))
    let helper = try #require(try SymbolCLIOracle.nmAddress(of: "hidden_helper", in: program))
    #expect(try SymbolCLIOracle.nmAddress(of: "hidden_helper", in: directory + "/p.stripped") == nil)

    let load: UInt64 = 0x5555_5555_4000
    let address = load + helper + 8
    try writeFile(directory + "/list.txt", """
      0x\(String(load, radix: 16))+0x4000 \(id)@0x\(String(load, radix: 16)) /nonexistent/p - p
      0x\(String(address, radix: 16))

      """)
    // In the namespace the port is free by construction: nothing else runs there.
    let script = packageRoot + "/Scripts/with-local-debuginfod"
    #expect(try runChild(["mkdir", "-p", directory + "/offline/serve"]).exitCode == 0)
    #expect(try runChild(["cp", serve + "/p.debug", directory + "/offline/serve/"]).exitCode == 0)
    let run = try runChild(["unshare", "-rn", script, directory, id, "8002",
                                  SymbolicateCLI.executable, "symbolicate", "--format", "json", directory + "/list.txt"])
    try #require(run.exitCode == 0, "\(run.error)")
    let cached = directory + "/cache/" + id + "/debuginfo"
    #expect(run.output.contains("\"symbol\":\"hidden_helper\",\"symbolOffset\":8"), "\(run.output)")
    #expect(run.output.contains("\"status\":\"found\",\"file\":\"\(cached)\",\"via\":\"debuginfod\""), "\(run.output)")
    #expect(readFileBytes(cached) == readFileBytes(serve + "/p.debug"), "the client cache holds the served file")

    // --no-system-debug: the server is running and named, but not asked.
    let offline = try runChild(["unshare", "-rn", script, directory + "/offline", id, "8002",
                                      SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--format", "json",
                                      directory + "/list.txt"])
    #expect(offline.exitCode == 0, "\(offline.error)")
    #expect(!offline.output.contains("hidden_helper"), "\(offline.output)")
    #expect(readFileBytes(directory + "/offline/cache/" + id + "/debuginfo") == nil)

    // The same list with no server named: the image is not found (the server was what found it).
    let alone = try runChild([SymbolicateCLI.executable, "symbolicate", "--format", "json", directory + "/list.txt"],
                                   environment: ["DEBUGINFOD_URLS": "", "DEBUGINFOD_CACHE_PATH": directory + "/empty-cache"])
    #expect(!alone.output.contains("hidden_helper"), "\(alone.output)")
  }
}

enum SymbolCLIOracle {
  /// The address `nm` gives `name` in `path`, or nil when `nm` lists no such symbol.
  static func nmAddress(of name: String, in path: String) throws -> UInt64? {
    for line in try runChild(["nm", path]).output.split(separator: "\n") {
      let words = line.split(separator: " ")
      if words.count == 3, words[2] == name { return UInt64(words[0], radix: 16) }
    }
    return nil
  }
}

/// `imagelog symbolicate` over a stripped binary whose `.gnu_debuglink` file was changed after linking:
/// the debug file is not used, and the output's notes say which file and why (its CRC-32 and the
/// link's); once the right file is back, its DWARF gives the function's name.
@Suite struct SymbolicateDebugLinkCLITests {
  @Test(.enabled(if: haveTool("objcopy") && haveTool("cc") && haveTool("nm") && haveTool("readelf"), "needs objcopy, cc, nm, readelf"))
  func tamperedDebugLinkIsRefusedWithANote() throws {
    let directory = try makeTemporaryDirectory("imagelog-symbolicate-cli")
    try writeFile(directory + "/p.c", """
      #include <stdio.h>
      static int __attribute__((noinline)) linked_helper(int x) { return x * 5 + 1; }
      int main(int argc, char **argv) { printf("%d\\n", linked_helper(argc)); return 0; }
      """)
    let program = directory + "/p.full", stripped = directory + "/p", debug = directory + "/p.debug"
    #expect(try runChild(["cc", "-g", "-O1", "-Wl,--build-id", directory + "/p.c", "-o", program]).exitCode == 0)
    #expect(try runChild(["objcopy", "--only-keep-debug", program, debug]).exitCode == 0)
    #expect(try runChild(["objcopy", "--strip-all", "--add-gnu-debuglink=" + debug, program, stripped]).exitCode == 0)
    let helper = try #require(try SymbolCLIOracle.nmAddress(of: "linked_helper", in: program))
    let notes = try runChild(["readelf", "-n", program]).output
    let idLine = try #require(notes.split(separator: "\n").first { $0.contains("Build ID:") })
    let id = String(try #require(idLine.split(separator: " ").last))
    let load: UInt64 = 0x5555_5555_4000
    try writeFile(directory + "/list.txt", """
      0x\(String(load, radix: 16))+0x4000 \(id)@0x\(String(load, radix: 16)) \(stripped) - p
      0x\(String(load + helper + 4, radix: 16))

      """)
    let good = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", "--format", "json",
                                   directory + "/list.txt"])
    #expect(good.output.contains("\"symbol\":\"linked_helper\""), "\(good.output)")
    #expect(good.output.contains("\"notes\":[]"), "\(good.output)")

    // One byte appended: the same ELF file, build-id and DWARF; only the CRC-32 differs.
    let size = readFileBytes(debug)?.count ?? 0
    #expect(try runChild(["sh", "-c", "printf '\\0' >> \"$0\"", debug]).exitCode == 0)
    #expect(readFileBytes(debug)?.count == size + 1)
    let refused = try runChild([SymbolicateCLI.executable, "symbolicate", "--no-system-debug", directory + "/list.txt"])
    #expect(!refused.output.contains("linked_helper"), "\(refused.output)")
    #expect(refused.output.contains("note: \(debug): not used: CRC-32 0x"), "\(refused.output)")
    #expect(refused.output.contains("in the .gnu_debuglink of \(stripped)"), "\(refused.output)")
  }
}
