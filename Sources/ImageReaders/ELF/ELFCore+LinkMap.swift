/// The images of a core without `NT_FILE`, found as elfutils' `dwfl_core_file_report` finds them: the
/// main executable through the auxiliary vector (`AT_PHDR`, `AT_PHNUM`, `AT_PHENT`; named by
/// `AT_EXECFN`), the dynamic linker's `struct r_debug` through the executable's `DT_DEBUG` entry as
/// the core's memory holds it, and every library through `r_debug.r_map`'s `link_map` chain (`l_addr`,
/// `l_name`, `l_ld`, `l_next`: four words, 4 or 8 bytes by the core's class). The interpreter is also
/// found through `AT_BASE`, so a broken list still leaves the executable, the dynamic linker and the
/// vDSO.
///
/// Everything is read from the core's memory, each read bounded by one segment; a pointer outside the
/// core ends that part of the walk with a line in `problems`. The walk takes at most one entry per
/// segment of the core (every image maps at least one) and remembers the entries it saw, so a list
/// that loops or never ends stops, said so.
struct ELFCoreLinkMap {
  let core: ELFCore
  let read: (UInt64, Int) throws(FormatError) -> ByteReader?
  private(set) var images: [ELFCoreImage] = []
  private(set) var problems: [String] = []
  /// Where `r_debug` was found, and each `link_map` entry walked, in list order (tests break them).
  private(set) var debugAddress: UInt64?
  private(set) var entryAddresses: [UInt64] = []

  /// The longest path read from memory (`PATH_MAX`).
  static let pathLimit = 4096
  /// The most bytes of the executable's dynamic section read (a real one has a few dozen entries).
  static let dynamicLimit: UInt64 = 64 * 1024
  /// How many segments before the one holding `l_ld` may start the image (an image linked above 0,
  /// whose ELF header is not at `l_addr`): text, read-only data and relocation segments come first.
  static let segmentsBeforeDynamic = 8

  init(core: ELFCore, read: @escaping (UInt64, Int) throws(FormatError) -> ByteReader?) {
    self.core = core
    self.read = read
  }

  var is64Bit: Bool { core.header.is64Bit }
  var wordSize: Int { is64Bit ? 8 : 4 }

  /// `address` in the process's address space (an ELF32 process's wraps at 32 bits).
  func wrapped(_ address: UInt64) -> UInt64 { ELFCoreImage.LinkMapPlacement.wrapped(address, is64Bit) }

  var pageSize: UInt64 { core.pageSize }

  mutating func run() {
    guard let main = mainExecutable() else { return }
    if let dynamic = main.headers.first(where: { $0.type == ProgramHeader.dynamic }),
       let rDebug = findDebugAddress(dynamic, bias: main.bias) {
      debugAddress = rDebug
      walk(rDebug)
    }
    // The dynamic linker by AT_BASE when the list did not name it: a static executable has none
    // (AT_BASE 0), a broken list still leaves it.
    if let base = core.auxiliaryValue(ELFCore.auxBase), base != 0, !images.contains(where: { $0.loadAddress == base }),
       let headers = try? ELFImageHeaders(mappedAt: base, read: read) {
      let name = main.interpreter ?? "[interpreter]"
      images.append(image(name, at: base, headers: headers, placement: nil))
    }
  }

  // MARK: the main executable

