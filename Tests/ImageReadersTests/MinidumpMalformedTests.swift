import Testing
@testable import ImageReaders
@testable import SnapshotFormatting

/// Hand-broken minidumps and the exact error each gives (LLVM's malformed-object tests in spirit): a
/// broken header or directory throws; a broken stream or entry is left out and named in `problems`,
/// and everything else is still read. The unbroken dump (from `MinidumpWriter`) reads without problems.
@Suite struct MinidumpMalformedTests {
  /// One amd64 thread (tid 4000, named "main") with a 256-byte stack, one module with a build-id, 64
  /// bytes of other memory, an exception on the thread, SystemInfo and MiscInfo.
  static func base(architecture: UInt16 = 9) -> [UInt8] {
    let context = MinidumpContext(layout: .amd64, registers: ["rip": 0x40_1000, "rsp": 0x7000_0100])
    var system = MinidumpWriter.SystemInfo(processorArchitecture: architecture)
    system.csdVersion = "Linux 6.1.0"
    let contents = MinidumpWriter.Contents(
      timeDateStamp: 1, systemInfo: system, processID: 77,
      threads: [MinidumpWriter.Thread(tid: 4000, name: "main", context: .registers(context), stackAddress: 0x7000_0000,
                                      stack: [UInt8](repeating: 0xAB, count: 256))],
      modules: [MinidumpWriter.Module(baseAddress: 0x40_0000, size: 0x2000, path: "/bin/app", buildID: Array(1...20))],
      memory: [(0x50_0000, [UInt8](repeating: 0xCD, count: 64))],
      exception: MinidumpWriter.Exception(tid: 4000, signal: 11, code: 1, address: 0x10))
    do { return try MinidumpWriter.write(contents) } catch { preconditionFailure("\(error)") }
  }

