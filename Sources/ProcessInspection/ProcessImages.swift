internal import CImageLogProcess
internal import Glibc
internal import ImageReaders

/// The binary images mapped into another process: its executable, shared libraries, dynamic
/// loader and vDSO, read from `/proc/PID/maps` and the process's own memory.
///
/// Headers, program headers and build-id notes are read from memory with `process_vm_readv(2)`,
/// so a deleted or replaced file and the vDSO are described as they are mapped. When memory cannot
/// be read (Yama's `ptrace_scope`, a process of another user), each file is read instead through
/// `/proc/PID/map_files` or `/proc/PID/root` (so paths inside another mount namespace resolve),
/// and the vDSO, which has no file, from this process's own vDSO when both executables have the
/// same ABI (the kernel maps one vDSO image per ABI). ELF32 processes on a 64-bit kernel are read
/// as ELF32. Files mapped at offset 0 that are not ELF (locale archives, caches) are not images.
///
/// The fields are those of the in-process snapshot. `fileMappedRange` ends where the file's last
/// mapping does, as `eu-unstrip -n -p PID` reports module sizes.
public enum ProcessImages {
  /// The images of process `pid`, in address order (as `/proc/PID/maps` and `eu-unstrip` list them).
  ///
  /// Needs the access `ptrace(2)` calls `PTRACE_MODE_READ` for the maps, and
  /// `PTRACE_MODE_ATTACH` for the memory (the file is read when that is refused).
  public static func snapshot(of pid: Int32) throws(ProcessError) -> [Image] {
    try snapshot(of: pid, readingMemory: true)
  }

  /// `readingMemory: false` reads every header from the files, as when `process_vm_readv` is refused.
  static func snapshot(of pid: Int32, readingMemory: Bool) throws(ProcessError) -> [Image] {
    try images(of: pid, mappings: try readMappings(of: pid), readingMemory: readingMemory)
  }

  /// The images `mappings` (the parsed `/proc/PID/maps`) show, headers read from memory or the files.
  static func images(of pid: Int32, mappings: [ProcessMapping], readingMemory: Bool) throws(ProcessError) -> [Image] {
    var reader = ProcessMemoryReader(pid: pid, readingMemory: readingMemory)
    let main = mainExecutableIdentity(of: pid)
    var images: [Image] = []
    for index in mappings.indices {
      let mapping = mappings[index]
      guard mapping.fileOffset == 0, mapping.isReadable, mapping.isFile || mapping.path == "[vdso]" else { continue }
      guard var image = try reader.image(at: index, in: mappings) else { continue }
      guard mapping.path == "[vdso]" || mapsItsCode(image, from: index, in: mappings) else { continue }
      if let main, mapping.inode == main.inode, mapping.deviceMajor == main.major, mapping.deviceMinor == main.minor {
        image.isMainExecutable = true
      }
      images.append(image)
    }
    // A live process always maps its executable (or at least the vDSO): none means the maps were read
    // in exec's window (the new address space holds only the stack) or while the process was exiting.
    if images.isEmpty {
      // Maps were readable but neither memory nor the files behind them: say what access is missing.
      if reader.memoryRefused, readingMemory, mappings.contains(where: \.isFile) {
        throw .permissionDenied(pid: pid, reading: "/proc/\(pid)/mem and the mapped files",
                                hint: accessHint(for: pid, readingMemory: true))
      }
      throw emptyAddressSpaceError(pid)
    }
    return images
  }


  /// True when a mapping of the same file inside the image's load range is executable: the loader
  /// maps a loaded object's code, while an ELF file only mapped to be read (a symbolizer's or a
  /// debugger's `mmap` of a library, this process's own `MappedFile`) has no executable part. The
  /// object's mappings follow its first one in address order, so the scan stops past its range.
  static func mapsItsCode(_ image: Image, from index: Int, in mappings: [ProcessMapping]) -> Bool {
    let first = mappings[index]
    for mapping in mappings[index...] {
      guard mapping.start < image.loadRange.upperBound else { break }
      if mapping.isExecutable, mapping.inode == first.inode, mapping.deviceMajor == first.deviceMajor,
         mapping.deviceMinor == first.deviceMinor {
        return true
      }
    }
    return false
  }