  /// The executable's program headers as `AT_PHDR` shows them, their load bias, and its `PT_INTERP`.
  mutating func mainExecutable() -> (headers: [ProgramHeader], bias: UInt64, interpreter: String?)? {
    guard let phdr = core.auxiliaryValue(ELFCore.auxPHDR), phdr != 0 else {
      problems.append("the core has no NT_FILE and its NT_AUXV has no AT_PHDR: its images cannot be found")
      return nil
    }
    let entrySize = is64Bit ? 56 : 32
    let count = core.auxiliaryValue(ELFCore.auxPHCount) ?? 0
    let givenSize = core.auxiliaryValue(ELFCore.auxPHEntrySize) ?? UInt64(entrySize)
    guard givenSize == UInt64(entrySize), count > 0, count <= 0xFFFF else {
      problems.append("NT_AUXV gives AT_PHNUM \(count) and AT_PHENT \(givenSize) (\(entrySize) expected): "
                        + "the main executable's program headers cannot be read")
      return nil
    }
    let tableSize = Int(count) * entrySize  // count <= 0xFFFF, entrySize <= 56
    guard let table = try? read(phdr, tableSize),
          let headers = try? ProgramHeader.table(table, count: Int(count), entrySize: entrySize, is64Bit: is64Bit) else {
      problems.append("the main executable's program headers (AT_PHDR 0x\(hexDigits(phdr)), \(count) entries) "
                        + "are not in the core's memory")
      return nil
    }
    var bias: UInt64
    if let table = headers.first(where: { $0.type == ProgramHeader.programHeaderTable }) {
      bias = wrapped(phdr &- table.vmAddress)
    } else {
      // No PT_PHDR (some static executables): the table follows the ELF header in the first page.
      let start = phdr & ~(pageSize - 1)
      guard let headers = try? ELFImageHeaders(mappedAt: start, read: read),
            headers.header.programHeaderOffset == phdr - start else {
        problems.append("the main executable has no PT_PHDR and no ELF header before AT_PHDR 0x\(hexDigits(phdr)): "
                          + "it cannot be placed")
        return nil
      }
      bias = wrapped(start &- headers.layout.firstVMAddress)
    }
    guard let layout = try? LoadLayout(headers) else {
      problems.append("the main executable's program headers at 0x\(hexDigits(phdr)) have no valid PT_LOAD")
      return nil
    }
    let load = wrapped(bias &+ layout.firstVMAddress)
    var interpreter: String?
    if let segment = headers.first(where: { $0.type == ProgramHeader.interpreter }) {
      interpreter = string(at: wrapped(bias &+ segment.vmAddress))
    }
    let name = core.auxiliaryValue(ELFCore.auxExecFN).flatMap { string(at: $0) }.flatMap { $0.isEmpty ? nil : $0 }
      ?? core.process.flatMap { $0.name.isEmpty ? nil : $0.name } ?? "[exe]"
    let placement = headers.first { $0.type == ProgramHeader.dynamic }.map {
      ELFCoreImage.LinkMapPlacement(loadBias: bias, dynamicVMAddress: wrapped(bias &+ $0.vmAddress))
    }
    var found: ELFImageHeaders?
    var problem: FormatError?
    do throws(FormatError) { found = try ELFImageHeaders(mappedAt: load, read: read) } catch { problem = error }
    var main = image(name, at: load, headers: found, placement: placement)
    main.problem = problem
    if found == nil {
      // The program headers at AT_PHDR still say how far it maps.
      main.mappedEnd = max(wrapped(bias &+ layout.loadEndVMAddress), load)
    }
    images.append(main)
    return (headers, bias, interpreter)
  }

  /// `r_debug`'s address from the executable's `DT_DEBUG`, as the dynamic linker wrote it in memory;
  /// `nil`, said in `problems`, when there is none.
  mutating func findDebugAddress(_ dynamic: ProgramHeader, bias: UInt64) -> UInt64? {
    let address = wrapped(bias &+ dynamic.vmAddress)
    let entrySize = 2 * wordSize
    let size = Int(min(dynamic.fileSize, Self.dynamicLimit)) / entrySize * entrySize  // <= 64 KiB
    guard size > 0, var entries = try? read(address, size) else {
      problems.append("the main executable's dynamic section (0x\(hexDigits(address))) is not in the core's memory: "
                        + "its libraries cannot be found")
      return nil
    }
    // Each step reads one entry: bounded by the bytes read.
    while entries.remaining >= entrySize {
      guard let tag = try? entries.readWord(is64Bit: is64Bit), let value = try? entries.readWord(is64Bit: is64Bit),
            tag != ELFDynamicEntry.null else { break }
      if tag == ELFDynamicEntry.debug {
        guard value != 0 else { break }
        return value
      }
    }
    problems.append("the main executable's DT_DEBUG is absent or 0 (the dynamic linker had not started): "
                      + "its libraries cannot be found")
    return nil
  }

  // MARK: the dynamic linker's list

  /// Walks `r_debug.r_map` to its end, or to where `problems` says it stopped.
  mutating func walk(_ rDebug: UInt64) {
    // struct r_debug: int r_version (padded to a word), struct link_map *r_map, ...
    guard let head = try? read(rDebug, 2 * wordSize), head.count == 2 * wordSize else {
      problems.append("r_debug at 0x\(hexDigits(rDebug)) (DT_DEBUG) is not in the core's memory: libraries not listed")
      return
    }
    // Two words were read: both fields lie inside them.
    let version = head.field(UInt32.self, at: 0)
    var next = head.field(is64Bit: is64Bit, at: wordSize)
    // glibc writes 1 (2 since 2.35, with r_next for other namespaces), musl 1; 0 is "not set up yet".
    guard version == 1 || version == 2 else {
      problems.append("r_debug at 0x\(hexDigits(rDebug)) has r_version \(version) (1 or 2 expected): not a dynamic "
                        + "linker's list; libraries not listed")
      return
    }
    let limit = max(core.segments.count, 1)
    var seen: Set<UInt64> = []
    var index = 0
    while next != 0 {
      guard index < limit else {
        problems.append("the link_map list has more entries than the core has segments (\(limit)): "
                          + "the first \(limit) are listed")
        return
      }
      guard seen.insert(next).inserted else {
        problems.append("link_map entry \(index) (0x\(hexDigits(next))) comes round again: the list loops; "
                          + "the first \(index) entries are listed")
        return
      }
      // struct link_map: l_addr, l_name, l_ld, l_next, then fields private to the dynamic linker.
      guard let node = try? read(next, 4 * wordSize), node.count == 4 * wordSize else {
        problems.append("link_map entry \(index) at 0x\(hexDigits(next)) is not in the core's memory: "
                          + "the list stops there")
        return
      }
      entryAddresses.append(next)
      // Four words were read: every field lies inside them.
      add(entry: index, bias: node.field(is64Bit: is64Bit, at: 0), namePointer: node.field(is64Bit: is64Bit, at: wordSize),
          dynamic: node.field(is64Bit: is64Bit, at: 2 * wordSize))
      index += 1
      next = node.field(is64Bit: is64Bit, at: 3 * wordSize)
    }
  }

