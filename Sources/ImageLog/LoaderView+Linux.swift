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

/// The loader's list as last seen, brought up to date in place by one `dl_iterate_phdr` walk.
///
/// Images are built inside the walk's callback, while the loader's list lock guarantees the object is
/// still mapped, and only for objects not seen before. Survivors keep their relative order in the
/// loader's list (new objects are appended to their namespace), so the walk merges against the
/// previous list with a cursor instead of hashing. Once anything was unloaded (`dlpi_subs` moved), a
/// new object may sit at a freed address with its program headers where the old one's were; when the
/// counters say that may have happened (see `update`), a survivor is accepted only if its name, its
/// `PT_LOAD`/`PT_NOTE` headers and its build-id bytes are unchanged (the same file at the same
/// address: every `Image` field would come out equal).
final class LoaderView {
  /// The view itself: a value the walk takes over (swapped out, so its arrays stay uniquely
  /// referenced and are edited in place) and hands back.
  struct List {
    var counters: LoaderCounters?
    var keys: [LoadedObjectKey] = []
    var images: [Image] = []
    var fingerprints: [Fingerprint] = []
  }

  private var list = List()

  /// The loader's counters when the view was last brought up to date.
  var counters: LoaderCounters? { list.counters }
  /// The images, in the loader's order.
  var images: [Image] { list.images }

  /// What identifies the file behind a key: its loader name and the program headers its image was
  /// built from (the `PT_LOAD` and `PT_NOTE` entries, already decoded: keeping them costs nothing).
  struct Fingerprint {
    /// The loader's name when it differs from the image's path (`nil`: it is the path).
    var name: [UInt8]?
    var headerCount: UInt16
    var headers: [ProgramHeader]
  }

  /// What one update found.
  struct Changes {
    var removed: [Image] = []
    var added: [Image] = []
  }

  /// Walks the loader's list and applies the differences; `nil` when the counters did not move.
  ///
  /// glibc counts every object added to or removed from a namespace list (`dlpi_adds`/`dlpi_subs`
  /// move by one per object, failed loads included). A first walk matches objects by key only; when
  /// the objects it found added and removed account exactly for how far the counters moved, no object
  /// can have been replaced under an old key. Otherwise a second walk checks every survivor's
  /// fingerprint and reports a replaced one as removed and added.
  func update(collectingChanges collect: Bool = true) -> Changes? {
    let previous = list.counters
    let first = walk(verify: false, force: false, collect: collect)
    guard !first.unchanged else { return nil }
    guard let previous, first.counters.subs != previous.subs else { return first.changes }
    let added = UInt64(first.added), removed = UInt64(first.removed)
    if first.counters.adds &- previous.adds == added && first.counters.subs &- previous.subs == removed {
      return first.changes
    }
    let second = walk(verify: true, force: true, collect: collect)
    var changes = first.changes
    changes.removed += second.changes.removed
    changes.added += second.changes.added
    return changes
  }

  /// One `dl_iterate_phdr` walk over the list, which the walk owns meanwhile. The callback reaches the
  /// walk through a typed pointer to this stack value: no reference counting or dynamic exclusivity
  /// checks per object.
  private func walk(verify: Bool, force: Bool, collect: Bool) -> Walk {
    var walk = Walk(verify: verify, force: force, collect: collect)
    swap(&walk.list, &list)
    withUnsafeMutablePointer(to: &walk) { pointer in
      _ = il_iterate_objects({ object, raw in
        guard let object, let raw else { return 1 }
        // `raw` is the pointer to `walk` passed below, typed as it was created.
        return UnsafeMutablePointer<Walk>(OpaquePointer(raw)).pointee.visit(object.pointee)
      }, UnsafeMutableRawPointer(pointer))
    }
    if !walk.unchanged {
      walk.finish()
      walk.list.counters = walk.counters
    }
    swap(&walk.list, &list)
    return walk
  }

