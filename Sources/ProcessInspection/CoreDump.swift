public import ImageReaders

/// An ELF core file opened for reading: its notes decoded (`ELFCore`), its memory read on demand in
/// ranges (`FileBytes`: `pread` for small ranges, a mapping for large ones), so a core of gigabytes
/// is never read whole.
///
/// Memory the core left out (file-backed text, which the kernel does not dump by default) is read
/// from the file the process had mapped there (`NT_FILE`), but only once that file is shown to be
/// the one the process mapped: the same build-id as the image's headers in the core, or, when the
/// core kept no headers, program headers that map the file the way `NT_FILE` shows. A file that
/// changed since is never read in its place; `images()` says so.
///
/// Not for concurrent use: one thread reads one core (as `FileBytes`).
public final class CoreDump {
  /// The path the core was opened with.
  public let path: String
  /// The decoded notes and segments.
  package let core: ELFCore
  private let file: FileBytes
  /// The images and what was found out about their files, made on first use.
  private var catalog: Catalog?

  /// Why a core cannot be read; `description` is one line without the path.
  public enum OpenError: Error, Sendable, CustomStringConvertible {
    /// The file cannot be opened or read.
    case open(MappedFile.OpenError)
    /// The bytes are not an ELF core, or its tables or notes are malformed.
    case format(FormatError)

    /// One line without the path (the caller adds it).
    public var description: String {
      switch self {
      case .open(let error): error.description
      case .format(let error): error.description
      }
    }
  }

  /// Opens the core at `path` and decodes its program headers and notes.
  public convenience init(path: String) throws(OpenError) {
    let file: FileBytes
    do { file = try FileBytes(path: path) } catch { throw .open(error) }
    try self.init(path: path, file: file)
  }

  /// The core whose bytes `file` fetches (a file, or the parts of a core kept as it was read from a
  /// pipe); `path` names it.
  package init(path: String, file: FileBytes) throws(OpenError) {
    self.path = path
    self.file = file
    do {
      core = try file.withRanges { ranges throws(FormatError) in try ELFCore(source: ranges) }
    } catch {
      if let readError = file.readError { throw .open(readError) }
      throw .format(error)
    }
  }

  /// The kernel's `MAJOR.MINOR.PATCH` as the core's vDSO records it, or `nil` (see `ELFCore.kernelVersion`).
  public var kernelVersion: String? { file.withRanges { core.kernelVersion(in: $0) } }

  /// True when the bytes at `path` start with an ELF header whose `e_type` is `ET_CORE`.
  package static func isCore(_ header: ByteReader) -> Bool {
    guard let parsed = try? ELFHeader(header) else { return false }
    return parsed.type == ELFFile.coreType
  }

  /// The images the core holds, in address order (see `ELFCore.imageList(in:)`), as `Image` values, and
  /// one line per image whose file on disk cannot stand in for what the core left out (a build-id
  /// mismatch: the file changed since the core was written) and per thing that cut a list read from the
  /// dynamic linker's `link_map` short, without the `imagelog: CORE: ` prefix.
  public func images() -> (images: [Image], problems: [String]) {
    let catalog = loadCatalog()
    return (catalog.entries.compactMap(\.image), catalog.problems)
  }

  /// Where the list of images came from: `NT_FILE`, or the dynamic linker's list for a core without it.
  package var imageSource: ELFCoreImageSource { loadCatalog().source }

