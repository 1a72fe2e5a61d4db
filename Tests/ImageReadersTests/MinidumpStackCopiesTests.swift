import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// `MinidumpFile.stackCopies`, what a snapshot of a dump holds of its threads' stacks (issue 35): a
/// range of the file is copied once however many threads name it, and the copies together hold at
/// most the file's size. The dumps are the hostile shapes made from the committed writer fixture.
@Suite struct MinidumpStackCopiesTests {
  static let mebibyte = 1 << 20

  static func copies(_ bytes: [UInt8]) throws -> (dump: MinidumpFile, stacks: [(address: UInt64, bytes: [UInt8])?],
                                                  problem: FormatError?) {
    try ByteReader.reading(bytes) { reader throws(FormatError) in
      let dump = try MinidumpFile(source: reader)
      let (stacks, problem) = dump.stackCopies(in: reader)
      return (dump, stacks, problem)
    }
  }

  /// 1,000 threads naming one 1 MiB range, at one address and at 1,000: one copy, each thread's stack
  /// its own address and the range's bytes.
  @Test(arguments: [0, UInt64(1 << 20)])
  func oneRangeIsCopiedOnce(addressStep: UInt64) throws {
    let base = try Fixtures.bytes("minidump/writer-x86_64.dmp")
    let bytes = try #require(MinidumpShapes.replicating(base, threads: 1000, modules: 1, stackSize: Self.mebibyte,
                                                        stackAddressStep: addressStep))
    let (dump, stacks, problem) = try Self.copies(bytes)
    #expect(problem == nil)
    #expect(stacks.count == 1000 && stacks.allSatisfy { $0 != nil })
    let held = MinidumpShapes.heldBytes(stacks.map { $0?.bytes })
    #expect(held.distinct == Self.mebibyte && held.named == 1000 * Self.mebibyte, "\(held)")
    #expect(zip(dump.threads, stacks).allSatisfy { thread, stack in stack?.address == thread.stack.startAddress })
    // One copy (held.distinct): the first's bytes are every thread's.
    let first = try #require(dump.threads.first)
    let range = Int(first.stack.location.rva)..<Int(first.stack.location.rva) + Self.mebibyte
    #expect(stacks.first??.bytes.withUnsafeBytes { copy in bytes.withUnsafeBytes { file in
      copy.elementsEqual(UnsafeRawBufferPointer(rebasing: file[range]))
    } } == true)
  }

  /// 1,000 threads at 1,000 addresses whose 64 KiB ranges of the file each start a byte after the
  /// last: the first ones are copied up to the file's size, the rest left out, named in one problem.
  @Test func overlappingRangesAreCappedAtTheFileSize() throws {
    let base = try Fixtures.bytes("minidump/writer-x86_64.dmp")
    let size = 64 << 10
    let bytes = try #require(MinidumpShapes.replicating(base, threads: 1000, modules: 1, stackSize: size, stackShift: 1,
                                                        stackAddressStep: UInt64(size)))
    let (dump, stacks, problem) = try Self.copies(bytes)
    let kept = bytes.count / size
    try #require(kept < 1000)
    #expect(stacks.prefix(kept).allSatisfy { $0?.bytes.count == size } && stacks.dropFirst(kept).allSatisfy { $0 == nil })
    let held = MinidumpShapes.heldBytes(stacks.map { $0?.bytes })
    #expect(held.distinct == kept * size && held.distinct <= bytes.count)
    #expect(problem == .minidump("ThreadList stream (directory 0): the stacks of \(1000 - kept) threads (the first thread "
                                 + "\(kept), tid \(dump.threads[kept].tid)) left out: the stacks kept already hold as many bytes "
                                 + "as the file"))
  }
}
