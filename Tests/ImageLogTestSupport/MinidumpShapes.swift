/// Hostile minidump shapes made from a real dump at test time (issue 35), so that no large file is
/// committed: many thread descriptors naming one range of the file, and many modules. The dump's own
/// ThreadList and ModuleList are left where they are; new lists are appended at the end of the file
/// and the directory's entries point at them. Also compiled into `make fuzz` (Tests/Fuzz), which makes
/// shapes from its inputs: every read is checked, and an input that is not a dump with a thread and a
/// module gives `nil`, never a trap.
public enum MinidumpShapes {
  /// `base` with `threads` threads, copies of its first thread (the same context bytes) with tids
  /// counting up from the first's, and `modules` modules, copies of its first (the same name and
  /// CodeView record) `moduleStride` bytes apart from the first's base address (each module's size cut
  /// to the stride). With `stackSize`, the first thread's stack bytes, followed by zeros up to
  /// `stackSize`, are appended once and every thread's stack descriptor names them (from the first
  /// thread's stack address); with `stackShift` too, thread k's descriptor starts `k * stackShift` bytes
  /// further into the appended bytes (overlapping ranges of the file, each a different one), which are
  /// made long enough for the last. With `stackAddressStep`, thread k's stack starts `k * stackAddressStep`
  /// above the first's (ranges of the process that do not overlap, over the same or overlapping bytes of
  /// the file); else all start at the same address. With `ownContexts`, each thread gets its own copy of
  /// the first's context, one after another (as a writer lays out the contexts of a real process's
  /// threads); else all name the first's. `nil` when `base` has no ThreadList or ModuleList with an entry, or
  /// the result would not fit the format's 32-bit offsets.
  public static func replicating(_ base: [UInt8], threads: Int, modules: Int, moduleStride: UInt64 = 0x10000,
                                 stackSize: Int? = nil, stackShift: Int = 0, stackAddressStep: UInt64 = 0,
                                 ownContexts: Bool = false) -> [UInt8]? {
    var bytes = base
    guard threads >= 1, modules >= 1, threads <= 1 << 24, modules <= 1 << 24, stackShift >= 0, stackShift <= 1 << 20,
          let threadList = stream(bytes, type: 3), let moduleList = stream(bytes, type: 4),
          let firstThread = firstEntry(bytes, list: threadList, entrySize: 48),
          let firstModule = firstEntry(bytes, list: moduleList, entrySize: 108) else { return nil }
    var thread = Array(bytes[firstThread..<firstThread + 48])
    if let stackSize {
      let size = int(thread, 32, 4), rva = int(thread, 36, 4)
      guard stackSize >= 0, stackSize <= 1 << 30, (threads - 1) * stackShift <= 1 << 30, let size, let rva,
            size <= stackSize, rva <= bytes.count, size <= bytes.count - rva else { return nil }
      align(&bytes)
      let start = bytes.count
      let original = Array(bytes[rva..<rva + size])
      bytes += original
      bytes += [UInt8](repeating: 0, count: stackSize - size + (threads - 1) * stackShift)
      write(&thread, 32, 4, UInt64(stackSize))
      write(&thread, 36, 4, UInt64(start))
    }
    guard let tid = read(thread, 0, 4), let stackRVA = read(thread, 36, 4), let stackAddress = read(thread, 24, 8),
          let contextSize = int(thread, 40, 4), let contextRVA = int(thread, 44, 4) else { return nil }
    var contextsAt = contextRVA
    if ownContexts {
      guard contextRVA <= bytes.count, contextSize <= bytes.count - contextRVA, contextSize <= 1 << 16 else { return nil }
      let context = Array(bytes[contextRVA..<contextRVA + contextSize])
      align(&bytes)
      contextsAt = bytes.count
      for _ in 0..<threads { bytes += context }
    }
    align(&bytes)
    let threadsAt = bytes.count
    bytes += [UInt8](repeating: 0, count: 8)
    write(&bytes, threadsAt, 4, UInt64(threads))
    for index in 0..<threads {
      write(&thread, 0, 4, UInt64(tid) &+ UInt64(index))
      write(&thread, 36, 4, stackRVA &+ UInt64(index * stackShift))  // index * stackShift <= 2^30 (checked)
      write(&thread, 24, 8, stackAddress &+ UInt64(index) &* stackAddressStep)
      if ownContexts { write(&thread, 44, 4, UInt64(contextsAt + index * contextSize)) }  // within 2^24 * 2^16
      bytes += thread
    }
    var module = Array(bytes[firstModule..<firstModule + 108])
    guard let baseAddress = read(module, 0, 8), let size = read(module, 8, 4) else { return nil }
    write(&module, 8, 4, min(size, moduleStride))
    align(&bytes)
    let modulesAt = bytes.count
    bytes += [UInt8](repeating: 0, count: 8)
    write(&bytes, modulesAt, 4, UInt64(modules))
    for index in 0..<modules {
      write(&module, 0, 8, baseAddress &+ UInt64(index) &* moduleStride)
      bytes += module
    }
    guard bytes.count <= Int(UInt32.max) else { return nil }
    write(&bytes, threadList.entry + 4, 4, UInt64(8 + 48 * threads))
    write(&bytes, threadList.entry + 8, 4, UInt64(threadsAt))
    write(&bytes, moduleList.entry + 4, 4, UInt64(8 + 108 * modules))
    write(&bytes, moduleList.entry + 8, 4, UInt64(modulesAt))
    return bytes
  }

