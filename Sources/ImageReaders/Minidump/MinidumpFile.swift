/// A minidump decoded from bytes: the process snapshot Breakpad, Crashpad, rust-minidump's writer and
/// imagelog write for a crash (or on demand): its threads with their registers and stacks, its modules
/// with their build-ids, the exception, the system, and the memory the writer kept.
///
/// Dumps can be large (a full-memory dump is the whole process): the value keeps the decoded streams
/// and where each memory range lies in the file, and memory is read later, range by range, through the
/// same source (`memory(at:length:in:)`).
///
/// Strict about the header and the stream directory (a broken one throws); tolerant about each stream:
/// a stream that breaks the format's rules is left out and named in `problems`, and an entry whose
/// own part is broken (a thread's context outside the file, a module's name with an odd length) keeps
/// what could be read, the rest `nil`, with a line in `problems`. Unknown streams are listed in
/// `streams` and otherwise skipped. Nothing is allocated by a count the file states before the count
/// is checked against the bytes that would hold its entries.
package struct MinidumpFile: Sendable {
  /// `MINIDUMP_HEADER`.
  package var header: Header
  /// The stream directory (`MINIDUMP_DIRECTORY`), in file order, unused entries included.
  package var streams: [Stream]
  /// `SystemInfoStream` (7), or `nil` when the dump has none (or it was broken: see `problems`).
  package var systemInfo: SystemInfo?
  /// `MiscInfoStream` (15), any of its five sizes.
  package var miscInfo: MiscInfo?
  /// `ThreadListStream` (3), in stream order; each thread's `name` from `ThreadNamesStream` (24).
  package var threads: [Thread]
  /// `ThreadNamesStream` (24) as written, in stream order (also merged into `threads`).
  package var threadNames: [ThreadName]
  /// `ModuleListStream` (4), in stream order.
  package var modules: [Module]
  /// `UnloadedModuleListStream` (14).
  package var unloadedModules: [UnloadedModule]
  /// The memory the dump holds (`MemoryListStream` 5, `Memory64ListStream` 9 and the threads' stacks),
  /// sorted by address, without overlaps.
  package var memoryRanges: [MemoryRange]
  /// `MemoryInfoListStream` (16): the process's regions and their protections, when the writer kept them.
  package var memoryInfo: [MemoryInfo]
  /// `ExceptionStream` (6), or `nil` for a dump written without one (a dump of a live process).
  package var exception: Exception?
  /// The Linux streams Breakpad's writer adds (`0x47670003`...`0x4767000A`).
  package var linux: LinuxStreams
  /// Crashpad's `CrashpadInfoStream` (`0x43500001`): report and client ids, annotations.
  package var crashpadInfo: CrashpadInfo?
  /// Breakpad's `BreakpadInfoStream` (`0x47670001`).
  package var breakpadInfo: BreakpadInfo?
  /// What could not be read, one line each: the stream (and its entry) and what is wrong with it.
  package var problems: [FormatError]
  /// The size of the dump file in bytes.
  package var fileSize: Int

  /// `MINIDUMP_SIGNATURE`, "MDMP" read as a little-endian `UInt32`.
  package static let signature: UInt32 = 0x504D_444D
  /// `MINIDUMP_VERSION`: the low 16 bits of `MINIDUMP_HEADER.Version` (the high 16 are the writer's).
  package static let formatVersion: UInt32 = 0xA793

  /// True when `bytes` start with a minidump's signature (what `imagelog` sniffs a file by).
  package static func isMinidump(_ bytes: ByteReader) -> Bool {
    (try? bytes.peek(UInt32.self, at: 0)) == signature
  }

  /// `MINIDUMP_HEADER`.
  package struct Header: Sendable, Equatable {
    /// `Signature`: always `MinidumpFile.signature`.
    package var signature: UInt32
    /// `Version`: `0xA793` in the low 16 bits, the writer's own value in the high 16.
    package var version: UInt32
    /// `NumberOfStreams`
    var streamCount: UInt32
    /// `StreamDirectoryRva`: where the directory starts in the file.
    var streamDirectoryRVA: UInt32
    /// `CheckSum`: 0 in every dump writers on Linux make.
    package var checksum: UInt32
    /// `TimeDateStamp`: when the dump was written, seconds since 1970 (UTC).
    package var timeDateStamp: UInt32
    /// `Flags`: `MINIDUMP_TYPE` bits (`MiniDumpWithFullMemory` 2, ...).
    package var flags: UInt64
  }

  /// `MINIDUMP_LOCATION_DESCRIPTOR`: `dataSize` bytes at offset `rva` of the file.
  package struct Location: Sendable, Equatable {
    /// `DataSize`
    package var dataSize: UInt32
    /// `Rva`: the offset from the start of the file.
    package var rva: UInt32

    /// The location of `dataSize` bytes at file offset `rva`.
    package init(dataSize: UInt32, rva: UInt32) {
      self.dataSize = dataSize
      self.rva = rva
    }
  }

  /// One `MINIDUMP_DIRECTORY` entry.
  package struct Stream: Sendable, Equatable {
    /// `StreamType` (`MINIDUMP_STREAM_TYPE`, or a Breakpad/Crashpad extension).
    package var type: UInt32
    /// Where the stream's bytes are.
    package var location: Location
    /// The stream type's name (`ThreadList`, `LinuxMaps`, ...), or its number in hex when unknown.
    package var name: String { MinidumpFile.streamName(type) }
  }

  /// One `MINIDUMP_THREAD`.
  package struct Thread: Sendable, Equatable {
    /// `ThreadId`: the Linux tid.
    package var tid: UInt32
    /// `SuspendCount`
    package var suspendCount: UInt32
    /// `PriorityClass`
    package var priorityClass: UInt32
    /// `Priority`
    package var priority: UInt32
    /// `Teb`: on Linux, the thread pointer (`fs` base on x86_64, `TPIDR_EL0` on aarch64) where written.
    package var teb: UInt64
    /// `Stack`: the thread's stack memory, from its lowest address kept.
    package var stack: MemoryDescriptor
    /// `ThreadContext`: where the registers are.
    var contextLocation: Location
    /// The registers, decoded; `nil` when the context lies outside the file or is not one this reader
    /// decodes (see `problems`).
    package var context: MinidumpContext?
    /// The thread's name from `ThreadNamesStream`, or `nil` when the dump names it nowhere.
    package var name: String?
  }

  /// `MINIDUMP_MEMORY_DESCRIPTOR`: `location.dataSize` bytes of the process at `startAddress`.
  package struct MemoryDescriptor: Sendable, Equatable {
    /// `StartOfMemoryRange`
    package var startAddress: UInt64
    /// `Memory`: where the bytes are in the file.
    package var location: Location

    package init(startAddress: UInt64, location: Location) {
      self.startAddress = startAddress
      self.location = location
    }
  }

  /// One `MINIDUMP_THREAD_NAME`.
  package struct ThreadName: Sendable, Equatable {
    /// `ThreadId`
    package var tid: UInt32
    /// The name (`RvaOfThreadName`, a `MINIDUMP_STRING`).
    package var name: String
  }

  /// A range of the process's memory the dump holds: `size` bytes from `address`, found at
  /// `fileOffset` in the file.
  package struct MemoryRange: Sendable, Equatable {
    /// The first address.
    package var address: UInt64
    /// How many bytes the dump holds (a range that ran past the end of a truncated file is cut there).
    package var size: UInt64
    /// Where the first byte is in the file.
    package var fileOffset: UInt64
    /// `address ..< address + size` (the reader keeps no range that wraps past 2^64).
    package var addressRange: Range<UInt64> { address..<(address &+ size) }
  }
}
