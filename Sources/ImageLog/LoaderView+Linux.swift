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

/// The loader's list as last seen, brought up to date by one `dl_iterate_phdr` walk.
///
/// Images are built inside the walk's callback, while the loader's list lock guarantees the object is
/// still mapped, and only for objects not seen before. Survivors keep their relative order in the
/// loader's list (new objects are appended to their namespace), so the walk merges against the
/// previous list with a cursor instead of hashing; the C side of the walk passes over the object
/// expected at the cursor without calling into Swift, so an unchanged object costs one comparison.
/// The walk records what it found and the view applies it afterwards.
///
/// Once anything was unloaded (`dlpi_subs` moved), a new object may sit at a freed address with its
/// program headers where the old one's were; when the counters say that may have happened (see
/// `update`), a survivor is accepted only if the image built from it again is equal to the stored
/// one: the same path (a library's path is its loader name; the executable and the vDSO, whose paths
/// are not, are never unloaded), the same ranges from its program headers and the same build-id
/// bytes at the same address.
struct LoaderView {
  /// The images, in the loader's order.
  private(set) var images: [Image] = []
  /// What identifies each image's object while it stays loaded, in the same order.
  private var keys: [il_object_key] = []
  /// The loader's counters when the view was last brought up to date.
  private(set) var counters: LoaderCounters?
  /// A walk's lists of additions, kept between walks for their capacity.
  private var spareKeys: [il_object_key] = []
  private var spareImages: [Image] = []

  /// What updates found: images removed and images added, each in load order.
  struct Changes {
    var removed: [Image] = []
    var added: [Image] = []
  }

  /// Walks the loader's list and applies the differences; `nil` when the counters did not move.
  mutating func update(collectingChanges collect: Bool = true) -> Changes? {
    var changes = Changes()
    let changed = update { event, image in
      guard collect else { return }
      if event == .removed { changes.removed.append(image) } else { changes.added.append(image) }
    }
    return changed ? changes : nil
  }

  /// Walks the loader's list, applies the differences and calls `report` for each: every image
  /// removed, in load order, then every image added, in load order. `false` when the counters did not
  /// move. `report` must not use this view.
  ///
  /// glibc counts every object added to or removed from a namespace list (`dlpi_adds`/`dlpi_subs`
  /// move by one per object, failed loads included). A first walk matches objects by key only; when
  /// the objects it found added and removed account exactly for how far the counters moved, no object
  /// can have been replaced under an old key. Otherwise a second walk checks every survivor
  /// and reports a replaced one as removed and added (its removals after the first walk's, its
  /// additions after the first walk's).
  mutating func update(_ report: (ImageEvent, Image) -> Void) -> Bool {
    let previous = counters
    var first = Walk(verify: false, addedKeys: [], addedImages: [])
    swap(&first.addedKeys, &spareKeys)
    swap(&first.addedImages, &spareImages)
    defer {
      first.addedKeys.emptyKeepingCapacity()
      first.addedImages.emptyKeepingCapacity()
      swap(&first.addedKeys, &spareKeys)
      swap(&first.addedImages, &spareImages)
    }
    guard run(&first) else { return false }
    var verify = false
    if let previous, first.counters.subs != previous.subs {
      let added = UInt64(first.added), removed = UInt64(first.removed)
      verify = first.counters.adds &- previous.adds != added || first.counters.subs &- previous.subs != removed
    }
    reportRemovals(first, report)
    if !verify {
      for index in first.addedImages.indices { report(.added, first.addedImages[index]) }
      apply(&first)
      return true
    }
    let firstAdded = first.addedImages
    apply(&first)
    var second = Walk(verify: true, addedKeys: [], addedImages: [])
    if run(&second) {
      reportRemovals(second, report)
      for image in firstAdded { report(.added, image) }
      for image in second.addedImages { report(.added, image) }
      apply(&second)
    } else {
      for image in firstAdded { report(.added, image) }
    }
    return true
  }

