internal import Glibc
import ProcessInspection
import ImageReaders
import Snapshot

/// Why a core read from a stream gave no snapshot. `description` is one line, without a prefix.
package enum CoreStreamError: Error, CustomStringConvertible {
  /// The bytes are not an ELF core, or its header, program headers or notes are malformed.
  case format(FormatError)
  /// The stream ended before the notes were whole: there are no threads to report.
  case truncated(at: Int, inside: String)
  /// Reading the stream failed.
  case read(SystemError)
  /// What must be kept to make any report (the program headers, the notes) is larger than the memory
  /// limit.
  case memoryLimit(what: String, bytes: Int, limit: Int)

  package var description: String {
    switch self {
    case .format(let error): "\(error)"
    case let .truncated(at, inside): "the core ended after \(at) bytes, inside \(inside): no threads to report"
    case .read(let error): "\(error)"
    case let .memoryLimit(what, bytes, limit):
      "\(what) (\(bytes) bytes) do not fit in the memory limit of \(limit) bytes"
    }
  }
}

/// How much of a streamed core is kept in memory.
package struct CoreStreamLimits: Sendable {
  /// The most bytes of the stream kept at once: the header, the program headers, the notes and the
  /// memory kept from the core (each thread's stack, each image's ELF header page, the vDSO). Whatever
  /// the core's size, the reader holds no more than this, a read buffer of `readSize` and what the
  /// snapshot is made of.
  package var memoryBytes: Int
  /// How much of each thread's stack is kept from its stack pointer towards the stack's base, as
  /// `pid --threads` copies it.
  package var stackBytes: Int

  /// The limits given; the defaults keep 128 MiB at most, 1 MiB of each stack.
  package init(memoryBytes: Int = 128 << 20, stackBytes: Int = Int(ProcessThreads.maxStackBytes)) {
    self.memoryBytes = memoryBytes
    self.stackBytes = stackBytes
  }
}

/// A process as a core handler gets it: the snapshot made from the core's notes and the memory
/// behind it.
package struct DumpCapture {
  /// Where the memory the threads were unwound in came from.
  package enum MemorySource: Sendable, Equatable {
    /// The dumping process itself, through `/proc/PID` (`DumpingProcess`), while the kernel held it.
    case process(pid: Int32)
    /// The parts of the core kept from the stream, and the files the images were mapped from.
    case stream
  }

  /// The process: the signal, the threads with their frames (not yet symbolicated), the images.
  package var snapshot: ProcessSnapshot
  /// The core's notes (threads and their registers, the signal, the auxiliary vector, the mapped files).
  package var core: ELFCore
  /// Where the memory came from.
  package var memorySource: MemorySource
  /// One line per thing that made the snapshot less than whole (without a prefix).
  package var problems: [String]
  /// The memory the snapshot was made from: the dumping process (readable only inside
  /// `CoreStream.read`'s body: the kernel may let it go once the core is read to its end) or the
  /// parts of the core kept.
  package var memory: any MemoryReading
}

