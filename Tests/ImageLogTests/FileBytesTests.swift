import ImageLogTestSupport
import Glibc
import ImageReaders
import Testing
@testable import ImageLog

/// `FileBytes`: ranges read with pread (or mapped when large) equal the file's bytes at every offset;
/// ranges outside the file throw `ByteReader.slice`'s exact error; a file that shrinks after it was
/// opened gives `FormatError.truncated` and says so in `readError`; what cannot be opened fails as
/// `MappedFile` fails; and ELF files decoded through it equal those decoded from a mapping.
@Suite struct FileBytesTests {
  /// A temporary file holding `bytes`; removed by the caller with `unlink`.
  static func temporaryFile(_ bytes: [UInt8]) throws -> String {
    var template = Array((try makeTemporaryDirectory("imagelog-filebytes") + "/file.XXXXXX").utf8CString)
    let descriptor = mkstemp(&template)
    guard descriptor >= 0 else { throw TestSupportError("mkstemp failed") }
    defer { close(descriptor) }
    let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    guard written == bytes.count else { throw TestSupportError("short write") }
    return String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  static func pseudoRandomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return UInt8(truncatingIfNeeded: state >> 33)
    }
  }

  /// The bytes `FileBytes` hands out for a range (copied out of the reader).
  static func fetch(_ ranges: FileRanges, _ start: Int, _ length: Int) throws(FormatError) -> [UInt8] {
    let reader = try ranges.slice(at: start, length: length)
    return try reader.bytes(at: 0, length: reader.count)
  }

  @Test func everyRangeHoldsTheFilesBytes() throws {
    // Large enough that some ranges are mapped (more than FileBytes.largestRead) and some are read.
    let content = Self.pseudoRandomBytes(300_000, seed: 3)
    let path = try Self.temporaryFile(content)
    defer { unlink(path) }
    let file = try FileBytes(path: path)
    #expect(file.count == content.count)
    var state: UInt64 = 11
    func next(_ bound: Int) -> Int {
      state = state &* 6_364_136_223_846_793_005 &+ 1
      return Int(state >> 33) % bound
    }
    try file.withRanges { ranges throws(FormatError) in
      let fixed: [(Int, Int)] = [(0, 0), (0, 1), (0, 64), (content.count, 0), (content.count - 1, 1), (0, content.count),
                                 (content.count - 5000, 5000), (4095, 2), (1023, 1026), (100_000, 40_000)]
      var checks = fixed
      for _ in 0..<300 {
        let start = next(content.count)
        checks.append((start, next(min(content.count - start, 70_000) + 1)))
      }
      for (start, length) in checks {
        let got = try Self.fetch(ranges, start, length)
        #expect(got == Array(content[start..<start + length]), "range \(start)+\(length)")
      }
    }
    #expect(file.readError == nil)
    #expect(file.fetchCount > 0)
  }

  @Test func rangesOutsideTheFileThrowByteReadersErrors() throws {
    let content = Self.pseudoRandomBytes(10, seed: 5)
    let path = try Self.temporaryFile(content)
    defer { unlink(path) }
    let file = try FileBytes(path: path)
    content.withUnsafeBytes { raw in
      let whole = ByteReader(raw)
      file.withRanges { ranges in
        for (start, length) in [(-1, 1), (0, -1), (0, 11), (10, 1), (11, 0), (5, 6), (Int.max, 1), (1, Int.max)] {
          #expect(throws: FormatError.outOfRange(start: start, length: length, limit: 10)) { try ranges.slice(at: start, length: length) }
          #expect(throws: FormatError.outOfRange(start: start, length: length, limit: 10)) { try whole.slice(at: start, length: length) }
        }
        #expect((try? Self.fetch(ranges, 0, 10)) == content)  // the whole short file, in one short read
        #expect((try? Self.fetch(ranges, 10, 0)) == [])       // an empty range at the end
      }
    }
  }

  @Test func aFileThatShrinksIsTruncatedNotTrusted() throws {
    let content = Self.pseudoRandomBytes(100_000, seed: 7)
    let path = try Self.temporaryFile(content)
    defer { unlink(path) }
    let file = try FileBytes(path: path)
    guard truncate(path, 10_000) == 0 else { throw TestSupportError("truncate failed") }
    file.withRanges { ranges in
      // Bytes still there are read; the size the checks use is still the size at open.
      #expect(ranges.count == 100_000)
      #expect((try? Self.fetch(ranges, 0, 100)) == Array(content[0..<100]))
      // A range past the new end, and one across it.
      #expect(throws: FormatError.truncated(at: 50_000, needed: 100, available: 0)) { try ranges.slice(at: 50_000, length: 100) }
      #expect(throws: FormatError.truncated(at: 8_000, needed: 4_000, available: 2_000)) { try ranges.slice(at: 8_000, length: 4_000) }
    }
    #expect(file.readError == .shrank(size: 100_000))
    #expect(file.readError?.description == "file shrank while being read (it had 100000 bytes)")
  }

  @Test func whatCannotBeOpenedFailsAsMappedFileDoes() throws {
    let folder = try makeTemporaryDirectory("imagelog-filebytes-dir")
    let fifo = folder + "/fifo", empty = folder + "/empty"
    guard mkfifo(fifo, 0o600) == 0 else { throw TestSupportError("mkfifo failed") }
    let emptyDescriptor = open(empty, O_CREAT | O_WRONLY, 0o600)
    close(emptyDescriptor)
    defer { unlink(fifo); unlink(empty); rmdir(folder) }
    let cases: [(String, MappedFile.OpenError)] = [
      (folder, .notRegularFile(kind: "directory")),
      (fifo, .notRegularFile(kind: "FIFO")),  // refused without blocking: O_NONBLOCK, then fstat
      (empty, .empty),
      (folder + "/missing", .system(SystemError("cannot open", errno: ENOENT))),
      ("/dev/null", .notRegularFile(kind: "character device")),
    ]
    for (path, expected) in cases {
      #expect(throws: expected) { try FileBytes(path: path) }
      #expect(throws: expected) { try MappedFile(path: path) }
    }
  }

  /// ELF files under the system library folder (every 4th, so the test stays short), decoded through
  /// FileBytes and from a whole-file mapping: the same values, or the same error.
  @Test(.enabled(if: access("/usr/lib/x86_64-linux-gnu", R_OK) == 0, "no /usr/lib/x86_64-linux-gnu (not x86-64 Debian); skipped"))
  func systemLibrariesDecodeAsFromAMapping() throws {
    let folder = "/usr/lib/x86_64-linux-gnu"
    let directory = try #require(opendir(folder), "cannot list \(folder)")
    var names: [String] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
      if name.contains(".so") { names.append(name) }
    }
    closedir(directory)
    var compared = 0
    for name in names.sorted().enumerated().filter({ $0.offset % 4 == 0 }).map(\.element) {
      let path = folder + "/" + name
      guard let mapped = try? MappedFile(path: path), let ranged = try? FileBytes(path: path) else { continue }
      let whole: String = mapped.withReader { reader in
        guard (try? reader.peek(UInt32.self, at: 0)) == ELFHeader.magic else { return "not ELF" }
        do throws(FormatError) { return String(describing: try ELFFile(reader)) } catch { return "error: \(error)" }
      }
      guard whole != "not ELF" else { continue }
      let viaRanges: String = ranged.withRanges { ranges in
        do throws(FormatError) { return String(describing: try ELFFile(source: ranges)) } catch { return "error: \(error)" }
      }
      #expect(viaRanges == whole, "\(path)")
      compared += 1
    }
    #expect(compared > 0, "no ELF libraries under \(folder)")
  }

  /// Every Mach-O and universal fixture, decoded with `BinaryFile.parse(source:)` over FileBytes (what
  /// `imagelog file` does, and the README's example) and from a whole-file mapping: the same values or
  /// the same error, in a few pread calls each.
  @Test func machOFixturesDecodeAsFromAMapping() throws {
    let folder = packageRoot + "/Tests/ImageReadersTests/Fixtures/macho"
    var pending = [folder]
    var paths: [String] = []
    while let current = pending.popLast() {
      guard let directory = opendir(current) else { continue }
      while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard name != ".", name != ".." else { continue }
        var info = stat()
        guard stat(current + "/" + name, &info) == 0 else { continue }
        if info.st_mode & S_IFMT == S_IFDIR { pending.append(current + "/" + name) } else { paths.append(current + "/" + name) }
      }
      closedir(directory)
    }
    var universal = 0
    for path in paths.sorted() {
      let mapped = try MappedFile(path: path)
      let whole: String = mapped.withReader { reader in
        do throws(FormatError) { return String(describing: try BinaryFile.parse(reader)) } catch { return "error: \(error)" }
      }
      guard !whole.hasPrefix("error: not"), !whole.hasPrefix("error: too short") else { continue }  // Info.plist
      let file = try FileBytes(path: path)
      let viaRanges: String = file.withRanges { ranges in
        do throws(FormatError) {
          let binary = try BinaryFile.parse(source: ranges)  // reads only the ranges it needs
          if case .fat = binary { universal += 1 }
          return String(describing: binary)
        } catch {
          return "error: \(error)"
        }
      }
      #expect(viaRanges == whole, "\(path)")
      #expect(file.fetchCount <= 12, "\(path): \(file.fetchCount) fetches")
    }
    #expect(universal >= 3)
  }
}