  /// The parsed `/proc/PID/maps`, with every failure turned into the error a person can act on. A
  /// process whose main thread has exited (pthread_exit) shows no maps there: its live threads' do.
  static func readMappings(of pid: Int32) throws(ProcessError) -> [ProcessMapping] {
    let text: [UInt8]
    do {
      text = try ProcFile.read("/proc/\(pid)/maps")
    } catch {
      switch error.errno {
      case ENOENT, ESRCH: throw processGoneError(pid)
      case EACCES, EPERM: throw .permissionDenied(pid: pid, reading: "/proc/\(pid)/maps", hint: accessHint(for: pid))
      default: throw .system(pid: pid, SystemError("cannot \(error.operation) /proc/\(pid)/maps", errno: error.errno))
      }
    }
    var mappings = ProcessMapping.parse(text)
    if mappings.isEmpty, let thread = liveThread(of: pid), let threadText = try? ProcFile.read("/proc/\(pid)/task/\(thread)/maps") {
      mappings = ProcessMapping.parse(threadText)
    }
    if mappings.isEmpty { throw emptyAddressSpaceError(pid) }
    return mappings
  }

  /// A thread of `pid` that runs on after its main thread exited (pthread_exit), or nil: the main
  /// thread's task, zombie, no longer holds the address space, so `/proc/PID/maps`, `/proc/PID/exe` and
  /// `process_vm_readv(PID)` come back empty or refused, while the same through the live thread's TID
  /// answer for the whole process. Asked only after such an answer: a process whose main thread lives
  /// costs nothing more.
  static func liveThread(of pid: Int32) -> Int32? {
    let thread = il_live_thread(pid)
    return thread > 0 ? thread : nil
  }

  /// `.noSuchProcess`, or `.exited` when the PID existed a moment ago (a zombie shows as one).
  static func processGoneError(_ pid: Int32) -> ProcessError {
    access("/proc/\(pid)", F_OK) == 0 ? emptyAddressSpaceError(pid) : .noSuchProcess(pid: pid)
  }

  /// Why a process that exists has no mappings (or none of an image): a kernel thread, a zombie, or it
  /// is inside an exec or exiting; `.exited` when it is gone by now.
  static func emptyAddressSpaceError(_ pid: Int32) -> ProcessError {
    guard let stat = ProcessThreads.taskStat("/proc/\(pid)/stat") else { return .exited(pid: pid, reading: .images) }
    let command = ProcessThreads.name(stat)
    if stat.state == CChar(UInt8(ascii: "Z")) || stat.state == CChar(UInt8(ascii: "X")) {
      return .zombie(pid: pid, command: command, reading: .images)
    }
    if ProcessThreads.isKernelThread(stat) { return .kernelThread(pid: pid, command: command, reading: .images) }
    return .noImages(pid: pid)  // alive, but its address space is being replaced (exec) or torn down (exit)
  }

  struct FileIdentity { var inode: UInt64; var major: UInt32; var minor: UInt32 }

  /// The device and inode of `/proc/PID/exe` (followed), as `maps` writes them; a live thread's
  /// when the main thread has exited.
  static func mainExecutableIdentity(of pid: Int32) -> FileIdentity? {
    var info = stat()
    guard stat("/proc/\(pid)/exe", &info) == 0
            || liveThread(of: pid).map({ stat("/proc/\(pid)/task/\($0)/exe", &info) == 0 }) == true else { return nil }
    let device = UInt64(info.st_dev)
    // glibc's gnu_dev_major / gnu_dev_minor.
    let major = UInt32(truncatingIfNeeded: ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff)))
    let minor = UInt32(truncatingIfNeeded: (device & 0xff) | ((device >> 12) & ~UInt64(0xff)))
    return FileIdentity(inode: UInt64(info.st_ino), major: major, minor: minor)
  }
}

