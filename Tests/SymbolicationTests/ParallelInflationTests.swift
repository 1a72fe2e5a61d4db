import Glibc
import ImageLogTestSupport
import Testing
import ImageLog
@testable import ImageReaders
@testable import Symbolication

/// A file's compressed debug sections inflated with the largest on a worker thread
/// (`DebugInfoFile.inflateAside`) against all on the calling thread: the same bytes in every section, and
/// for a damaged stream the same error, the first in section order, whichever thread met it.
@Suite struct ParallelInflationTests {
  static let fixtures = ["gcc-c-O2-dwarf5-zlib", "clang-cxx-O2-dwarf4-zlib", "gcc-cxx-O2-dwarf5-zstd", "clang-c-O2-dwarf4-zstd"]
    .map { packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf/" + $0 }
  /// The largest of libc6-dbg's debug files (libc's), when it is installed.
  static let libcDebugFile: String? = InflationLimitTests.libcDebugFiles.max { size($0) < size($1) }

  static func size(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
  }

  /// The sections of `bytes`, inflated on one thread or with the worker beside it.
  static func sections(_ bytes: [UInt8], aside: Bool,
                       decompress: @escaping DWARFDecompressor = SystemDecompressor.decompress) -> Result<[[UInt8]], FormatError> {
    var background: DWARFBackgroundRunner?
    if aside { background = { work in DebugInfoFile.inflateAside(work) } }
    return bytes.withUnsafeBytes { raw -> Result<[[UInt8]], FormatError> in
      do throws(FormatError) {
        let reader = ByteReader(raw)
        let read = try DWARFSections.elf(try ELFFile(reader), bytes: reader, owner: nil, decompress: decompress,
                                         background: background)
        let all = [read.info, read.abbrev, read.line, read.str, read.lineStr, read.strOffsets, read.addr, read.ranges,
                   read.rnglists, read.aranges, read.frame]
        return .success(all.map { Array($0.bytes) })
      } catch {
        return .failure(error)
      }
    }
  }

  /// The compressed debug sections of `bytes` that are read (`DWARFSections.wanted`), in the section
  /// table's order: name and the file range of their stream (after the header).
  static func compressedStreams(_ bytes: [UInt8]) throws -> [(name: String, range: Range<Int>)] {
    try bytes.withUnsafeBytes { raw in
      let file = try ELFFile(ByteReader(raw))
      return file.sections.filter { section in
        section.name.hasPrefix(".debug_") && section.flags & DWARFSections.compressedFlag != 0
          && DWARFSections.wanted(section.name.dropFirst(".debug_".count))
      }
        .map { ($0.name, Int($0.fileOffset) + 24..<Int($0.fileOffset) + Int($0.size)) }  // Elf64_Chdr: 24 bytes
    }
  }

  @Test(.enabled(if: WorkerThread.processorCount > 1, "one processor: DebugInfoFile.inflateAside inflates in place"))
  func sameBytesEitherWay() throws {
    let paths = Self.fixtures + (Self.libcDebugFile.map { [$0] } ?? [])
    for path in paths {
      let bytes = try #require(readFileBytes(path))
      #expect(try Self.compressedStreams(bytes).count >= 3, "\(path)")
      let alone = try Self.sections(bytes, aside: false).get()
      let aside = try Self.sections(bytes, aside: true).get()
      #expect(alone == aside, "\(path)")
      #expect(!alone[0].isEmpty && !alone[2].isEmpty, "\(path): no .debug_info or .debug_line")
    }
  }

  /// A decompressor failing for the streams in `failing` (by their sizes), naming the section, and
  /// inflating the others: which section's error comes out is seen.
  static func failing(_ failing: [Int: String]) -> DWARFDecompressor {
    { (compression, input, output) throws(FormatError) -> Int in
      if let name = failing[input.count] { throw .dwarf(section: name, offset: 0, "damaged") }
      return try SystemDecompressor.decompress(compression, input, output)
    }
  }

  /// The largest stream (`.debug_info`, inflated aside) failing, then also the first other one: the
  /// error is the one a single thread gives, the first failing section in the file's order.
  @Test(.enabled(if: WorkerThread.processorCount > 1, "one processor: DebugInfoFile.inflateAside inflates in place"))
  func sameErrorEitherWay() throws {
    for path in Self.fixtures {
      let bytes = try #require(readFileBytes(path))
      let streams = try Self.compressedStreams(bytes)
      try #require(Set(streams.map(\.range.count)).count == streams.count, "\(path): two streams of one size")
      let largest = try #require(streams.max { $0.range.count < $1.range.count })
      let other = try #require(streams.first { $0.name != largest.name })
      for failing in [[largest], [largest, other]] {
        let decompress = Self.failing(Dictionary(uniqueKeysWithValues: failing.map { ($0.range.count, $0.name) }))
        let alone = Self.sections(bytes, aside: false, decompress: decompress)
        let aside = Self.sections(bytes, aside: true, decompress: decompress)
        let first = try #require(streams.first { stream in failing.contains { $0.name == stream.name } })
        #expect(alone.map { _ in 0 } == .failure(.dwarf(section: first.name, offset: 0, "damaged")), "\(path)")
        #expect(aside.map { _ in 0 } == alone.map { _ in 0 }, "\(path), \(failing.map(\.name))")
      }
    }
    // A real damaged zlib stream in .debug_info: zlib's own error, the same either way.
    let path = Self.fixtures[0]
    var damaged = try #require(readFileBytes(path))
    let info = try #require(try Self.compressedStreams(damaged).first { $0.name == ".debug_info" })
    for index in info.range.dropFirst(8).prefix(64) { damaged[index] ^= 0xA5 }
    let alone = Self.sections(damaged, aside: false)
    guard case .failure = alone else { Issue.record("\(path): a damaged .debug_info inflated"); return }
    #expect(Self.sections(damaged, aside: true).map { _ in 0 } == alone.map { _ in 0 })
  }
}