  /// Adds the image a `link_map` entry names, unless it is one already listed (the executable, whose
  /// `l_name` is empty) or the vDSO (listed by `AT_SYSINFO_EHDR`).
  mutating func add(entry index: Int, bias: UInt64, namePointer: UInt64, dynamic: UInt64) {
    guard dynamic != 0 else { return }  // as elfutils: a cleared entry has no use
    if images.contains(where: { $0.linkMap?.dynamicVMAddress == dynamic }) { return }
    let located = locate(bias: bias, dynamic: dynamic)
    if let vdso = core.auxiliaryValue(ELFCore.auxSysinfoEHDR), vdso != 0, located?.address == vdso { return }
    let name = string(at: namePointer)
    let placement = ELFCoreImage.LinkMapPlacement(loadBias: bias, dynamicVMAddress: dynamic)
    guard let name, !name.isEmpty else {
      problems.append("link_map entry \(index): l_name 0x\(hexDigits(namePointer)) is not a path in the core's memory"
                        + (located == nil ? "; the entry is left out" : ""))
      if let located {
        images.append(image("[link_map entry \(index)]", at: located.address, headers: located.headers,
                            placement: placement))
      }
      return
    }
    if let located {
      images.append(image(name, at: located.address, headers: located.headers, placement: placement))
    } else {
      // The core kept no headers here: the caller may place the file on disk by l_ld.
      images.append(ELFCoreImage(path: name, loadAddress: bias, mappings: [], headers: nil, problem: nil,
                                 isVDSO: false, mappedEnd: bias, linkMap: placement))
    }
  }

  /// Where the ELF header of the image `l_addr` and `l_ld` place is, with its headers from the core:
  /// at `l_addr` (an image linked at 0, as shared libraries are), else at the start of one of the
  /// segments just below `l_ld`; accepted only when its `PT_DYNAMIC` lands at `l_ld` with that bias.
  func locate(bias: UInt64, dynamic: UInt64) -> (address: UInt64, headers: ELFImageHeaders)? {
    var candidates = [bias]
    if let index = core.segmentIndex(containing: dynamic) {
      for at in stride(from: index, through: max(0, index - Self.segmentsBeforeDynamic), by: -1) {
        candidates.append(core.segments[at].vmRange.lowerBound)
      }
    }
    let placement = ELFCoreImage.LinkMapPlacement(loadBias: bias, dynamicVMAddress: dynamic)
    for address in candidates {
      guard let headers = try? ELFImageHeaders(mappedAt: address, read: read),
            placement.loadAddress(of: headers) == address, placement.places(headers) else { continue }
      return (address, headers)
    }
    return nil
  }

  // MARK: reading

  /// An image at `address` with `headers` (its mappings made from its `PT_LOAD`s).
  func image(_ path: String, at address: UInt64, headers: ELFImageHeaders?,
             placement: ELFCoreImage.LinkMapPlacement?) -> ELFCoreImage {
    guard let headers else {
      return ELFCoreImage(path: path, loadAddress: address, mappings: [], headers: nil, problem: nil, isVDSO: false,
                          mappedEnd: address, linkMap: placement)
    }
    let mappings = headers.fileMappings(loadBias: address &- headers.layout.firstVMAddress, path: path,
                                        pageSize: pageSize)
    return ELFCoreImage(path: path, loadAddress: address, mappings: mappings, headers: headers, problem: nil,
                        isVDSO: false, mappedEnd: max(mappings.map(\.vmRange.upperBound).max() ?? address, address),
                        linkMap: placement)
  }

  /// The NUL-terminated string at `address` in the core's memory, at most `pathLimit` bytes inside one
  /// segment; `nil` when it is not there or has no NUL in that span.
  func string(at address: UInt64) -> String? {
    guard let segment = core.segment(containing: address) else { return nil }
    let delta = address - segment.vmRange.lowerBound  // the segment contains address
    guard delta < segment.availableSize else { return nil }
    let length = Int(min(segment.availableSize - delta, UInt64(Self.pathLimit + 1)))  // <= pathLimit + 1
    guard let bytes = try? read(address, length) else { return nil }
    return try? bytes.cString(at: 0)
  }
}