  /// Reads the process's memory at `address` into `buffer`: from the core where it holds the bytes,
  /// else from the verified file mapped there. False when any byte is in neither.
  public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    let catalog = loadCatalog()
    var done = 0
    // Each step copies at least one byte or returns: bounded by the buffer's size.
    while done < buffer.count {
      let (at, overflow) = address.addingReportingOverflow(UInt64(done))
      guard !overflow else { return false }
      let want = buffer.count - done
      let target = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
      var got = 0
      if let segment = core.segment(containing: at) {
        let delta = at - segment.vmRange.lowerBound
        if delta < segment.availableSize {
          got = Int(min(UInt64(want), segment.availableSize - delta))  // <= want
          // availableSize > delta >= 0 means the segment's bytes lie inside the core file (ELFCore clips
          // availableSize to it), so fileOffset + delta is below the file's size: no overflow. Bytes the
          // core's source does not have (a streamed core keeps only some) may still be in the file.
          if !copy(from: file, offset: segment.fileOffset + delta, count: got, into: target) { got = 0 }
        }
      }
      if got == 0 {
        guard let (source, offset, count) = catalog.fileBytes(for: at, want: want),
              copy(from: source, offset: offset, count: count, into: target) else { return false }
        got = count
      }
      done += got
    }
    return true
  }

  private func copy(from source: FileBytes, offset: UInt64, count: Int,
                    into target: UnsafeMutableRawBufferPointer) -> Bool {
    guard count > 0, let start = Int(exactly: offset) else { return false }
    return source.withRanges { ranges in
      guard let reader = try? ranges.slice(at: start, length: count) else { return false }
      reader.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
      return true
    }
  }

  private func loadCatalog() -> Catalog {
    if let catalog { return catalog }
    let made = Catalog(core: core, file: file)
    catalog = made
    return made
  }

  /// The images, each with the file on disk that may stand in for memory the core left out.
  private struct Catalog {
    struct Entry {
      var image: Image?
      var coreImage: ELFCoreImage
      /// The file at the image's path, when it is shown to be the one the process mapped.
      var verifiedFile: FileBytes?
    }

    var entries: [Entry] = []
    var problems: [String] = []
    var source: ELFCoreImageSource

    init(core: ELFCore, file: FileBytes) {
      let list = file.withRanges { core.imageList(in: $0) }
      source = list.source
      problems = list.problems
      let phdr = core.auxiliaryValue(ELFCore.auxPHDR)
      for var coreImage in list.images {
        var entry = Entry(image: nil, coreImage: coreImage, verifiedFile: nil)
        let diskPath = Image.withoutDeletedMark(coreImage.path).path
        // NT_FILE's paths are absolute; a path from the process's memory (l_name, AT_EXECFN) may be
        // relative to a working directory that is not ours, and is not opened.
        let openable = list.source == .fileNote || diskPath.hasPrefix("/")
        var disk: (file: FileBytes, headers: ELFImageHeaders)?
        if !coreImage.isVDSO, openable, let opened = try? FileBytes(path: diskPath),
           let headers = try? opened.withRanges({ ranges throws(FormatError) in try ELFImageHeaders(file: ranges) }) {
          disk = (opened, headers)
        }
        var headers = coreImage.headers
        let shownPath = coreImage.path  // printed through printError, which escapes the line
        if let inCore = coreImage.headers {
          if let disk {
            if let coreID = inCore.buildID, let diskID = disk.headers.buildID, coreID != diskID {
              problems.append("\(shownPath): build-id \(coreID.hex) in the core, \(diskID.hex) on disk: "
                                + "the file changed since the core was written; not read in its place")
            } else if inCore.buildID != nil, inCore.buildID == disk.headers.buildID {
              entry.verifiedFile = disk.file
            }
          }
        } else {
          if let problem = coreImage.problem {
            problems.append("\(shownPath): its ELF headers in the core are damaged (\(problem))")
          }
          if let placement = coreImage.linkMap {
            // Found in the dynamic linker's list: the file is the one mapped there when its PT_DYNAMIC,
            // moved by l_addr, lands at l_ld (as elfutils ties a file to a link_map entry).
            if let disk, placement.places(disk.headers) {
              headers = disk.headers
              entry.verifiedFile = disk.file
              coreImage.loadAddress = placement.loadAddress(of: disk.headers)
              coreImage.mappings = disk.headers.fileMappings(loadBias: placement.loadBias, path: coreImage.path,
                                                             pageSize: core.pageSize)
              coreImage.mappedEnd = coreImage.mappings.map(\.vmRange.upperBound).max() ?? coreImage.loadAddress
              entry.coreImage = coreImage
            } else if disk != nil {
              // elfutils would place the file by l_ld alone; a file that disagrees with l_addr is not
              // the one mapped there. Without headers, a library's extent is unknown: it is left out.
              let known = coreImage.mappedEnd > coreImage.loadAddress
              problems.append("\(shownPath): the core kept no ELF headers for it and the file on disk does not put "
                                + "its dynamic section at l_ld 0x\(hexDigits(placement.dynamicVMAddress)) as the "
                                + "dynamic linker's list shows; " + (known ? "its build-id is unknown" : "left out"))
              if !known { continue }
            }
          } else if coreImage.mappings.isEmpty {
            // Nothing the core holds says where the file would map (an image from the dynamic linker's
            // list without a dynamic section): no file is tied to it.
            if disk != nil {
              problems.append("\(shownPath): the core kept no ELF headers for it and nothing in the core ties the "
                                + "file on disk to it; its build-id is unknown")
            }
          } else if let disk, disk.headers.matches(coreImage.mappings, loadAddress: coreImage.loadAddress) {
            headers = disk.headers
            entry.verifiedFile = disk.file
          } else if disk != nil {
            problems.append("\(shownPath): the core kept no ELF headers for it and the file on disk does not map "
                              + "as the core's mappings show; its build-id is unknown")
          }
        }
        // Neither the core nor a file on disk shows ELF headers: a data file mapped from its start
        // (a locale archive, a cache), or a file gone since. Not an image anyone can name.
        if headers == nil && disk == nil {
          if coreImage.linkMap != nil {
            problems.append("\(shownPath): neither the core nor a file at that path holds its ELF headers; left out")
          }
          continue
        }
        entry.image = Self.image(entry.coreImage, headers: headers, phdr: phdr, core: core,
                                 fileVerified: entry.verifiedFile != nil)
        entries.append(entry)
      }
    }

    static func image(_ coreImage: ELFCoreImage, headers: ELFImageHeaders?, phdr: UInt64?, core: ELFCore,
                      fileVerified: Bool) -> Image {
      let load = coreImage.loadAddress
      let mappedEnd = max(coreImage.mappedEnd, load)
      guard let headers else {
        let isMain = phdr.map { $0 >= load && $0 < mappedEnd } ?? false
        return Image(path: coreImage.path, loadAddress: load, loadBias: load, textRange: load..<mappedEnd,
                     loadRange: load..<mappedEnd, buildID: nil, architecture: core.architecture, isMainExecutable: isMain,
                     buildIDAddress: nil, fileMappedRange: load..<mappedEnd)
      }
      let bias = load &- headers.layout.firstVMAddress
      let loadEnd = max(bias &+ headers.layout.loadEndVMAddress, load)
      let textEnd = min(max(bias &+ headers.layout.textEndVMAddress, load), loadEnd)
      let isMain = phdr.map { $0 >= load && $0 < loadEnd } ?? false
      // eu-unstrip -n --core's module span: a library it reads from its file (found through the
      // dynamic linker's list, same build-id) ends where its last PT_LOAD does; the main executable,
      // the vDSO and a library whose file is gone or changed, which elfutils finds in the core's
      // memory, end at the page that holds that end. `unstrip` prints this span.
      var moduleEnd = loadEnd
      if isMain || coreImage.isVDSO || !fileVerified {
        let page = max(core.auxiliaryValue(ELFCore.auxPageSize) ?? 4096, 1)  // gdb writes NT_FILE with page size 1
        let rounded = loadEnd.addingReportingOverflow((page - loadEnd % page) % page)
        if !rounded.overflow { moduleEnd = rounded.partialValue }
      }
      return Image(path: coreImage.path, loadAddress: load, loadBias: bias, textRange: load..<textEnd,
                   loadRange: load..<loadEnd, buildID: headers.buildID, architecture: headers.architecture,
                   isMainExecutable: isMain, buildIDAddress: headers.buildIDVMAddress.map { bias &+ $0 },
                   fileMappedRange: load..<moduleEnd)
    }

    /// The verified file holding `address`, where in it, and how many of `want` bytes it holds there.
    func fileBytes(for address: UInt64, want: Int) -> (FileBytes, UInt64, Int)? {
      for entry in entries {
        guard let file = entry.verifiedFile else { continue }
        for mapping in entry.coreImage.mappings where mapping.vmRange.contains(address) {
          let delta = address - mapping.vmRange.lowerBound
          let (offset, overflow) = mapping.fileOffset.addingReportingOverflow(delta)
          guard !overflow, offset < UInt64(file.count) else { return nil }
          let count = min(UInt64(want), mapping.vmRange.upperBound - address, UInt64(file.count) - offset)
          return (file, offset, Int(count))  // count <= want
        }
      }
      return nil
    }
  }
}