/// A core read once, in file order, from a descriptor that cannot seek (the pipe the kernel gives a
/// `core_pattern` handler), in bounded memory however large the core.
///
/// The ELF header, the program headers and the notes are kept and decoded (`ELFCore`, as from a
/// file). Then, while the kernel still holds the dumping process — it waits for the pipe to take the
/// rest of the core — its own `/proc/PID` gives the images and the memory the threads are unwound in
/// (`DumpingProcess`), once its maps are shown to be the ones the core's `NT_FILE` lists. When they
/// are not (the process is gone, or the PID is another's), the memory is the core's own: each
/// thread's stack from its stack pointer, each image's ELF header page and the vDSO are kept as they
/// go by, and the images' code comes from their files (as `CoreDump` reads a core file).
///
/// gdb's `gcore` writes its notes after the memory; memory that comes before the notes is kept whole
/// while the memory limit allows, else its first page only, and the snapshot says what was not kept.
///
/// Every byte read is handed to `copy` first, in order, so the core itself can be kept (compressed)
/// on its way past.
package final class CoreStream {
  /// How many bytes a read asks for when nothing is kept.
  package static let readSize = 1 << 20

  private let descriptor: Int32
  private let pid: Int32
  private let limits: CoreStreamLimits
  private let copy: ((UnsafeRawBufferPointer) -> Void)?
  /// How many bytes have been read.
  package private(set) var bytesRead = 0
  /// The size of the core its program headers describe (0 until they are read).
  package private(set) var expectedSize = 0
  /// True once the stream has ended.
  package private(set) var ended = false
  /// The parts kept, in file order, owned here until handed to a `FileBytes`.
  private var kept: [(offset: Int, bytes: UnsafeMutableRawBufferPointer)] = []
  private var keptBytes = 0
  private var problems: [String] = []

  /// A reader of the core on `descriptor` (not closed here: the kernel waits for the handler to
  /// close it) for the process `pid`.
  package init(descriptor: Int32, pid: Int32, limits: CoreStreamLimits = CoreStreamLimits(),
              copy: ((UnsafeRawBufferPointer) -> Void)? = nil) {
    self.descriptor = descriptor
    self.pid = pid
    self.limits = limits
    self.copy = copy
  }

  deinit {
    for part in kept { part.bytes.deallocate() }
  }

  /// Reads the whole core and makes its snapshot. `body` is called once with it while its memory can
  /// be read (for the dumping process: before the end of the core is read; the place to copy what a
  /// writer needs from that memory); its result is returned with the capture, whose problems then
  /// also say how the stream ended.
  package func read<Result>(whileReadable body: (DumpCapture) -> Result) throws(CoreStreamError)
    -> (capture: DumpCapture, result: Result) {
    let header = try readHeader()
    let segments = try readProgramHeaders(header)
    let noteBytes = segments.filter { $0.kind == .notes }.reduce(0) { $0 + $1.fileRange.count }
    guard noteBytes > 0 else { throw .format(.elf("the core has no PT_NOTE: no threads to report")) }
    guard noteBytes <= limits.memoryBytes - min(keptBytes, limits.memoryBytes) else {
      throw .memoryLimit(what: "the core's notes", bytes: noteBytes, limit: limits.memoryBytes)
    }
    var notesLeft = noteBytes
    var passedBeforeNotes = 0
    var index = 0
    // The segments up to the last note: notes kept whole, memory as the limit allows (gcore's layout).
    while notesLeft > 0, index < segments.count {
      let segment = segments[index]
      index += 1
      switch segment.kind {
      case .notes:
        guard segment.fileRange.lowerBound >= bytesRead else {
          throw .format(.elf("PT_NOTE at offset \(segment.fileRange.lowerBound) overlaps bytes before it (up to \(bytesRead))"))
        }
        try keep(segment.fileRange)
        guard bytesRead == segment.fileRange.upperBound else {
          throw .truncated(at: bytesRead, inside: "the notes (bytes \(segment.fileRange.lowerBound)..<\(segment.fileRange.upperBound))")
        }
        notesLeft -= segment.fileRange.count
      case .memory:
        let range = max(segment.fileRange.lowerBound, bytesRead)..<max(segment.fileRange.upperBound, bytesRead)
        let room = limits.memoryBytes - min(limits.memoryBytes, keptBytes + notesLeft)
        if range.count <= room {
          try keep(range)
        } else {
          let page = min(range.count, 4096, room)
          if page > 0 { try keep(range.lowerBound..<range.lowerBound + page) }
          passedBeforeNotes += range.count - page
        }
      }
    }
    if passedBeforeNotes > 0 {
      problems.append("\(passedBeforeNotes) bytes of memory came before the core's notes and did not fit in the "
                        + "memory limit of \(limits.memoryBytes) bytes: not kept")
    }
    let core: ELFCore
    do { core = try ELFCore(source: keptRanges()) } catch { throw .format(error) }

    let (process, images, refusal) = openProcess(core)
    if let process {
      var snapshot = ProcessSnapshot.core(core, images: images, memory: process.memory,
                                          osVersion: ProcessSnapshot.currentOSVersion(), date: 0)
      // The files deleted or replaced since they were loaded, held open through the dying process's
      // mappings while the kernel holds it, as a live capture holds them (`InMemoryImage.live`).
      snapshot.inMemoryImages += InMemoryImage.heldMappings(of: snapshot.images.compactMap(\.loaded), pid: pid)
      let names = process.threadNames()
      for index in snapshot.threads.indices {
        if let tid = snapshot.threads[index].tid, let name = names[Int32(truncatingIfNeeded: tid)] {
          snapshot.threads[index].name = name
        }
      }
      var capture = DumpCapture(snapshot: snapshot, core: core, memorySource: .process(pid: pid), problems: problems,
                                memory: process.memory)
      let result = body(capture)
      readRest { () throws(CoreStreamError) in try drain() }
      capture.problems = problems + endProblems(memoryFromProcess: true)
      return (capture, result)
    }
    problems.append("memory read from the core, not from the process (\(refusal))")
    readRest { () throws(CoreStreamError) in
      for range in plan(core, segments: segments[index...]) {
        guard range.upperBound > bytesRead else { continue }
        try keep(max(range.lowerBound, bytesRead)..<range.upperBound)
      }
      try drain()
    }
    let size = bytesRead
    let file = FileBytes(path: "standard input", count: size, held: kept)
    kept = []
    let dump: CoreDump
    do { dump = try CoreDump(path: "standard input", file: file) } catch {
      throw .format(error.asFormatError)
    }
    let (snapshot, imageProblems) = ProcessSnapshot.core(dump)
    let capture = DumpCapture(snapshot: snapshot, core: dump.core, memorySource: .stream,
                              problems: problems + imageProblems + endProblems(memoryFromProcess: false), memory: dump)
    return (capture, body(capture))
  }

  /// The dumping process and its images, or why its `/proc/PID` is not used.
  private func openProcess(_ core: ELFCore) -> (DumpingProcess?, [ProcessInspection.Image], String) {
    let process: DumpingProcess
    do { process = try DumpingProcess(pid: pid, core: core) } catch { return (nil, [], error.description) }
    do { return (process, try process.images(), "") } catch { return (nil, [], error.description) }
  }

  /// Runs `reading` (the memory after the notes): a read that fails there ends the stream, as a core
  /// cut short does, and is said; the snapshot is made from what came before.
  private func readRest(_ reading: () throws(CoreStreamError) -> Void) {
    do {
      try reading()
    } catch {
      problems.append("\(error)")
      ended = true
    }
  }

  /// What the end of the stream says: a core cut short.
  private func endProblems(memoryFromProcess: Bool) -> [String] {
    guard bytesRead < expectedSize else { return [] }
    return ["the core ended after \(bytesRead) of the \(expectedSize) bytes its program headers describe"
              + (memoryFromProcess ? " (the memory was read from the process itself)" : ": memory past it is missing")]
  }

  // MARK: Reading in order

  /// The ELF header, kept (with the program header table when it starts inside the header's bytes).
  private func readHeader() throws(CoreStreamError) -> ELFHeader {
    try keep(0..<64)
    guard bytesRead >= 52 else { throw .truncated(at: bytesRead, inside: "the ELF header") }
    do {
      return try ELFHeader(keptRanges().slice(at: 0, length: bytesRead))
    } catch {
      if bytesRead < 64, case .truncated = error { throw .truncated(at: bytesRead, inside: "the ELF header") }
      throw .format(error)
    }
  }

  /// The program header table, kept and decoded; the notes and memory in file order.
  private func readProgramHeaders(_ header: ELFHeader) throws(CoreStreamError) -> [ELFCore.StreamSegment] {
    let table: Range<Int>
    do { table = try ELFCore.streamProgramHeaderTable(header) } catch { throw .format(error) }
    guard table.count <= limits.memoryBytes - min(keptBytes, limits.memoryBytes) else {
      throw .memoryLimit(what: "the program headers", bytes: table.count, limit: limits.memoryBytes)
    }
    try keep(table)
    guard bytesRead >= table.upperBound else {
      throw .truncated(at: bytesRead, inside: "the program headers (bytes \(table.lowerBound)..<\(table.upperBound))")
    }
    do {
      let headers = try ELFCore.programHeaders(in: keptRanges(), header: header)
      let segments = try ELFCore.streamSegments(headers)
      expectedSize = max(table.upperBound, segments.map(\.fileRange.upperBound).max() ?? 0)
      return segments
    } catch {
      throw .format(error)
    }
  }

  /// Reads `range` and keeps it. A range that starts before what was read continues the last part
  /// kept when that part ends where reading stopped (the program headers right after the header);
  /// otherwise its bytes already passed are not there. Stops short at the end of the stream.
  private func keep(_ range: Range<Int>) throws(CoreStreamError) {
    var start = range.lowerBound
    if start < bytesRead {
      if let last = kept.last, last.offset <= start, last.offset + last.bytes.count == bytesRead {
        start = last.offset
      } else {
        start = bytesRead
      }
    }
    guard range.upperBound > start else { return }
    try skip(to: start)
    var prefix = 0
    if let last = kept.last, last.offset == start, start < bytesRead { prefix = bytesRead - start }
    let count = range.upperBound - start  // > 0, checked above
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
    if prefix > 0, let last = kept.popLast() {
      UnsafeMutableRawBufferPointer(rebasing: buffer[0..<prefix]).copyMemory(from: UnsafeRawBufferPointer(last.bytes))
      keptBytes -= last.bytes.count
      last.bytes.deallocate()
    }
    let got: Int
    do {
      got = try fill(UnsafeMutableRawBufferPointer(rebasing: buffer[prefix...]))
    } catch {
      buffer.deallocate()
      throw error
    }
    let total = prefix + got
    guard total > 0 else { buffer.deallocate(); return }
    kept.append((start, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<total])))
    keptBytes += count
  }

  /// Reads and passes over the bytes up to `offset` (or the end of the stream).
  private func skip(to offset: Int) throws(CoreStreamError) {
    guard bytesRead < offset, !ended else { return }
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readSize, alignment: 16)
    defer { scratch.deallocate() }
    // Each round reads at least one byte or ends the stream.
    while bytesRead < offset, !ended {
      _ = try fill(UnsafeMutableRawBufferPointer(rebasing: scratch[0..<min(scratch.count, offset - bytesRead)]))
    }
  }

  /// Reads the rest of the stream.
  private func drain() throws(CoreStreamError) { try skip(to: Int.max) }

  /// Fills `buffer` from the stream (less only at its end), handing each read to `copy`.
  private func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(CoreStreamError) -> Int {
    guard let base = buffer.baseAddress else { return 0 }
    var filled = 0
    // Each round reads at least one byte, or ends the loop.
    while filled < buffer.count, !ended {
      let got = Glibc.read(descriptor, base + filled, buffer.count - filled)
      if got < 0 {
        if errno == EINTR { continue }
        throw .read(.current("cannot read the core from standard input"))
      }
      if got == 0 { ended = true; break }
      copy?(UnsafeRawBufferPointer(start: base + filled, count: got))
      filled += got
      bytesRead += got  // a read returns at most what was asked for: bytesRead stays the stream's length
    }
    return filled
  }

  /// The parts kept, as a source the ELF reader decodes from (`count`: what was read).
  private func keptRanges() -> KeptRanges {
    KeptRanges(parts: kept.map { ($0.offset, UnsafeRawBufferPointer($0.bytes)) }, count: bytesRead)
  }

  // MARK: What to keep when the memory is the core's

  /// The file ranges of the memory a snapshot from the core itself needs, from the segments after the
  /// notes, most needed first as the limit allows (each image's ELF header page, the vDSO, the crashed
  /// thread's stack, the other stacks), merged and in file order.
  private func plan(_ core: ELFCore, segments: ArraySlice<ELFCore.StreamSegment>) -> [Range<Int>] {
    let memory = segments.filter { $0.kind == .memory }
    func fileRanges(_ addresses: Range<UInt64>) -> [Range<Int>] {
      var result: [Range<Int>] = []
      for segment in memory {
        let start = segment.vmAddress
        let (end, overflow) = start.addingReportingOverflow(UInt64(segment.fileRange.count))
        guard !overflow, addresses.lowerBound < end, start < addresses.upperBound else { continue }
        // Both bounds lie inside the segment, whose file range fits in Int.
        let lower = Int(max(addresses.lowerBound, start) - start), upper = Int(min(addresses.upperBound, end) - start)
        result.append(segment.fileRange.lowerBound + lower..<segment.fileRange.lowerBound + upper)
      }
      return result
    }
    func segmentRange(holding address: UInt64) -> Range<UInt64>? {
      for segment in memory {
        let (end, overflow) = segment.vmAddress.addingReportingOverflow(UInt64(segment.fileRange.count))
        if !overflow, address >= segment.vmAddress, address < end { return segment.vmAddress..<end }
      }
      return nil
    }
    var wanted: [(what: String, ranges: [Range<Int>])] = []
    let page = core.pageSize
    for mapping in core.mappedFiles?.mappings ?? [] where mapping.fileOffset == 0 {
      let end = mapping.vmRange.lowerBound.addingReportingOverflow(page)
      guard !end.overflow else { continue }
      wanted.append(("the ELF header of \(mapping.path)", fileRanges(mapping.vmRange.lowerBound..<min(end.partialValue, mapping.vmRange.upperBound))))
    }
    if let vdso = core.auxiliaryValue(ELFCore.auxSysinfoEHDR), let range = segmentRange(holding: vdso) {
      let (cap, overflow) = vdso.addingReportingOverflow(UInt64(limits.stackBytes))
      wanted.append(("the vDSO", fileRanges(vdso..<(overflow ? range.upperBound : min(range.upperBound, cap)))))
    }
    let crashed = core.crashedThreadIndex
    let order = core.threads.indices.sorted { a, b in a == crashed ? b != crashed : false }
    for index in order {
      let thread = core.threads[index]
      guard let sp = thread.registers?.sp, let range = segmentRange(holding: sp) else { continue }
      // The red zone below the stack pointer (x86_64's 128 bytes) and a little more.
      let low = max(range.lowerBound, sp >= 256 ? sp - 256 : 0)
      let (top, overflow) = sp.addingReportingOverflow(UInt64(limits.stackBytes))
      wanted.append(("the stack of thread \(thread.tid)", fileRanges(low..<(overflow ? range.upperBound : min(top, range.upperBound)))))
    }
    var chosen: [Range<Int>] = []
    var room = limits.memoryBytes - min(limits.memoryBytes, keptBytes)
    var left: [String] = []
    for (what, ranges) in wanted {
      let size = ranges.reduce(0) { $0 + $1.count }
      guard size <= room else { left.append(what); continue }
      room -= size
      chosen += ranges
    }
    if !left.isEmpty {
      problems.append("the memory limit of \(limits.memoryBytes) bytes left out \(left.count) parts of the core "
                        + "(\(left.prefix(3).joined(separator: ", "))\(left.count > 3 ? ", ..." : ""))")
    }
    chosen.sort { $0.lowerBound < $1.lowerBound }
    var merged: [Range<Int>] = []
    for range in chosen {
      if let last = merged.last, range.lowerBound <= last.upperBound {
        merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
      } else {
        merged.append(range)
      }
    }
    return merged
  }
}