/// Reads ranges of one process's memory, remembering when the kernel refuses so the rest of the
/// images go straight to their files.
struct ProcessMemoryReader {
  let pid: Int32
  /// The task read: `pid`, or a live thread once the main thread is found to have exited.
  private var task: Int32
  private(set) var memoryRefused = false
  let pageSize: UInt64 = {
    let size = sysconf(Int32(_SC_PAGESIZE))
    return size > 0 ? UInt64(size) : 4096
  }()

  /// How many note bytes we read at most per `PT_NOTE`: build-id notes are tiny.
  static let noteLimit: UInt64 = 64 * 1024
  /// How many bytes of the first page hold the ELF header and, almost always, the program headers.
  static let headerReadSize: UInt64 = 4096

  init(pid: Int32, readingMemory: Bool = true) {
    self.pid = pid
    task = pid
    memoryRefused = !readingMemory
  }

  /// Up to `count` bytes at `address` (fewer when the range runs into unmapped memory), or `nil`
  /// when the memory cannot be read at all.
  mutating func read(at address: Address, count: UInt64) throws(ProcessError) -> [UInt8]? {
    guard !memoryRefused, count > 0, let length = Int(exactly: count) else { return nil }
    var failure: Int32 = 0
    let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
      let got = il_read_process_memory(task, address, buffer.baseAddress, length)
      if got < 0 { failure = errno; initialized = 0 } else { initialized = got }
    }
    switch failure {
    case 0: return bytes.isEmpty ? nil : bytes
    case ESRCH:
      // The main thread may have exited while the others run on (pthread_exit): read through one of those.
      guard task == pid, let thread = ProcessImages.liveThread(of: pid) else { throw .exited(pid: pid, reading: .images) }
      task = thread
      return try read(at: address, count: count)
    case EPERM, EACCES, ENOSYS: memoryRefused = true; return nil
    default: return nil  // EFAULT: that range is not mapped (any more)
    }
  }

  /// The image whose ELF header is mapped by `mappings[index]`, or `nil` when that is not an ELF image.
  mutating func image(at index: Int, in mappings: [ProcessMapping]) throws(ProcessError) -> Image? {
    let mapping = mappings[index]
    let headerBytes = min(mapping.end &- mapping.start, Self.headerReadSize)
    if let bytes = try read(at: mapping.start, count: headerBytes),
       let image = try imageFromMemory(bytes, mapping: mapping, index: index, in: mappings) {
      return image
    }
    if mapping.path == "[vdso]" {
      // No file behind it. The kernel maps one vDSO image per ABI, so ours is the target's when the
      // two executables have the same ELF class, byte order and machine.
      guard let own = ownVDSO(size: mapping.end &- mapping.start), sameABI() else { return nil }
      return try imageFromMemory(own, mapping: mapping, index: index, in: mappings)
    }
    return imageFromFile(mapping: mapping, index: index, in: mappings)
  }

  /// This process's vDSO (`AT_SYSINFO_EHDR`), `size` bytes of it, or `nil`.
  private func ownVDSO(size: UInt64) -> [UInt8]? {
    let base = il_vdso_address()
    guard base != 0, size > 0, size <= 1 << 20, let length = Int(exactly: size) else { return nil }
    let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
      let got = il_read_process_memory(getpid(), base, buffer.baseAddress, length)
      initialized = got == length ? length : 0
    }
    return bytes.isEmpty ? nil : bytes
  }

  /// True when `/proc/PID/exe` and our executable agree on `EI_CLASS`, `EI_DATA` and `e_machine`.
  private func sameABI() -> Bool {
    func identity(_ path: String) -> [UInt8]? {
      let descriptor = open(path, O_RDONLY | O_CLOEXEC)
      guard descriptor >= 0 else { return nil }
      defer { close(descriptor) }
      var bytes = [UInt8](repeating: 0, count: 20)
      guard bytes.withUnsafeMutableBytes({ Glibc.read(descriptor, $0.baseAddress, 20) }) == 20 else { return nil }
      return [bytes[4], bytes[5], bytes[18], bytes[19]]
    }
    guard let theirs = identity("/proc/\(pid)/exe"), let ours = identity("/proc/self/exe") else { return false }
    return theirs == ours
  }

  /// Decodes the header page read from memory; program headers past it and notes are read as needed.
  private mutating func imageFromMemory(_ first: [UInt8], mapping: ProcessMapping, index: Int,
                                        in mappings: [ProcessMapping]) throws(ProcessError) -> Image? {
    let parsed: (header: ELFHeader, phdrs: [ProgramHeader])?
    do throws(FormatError) {
      parsed = try ByteReader.reading(first) { reader throws(FormatError) in
        let header = try ELFHeader(reader)
        let size = UInt64(header.programHeaderCount) * UInt64(header.programHeaderEntrySize)  // UInt16 * UInt16
        if let range = try? ByteReader.checkedRange(offset: header.programHeaderOffset, size: size,
                                                    limit: reader.count, "program headers") {
          var table = try reader.slice(at: range.lowerBound, length: range.count)
          table.endian = header.endian
          return (header, try ProgramHeader.table(table, count: Int(header.programHeaderCount),
                                                   entrySize: Int(header.programHeaderEntrySize),
                                                   is64Bit: header.is64Bit))
        }
        return (header, [])
      }
    } catch {
      return nil  // not ELF, or a header we cannot trust: the file may still say more
    }
    guard let (header, parsedPhdrs) = parsed else { return nil }
    var phdrs = parsedPhdrs
    if phdrs.isEmpty && header.programHeaderCount > 0 {
      // The program headers lie past the first page: fetch them on their own.
      let size = UInt64(header.programHeaderCount) * UInt64(header.programHeaderEntrySize)
      let (address, overflow) = mapping.start.addingReportingOverflow(header.programHeaderOffset)
      guard !overflow, let table = try read(at: address, count: size) else { return nil }
      do throws(FormatError) {
        phdrs = try ByteReader.reading(table, endian: header.endian) { reader throws(FormatError) in
          try ProgramHeader.table(reader, count: Int(header.programHeaderCount),
                                  entrySize: Int(header.programHeaderEntrySize), is64Bit: header.is64Bit)
        }
      } catch { return nil }
    }
    guard let layout = try? LoadLayout(phdrs) else { return nil }
    let bias = mapping.start &- layout.firstVMAddress
    var buildID: BuildID?
    var buildIDAddress: Address?
    for note in phdrs where note.type == ProgramHeader.note && note.vmSize > 0 {
      let address = bias &+ note.vmAddress
      let size = min(note.vmSize, Self.noteLimit)
      let bytes: [UInt8]?
      if address >= mapping.start, address - mapping.start <= UInt64(first.count),
         size <= UInt64(first.count) - (address - mapping.start) {
        let offset = Int(address - mapping.start)  // <= first.count, proved above
        bytes = Array(first[offset..<(offset + Int(size))])
      } else {
        bytes = try read(at: address, count: size)
      }
      guard let bytes else { continue }
      let found = try? ByteReader.reading(bytes, endian: header.endian) { reader throws(FormatError) in
        try ELFNote.buildIDNote(in: reader, alignment: note.alignment == 8 ? 8 : 4)
      }
      if let found {
        buildID = BuildID(found.descriptor)
        buildIDAddress = address &+ UInt64(found.descriptorOffset)
        break
      }
    }
    return makeImage(header: header, layout: layout, bias: bias, buildID: buildID,
                     buildIDAddress: buildIDAddress, mapping: mapping, index: index, in: mappings)
  }

  /// The same fields read from the file behind the mapping, for when memory is out of reach.
  private func imageFromFile(mapping: ProcessMapping, index: Int, in mappings: [ProcessMapping]) -> Image? {
    guard mapping.isFile else { return nil }
    var candidates = ["/proc/\(pid)/map_files/\(hexDigits(mapping.start))-\(hexDigits(mapping.end))"]
    let path = Image.withoutDeletedMark(mapping.path).path
    candidates.append("/proc/\(pid)/root\(path)")
    // An exited main thread has neither map_files nor a root: a live thread has the root.
    if task != pid { candidates.append("/proc/\(pid)/task/\(task)/root\(path)") }
    var file: MappedFile?
    for candidate in candidates {
      if let opened = try? MappedFile(path: candidate), Self.sameFile(candidate, as: mapping) {
        file = opened
        break
      }
    }
    guard let file else { return nil }
    let decoded: (ELFHeader, LoadLayout, [ProgramHeader], ELFNote?, ProgramHeader?)?
    do throws(FormatError) {
      decoded = try file.withReader { reader throws(FormatError) in
        let header = try ELFHeader(reader)
        let size = UInt64(header.programHeaderCount) * UInt64(header.programHeaderEntrySize)  // UInt16 * UInt16
        let range = try ByteReader.checkedRange(offset: header.programHeaderOffset, size: size,
                                                limit: reader.count, "program headers")
        var table = try reader.slice(at: range.lowerBound, length: range.count)
        table.endian = header.endian
        let phdrs = try ProgramHeader.table(table, count: Int(header.programHeaderCount),
                                            entrySize: Int(header.programHeaderEntrySize), is64Bit: header.is64Bit)
        guard let layout = try LoadLayout(phdrs) else { return nil }
        for note in phdrs where note.type == ProgramHeader.note {
          guard let area = try? ByteReader.checkedRange(offset: note.fileOffset, size: note.fileSize,
                                                        limit: reader.count, "PT_NOTE") else { continue }
          var notes = try reader.slice(at: area.lowerBound, length: area.count)
          notes.endian = header.endian
          if let found = try? ELFNote.buildIDNote(in: notes, alignment: note.alignment == 8 ? 8 : 4) {
            return (header, layout, phdrs, found, note)
          }
        }
        return (header, layout, phdrs, nil, nil)
      }
    } catch {
      return nil
    }
    guard let (header, layout, _, note, segment) = decoded else { return nil }
    let bias = mapping.start &- layout.firstVMAddress
    var buildIDAddress: Address?
    if let note, let segment { buildIDAddress = bias &+ segment.vmAddress &+ UInt64(note.descriptorOffset) }
    return makeImage(header: header, layout: layout, bias: bias, buildID: note.map { BuildID($0.descriptor) },
                     buildIDAddress: buildIDAddress, mapping: mapping, index: index, in: mappings)
  }

  /// True when `path` is the file the mapping maps (same inode), so a path that now names another
  /// file (replaced on disk, or another mount namespace) is not read in its place.
  private static func sameFile(_ path: String, as mapping: ProcessMapping) -> Bool {
    var info = stat()
    guard PathBytes.withCString(path, { stat($0, &info) }) == 0 else { return false }
    return UInt64(info.st_ino) == mapping.inode
  }

  private func makeImage(header: ELFHeader, layout: LoadLayout, bias: Address, buildID: BuildID?,
                         buildIDAddress: Address?, mapping: ProcessMapping, index: Int,
                         in mappings: [ProcessMapping]) -> Image {
    let loadAddress = mapping.start
    let loadEnd = max(bias &+ layout.loadEndVMAddress, loadAddress)
    let textEnd = min(max(bias &+ layout.textEndVMAddress, loadAddress), loadEnd)
    // elfutils' module span: the file's mappings from the header on, up to the end of the last one.
    var fileEnd = mapping.end
    var next = index + 1
    while next < mappings.count, mappings[next].start < loadEnd {
      if mappings[next].isSameFile(as: mapping) || (mapping.path == "[vdso]" && mappings[next].path == "[vdso]") {
        fileEnd = max(fileEnd, mappings[next].end)
      }
      next += 1
    }
    let path = mapping.path
    return Image(path: path, name: Image.shortName(of: path), loadAddress: loadAddress, loadBias: bias,
                 textRange: loadAddress..<textEnd, loadRange: loadAddress..<loadEnd, buildID: buildID,
                 architecture: elfArchitectureName(machine: header.machine, is64Bit: header.is64Bit, flags: header.flags),
                 isMainExecutable: false, buildIDAddress: buildIDAddress, fileMappedRange: loadAddress..<fileEnd)
  }
}