  private struct Walk {
    var list = List()
    var counters = LoaderCounters(adds: 0, subs: 0)
    var unchanged = false
    let verify: Bool
    let force: Bool
    let collect: Bool
    /// Objects gone, found before the end of the walk or after it.
    var removed = 0
    var cursor = 0
    var index = 0
    /// Objects seen for the first time, including any whose image could not be built.
    var added = 0
    var changes = Changes()

    init(verify: Bool, force: Bool, collect: Bool) {
      self.verify = verify
      self.force = force
      self.collect = collect
    }

    mutating func visit(_ object: il_object) -> Int32 {
      defer { index += 1 }
      if index == 0 {
        counters = LoaderCounters(adds: object.adds, subs: object.subs)
        if !force && list.counters == counters { unchanged = true; return 1 }
      }
      let key = LoadedObjectKey(loadBias: object.load_bias, programHeaders: UInt(bitPattern: object.phdrs))
      if cursor < list.keys.count, list.keys[cursor] == key, !verify || LoaderView.isSame(list, at: cursor, object) {
        cursor += 1
        return 0
      }
      var later = cursor + 1
      while later < list.keys.count,
            !(list.keys[later] == key && (!verify || LoaderView.isSame(list, at: later, object))) {
        later += 1
      }
      if later < list.keys.count {
        // The objects between the cursor and the match were unloaded.
        removed += later - cursor
        if collect { changes.removed += list.images[cursor..<later] }
        list.keys.removeSubrange(cursor..<later)
        list.images.removeSubrange(cursor..<later)
        list.fingerprints.removeSubrange(cursor..<later)
        cursor += 1
        return 0
      }
      added += 1
      guard let (image, headers) = LoaderImageBuilder.image(from: object, index: index) else { return 0 }
      list.keys.insert(key, at: cursor)
      list.fingerprints.insert(LoaderView.fingerprint(object, image: image, headers: headers), at: cursor)
      if collect { changes.added.append(image) }
      list.images.insert(image, at: cursor)
      cursor += 1
      return 0
    }

    /// Whatever the walk did not reach again is gone.
    mutating func finish() {
      guard cursor < list.keys.count else { return }
      removed += list.keys.count - cursor
      if collect { changes.removed += list.images[cursor...] }
      list.keys.removeSubrange(cursor...)
      list.images.removeSubrange(cursor...)
      list.fingerprints.removeSubrange(cursor...)
    }
  }

  static func fingerprint(_ object: il_object, image: Image, headers: [ProgramHeader]) -> Fingerprint {
    // A library's path is its loader name: keep a copy only for the executable and the vDSO.
    let name: [UInt8]? = image.isMainExecutable || image.path == "[vdso]"
      ? object.name.map { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? [] : nil
    return Fingerprint(name: name, headerCount: object.phnum, headers: headers)
  }

  /// Whether `object` is the same file, mapped the same way, as the entry at `position`.
  private static func isSame(_ list: List, at position: Int, _ object: il_object) -> Bool {
    let known = list.fingerprints[position]
    guard object.phnum == known.headerCount, let headers = LoaderImageBuilder.headers(of: object),
          headers == known.headers else { return false }
    let image = list.images[position]
    let name = object.name.map { UnsafeRawBufferPointer(start: $0, count: strlen($0)) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
    if let knownName = known.name {
      guard let base = name.baseAddress else { return knownName.isEmpty }
      guard Self.equal(knownName, base, count: name.count) else { return false }
    } else {
      // A native String's UTF-8 is contiguous: one memcmp instead of a per-byte walk.
      let same = image.path.utf8.withContiguousStorageIfAvailable { path in
        path.count == name.count && (path.isEmpty || memcmp(path.baseAddress!, name.baseAddress!, path.count) == 0)
      } ?? image.path.utf8.elementsEqual(name)
      guard same else { return false }
    }
    // Identical PT_LOAD and PT_NOTE headers at the same bias map the note at the same place, inside a
    // PT_LOAD's file bytes: reading it is safe.
    guard let buildID = image.buildID, let address = image.buildIDAddress,
          let start = UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: address)) else { return true }
    return Self.equal(buildID.bytes, start, count: buildID.bytes.count)
  }

