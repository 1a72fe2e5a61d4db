internal import Glibc

extension ProcessThreads {
  /// Each thread's frames, innermost first, unwound from the registers and stack copied at the stop;
  /// an empty list for a thread that was not read (its `problem` says why). `images` are the process's
  /// (`ProcessImages.snapshot`): their headers and call frame information are read from the live
  /// process, whose read-only mappings did not change when its threads ran on.
  public func unwind(images: [Image], maxFrames: Int = 256) -> [[UnwoundFrame]] {
    let live = PageCachedMemory(ProcessMemory(pid: pid))
    let located = UnwindImage.locate(images, in: live)
    let architecture = registerArchitecture
    return threads.map { thread in
      guard let values = thread.registerValues else { return [] }
      var registers = RegisterSet(architecture: architecture)
      for (number, value) in values.enumerated() where number < RegisterSet.count { registers[dwarf: number] = value }
      let memory = StackCopyMemory(stack: thread.stack.map { BufferMemory($0.bytes, at: $0.address) }, live: live)
      return StackUnwinder(memory: memory, images: located).unwind(from: registers, maxFrames: maxFrames)
    }
  }
}

/// A stopped thread's memory as it was at the stop: its stack from the copy, anything else (headers,
/// `.eh_frame_hdr`, `.eh_frame`, or stack deeper than the copy) from the live process.
struct StackCopyMemory: MemoryReading {
  let stack: BufferMemory?
  let live: PageCachedMemory

  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    if let stack, stack.read(address, into: buffer) { return true }
    return live.read(address, into: buffer)
  }
}

/// Another process's memory read a page at a time and kept: the unwinder's many small reads of the
/// same `.eh_frame_hdr` table and FDEs (for every frame of every thread) cost one `process_vm_readv`
/// per page instead of one each. Only for memory that does not change while it is used (the images'
/// read-only mappings); a page that cannot be read is remembered as such.
package final class PageCachedMemory: MemoryReading {
  private let memory: ProcessMemory
  // The pages read, by base address: `bases` sorted, `slots[i]` the place in `storage` of the page at
  // `bases[i]` (-1: unreadable). Not a dictionary: the first `[UInt64: ...]` of a run costs the
  // runtime a search of every conformance record for `UInt64: Hashable` (BENCHMARKS.md, "Figures
  // behind design choices"). The pages themselves lie in one buffer, copied from without the
  // reference counting of an array per page: the unwinder reads a few bytes at a time.
  private var bases: [UInt64] = []
  private var slots: [Int] = []
  private var storage: UnsafeMutableRawPointer?
  private var storedPages = 0, capacity = 0
  // The page read last (nil: none, or unreadable): most reads follow one on the same page.
  private var lastBase: UInt64 = 0
  private var lastPage: UnsafeRawPointer?
  private static let pageSize: UInt64 = 4096
  /// A bound on what is kept (pages), so a hostile CFI walk cannot make the cache grow without end,
  /// nor its sorted insertions take long.
  private static let pageLimit = 4_096

  package init(_ memory: ProcessMemory) { self.memory = memory }

  deinit { free(storage) }

  package func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard let destination = buffer.baseAddress, buffer.count > 0 else { return true }
    let (last, overflow) = address.addingReportingOverflow(UInt64(buffer.count) - 1)
    guard !overflow else { return false }
    // A read across many pages (rare: CFI reads are small) goes straight to the process.
    guard last / Self.pageSize - address / Self.pageSize < 4, bases.count < Self.pageLimit else {
      return memory.read(address, into: buffer)
    }
    var done = 0
    var current = address
    while done < buffer.count {
      let base = current & ~(Self.pageSize - 1)
      guard let page = page(at: base) else { return false }
      let offset = Int(current - base)  // < pageSize
      let count = min(Int(Self.pageSize) - offset, buffer.count - done)
      (destination + done).copyMemory(from: page + offset, byteCount: count)
      done += count
      current += UInt64(count)  // within the range checked against overflow above
    }
    return true
  }

  /// The page at `base` (page-aligned), read on first use; nil when it cannot be read.
  private func page(at base: UInt64) -> UnsafeRawPointer? {
    if base == lastBase, let lastPage { return lastPage }
    var low = 0, high = bases.count
    while low < high {  // the first base at or above `base`
      let middle = low + (high - low) / 2
      if bases[middle] < base { low = middle + 1 } else { high = middle }
    }
    let slot: Int
    if low < bases.count, bases[low] == base {
      slot = slots[low]
    } else {
      slot = readPage(at: base)
      bases.insert(base, at: low)
      slots.insert(slot, at: low)
    }
    let page = slot < 0 ? nil : storage.map { UnsafeRawPointer($0 + slot * Int(Self.pageSize)) }
    (lastBase, lastPage) = (base, page)
    return page
  }

  /// Reads the page at `base` into the next place of `storage`: that place, or -1 when the page
  /// cannot be read (or no memory can be had for it).
  private func readPage(at base: UInt64) -> Int {
    let pageSize = Int(Self.pageSize)
    if storedPages == capacity {
      let grown = max(16, capacity * 2)  // at most pageLimit + 1 pages: bases.count < pageLimit here
      guard let moved = realloc(storage, grown * pageSize) else { return -1 }
      (storage, capacity) = (moved, grown)
      lastPage = nil  // it pointed into the buffer before it moved
    }
    guard let storage else { return -1 }
    // One page a call: reading more at once, for the neighbours a table search goes on to, was slower.
    let place = UnsafeMutableRawBufferPointer(start: storage + storedPages * pageSize, count: pageSize)
    guard memory.read(base, into: place) else { return -1 }
    storedPages += 1
    return storedPages - 1
  }
}