  /// After a `dlclose` called for the object whose load bias is `loadBias`: removes and reports that
  /// object without walking the loader's list, when the loader shows it is the one change since the
  /// view was brought up to date. The view holds exactly one object with that load bias (not 0, which
  /// non-PIE executables share with prelinked libraries), no loaded object contains that object's load
  /// address any more (`_dl_find_object`, no lock), and after that check the counters have moved by
  /// exactly one removal and no addition: so every object loaded was in the view (the closed one
  /// too), nothing can have been mapped at the freed address, and the one object gone is this one.
  /// `false` when any of this does not hold (the caller walks instead).
  mutating func removeClosed(loadBias: UInt64, _ report: (ImageEvent, Image) -> Void) -> Bool {
    guard loadBias != 0, let previous = counters,
          let index = keys.firstIndex(where: { UInt64($0.load_bias) == loadBias }),
          !keys[(index + 1)...].contains(where: { UInt64($0.load_bias) == loadBias }),
          il_address_is_loaded(images[index].loadAddress) == 0 else { return false }
    let now = LoaderCounters.current()
    guard now.adds == previous.adds, now.subs == previous.subs &+ 1 else { return false }
    report(.removed, images[index])
    images.remove(at: index)
    keys.remove(at: index)
    counters = now
    return true
  }

  /// After a `dlopen`: adds and reports the object it returned without walking the loader's list,
  /// when the loader shows it is the one change since the view was brought up to date. The counters
  /// moved by exactly one addition and no removal (so every object the view holds is still loaded and
  /// exactly one is new); the returned object's load bias is in no view entry (so it is the new one);
  /// and its link map comes right after the view's last object's and has none after it (so it is
  /// where a walk would put it: last, `il_opened_object`). The object's links are read before the
  /// counters, and that order is sound: the counters only grow, and the object was loaded before
  /// either read, so if they show just this one addition the list was the view plus this object then.
  /// `false` when any of this does not hold, and always outside a `dlopen` hook (the caller walks).
  mutating func addOpened(_ report: (ImageEvent, Image) -> Void) -> Bool {
    // The dlopen's object first (no object outside a dlopen hook: nothing else to do), then the
    // counters: whatever changed the list since the view also moved them.
    var object = il_object()
    guard let previous = counters, let last = images.last, il_opened_object(last.loadAddress, &object) != 0,
          !keys.contains(where: { $0.load_bias == object.load_bias }) else { return false }
    let now = LoaderCounters.current()
    guard now.adds == previous.adds &+ 1, now.subs == previous.subs else { return false }
    // A change after `now` moves the counters past it: the next update walks and finds it.
    guard let image = withUnsafePointer(to: &object, { LoaderImageBuilder.image(from: $0, index: images.count) })
    else { return false }
    report(.added, image)
    images.append(image)
    keys.append(il_object_key(load_bias: object.load_bias, phdrs: object.phdrs))
    counters = now
    return true
  }

  /// Calls `report` for the images a walk found gone (the view not yet changed).
  private func reportRemovals(_ walk: Walk, _ report: (ImageEvent, Image) -> Void) {
    for range in walk.removals {
      for index in range { report(.removed, images[index]) }
    }
    for index in walk.tail { report(.removed, images[index]) }
  }

  /// What one walk found, in positions of the list before it.
  private struct Walk {
    let verify: Bool
    /// The list before the walk (its storage, unchanged until the walk ends).
    var knownImages = UnsafeBufferPointer<Image>(start: nil, count: 0)
    /// Ranges of the previous list that are gone, in increasing order (the tail after the walk's
    /// cursor is not among them).
    var removals: [Range<Int>] = []
    /// Objects seen for the first time, in load order.
    var addedKeys: [il_object_key]
    var addedImages: [Image]
    /// Where each added object goes: before the previous list's entry at that position (after the
    /// objects added before it there). Empty while every addition is at the end (a `dlopen`).
    var addedPositions: [Int] = []
    /// The end of the previous list that the walk did not reach again (gone too).
    var tail = 0..<0
    /// Objects gone, and objects seen for the first time (including any whose image could not be built).
    var removed = 0
    var added = 0
    /// The loader's counters at the walk.
    var counters = LoaderCounters(adds: 0, subs: 0)

