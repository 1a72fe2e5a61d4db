#if os(Linux)
internal import CImageLog
internal import Glibc
import ImageReaders
import Synchronization

/// `dlpi_adds` / `dlpi_subs`: they only grow, so equal counters mean an unchanged list.
struct LoaderCounters: Equatable, Sendable {
  var adds: UInt64
  var subs: UInt64

  /// The counters now (one `dl_iterate_phdr` call that stops at the first object).
  static func current() -> LoaderCounters {
    var adds: UInt64 = 0
    var subs: UInt64 = 0
    il_loader_counters(&adds, &subs)
    return LoaderCounters(adds: adds, subs: subs)
  }
}

/// What identifies one loaded object while it stays loaded, available without decoding anything:
/// its load bias and where its program headers are (inside its own mapping, or a loader allocation).
struct LoadedObjectKey: Hashable, Sendable {
  var loadBias: UInt
  var programHeaders: UInt
}

/// One `dl_iterate_phdr` walk. Images are built inside the callback, while the loader's list lock
/// guarantees the object is still mapped. Objects already known are not decoded again, but only while
/// `dlpi_subs` has not moved: once anything was unloaded, a new object may sit at a freed address with
/// its program headers where the old one's were, so every image is rebuilt from its own bytes.
enum LoaderWalk {
  struct Result {
    var counters: LoaderCounters
    var objects: [(key: LoadedObjectKey, image: Image)]
  }

  private final class Context {
    let previous: [LoadedObjectKey: Image]
    let previousCounters: LoaderCounters?
    var reuse = false
    var counters = LoaderCounters(adds: 0, subs: 0)
    var objects: [(key: LoadedObjectKey, image: Image)] = []
    var index = 0
    init(previous: [LoadedObjectKey: Image], previousCounters: LoaderCounters?) {
      self.previous = previous
      self.previousCounters = previousCounters
      objects.reserveCapacity(previous.count + 4)
    }
  }

  static func run(reusing previous: [LoadedObjectKey: Image] = [:], previousCounters: LoaderCounters? = nil) -> Result {
    let context = Context(previous: previous, previousCounters: previousCounters)
    withExtendedLifetime(context) {
      _ = il_iterate_objects({ object, raw in
        guard let object, let raw else { return 0 }
        let context = Unmanaged<Context>.fromOpaque(raw).takeUnretainedValue()
        let info = object.pointee
        let index = context.index
        context.index += 1
        if index == 0 {
          context.counters = LoaderCounters(adds: info.adds, subs: info.subs)
          context.reuse = context.previousCounters?.subs == info.subs
        }
        let key = LoadedObjectKey(loadBias: info.load_bias, programHeaders: UInt(bitPattern: info.phdrs))
        if context.reuse, let known = context.previous[key] {
          context.objects.append((key, known))
        } else if let image = LoaderImageBuilder.image(from: info, index: index) {
          context.objects.append((key, image))
        }
        return 0
      }, Unmanaged.passUnretained(context).toOpaque())
    }
    return Result(counters: context.counters, objects: context.objects)
  }
}

/// Builds `Image` values from what the loader reports, reading only the object's own program
/// headers and `PT_NOTE` bytes in memory.
enum LoaderImageBuilder {
  /// The main executable's real path: `readlink("/proc/self/exe")`, once per process.
  static let executablePath: String = {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { return "" }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }()

  /// `AT_SYSINFO_EHDR`: the vDSO's load address (0 when there is none).
  static let vdsoAddress: Address = il_vdso_address()

  /// `AT_PAGESZ`: the granularity of file mappings.
  static let pageSize: UInt64 = il_page_size()

  /// The name crash tooling uses for this process's architecture (every in-process image shares it).
  static let architecture: String = {
    #if arch(x86_64)
    return "x86_64"
    #elseif arch(arm64)
    return "arm64"
    #elseif arch(i386)
    return "i386"
    #elseif arch(arm)
    return "arm"
    #elseif arch(riscv64)
    return "riscv64"
    #elseif arch(powerpc64le)
    return "ppc64le"
    #elseif arch(s390x)
    return "s390x"
    #else
    return "unknown"
    #endif
  }()