  /// The directory entry (its offset) and the stream's offset and size of the first stream of `type`.
  static func stream(_ bytes: [UInt8], type: UInt64) -> (entry: Int, rva: Int, size: Int)? {
    guard read(bytes, 0, 4) == 0x504D_444D, let count = int(bytes, 8, 4), let directory = int(bytes, 12, 4) else { return nil }
    for index in 0..<min(count, 1 << 16) where read(bytes, directory + index * 12, 4) == type {
      guard let size = int(bytes, directory + index * 12 + 4, 4), let rva = int(bytes, directory + index * 12 + 8, 4)
      else { return nil }
      return (directory + index * 12, rva, size)
    }
    return nil
  }

  /// Where the first entry of a counted list is (after the count, and 4 bytes of padding when the
  /// list's size says so), when the list has one that lies in the file.
  static func firstEntry(_ bytes: [UInt8], list: (entry: Int, rva: Int, size: Int), entrySize: Int) -> Int? {
    guard let count = int(bytes, list.rva, 4), count >= 1, count <= list.size / entrySize else { return nil }
    let start = list.rva + (list.size - count * entrySize == 8 ? 8 : 4)
    return start <= bytes.count - entrySize ? start : nil
  }

  /// The little-endian value of `size` bytes at `at`, or `nil` when they are not all in `bytes`.
  static func read(_ bytes: [UInt8], _ at: Int, _ size: Int) -> UInt64? {
    guard at >= 0, at <= bytes.count - size else { return nil }
    var value: UInt64 = 0
    for index in (0..<size).reversed() { value = value << 8 | UInt64(bytes[at + index]) }
    return value
  }

  /// `read` of a 32-bit field, as an `Int`.
  static func int(_ bytes: [UInt8], _ at: Int, _ size: Int) -> Int? { read(bytes, at, size).flatMap { Int(exactly: $0) } }

  /// Writes `value`'s low `size` bytes at `at` (inside `bytes`: the callers made room), little-endian.
  static func write(_ bytes: inout [UInt8], _ at: Int, _ size: Int, _ value: UInt64) {
    for index in 0..<size { bytes[at + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
  }

  /// Pads `bytes` to a multiple of 8 (where the lists start).
  static func align(_ bytes: inout [UInt8]) {
    bytes += [UInt8](repeating: 0, count: (8 - bytes.count % 8) % 8)
  }
}

extension MinidumpShapes {
  /// How many bytes `arrays` hold: each storage counted once however many arrays share it, and in all
  /// (what copies would hold). What a reader's copies of a dump's stacks are checked by.
  public static func heldBytes(_ arrays: [[UInt8]?]) -> (distinct: Int, named: Int) {
    var storages = Set<UInt>()
    var distinct = 0, named = 0
    for array in arrays {
      guard let array else { continue }
      named += array.count
      let storage = array.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
      if storages.insert(storage).inserted { distinct += array.count }
    }
    return (distinct, named)
  }
}
