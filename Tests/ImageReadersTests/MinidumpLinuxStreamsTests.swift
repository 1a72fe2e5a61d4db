#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import Testing
@testable import ImageReaders
@testable import SnapshotFormatting

/// Breakpad's Linux streams: the test process's own `/proc/self` files written into a dump and read
/// back decoded, the auxiliary vector held to the C library's `getauxval`; the DSO debug stream in
/// Breakpad's layout (`MDRawDebug64` and `MDRawLinkMap64`, naturally aligned as its writer's compiler
/// lays them out), which no other tool here decodes.
@Suite struct MinidumpLinuxStreamsTests {
  static func dump(architecture: UInt16 = 9, streams: [(type: UInt32, bytes: [UInt8])]) throws -> MinidumpFile {
    try MinidumpFile(bytes: try MinidumpWriter.write(MinidumpWriter.Contents(
      timeDateStamp: 0, systemInfo: MinidumpWriter.SystemInfo(processorArchitecture: architecture), threads: [], modules: [],
      extraStreams: streams)))
  }

  /// A shell's `/proc/PID/auxv` in a dump, decoded, against what the dynamic loader printed for the
  /// same process (`LD_SHOW_AUXV=1`): every numeric entry it prints.
  @Test func auxiliaryVectorEqualsTheLoaders() throws {
    let child = try RunningChild(["/bin/sh", "-c", "echo marker; kill -STOP $$"], environment: environment(applying: ["LD_SHOW_AUXV": "1"]))
    defer { child.stop() }
    var printed: [UInt64: UInt64] = [:]
    let numbers: [String: UInt64] = ["AT_PHDR": 3, "AT_PHENT": 4, "AT_PHNUM": 5, "AT_PAGESZ": 6, "AT_BASE": 7, "AT_FLAGS": 8,
                                     "AT_ENTRY": 9, "AT_UID": 11, "AT_EUID": 12, "AT_GID": 13, "AT_EGID": 14, "AT_CLKTCK": 17,
                                     "AT_SECURE": 23, "AT_RANDOM": 25, "AT_SYSINFO_EHDR": 33, "AT_MINSIGSTKSZ": 51]
    while let line = child.readLine(), line != "marker" {
      let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingSpaces }
      guard parts.count == 2, let type = numbers[parts[0]] else { continue }
      printed[type] = parts[1].hasPrefix("0x") ? UInt64(parts[1].dropFirst(2), radix: 16) : UInt64(parts[1])
    }
    try #require(printed.count >= 10, "LD_SHOW_AUXV printed \(printed)")
    let auxv = try #require(readFileBytes("/proc/\(child.pid)/auxv"))
    let dump = try Self.dump(streams: [(MinidumpFile.linuxAuxvType, auxv)])
    let entries = try #require(dump.auxiliaryVector)
    for (type, value) in printed {
      #expect(entries.first { $0.type == type }?.value == value, "AT_\(type)")
    }
  }

  @Test func procFilesReadBack() throws {
    let status = try #require(readFileBytes("/proc/self/status"))
    let commandLine = try #require(readFileBytes("/proc/self/cmdline"))
    let maps = try #require(readFileBytes("/proc/self/maps"))
    let dump = try Self.dump(streams: [(MinidumpFile.linuxProcStatusType, status), (MinidumpFile.linuxCommandLineType, commandLine),
                                       (MinidumpFile.linuxMapsType, maps), (MinidumpFile.linuxCPUInfoType, Array("processor\t: 0\n".utf8))])
    #expect(dump.problems.isEmpty)
    #expect(dump.linux.procStatusValue("Pid") == "\(getpid())")
    #expect(dump.linux.procStatusValue("PPid") == "\(getppid())")
    #expect(dump.linux.arguments == CommandLine.arguments)
    #expect(dump.linux.maps == maps)
    #expect(dump.linux.cpuInfo == Array("processor\t: 0\n".utf8))
    #expect(dump.linux.environment == nil && dump.linux.environmentEntries == nil)
  }

  /// `MDRawDebug` and its link maps in Breakpad's layout for `wide` (64-bit) or 32-bit processes,
  /// the map array at `mapRVA` with the names after it, and the dynamic section's bytes after the header.
  static func dsoDebug(wide: Bool, mapRVA: Int, names: [String]) -> (debug: [UInt8], maps: [UInt8]) {
    var maps = [UInt8]()
    let entrySize = wide ? 24 : 12
    var namesBlob = [UInt8]()
    for (index, name) in names.enumerated() {
      let nameRVA = UInt32(mapRVA + names.count * entrySize + namesBlob.count)
      var string = [UInt8]()
      string.append32(UInt32(name.utf16.count * 2))
      for unit in name.utf16 { string.append16(unit) }
      namesBlob += string + [0, 0]
      if wide {
        maps.append64(0x7F00_0000_0000 + UInt64(index) * 0x1000); maps.append32(nameRVA); maps.append32(0)
        maps.append64(0x7F00_0000_0E00 + UInt64(index) * 0x1000)
      } else {
        maps.append32(0xF700_0000 + UInt32(index) * 0x1000); maps.append32(nameRVA); maps.append32(0xF700_0E00 + UInt32(index) * 0x1000)
      }
    }
    var debug = [UInt8]()
    debug.append32(1); debug.append32(UInt32(mapRVA)); debug.append32(UInt32(names.count))
    if wide {
      debug.append32(0); debug.append64(0x7F00_1111_0000); debug.append64(0x7F00_2222_0000); debug.append64(0x5555_5555_7DD8)
    } else {
      debug.append32(0xF711_0000); debug.append32(0xF722_0000); debug.append32(0x0804_9F00)
    }
    return (debug + [1, 0, 0, 0, 0, 0, 0, 0, 0xAA], maps + namesBlob)
  }

  @Test(arguments: [true, false])
  func dsoDebugReads(wide: Bool) throws {
    let names = ["", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
    // Written once to learn where the link maps (an extra stream of their own) land.
    func streams(_ rva: Int) -> [(type: UInt32, bytes: [UInt8])] {
      let parts = Self.dsoDebug(wide: wide, mapRVA: rva, names: names)
      return [(0x4B4B_0000, parts.maps), (MinidumpFile.linuxDSODebugType, parts.debug)]
    }
    let first = try Self.dump(architecture: wide ? 9 : 0, streams: streams(0))
    let rva = try #require(first.streams.first { $0.type == 0x4B4B_0000 }).location.rva
    let dump = try Self.dump(architecture: wide ? 9 : 0, streams: streams(Int(rva)))
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    let debug = try #require(dump.linux.dsoDebug)
    #expect(debug.version == 1)
    #expect(debug.linkMaps.map(\.name) == names)
    let base: UInt64 = wide ? 0x7F00_0000_0000 : 0xF700_0000
    let biases: [UInt64] = [base, base + 0x1000, base + 0x2000]
    #expect(debug.linkMaps.map(\.loadBias) == biases)
    #expect(debug.linkMaps.map(\.dynamicAddress) == biases.map { $0 + 0xE00 })
    #expect(debug.breakpointAddress == (wide ? 0x7F00_1111_0000 : 0xF711_0000))
    #expect(debug.linkerBase == (wide ? 0x7F00_2222_0000 : 0xF722_0000))
    #expect(debug.dynamicAddress == (wide ? 0x5555_5555_7DD8 : 0x0804_9F00))
    #expect(debug.dynamicSection == [1, 0, 0, 0, 0, 0, 0, 0, 0xAA])
  }
}
