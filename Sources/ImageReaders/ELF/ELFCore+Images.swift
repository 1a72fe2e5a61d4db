/// What a loaded ELF image's own headers say: the header, the program headers, the spans they cover
/// and the build-id with where its bytes are. Read from an image mapped in memory (a core's, another
/// process's) or from its file, with the same checks.
package struct ELFImageHeaders: Sendable, Equatable {
  /// The ELF header.
  package var header: ELFHeader
  /// The program headers.
  package var programHeaders: [ProgramHeader]
  /// The spans the `PT_LOAD`s cover, link-time.
  package var layout: LoadLayout
  /// The GNU build-id, or `nil` when the image has none (or, in memory, its note was not available).
  package var buildID: BuildID?
  /// The link-time address of the build-id's bytes (the note descriptor), or `nil`.
  package var buildIDVMAddress: UInt64?

  /// The most note bytes read per `PT_NOTE`: build-id notes are tiny.
  static let noteLimit: UInt64 = 64 * 1024

  /// The headers of the image whose ELF header is mapped at `loadAddress`, read through `read(address,
  /// length)`, which returns `nil` for memory it does not have. `nil` when the header or the program
  /// headers are not available; throws when the bytes there are not an ELF image's headers.
  package init?(mappedAt loadAddress: UInt64,
               read: (UInt64, Int) throws(FormatError) -> ByteReader?) throws(FormatError) {
    var first = try read(loadAddress, 64)
    if first == nil { first = try read(loadAddress, 52) }  // an ELF32 header at the very end of the memory kept
    guard let first else { return nil }
    header = try ELFHeader(first)
    // e_phnum and e_phentsize are UInt16: the product fits.
    let tableSize = Int(header.programHeaderCount) * Int(header.programHeaderEntrySize)
    let (tableAddress, overflow) = loadAddress.addingReportingOverflow(header.programHeaderOffset)
    guard !overflow, header.programHeaderCount > 0 else {
      throw .elf("ELF header at 0x\(hexDigits(loadAddress)) has no program headers")
    }
    guard var table = try read(tableAddress, tableSize) else { return nil }
    table.endian = header.endian
    programHeaders = try ProgramHeader.table(table, count: Int(header.programHeaderCount),
                                             entrySize: Int(header.programHeaderEntrySize), is64Bit: header.is64Bit)
    guard let layout = try LoadLayout(programHeaders) else {
      throw .elf("ELF image at 0x\(hexDigits(loadAddress)) has no PT_LOAD")
    }
    self.layout = layout
    let bias = loadAddress &- layout.firstVMAddress  // wraps for images linked above where they load
    for segment in programHeaders where segment.type == ProgramHeader.note && segment.fileSize > 0 {
      let size = Int(min(segment.fileSize, Self.noteLimit))  // <= 64 KiB
      guard var area = try read(bias &+ segment.vmAddress, size) else { continue }
      area.endian = header.endian
      // A note segment that does not parse is not a build-id: the image is still an image.
      if let note = try? ELFNote.buildIDNote(in: area, alignment: segment.alignment == 8 ? 8 : 4) {
        buildID = BuildID(note.descriptor)
        buildIDVMAddress = segment.vmAddress &+ UInt64(note.descriptorOffset)
        break
      }
    }
  }

  /// The headers of the ELF file whose bytes `file` fetches (notes found by `p_offset`).
  package init<Source: RandomAccessBytes>(file source: Source) throws(FormatError) {
    header = try ELFHeader(source.slice(at: 0, length: min(source.count, 64)))
    var file = source
    file.endian = header.endian
    let tableSize = UInt64(header.programHeaderCount) * UInt64(header.programHeaderEntrySize)  // UInt16 * UInt16
    let range = try ByteReader.checkedRange(offset: header.programHeaderOffset, size: tableSize, limit: file.count,
                                            "program header table")
    programHeaders = try ProgramHeader.table(file.slice(at: range.lowerBound, length: range.count),
                                             count: Int(header.programHeaderCount),
                                             entrySize: max(Int(header.programHeaderEntrySize), 1), is64Bit: header.is64Bit)
    guard let layout = try LoadLayout(programHeaders) else { throw .elf("no PT_LOAD: not a loadable image") }
    self.layout = layout
    for segment in programHeaders where segment.type == ProgramHeader.note && segment.fileSize > 0 {
      guard let area = try? ByteReader.checkedRange(offset: segment.fileOffset, size: min(segment.fileSize, Self.noteLimit),
                                                    limit: file.count, "PT_NOTE") else { continue }
      if let note = try? ELFNote.buildIDNote(in: file.slice(at: area.lowerBound, length: area.count),
                                              alignment: segment.alignment == 8 ? 8 : 4) {
        buildID = BuildID(note.descriptor)
        buildIDVMAddress = segment.vmAddress &+ UInt64(note.descriptorOffset)
        break
      }
    }
  }

  /// The architecture name of the image (`x86_64`, `i386`, ...).
  package var architecture: String {
    elfArchitectureName(machine: header.machine, is64Bit: header.is64Bit, flags: header.flags)
  }

  /// The file mappings a loader makes for these headers at `loadBias`, as `NT_FILE` would show them:
  /// one per `PT_LOAD` with file bytes, from its page-aligned start to the end of its file bytes (the
  /// zero fill past `p_filesz` is not the file's), at its page-aligned offset. A segment whose address
  /// and offset disagree modulo `pageSize`, which no loader can map, is left out. For an image found
  /// without `NT_FILE`; `pageSize` is a power of two.
  package func fileMappings(loadBias: UInt64, path: String, pageSize: UInt64) -> [ELFCore.MappedFiles.Mapping] {
    let mask = pageSize &- 1
    var result: [ELFCore.MappedFiles.Mapping] = []
    for segment in programHeaders where segment.type == ProgramHeader.load && segment.fileSize > 0 {
      let inPage = segment.vmAddress & mask
      guard segment.fileOffset & mask == inPage else { continue }
      let (fileEnd, overflow) = segment.vmAddress.addingReportingOverflow(min(segment.fileSize, segment.vmSize))
      // inPage <= vmAddress and inPage <= fileOffset: the subtractions cannot wrap.
      let start = loadBias &+ (segment.vmAddress - inPage), end = loadBias &+ fileEnd
      guard !overflow, start < end else { continue }  // a wrapping bias is no mapping
      result.append(.init(vmRange: start..<end, fileOffset: segment.fileOffset - inPage, path: path))
    }
    result.sort { $0.vmRange.lowerBound < $1.vmRange.lowerBound }
    return result
  }

  /// True when the file's `PT_LOAD`s map the way `mappings` (one image's `NT_FILE` entries, the first at
  /// `loadAddress`) show: each mapping's offset in the file lies in the file range of the segment at
  /// its address. How a file on disk is tied to a core that kept no build-id for it.
  package func matches(_ mappings: [ELFCore.MappedFiles.Mapping], loadAddress: UInt64) -> Bool {
    let bias = loadAddress &- layout.firstVMAddress
    for mapping in mappings {
      let linkAddress = mapping.vmRange.lowerBound &- bias
      guard let segment = programHeaders.first(where: { header in
        guard header.type == ProgramHeader.load else { return false }
        let alignment = header.alignment > 1 && header.alignment & (header.alignment - 1) == 0 ? header.alignment : 1
        let start = header.vmAddress & ~(alignment - 1)
        return linkAddress >= start && linkAddress - start < header.vmSize &+ (header.vmAddress - start)
      }) else { return false }
      let alignment = segment.alignment > 1 && segment.alignment & (segment.alignment - 1) == 0 ? segment.alignment : 1
      let segmentStart = segment.vmAddress & ~(alignment - 1)
      let expectedOffset = (segment.fileOffset & ~(alignment - 1)) &+ (linkAddress - segmentStart)
      guard expectedOffset == mapping.fileOffset else { return false }
    }
    return true
  }
}

