extension ProcessThreads {
  /// Each thread's frames, innermost first, unwound from the registers and stack copied at the stop;
  /// an empty list for a thread that was not read (its `problem` says why). `images` are the process's
  /// (`ProcessImages.snapshot`): their headers and call frame information are read from the live
  /// process, whose read-only mappings did not change when its threads ran on.
  public func unwind(images: [Image], maxFrames: Int = 256) -> [[UnwoundFrame]] {
    let live = PageCachedMemory(ProcessMemory(pid: pid))
    let located = images.map {
      UnwindImage.locate(loadAddress: $0.loadAddress, loadBias: $0.loadBias, textRange: $0.textRange, in: live)
    }
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
final class PageCachedMemory: MemoryReading {
  private let memory: ProcessMemory
  // The pages read, by base address: `bases` sorted, `pages[i]` the page at `bases[i]` (nil: unreadable).
  // Not a dictionary: the first `[UInt64: ...]` of a run costs the runtime a search of every
  // conformance record for `UInt64: Hashable` (BENCHMARKS.md, "Figures behind design choices").
  private var bases: [UInt64] = []
  private var pages: [[UInt8]?] = []
  // The page read last (nil: none, or unreadable): most reads follow one on the same page.
  private var lastBase: UInt64 = 0
  private var lastPage: [UInt8]?
  private static let pageSize: UInt64 = 4096
  /// A bound on what is kept (pages), so a hostile CFI walk cannot make the cache grow without end,
  /// nor its sorted insertions take long.
  private static let pageLimit = 4_096

  init(_ memory: ProcessMemory) { self.memory = memory }

  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    guard buffer.count > 0 else { return true }
    let (last, overflow) = address.addingReportingOverflow(UInt64(buffer.count) - 1)
    guard !overflow else { return false }
    // A read across many pages (rare: CFI reads are small) goes straight to the process.
    guard last / Self.pageSize - address / Self.pageSize < 4, pages.count < Self.pageLimit else {
      return memory.read(address, into: buffer)
    }
    var done = 0
    var current = address
    while done < buffer.count {
      let base = current & ~(Self.pageSize - 1)
      guard let page = page(at: base) else { return false }
      let offset = Int(current - base)  // < pageSize
      let count = min(page.count - offset, buffer.count - done)
      page.withUnsafeBytes { raw in
        UnsafeMutableRawBufferPointer(rebasing: buffer[done..<done + count])
          .copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + count]))
      }
      done += count
      current += UInt64(count)  // within the range checked against overflow above
    }
    return true
  }

  private func page(at base: UInt64) -> [UInt8]? {
    if base == lastBase, let lastPage { return lastPage }
    var low = 0, high = bases.count
    while low < high {  // the first base at or above `base`
      let middle = low + (high - low) / 2
      if bases[middle] < base { low = middle + 1 } else { high = middle }
    }
    let page: [UInt8]?
    if low < bases.count, bases[low] == base {
      page = pages[low]
    } else {
      // One page a call: reading more at once, for the neighbours a table search goes on to, was slower.
      var bytes = [UInt8](repeating: 0, count: Int(Self.pageSize))
      let read = bytes.withUnsafeMutableBytes { memory.read(base, into: $0) }
      page = read ? bytes : nil
      bases.insert(base, at: low)
      pages.insert(page, at: low)
    }
    (lastBase, lastPage) = (base, page)
    return page
  }
}