    /// Called by the C walk for every object that is not the one expected at the cursor (every
    /// object when verifying).
    mutating func visit(_ object: UnsafePointer<il_object>, _ walk: UnsafeMutablePointer<il_walk>) -> Int32 {
      let key = il_object_key(load_bias: object.pointee.load_bias, phdrs: object.pointee.phdrs)
      let index = walk.pointee.index
      let cursor = walk.pointee.cursor
      let count = walk.pointee.key_count
      var later = cursor
      // `keys` is the view's key storage, unchanged for the whole walk (see `LoaderView.walk`).
      if let keys = walk.pointee.keys {
        while later < count {
          if LoaderView.equal(keys[later], key) && (!verify || isSame(at: later, object, index: index)) { break }
          later += 1
        }
      }
      if later < count {
        // The objects between the cursor and the match were unloaded.
        if later > cursor {
          removed += later - cursor
          removals.append(cursor..<later)
        }
        walk.pointee.cursor = later + 1
        return 0
      }
      added += 1
      guard let image = LoaderImageBuilder.image(from: object, index: index) else { return 0 }
      if addedImages.isEmpty && count == 0 {
        // A first walk: the loader's counters tell about how many objects there are.
        let estimate = Int(truncatingIfNeeded: walk.pointee.adds &- walk.pointee.subs)
        let capacity = estimate > 0 && estimate < 4096 ? estimate : 16
        addedKeys.reserveCapacity(capacity)
        addedImages.reserveCapacity(capacity)
      }
      if cursor != count && addedPositions.isEmpty {
        // The first addition that is not at the end: the earlier ones all were.
        addedPositions = Array(repeating: count, count: addedImages.count)
      }
      if cursor != count || !addedPositions.isEmpty { addedPositions.append(cursor) }
      addedKeys.append(key)
      addedImages.append(image)
      return 0
    }

    /// Whether `object` is the same file, mapped the same way, as the known entry at `position`: the
    /// image built from it now equals the stored one.
    func isSame(at position: Int, _ object: UnsafePointer<il_object>, index: Int) -> Bool {
      guard position < knownImages.count, let image = LoaderImageBuilder.image(from: object, index: index) else {
        return false
      }
      return image == knownImages[position]
    }
  }

  /// One `dl_iterate_phdr` walk over the list, recorded in `walk` (nothing applied yet); `false`
  /// when the walk (not `verify`) found the counters unchanged. The callback reaches the walk through
  /// a typed pointer to this stack value: no reference counting or exclusivity checks per object.
  private func run(_ walk: inout Walk) -> Bool {
    var state = il_walk()
    state.match_keys = walk.verify ? 0 : 1
    if !walk.verify, let counters {
      state.stop_if_unchanged = 1
      state.known_adds = counters.adds
      state.known_subs = counters.subs
    }
    // The lists are only read during the walk; they change after it.
    keys.withUnsafeBufferPointer { keys in
      images.withUnsafeBufferPointer { images in
        state.keys = keys.baseAddress
        state.key_count = keys.count
        walk.knownImages = images
        withUnsafeMutablePointer(to: &walk) { pointer in
          _ = il_walk_objects(&state, { object, state, raw in
            guard let object, let state, let raw else { return 1 }
            // `raw` is the pointer to `walk` passed below, typed as it was created.
            return UnsafeMutablePointer<Walk>(OpaquePointer(raw)).pointee.visit(object, state)
          }, UnsafeMutableRawPointer(pointer))
        }
      }
    }
    walk.knownImages = UnsafeBufferPointer(start: nil, count: 0)
    guard state.unchanged == 0 else { return false }
    // Whatever the walk did not reach again is gone.
    walk.tail = min(state.cursor, keys.count)..<keys.count
    walk.removed += walk.tail.count
    walk.counters = LoaderCounters(adds: state.adds, subs: state.subs)
    return true
  }