  static let is64Bit = MemoryLayout<UInt>.size == 8
  static let programHeaderSize = is64Bit ? 56 : 32

  static func image(from object: il_object, index: Int) -> Image? {
    guard let phdrs = object.phdrs else { return nil }
    let count = Int(object.phnum)
    // phnum is a UInt16 and the entry size 56: the product fits in Int.
    let table = ByteReader(UnsafeRawBufferPointer(start: phdrs, count: count * programHeaderSize), endian: .native)
    guard let headers = try? ProgramHeader.table(table, count: count, entrySize: programHeaderSize, is64Bit: is64Bit),
          let layout = try? LoadLayout(headers) else { return nil }
    let bias = UInt64(object.load_bias)
    // Addresses wrap as the loader's do: the bias is a difference modulo 2^64.
    let loadAddress = bias &+ layout.firstVMAddress
    let textEnd = bias &+ layout.textEndVMAddress
    let loadEnd = bias &+ layout.loadEndVMAddress
    guard loadAddress <= textEnd, loadAddress <= loadEnd else { return nil }

    let name = object.name.map { String(cString: $0) } ?? ""  // the loader's own string, not file data
    let isVDSO = vdsoAddress != 0 && loadAddress == vdsoAddress
    let isMain = index == 0 && name.isEmpty && !isVDSO
    let path = isVDSO ? "[vdso]" : isMain ? executablePath : name

    var fileEnd = loadAddress
    for header in headers where header.type == ProgramHeader.load && header.fileSize > 0 {
      let (end, overflow) = header.vmAddress.addingReportingOverflow(header.fileSize)
      guard !overflow else { continue }
      fileEnd = max(fileEnd, bias &+ roundUpToPage(end))
    }

    let (buildID, buildIDAddress) = findBuildID(headers, bias: bias)
    return Image(path: path, name: isVDSO ? "[vdso]" : nil, loadAddress: loadAddress, loadBias: bias,
                 textRange: loadAddress..<textEnd, loadRange: loadAddress..<loadEnd, buildID: buildID,
                 architecture: architecture, isMainExecutable: isMain, buildIDAddress: buildIDAddress,
                 fileMappedRange: loadAddress..<max(fileEnd, loadAddress))
  }

  static func roundUpToPage(_ value: UInt64) -> UInt64 {
    let mask = pageSize &- 1
    let (sum, overflow) = value.addingReportingOverflow(mask)
    return overflow ? value : sum & ~mask
  }

  /// The GNU build-id from the first `PT_NOTE` that has one. A note is read only when it lies
  /// inside the file-backed part of a `PT_LOAD`, so the bytes are mapped and readable.
  static func findBuildID(_ headers: [ProgramHeader], bias: UInt64) -> (BuildID?, Address?) {
    for note in headers where note.type == ProgramHeader.note && note.fileSize > 0 {
      let (noteEnd, overflow) = note.vmAddress.addingReportingOverflow(note.fileSize)
      guard !overflow, let length = Int(exactly: note.fileSize) else { continue }
      let mapped = headers.contains { load in
        load.type == ProgramHeader.load && load.vmAddress <= note.vmAddress
          && noteEnd <= load.vmAddress &+ load.fileSize && load.vmAddress <= load.vmAddress &+ load.fileSize
      }
      guard mapped else { continue }
      let address = bias &+ note.vmAddress
      guard let start = UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: address)) else { continue }
      let reader = ByteReader(UnsafeRawBufferPointer(start: start, count: length), endian: .native)
      let alignment = note.alignment == 8 ? 8 : 4
      guard let found = try? ELFNote.buildIDNote(in: reader, alignment: alignment), !found.descriptor.isEmpty else {
        continue
      }
      // descriptorOffset < length, which fits in Int and came from a UInt64: the sum cannot wrap in practice.
      return (BuildID(found.descriptor), address &+ UInt64(found.descriptorOffset))
    }
    return (nil, nil)
  }
}

extension ByteReader.Endian {
  /// This machine's byte order: how in-memory loader structures are laid out.
  static var native: ByteReader.Endian {
    #if _endian(big)
    return .big
    #else
    return .little
    #endif
  }
}
#endif