  static func get32(_ bytes: [UInt8], _ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) } }
  static func set32(_ bytes: inout [UInt8], _ at: Int, _ value: UInt32) {
    for index in 0..<4 { bytes[at + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(index))) }
  }
  static func set64(_ bytes: inout [UInt8], _ at: Int, _ value: UInt64) {
    for index in 0..<8 { bytes[at + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
  }

  /// The directory index, offset and size of the first stream of `type` (found by walking the
  /// directory's raw entries).
  static func stream(_ bytes: [UInt8], _ type: UInt32) -> (index: Int, rva: Int, size: Int) {
    for index in 0..<Int(get32(bytes, 8)) where get32(bytes, 32 + index * 12) == type {
      return (index, Int(get32(bytes, 32 + index * 12 + 8)), Int(get32(bytes, 32 + index * 12 + 4)))
    }
    preconditionFailure("no stream \(type)")
  }

  @Test func unbrokenDumpReadsWithoutProblems() throws {
    let dump = try MinidumpFile(bytes: Self.base())
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    #expect(dump.threads.map(\.name) == ["main"])
    #expect(dump.threads.first?.context?.pc == 0x40_1000)
    #expect(dump.modules.map(\.name) == ["/bin/app"])
    #expect(dump.modules.first?.debugIdentifier == "0403020106050807090A0B0C0D0E0F100")
    #expect(dump.memoryRanges.map(\.address) == [0x50_0000, 0x7000_0000])
    #expect(dump.exception?.context?.sp == 0x7000_0100)
    #expect(dump.miscInfo?.processID == 77)
  }

  /// Broken so that reading throws: the header or the directory.
  static let fatal: [String] = ["empty", "three bytes", "ELF file", "header cut", "bad version", "directory count lies",
                                "directory past end"]

  static func fatalCase(_ name: String) -> (bytes: [UInt8], error: FormatError) {
    var bytes = base()
    switch name {
    case "empty": return ([], .tooShort(count: 0))
    case "three bytes": return ([0x4D, 0x44, 0x4D], .tooShort(count: 3))
    case "ELF file": return ([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0], .minidump("not a minidump: signature 0x464c457f is not MDMP"))
    case "header cut": return (Array(bytes.prefix(20)), .minidump("minidump header truncated: 32 bytes needed, the file has 20"))
    case "bad version":
      set32(&bytes, 4, 0x1234)
      return (bytes, .minidump("minidump version 0x1234 is not 0xa793"))
    case "directory count lies":
      set32(&bytes, 8, 1_000_000_000)
      return (bytes, .fieldOutOfRange("stream directory (1000000000 entries of 12 bytes)", offset: 32, size: 12_000_000_000,
                                      limit: bytes.count))
    case "directory past end":
      set32(&bytes, 12, UInt32(bytes.count - 8))
      return (bytes, .fieldOutOfRange("stream directory (7 entries of 12 bytes)", offset: UInt64(bytes.count - 8), size: 84,
                                      limit: bytes.count))
    default: preconditionFailure(name)
    }
  }

  @Test(arguments: fatal)
  func brokenHeaderThrows(_ name: String) {
    let (bytes, error) = Self.fatalCase(name)
    #expect(throws: error) { try MinidumpFile(bytes: bytes) }
  }

  /// Broken in one stream or entry: the dump reads, with exactly this problem.
  static let partial: [String] = [
    "stream past end", "a billion threads", "thread list of a negative-looking count", "context past end",
    "context too short", "context of another CPU", "architecture not decoded", "module name odd length",
    "module name past end", "CodeView record too large", "memory range past end", "memory ranges overlap",
    "memory range wraps", "exception parameters", "second thread list", "system info short",
    "thread names count lies", "names share one long string", "memory64 sizes overflow",
  ]

  static func partialCase(_ name: String) -> (bytes: [UInt8], problems: [FormatError], check: @Sendable (MinidumpFile) -> Bool) {
    var bytes = base()
    let threads = stream(bytes, MinidumpFile.threadListType), modules = stream(bytes, MinidumpFile.moduleListType)
    let memory = stream(bytes, MinidumpFile.memoryListType), exception = stream(bytes, MinidumpFile.exceptionType)
    let size = bytes.count
    let thread0 = threads.rva + 4, module0 = modules.rva + 4
    let modulesRead: @Sendable (MinidumpFile) -> Bool = { $0.modules.map(\.name) == ["/bin/app"] }
    switch name {
    case "stream past end":
      set32(&bytes, 32 + threads.index * 12 + 8, UInt32(size - 20))
      return (bytes, [.minidump("ThreadList stream (directory 0): stream at file offset 0x\(hexDigits(UInt64(size - 20)))+0x34 past end (\(size) bytes)")],
              { $0.threads.isEmpty && $0.modules.count == 1 })
    case "a billion threads":
      set32(&bytes, threads.rva, 1_000_000_000)
      return (bytes, [.minidump("ThreadList stream (directory 0): 1000000000 entries of 48 bytes do not fit in its 52 bytes")],
              { $0.threads.isEmpty && modulesRead($0) })
    case "thread list of a negative-looking count":
      set32(&bytes, threads.rva, 0xFFFF_FFFF)
      return (bytes, [.minidump("ThreadList stream (directory 0): 4294967295 entries of 48 bytes do not fit in its 52 bytes")],
              { $0.threads.isEmpty && modulesRead($0) })
    case "context past end":
      set32(&bytes, thread0 + 44, UInt32(size - 16))
      return (bytes, [.minidump("ThreadList stream (directory 0): thread 0 (tid 4000) context at file offset 0x\(hexDigits(UInt64(size - 16)))+0x4d0 past end (\(size) bytes)")],
              { $0.threads.count == 1 && $0.threads[0].context == nil && $0.exception?.context != nil })
    case "context too short":
      set32(&bytes, thread0 + 40, 100)
      return (bytes, [.minidump("ThreadList stream (directory 0): thread 0 (tid 4000) context: 100 bytes, too short for CONTEXT_AMD64 (1232)")],
              { $0.threads.first?.context == nil && $0.threads.first?.name == "main" })
    case "context of another CPU":
      let context = Int(get32(bytes, thread0 + 44))
      set32(&bytes, context + 0x30, 0x0040_0003)
      return (bytes, [.minidump("ThreadList stream (directory 0): thread 0 (tid 4000) context: context flags 0x400003 are not CONTEXT_AMD64's (0x100000)"),
                      .minidump("Exception stream (directory 3): thread 4000 context: context flags 0x400003 are not CONTEXT_AMD64's (0x100000)")],
              { $0.threads.first?.context == nil })
    case "architecture not decoded":
      bytes = base(architecture: 3)
      return (bytes, [.minidump("ThreadList stream (directory 0): thread 0 (tid 4000) context: ppc contexts are not decoded"),
                      .minidump("Exception stream (directory 3): thread 4000 context: ppc contexts are not decoded")],
              { $0.threads.first?.context == nil && $0.systemInfo?.architectureName == "ppc" })
    case "module name odd length":
      set32(&bytes, Int(get32(bytes, module0 + 20)), 7)
      return (bytes, [.minidump("ModuleList stream (directory 1): module 0 name: MINIDUMP_STRING length 7 is odd (UTF-16)")],
              { $0.modules.first?.name == "" && $0.modules.first?.buildID?.bytes == Array(1...20) })
    case "module name past end":
      let name = Int(get32(bytes, module0 + 20))
      set32(&bytes, name, 0xFFFF_FFFE)
      return (bytes, [.minidump("ModuleList stream (directory 1): module 0 name (4294967294 bytes of MINIDUMP_STRING) at file offset 0x\(hexDigits(UInt64(name + 4)))+0xfffffffe past end (\(size) bytes)")],
              { $0.modules.first?.name == "" })
    case "CodeView record too large":
      set32(&bytes, module0 + 76, 0x10_0000)
      return (bytes, [.limitExceeded("ModuleList stream (directory 1): module 0 (/bin/app) CodeView record size", value: 0x10_0000, limit: 65536)],
              { $0.modules.first?.codeView == nil && $0.modules.first?.name == "/bin/app" })
    case "memory range past end":
      // The other memory (the first descriptor after the stack's) moved to the file's last 16 bytes.
      set32(&bytes, memory.rva + 4 + 16 + 12, UInt32(size - 16))
      return (bytes, [.minidump("MemoryList stream (directory 2): range 1 0x500000+0x40 at file offset 0x\(hexDigits(UInt64(size - 16))) runs past the end of the file (\(size) bytes): 16 bytes kept")],
              { $0.memoryRange(containing: 0x50_000F) != nil && $0.memoryRange(containing: 0x50_0010) == nil })
    case "memory ranges overlap":
      // The other memory moved into the stack's addresses, its bytes elsewhere in the file.
      set64(&bytes, memory.rva + 4 + 16, 0x7000_00F0)
      return (bytes, [.minidump("MemoryList stream (directory 2): range 1 0x700000f0+0x40 overlaps ThreadList stream (directory 0): thread 0 (tid 4000) stack 0x70000000+0x100 with other bytes: the overlap is read from the latter")],
              { $0.memoryRanges.map(\.addressRange) == [0x7000_0000..<0x7000_0100, 0x7000_0100..<0x7000_0130] })
    case "memory range wraps":
      set64(&bytes, memory.rva + 4 + 16, UInt64.max - 0x10)
      return (bytes, [.minidump("MemoryList stream (directory 2): range 1 0xffffffffffffffef+0x40 wraps past the end of the address space")],
              { $0.memoryRanges.count == 1 })
    case "exception parameters":
      set32(&bytes, exception.rva + 32, 20)
      return (bytes, [.minidump("Exception stream (directory 3): NumberParameters 20 is more than 15; the first 15 read")],
              { $0.exception?.parameters.count == 15 })
    case "second thread list":
      // The MiscInfo entry becomes a second ThreadList (its 24 bytes hold a "count" of 24).
      let misc = stream(bytes, MinidumpFile.miscInfoType)
      set32(&bytes, 32 + misc.index * 12, MinidumpFile.threadListType)
      return (bytes, [.minidump("ThreadList stream (directory \(misc.index)): a second ThreadList stream, not read (directory 0 was)")],
              { $0.threads.count == 1 && $0.miscInfo == nil })
    case "system info short":
      let system = stream(bytes, MinidumpFile.systemInfoType)
      set32(&bytes, 32 + system.index * 12 + 4, 40)
      return (bytes, [.minidump("SystemInfo stream (directory \(system.index)): 40 bytes, MINIDUMP_SYSTEM_INFO needs 56")],
              { $0.systemInfo == nil && $0.threads.first?.context?.layout == .amd64 })
    case "thread names count lies":
      let names = stream(bytes, MinidumpFile.threadNamesType)
      set32(&bytes, names.rva, 2)
      return (bytes, [.minidump("ThreadNames stream (directory \(names.index)): 2 entries of 12 bytes do not fit in its 16 bytes")],
              { $0.threads.first?.name == nil && $0.threadNames.isEmpty })
    case "names share one long string":
      // 40 modules whose names all point at one 64 KiB string: more than the dump holds, copied.
      let long = String(repeating: "x", count: 32 * 1024)
      let contents = MinidumpWriter.Contents(
        timeDateStamp: 0, systemInfo: MinidumpWriter.SystemInfo(processorArchitecture: 9), threads: [],
        modules: (0..<40).map { MinidumpWriter.Module(baseAddress: UInt64($0) << 20, size: 0x1000, path: $0 == 0 ? long : "m", buildID: nil) })
      bytes = (try? MinidumpWriter.write(contents)) ?? []
      let list = stream(bytes, MinidumpFile.moduleListType)
      let first = get32(bytes, list.rva + 4 + 20)
      for index in 1..<40 { set32(&bytes, list.rva + 4 + index * 108 + 20, first) }
      // The budget is the file's size and 1 MiB; each name copies 64 KiB.
      let failing = (bytes.count + (1 << 20)) / 65536
      return (bytes, [.minidump("ModuleList stream (directory 1): module \(failing) name: more bytes copied out of the dump than it holds "
                                + "(entries share their data); this and later copies left out")],
              { $0.modules.count == 40 && $0.modules[failing - 1].name == long && $0.modules[failing...].allSatisfy { $0.name.isEmpty } })
    case "memory64 sizes overflow":
      // A Memory64List replacing MiscInfo: 2 ranges whose sizes add past 2^64.
      let misc = stream(bytes, MinidumpFile.miscInfoType)
      var list = [UInt8]()
      list.append64(2); list.append64(0x100)
      list.append64(0x1000); list.append64(UInt64.max - 0x80); list.append64(0x2000); list.append64(0x10)
      let rva = bytes.count
      bytes += list
      set32(&bytes, 32 + misc.index * 12, MinidumpFile.memory64ListType)
      set32(&bytes, 32 + misc.index * 12 + 4, UInt32(list.count))
      set32(&bytes, 32 + misc.index * 12 + 8, UInt32(rva))
      return (bytes, [.minidump("Memory64List stream (directory \(misc.index)): range 0's bytes end past 2^64")],
              { $0.threads.count == 1 && $0.memoryRanges.count == 2 })
    default: preconditionFailure(name)
    }
  }

  @Test(arguments: partial)
  func brokenStreamIsNamedAndTheRestRead(_ name: String) throws {
    let (bytes, problems, check) = Self.partialCase(name)
    let dump = try MinidumpFile(bytes: bytes)
    #expect(dump.problems.map(\.description) == problems.map(\.description))
    #expect(check(dump), "\(name): what is left is not what it should be")
  }
}