  /// Whether `stored` holds exactly the `count` bytes at `memory`.
  private static func equal(_ stored: [UInt8], _ memory: UnsafeRawPointer, count: Int) -> Bool {
    guard stored.count == count else { return false }
    return stored.withUnsafeBytes { bytes in
      guard let base = bytes.baseAddress else { return true }
      return memcmp(base, memory, count) == 0
    }
  }

  /// A fresh walk of everything (no previous view): for `uncachedSnapshot()` and tests.
  static func capture() -> [Image] {
    let view = LoaderView()
    _ = view.update(collectingChanges: false)
    return view.images
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

  /// The `PT_LOAD` and `PT_NOTE` entries of a program header table (all an image needs); the
  /// others are skipped after reading their type, which halves the decoding of a typical table.
  static func loadAndNoteHeaders(_ table: ByteReader, count: Int) throws(FormatError) -> [ProgramHeader] {
    var result: [ProgramHeader] = []
    result.reserveCapacity(min(count, 8))
    for index in 0..<count {
      // index < count <= 65535 and the entry size is 56: the product fits in Int.
      var entry = try table.slice(at: index * programHeaderSize, length: programHeaderSize)
      let type = UInt32(truncatingIfNeeded: try entry.readWord(is64Bit: false))  // p_type is 32 bits
      guard type == ProgramHeader.load || type == ProgramHeader.note else { continue }
      try entry.seek(to: 0)
      result.append(try ProgramHeader(&entry, is64Bit: is64Bit))
    }
    return result
  }

  /// The last component of `executablePath`.
  static let executableName: String = lastComponent(of: executablePath)

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

  /// The `PT_LOAD` and `PT_NOTE` headers of a loaded object, or `nil` when they cannot be decoded.
  static func headers(of object: il_object) -> [ProgramHeader]? {
    guard let phdrs = object.phdrs else { return nil }
    let count = Int(object.phnum)
    // phnum is a UInt16 and the entry size 56: the product fits in Int.
    let table = ByteReader(UnsafeRawBufferPointer(start: phdrs, count: count * programHeaderSize), endian: .native)
    return try? loadAndNoteHeaders(table, count: count)
  }

  /// The image of a loaded object and the headers it was built from.
  static func image(from object: il_object, index: Int) -> (Image, [ProgramHeader])? {
    guard let headers = headers(of: object), let layout = try? LoadLayout(headers) else { return nil }
    let bias = UInt64(object.load_bias)
    // Addresses wrap as the loader's do: the bias is a difference modulo 2^64.
    let loadAddress = bias &+ layout.firstVMAddress
    let textEnd = bias &+ layout.textEndVMAddress
    let loadEnd = bias &+ layout.loadEndVMAddress
    guard loadAddress <= textEnd, loadAddress <= loadEnd else { return nil }

    // The loader's own string (not file data): l_name.
    let nameBytes = object.name.map { UnsafeRawBufferPointer(start: $0, count: strlen($0)) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
    let isVDSO = vdsoAddress != 0 && loadAddress == vdsoAddress
    let isMain = index == 0 && nameBytes.isEmpty && !isVDSO
    let path: String
    let shortName: String
    if isVDSO {
      (path, shortName) = ("[vdso]", "[vdso]")
    } else if isMain {
      (path, shortName) = (executablePath, executableName)
    } else {
      path = String(decoding: nameBytes, as: UTF8.self)
      let slash = nameBytes.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? 0
      shortName = String(decoding: UnsafeRawBufferPointer(rebasing: nameBytes[slash...]), as: UTF8.self)
    }

    var fileEnd = loadAddress
    for header in headers where header.type == ProgramHeader.load && header.fileSize > 0 {
      let (end, overflow) = header.vmAddress.addingReportingOverflow(header.fileSize)
      guard !overflow else { continue }
      fileEnd = max(fileEnd, bias &+ roundUpToPage(end))
    }

    let (buildID, buildIDAddress) = findBuildID(headers, bias: bias)
    let image = Image(path: path, name: shortName, loadAddress: loadAddress, loadBias: bias,
                 textRange: loadAddress..<textEnd, loadRange: loadAddress..<loadEnd, buildID: buildID,
                 architecture: architecture, isMainExecutable: isMain, buildIDAddress: buildIDAddress,
                 fileMappedRange: loadAddress..<max(fileEnd, loadAddress))
    return (image, headers)
  }

  /// `Image.shortName(of:)` on the UTF-8 view ('/' is ASCII, so the index is a character boundary).
  static func lastComponent(of path: String) -> String {
    guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
    return String(path[path.utf8.index(after: slash)...])
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
      guard let found = try? buildIDNote(in: reader, alignment: note.alignment == 8 ? 8 : 4),
            !found.descriptor.isEmpty else { continue }
      // descriptorOffset < length, which fits in Int and came from a UInt64: the sum cannot wrap in practice.
      return (BuildID(found.descriptor), address &+ UInt64(found.descriptorOffset))
    }
    return (nil, nil)
  }
}

extension LoaderImageBuilder {
  /// The GNU build-id note in `area`: the same walk and checks as `ELFNote.buildIDNote` (12-byte
  /// header, descriptor and next note at `alignment` boundaries, every size checked against what is
  /// left), but
  /// it copies only the build-id's descriptor instead of every note's name and descriptor: this runs
  /// for every image in every snapshot. Tests check both agree on every loaded image.
  static func buildIDNote(in area: ByteReader, alignment: Int) throws(FormatError) -> (descriptor: [UInt8], descriptorOffset: Int)? {
    var reader = area
    // Every note consumes at least 12 bytes: the loop is bounded by the area's size.
    // `readWord` is not generic: across the module boundary the generic `read<T>` is not specialized
    // and would look up type metadata for every field.
    while reader.remaining >= 12 {
      let nameSize = Int(try reader.readWord(is64Bit: false))  // a UInt32: exact in Int on 64-bit
      let descriptorSize = Int(try reader.readWord(is64Bit: false))
      let type = UInt32(truncatingIfNeeded: try reader.readWord(is64Bit: false))  // read as 32 bits
      let nameStart = reader.offset
      guard nameSize <= reader.remaining else { throw .elf("note name size \(nameSize) runs past the note area") }
      // "GNU" then NUL (or the field's end), as ELFNote's fixed-width name reads it.
      var isGNU = false
      if nameSize >= 4 {
        var name = reader
        try name.seek(to: nameStart)
        let word = try name.readWord(is64Bit: false)
        isGNU = word == (reader.endian == .little ? 0x0055_4E47 : 0x474E_5500)
      } else if nameSize == 3 {
        isGNU = try reader.bytes(at: nameStart, length: 3) == [0x47, 0x4E, 0x55]
      }
      // The descriptor starts at the first alignment boundary after the name, the next note at the
      // first boundary after the descriptor (positions relative to the area), as ELFNote reads them.
      // nameStart + nameSize <= reader.count (checked above): padding it cannot overflow Int.
      let descriptorStart = min(padded(nameStart + nameSize, alignment), reader.count)
      try reader.seek(to: descriptorStart)
      guard descriptorSize <= reader.remaining else {
        throw .elf("note descriptor size \(descriptorSize) runs past the note area")
      }
      if isGNU && type == ELFNote.gnuBuildIDType {
        return (try reader.readBytes(descriptorSize), descriptorStart)
      }
      try reader.skip(descriptorSize)
      try reader.seek(to: min(padded(reader.offset, alignment), reader.count))
    }
    return nil
  }

  // Callers pass a position inside the area (<= its count < Int.max - 8): the sum cannot overflow.
  private static func padded(_ size: Int, _ align: Int) -> Int { (size + align - 1) & ~(align - 1) }
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