/// One image of a core: a file mapped from offset 0 (`NT_FILE`) whose mappings follow it, an image the
/// dynamic linker's list names (`link_map`, for a core without `NT_FILE`), or the vDSO.
package struct ELFCoreImage: Sendable, Equatable {
  /// The path `NT_FILE` gives (` (deleted)` kept), the `link_map` entry's `l_name`, or `[vdso]`.
  package var path: String
  /// Where the file's offset 0 is mapped: the ELF header.
  package var loadAddress: UInt64
  /// The image's file mappings in address order: its `NT_FILE` entries, or, for an image from the
  /// dynamic linker's list, the mappings its `PT_LOAD`s make (empty for the vDSO).
  package var mappings: [ELFCore.MappedFiles.Mapping]
  /// The headers read from the core's memory, or `nil` when the core did not keep them.
  package var headers: ELFImageHeaders?
  /// Why the headers in memory could not be read when there were bytes to read, else `nil`.
  package var problem: FormatError?
  /// True for the vDSO (`AT_SYSINFO_EHDR`).
  package var isVDSO: Bool

  /// The end of the image's last mapping (the vDSO: of its segments in the core).
  package var mappedEnd: UInt64

  /// Where the dynamic linker placed an image found without `NT_FILE`, or `nil`: how a file on disk
  /// is tied to the core when the core kept no headers (its `PT_DYNAMIC` must land at `l_ld`).
  package var linkMap: LinkMapPlacement? = nil

  /// A `struct link_map`'s placement of an image (for the main executable: from `AT_PHDR`).
  package struct LinkMapPlacement: Sendable, Equatable {
    /// `l_addr`: the difference between the image's addresses in memory and its link-time ones.
    package var loadBias: UInt64
    /// `l_ld`: where its dynamic section (`PT_DYNAMIC`) is in memory.
    package var dynamicVMAddress: UInt64

    /// True when `headers` (an image's, from the core or a file) are the image placed here: its
    /// `PT_DYNAMIC` moved by `l_addr` lands at `l_ld`. Addresses wrap at the image's word size (an
    /// ELF32 `l_addr` below the link address is a 32-bit two's complement).
    package func places(_ headers: ELFImageHeaders) -> Bool {
      headers.programHeaders.contains { segment in
        segment.type == ProgramHeader.dynamic
          && Self.wrapped(loadBias &+ segment.vmAddress, headers.header.is64Bit) == dynamicVMAddress
      }
    }

    /// Where `headers`' ELF header is once placed here: `l_addr` plus the first `PT_LOAD`'s page.
    package func loadAddress(of headers: ELFImageHeaders) -> UInt64 {
      Self.wrapped(loadBias &+ headers.layout.firstVMAddress, headers.header.is64Bit)
    }

    static func wrapped(_ address: UInt64, _ is64Bit: Bool) -> UInt64 { is64Bit ? address : address & 0xFFFF_FFFF }
  }
}