  /// Applies a walk's removals and additions; in place for the common cases (a first walk, objects
  /// appended by `dlopen`, objects removed by `dlclose`).
  private mutating func apply(_ walk: inout Walk) {
    let tail = walk.tail
    counters = walk.counters
    if walk.addedPositions.isEmpty {
      // Removals, then additions at the end.
      if !tail.isEmpty {
        for _ in tail {
          images.removeLast()
          keys.removeLast()
        }
      }
      for range in walk.removals.reversed() {
        images.removeSubrange(range)
        keys.removeSubrange(range)
      }
      if images.isEmpty {
        swap(&images, &walk.addedImages)
        swap(&keys, &walk.addedKeys)
      } else {
        // Element by element: specialized copies, not the generic value-witness path.
        for index in walk.addedImages.indices {
          images.append(walk.addedImages[index])
          keys.append(walk.addedKeys[index])
        }
      }
      return
    }
    // Additions in the middle: merge into new lists, in the walk's order.
    if !tail.isEmpty { walk.removals.append(tail) }
    let count = keys.count
    let removedCount = walk.removals.reduce(0) { $0 + $1.count }
    let newCount = count - removedCount + walk.addedImages.count
    var newImages: [Image] = [], newKeys: [il_object_key] = []
    newImages.reserveCapacity(newCount)
    newKeys.reserveCapacity(newCount)
    var removal = 0, addition = 0
    for position in 0...count {
      while addition < walk.addedPositions.count && walk.addedPositions[addition] == position {
        newImages.append(walk.addedImages[addition])
        newKeys.append(walk.addedKeys[addition])
        addition += 1
      }
      guard position < count else { break }
      while removal < walk.removals.count && walk.removals[removal].upperBound <= position { removal += 1 }
      if removal < walk.removals.count && walk.removals[removal].contains(position) { continue }
      newImages.append(images[position])
      newKeys.append(keys[position])
    }
    images = newImages
    keys = newKeys
  }

  static func equal(_ a: il_object_key, _ b: il_object_key) -> Bool {
    a.load_bias == b.load_bias && a.phdrs == b.phdrs
  }