/// The parts of a stream kept, by file offset, as a `RandomAccessBytes`: a range inside one part is
/// read from it; any other range was not kept (`FormatError.truncated`), as past the end of a file.
struct KeptRanges: RandomAccessBytes {
  let parts: [(offset: Int, bytes: UnsafeRawBufferPointer)]
  /// How many bytes the stream had when the view was made.
  let count: Int
  var endian: ByteReader.Endian = .little

  init(parts: [(offset: Int, bytes: UnsafeRawBufferPointer)], count: Int) {
    self.parts = parts
    self.count = count
  }

  func slice(at start: Int, length: Int) throws(FormatError) -> ByteReader {
    guard start >= 0, length >= 0, start <= count, length <= count - start else {
      throw .outOfRange(start: start, length: length, limit: count)
    }
    for part in parts where part.offset <= start && start - part.offset <= part.bytes.count
      && length <= part.bytes.count - (start - part.offset) {
      let from = start - part.offset
      return ByteReader(UnsafeRawBufferPointer(rebasing: part.bytes[from..<from + length]), endian: endian)
    }
    throw .truncated(at: start, needed: length, available: 0)
  }
}

extension CoreDump.OpenError {
  /// The format error behind the failure (a core whose parts are in memory fails only on its bytes).
  var asFormatError: FormatError {
    switch self {
    case .format(let error): error
    case .open(let error): .elf("\(error)")
    }
  }
}
