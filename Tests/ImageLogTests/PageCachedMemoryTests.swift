import Glibc
@testable import ImageLog
import ImageLogTestSupport
import Testing

/// `PageCachedMemory`, the unwinder's page cache over another process's memory, read here over this
/// process's own: every read answers as the memory does, in any order, across page ends, and an
/// unreadable page stays unreadable.
@Suite struct PageCachedMemoryTests {
  @Test func readsAnswerAsTheMemoryDoes() throws {
    let pageSize = 4096, pageCount = 40, unreadable = 21  // past the cache's first 16 pages: it grows
    let region = try #require(mmap(nil, pageSize * pageCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
    try #require(region != MAP_FAILED)
    defer { munmap(region, pageSize * pageCount) }
    let bytes = region.bindMemory(to: UInt8.self, capacity: pageSize * pageCount)
    var rng = SeededGenerator(seed: 0x9A6E)
    for index in 0..<pageSize * pageCount { bytes[index] = UInt8(truncatingIfNeeded: rng.next()) }
    try #require(mprotect(region + pageSize * unreadable, pageSize, PROT_NONE) == 0)

    let base = UInt64(UInt(bitPattern: region))
    let cached = PageCachedMemory(ProcessMemory(pid: getpid()))
    var buffer = [UInt8](repeating: 0, count: 3 * pageSize)
    var reads = 0, refused = 0
    for _ in 0..<5000 {
      let offset = Int(rng.next() % UInt64(pageSize * pageCount))
      // Mostly the unwinder's small reads, some across two or three pages.
      let wanted = rng.next() % 8 == 0 ? Int(rng.next() % UInt64(2 * pageSize)) + 1 : Int(rng.next() % 64) + 1
      let count = min(wanted, pageSize * pageCount - offset)
      let firstPage = offset / pageSize, lastPage = (offset + count - 1) / pageSize
      let readable = !(firstPage...lastPage).contains(unreadable)
      let answered = buffer.withUnsafeMutableBytes {
        cached.read(base + UInt64(offset), into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]))
      }
      #expect(answered == readable, "offset \(offset), \(count) bytes")
      if answered {
        #expect(buffer[0..<count].elementsEqual(UnsafeBufferPointer(start: bytes + offset, count: count)),
                "offset \(offset), \(count) bytes")
        reads += 1
      } else {
        refused += 1
      }
    }
    #expect(reads > 4000 && refused > 50, "\(reads) reads, \(refused) refused")
  }
}