  /// A fresh walk of everything (no previous view): for `uncachedSnapshot()` and tests.
  static func capture() -> [Image] {
    var view = LoaderView()
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
    return PathBytes.string(buffer[0..<count].map { UInt8(bitPattern: $0) })
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

  /// The loader's name of an object (`l_name`, the loader's own string, not file data).
  static func nameBytes(_ object: UnsafePointer<il_object>) -> UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: object.pointee.name, count: object.pointee.name_length)
  }

  /// The image of a loaded object: its span from the program headers the loader mapped it by
  /// (`il_object_layout`), its build-id from its notes in memory.
  static func image(from object: UnsafePointer<il_object>, index: Int) -> Image? {
    var layout = il_layout()
    guard il_object_layout(object, pageSize, &layout) != 0 else { return nil }
    let bias = UInt64(object.pointee.load_bias)
    // Addresses wrap as the loader's do: the bias is a difference modulo 2^64.
    let loadAddress = bias &+ layout.first_vaddr
    let textEnd = bias &+ layout.text_end_vaddr
    let loadEnd = bias &+ layout.load_end_vaddr
    guard loadAddress <= textEnd, loadAddress <= loadEnd else { return nil }

    let name = nameBytes(object)
    let isVDSO = vdsoAddress != 0 && loadAddress == vdsoAddress
    let isMain = index == 0 && name.isEmpty && !isVDSO
    // The name is the path's last component, made only when asked for (`Image.name`).
    let path = isVDSO ? "[vdso]" : isMain ? executablePath : PathBytes.string(name)

    let (buildID, buildIDAddress) = findBuildID(object)
    return Image(path: path, loadAddress: loadAddress, loadBias: bias,
                 textRange: loadAddress..<textEnd, loadRange: loadAddress..<loadEnd, buildID: buildID,
                 architecture: architecture, isMainExecutable: isMain, buildIDAddress: buildIDAddress,
                 fileMappedRange: loadAddress..<max(layout.file_end, loadAddress))
  }

  /// The GNU build-id from the first `PT_NOTE` that has one. A note is read only when it lies
  /// inside the file-backed part of a `PT_LOAD`, so the bytes are mapped and readable
  /// (`il_object_next_note` picks those).
  static func findBuildID(_ object: UnsafePointer<il_object>) -> (BuildID?, Address?) {
    var index: UInt16 = 0
    var note = il_note_area()
    while il_object_next_note(object, &index, &note) != 0 {
      guard let start = UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: note.address)) else { continue }
      let reader = ByteReader(UnsafeRawBufferPointer(start: start, count: note.size), endian: .native)
      guard let found = try? buildIDNote(in: reader, alignment: note.alignment),
            !found.descriptor.isEmpty else { continue }
      // descriptorOffset < size, which fits in Int: the sum cannot wrap in practice.
      return (BuildID(found.descriptor), note.address &+ UInt64(found.descriptorOffset))
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
    // One seek and a few sequential reads per note. `readWord` is not generic: across the module
    // boundary the generic `read<T>`/`peek<T>` are not specialized and would look up type metadata
    // for every field. Positions are relative to the area's start, as ELFNote's are.
    var reader = area
    let count = area.count
    let gnu: UInt64 = area.endian == .little ? 0x0055_4E47 : 0x474E_5500  // "GNU\0" as a UInt32
    // Every note consumes at least 12 bytes: the loop is bounded by the area's size.
    while reader.remaining >= 12 {
      let nameSize = Int(try reader.readWord(is64Bit: false))  // a UInt32: exact in Int on 64-bit
      let descriptorSize = Int(try reader.readWord(is64Bit: false))
      let type = UInt32(truncatingIfNeeded: try reader.readWord(is64Bit: false))  // read as 32 bits
      let nameStart = reader.offset
      guard nameSize <= reader.remaining else { throw .elf("note name size \(nameSize) runs past the note area") }
      // "GNU" then NUL (or the field's end), as ELFNote's fixed-width name reads it.
      var isGNU = false
      if nameSize >= 4 {
        isGNU = try reader.readWord(is64Bit: false) == gnu  // the name's first 4 bytes (nameSize >= 4 fit)
      } else if nameSize == 3 {
        isGNU = try reader.bytes(at: nameStart, length: 3) == [0x47, 0x4E, 0x55]
      }
      // The descriptor starts at the first alignment boundary after the name, the next note at the
      // first boundary after the descriptor, as ELFNote reads them.
      // nameStart + nameSize <= count (checked above): padding it cannot overflow Int.
      let descriptorStart = min(padded(nameStart + nameSize, alignment), count)
      guard descriptorSize <= count - descriptorStart else {
        throw .elf("note descriptor size \(descriptorSize) runs past the note area")
      }
      if isGNU && type == ELFNote.gnuBuildIDType {
        return (try reader.bytes(at: descriptorStart, length: descriptorSize), descriptorStart)
      }
      // descriptorStart + descriptorSize <= count (checked above).
      try reader.seek(to: min(padded(descriptorStart + descriptorSize, alignment), count))
    }
    return nil
  }

  // Callers pass a position inside the area (<= its count < Int.max - 8): the sum cannot overflow.
  private static func padded(_ size: Int, _ align: Int) -> Int { (size + align - 1) & ~(align - 1) }
}

extension Array {
  /// `removeAll(keepingCapacity: true)` for the few elements these lists hold between uses:
  /// `removeLast()` is specialized where it is used, while `removeAll` goes through the generic
  /// `replaceSubrange` and destroys each element through its type's value witness.
  mutating func emptyKeepingCapacity() {
    while !isEmpty { removeLast() }
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
