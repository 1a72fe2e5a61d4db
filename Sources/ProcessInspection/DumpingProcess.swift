internal import CImageLogProcess
internal import Glibc
package import ImageReaders

/// The process a `core_pattern` handler is called for, read through `/proc/PID` while the kernel
/// holds it: a process writing its core is inside `do_coredump`, its other threads parked in
/// `coredump_task_exit` before they drop the address space, so its maps and memory stay as they were
/// at the crash until the core has been written to its end (and, with `core_pipe_limit` above 0,
/// until the handler exits). What the core's notes cannot give cheaply — the images' headers and call
/// frame information, the stacks, the threads' names — is read here instead of from the stream.
///
/// Memory is read with `process_vm_readv` (`ProcessMemory`), which works on a process in that state
/// as `/proc/PID/mem` does (both go through `mm_access`; the handler runs as root, from the kernel).
/// Pages are cached: nothing in a dumping process changes while it is read.
package final class DumpingProcess {
  /// The process, as the kernel numbers it for the handler (`%P`).
  package let pid: Int32
  /// Its memory, read a page at a time and kept.
  package let memory: PageCachedMemory
  private let mappings: [ProcessMapping]

  /// Why `/proc/PID` is not used for a core.
  package enum Refusal: Error, CustomStringConvertible {
    /// The maps cannot be read (no such process, an exited one, no access).
    case unreadable(ProcessError)
    /// The core has no `NT_FILE` to hold the process's maps to.
    case noFileNote(pid: Int32)
    /// `/proc/PID/maps` does not show the mappings the core's `NT_FILE` lists: another process.
    case notTheDumper(pid: Int32, missing: Range<UInt64>, mappedFiles: Int)

    package var description: String {
      switch self {
      case .unreadable(let error): "\(error)"
      case .noFileNote(let pid): "pid \(pid): the core has no NT_FILE note to tell that /proc/\(pid) is the process that dumped it"
      case let .notTheDumper(pid, missing, count):
        "pid \(pid): /proc/\(pid)/maps does not map 0x\(hexDigits(missing.lowerBound))-0x\(hexDigits(missing.upperBound)) "
          + "as the core's NT_FILE does (\(count) file mappings): not the process that wrote this core"
      }
    }
  }

  /// Process `pid`, when it is the one that wrote `core`: every file mapping the core's `NT_FILE`
  /// lists is in `/proc/PID/maps` with the same range and offset (under address-space randomisation no
  /// other process maps its files at the same addresses). A core handler given the wrong PID, or one
  /// whose process is gone, must not read another process's memory into the report.
  package init(pid: Int32, core: ELFCore) throws(Refusal) {
    guard let files = core.mappedFiles, !files.mappings.isEmpty else { throw .noFileNote(pid: pid) }
    let mappings: [ProcessMapping]
    do { mappings = try ProcessImages.readMappings(of: pid) } catch { throw .unreadable(error) }
    for file in files.mappings {
      let found = mappings.contains {
        $0.start == file.vmRange.lowerBound && $0.end == file.vmRange.upperBound && $0.fileOffset == file.fileOffset
      }
      guard found else { throw .notTheDumper(pid: pid, missing: file.vmRange, mappedFiles: files.mappings.count) }
    }
    self.pid = pid
    self.mappings = mappings
    memory = PageCachedMemory(ProcessMemory(pid: pid))
  }

  /// The images mapped, read as `ProcessImages.snapshot(of:)` reads them (headers from memory, else
  /// from the files behind the mappings), from the maps read when the process was opened.
  package func images() throws(ProcessError) -> [Image] {
    try ProcessImages.images(of: pid, mappings: mappings, readingMemory: true)
  }

  /// The mapping holding `address`, or `nil`.
  package func mapping(containing address: UInt64) -> Range<UInt64>? {
    var low = 0, high = mappings.count
    while low < high {  // maps are in address order and do not overlap
      let middle = low + (high - low) / 2
      if mappings[middle].end <= address { low = middle + 1 } else { high = middle }
    }
    guard low < mappings.count, mappings[low].start <= address else { return nil }
    return mappings[low].start..<mappings[low].end
  }

  /// Each thread's name (`comm`), by the thread id the core's notes use: the id in the process's own
  /// PID namespace (the last `NSpid` of `/proc/PID/task/TID/status`), which is the kernel's `%P`
  /// numbering only outside containers. Threads that cannot be read are left out.
  package func threadNames() -> [Int32: String] {
    var capture = il_threads_capture()
    guard il_list_threads(pid, &capture) == 0 else { return [:] }
    defer { il_free_threads_capture(&capture) }
    var names: [Int32: String] = [:]
    for thread in UnsafeBufferPointer(start: capture.threads, count: capture.count) where thread.stat.state != 0 {
      let name = ProcessThreads.name(thread.stat)
      names[Self.namespaceTID(pid: pid, tid: thread.tid) ?? thread.tid] = name
    }
    return names
  }

  /// The last number of the `NSpid:` line of the thread's status, or `nil`.
  static func namespaceTID(pid: Int32, tid: Int32) -> Int32? {
    guard let text = try? ProcFile.read("/proc/\(pid)/task/\(tid)/status") else { return nil }
    for line in text.split(separator: 0x0A) where line.starts(with: Array("NSpid:".utf8)) {
      let fields = line.dropFirst(6).split(whereSeparator: { $0 == 0x09 || $0 == 0x20 })
      return fields.last.flatMap { Int32(String(decoding: $0, as: UTF8.self)) }
    }
    return nil
  }
}