/// Where a core's list of images came from.
package enum ELFCoreImageSource: Sendable, Equatable {
  /// `NT_FILE`: the files the process had mapped, as the kernel or gdb wrote them.
  case fileNote
  /// The dynamic linker's list in the core's memory (`r_debug.r_map`'s `link_map` chain, found through
  /// the main executable's `DT_DEBUG`; the executable through `NT_AUXV`), as elfutils reads a core
  /// without `NT_FILE` (QEMU's, older kernels', some dumpers').
  case linkMap
}

/// The images of a core, where the list came from, and what cut it short.
package struct ELFCoreImageList: Sendable, Equatable {
  /// The images, in address order.
  package var images: [ELFCoreImage]
  /// `NT_FILE`, or the dynamic linker's list when the core has no `NT_FILE` naming an image.
  package var source: ELFCoreImageSource
  /// One line for each thing that left the list partial (a `link_map` entry outside the core's memory,
  /// a loop in the list), without the core's path; empty for a whole list.
  package var problems: [String]
}

extension ELFCore {
  /// The images the core holds, in address order (see `imageList(in:)`).
  package func images<Source: RandomAccessBytes>(in source: Source) -> [ELFCoreImage] {
    imageList(in: source).images
  }

  /// The images the core holds, in address order: each `NT_FILE` file mapped from offset 0, with the
  /// mappings of the same file that follow it, and the vDSO. The headers are read from the core's
  /// memory (the kernel dumps the first page of every ELF mapping by default); a file whose first
  /// page the core lacks has `headers == nil` (the caller may read the file, see `matches`), and one
  /// whose first page is not ELF (a locale archive, a font) is left out.
  ///
  /// A core without `NT_FILE`, or whose `NT_FILE` names no image, lists the main executable found
  /// through `NT_AUXV` and the libraries of the dynamic linker's `link_map` list instead (see
  /// `ELFCoreLinkMap`), with `source == .linkMap`.
  package func imageList<Source: RandomAccessBytes>(in source: Source) -> ELFCoreImageList {
    let read = { (address: UInt64, length: Int) throws(FormatError) -> ByteReader? in
      try self.memory(at: address, length: length, in: source)
    }
    var list = ELFCoreImageList(images: fileNoteImages(read), source: .fileNote, problems: [])
    if list.images.isEmpty {
      var walk = ELFCoreLinkMap(core: self, read: read)
      walk.run()
      list = ELFCoreImageList(images: walk.images, source: .linkMap, problems: walk.problems)
    }
    if let vdso = vdsoImage(read), !list.images.contains(where: { $0.loadAddress == vdso.loadAddress }) {
      list.images.append(vdso)
    }
    list.images.sort { $0.loadAddress < $1.loadAddress }
    return list
  }

  /// The images `NT_FILE` names (none without the note).
  func fileNoteImages(_ read: (UInt64, Int) throws(FormatError) -> ByteReader?) -> [ELFCoreImage] {
    var result: [ELFCoreImage] = []
    let mappings = mappedFiles?.mappings ?? []
    var index = 0
    while index < mappings.count {
      let first = mappings[index]
      var group = [first]
      index += 1
      while index < mappings.count, mappings[index].path == first.path, mappings[index].fileOffset != 0 {
        group.append(mappings[index])
        index += 1
      }
      guard first.fileOffset == 0 else { continue }
      var image = ELFCoreImage(path: first.path, loadAddress: first.vmRange.lowerBound, mappings: group, headers: nil,
                               problem: nil, isVDSO: false, mappedEnd: group.map(\.vmRange.upperBound).max() ?? 0)
      do throws(FormatError) {
        image.headers = try ELFImageHeaders(mappedAt: image.loadAddress, read: read)
      } catch {
        if case .notRecognized = error { continue }  // a data file mapped from its start
        image.problem = error
      }
      result.append(image)
    }
    return result
  }

  /// The vDSO (`AT_SYSINFO_EHDR`) when the core holds its headers.
  func vdsoImage(_ read: (UInt64, Int) throws(FormatError) -> ByteReader?) -> ELFCoreImage? {
    guard let vdso = auxiliaryValue(Self.auxSysinfoEHDR), vdso != 0,
          let headers = try? ELFImageHeaders(mappedAt: vdso, read: read) else { return nil }
    var end = vdso
    while let segment = segment(containing: end), segment.vmRange.upperBound > end,
          end - vdso < headers.layout.loadEndVMAddress &- headers.layout.firstVMAddress {
      end = segment.vmRange.upperBound  // moves forward every step: bounded by the segments
    }
    return ELFCoreImage(path: "[vdso]", loadAddress: vdso, mappings: [], headers: headers, problem: nil,
                        isVDSO: true, mappedEnd: end)
  }
}

extension ELFCore {
  /// The kernel's version as its vDSO records it (the `Linux` note, `LINUX_VERSION_CODE`:
  /// `MAJOR.MINOR.PATCH`), read from the core's memory; `nil` when the core holds no vDSO or no such
  /// note. A core records no `uname`: this is the one trace of the kernel it ran on.
  package func kernelVersion<Source: RandomAccessBytes>(in source: Source) -> String? {
    guard let vdso = auxiliaryValue(Self.auxSysinfoEHDR), vdso != 0 else { return nil }
    let read = { (address: UInt64, length: Int) throws(FormatError) -> ByteReader? in
      try self.memory(at: address, length: length, in: source)
    }
    guard let headers = try? ELFImageHeaders(mappedAt: vdso, read: read) else { return nil }
    let bias = vdso &- headers.layout.firstVMAddress
    for segment in headers.programHeaders where segment.type == ProgramHeader.note && segment.fileSize > 0 {
      let size = Int(min(segment.fileSize, ELFImageHeaders.noteLimit))  // <= 64 KiB
      guard let area = try? read(bias &+ segment.vmAddress, size),
            let notes = try? ELFNote.notes(in: area, alignment: 4) else { continue }
      for note in notes where note.name == "Linux" && note.type == 0 && note.descriptor.count == 4 {
        guard let code = try? ByteReader.reading(note.descriptor, endian: header.endian, { reader throws(FormatError) in
          try reader.peek(UInt32.self, at: 0)
        }) else { continue }
        return "\(code >> 16).\((code >> 8) & 0xFF).\(code & 0xFF)"
      }
    }
    return nil
  }
}
