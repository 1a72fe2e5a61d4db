import ProcessInspection
import ImageReaders
import Snapshot

extension Symbolicator {
  /// Unwinds the threads `snapshot`'s source left to be walked in `memoryToWalk` (a minidump's), then
  /// lets the memory go; nothing for a snapshot without it. `symbolicate` does this first, so a
  /// minidump's snapshot is symbolicated as any other; a snapshot written unsymbolicated
  /// (`--no-symbolicate`) is walked alone, its images' files found by `locator` all the same.
  package static func walkStacks(_ snapshot: inout ProcessSnapshot, locator: DebugFileLocator) {
    guard let memory = snapshot.memoryToWalk else { return }
    snapshot.memoryToWalk = nil
    walkStacks(&snapshot, memory: memory, locator: locator)
  }

  /// Unwinds every thread of `snapshot` that has registers but no frames yet (a minidump's), with the
  /// one unwinder: call frame information, then frame pointers, then stack scanning, each frame with
  /// its trust. Each image's file is found by identity as symbolication finds it (the recorded path, a
  /// `--search` folder, `/usr/lib/debug`, debuginfod: `locator`); the image is then placed by the
  /// file's program headers (load bias, text range), and its headers, code and `.eh_frame` are read
  /// from the file where `memory` (the dump's) does not hold them. An image without a file is walked
  /// through by the `STACK CFI` records of its `.sym` in the locator's symbol store, else by frame
  /// pointers and scanning only, held to minidump-stackwalk's checks where its code cannot be read
  /// (`StackUnwinder`'s `withoutCode`). An image recorded by its loader name alone
  /// (Crashpad's `libc.so.6`, `libswiftCore.so`) is looked for where the loader looked: the main
  /// executable's `DT_RPATH` and `DT_RUNPATH`, then the system's library folders; found there with its
  /// build-id, that file's path becomes the image's, so symbolication reads the same file.
  static func walkStacks(_ snapshot: inout ProcessSnapshot, memory: some MemoryReading, locator: DebugFileLocator) {
    guard snapshot.threads.contains(where: { $0.frames.isEmpty && $0.registers != nil }) else { return }
    let files = MappedFileMemory()
    // arm64.rs's ptr_auth_strip: a pointer keeps the bits up to the end of the module with the highest
    // base, at least 47 (as the images stand before any is placed by its file).
    let highest = snapshot.images.compactMap { $0.loaded?.loadRange }.max { $0.lowerBound < $1.lowerBound }
    let pointerMask = addressMask(reaching: highest?.upperBound ?? 0)  // used on aarch64 threads only
    // The main executable first: its search paths are where the loader found the others.
    var order = Array(snapshot.images.indices)
    if let main = order.firstIndex(where: { snapshot.images[$0].loaded?.isMainExecutable == true }) { order.swapAt(0, main) }
    var folders: [String] = []
    var storedFrames = [BreakpadCallFrames?](repeating: nil, count: snapshot.images.count)
    var stored = [BreakpadSymbolFile?](repeating: nil, count: snapshot.images.count)
    var windowsFrames = [BreakpadWindowsFrameSource?](repeating: nil, count: snapshot.images.count)
    let opened = OpenedFiles()
    var placed = [Bool](repeating: false, count: snapshot.images.count)
    for index in order {
      let path = place(&snapshot.images[index], files: files, locator: locator, loaderFolders: folders, opened: opened)
      if let path, snapshot.images[index].loaded?.isMainExecutable == true { folders = loaderFolders(of: path) }
      placed[index] = path != nil
      if path == nil {
        stored[index] = storedSymbols(snapshot.images[index], locator: locator)
        storedFrames[index] = stored[index].flatMap { BreakpadCallFrames($0) }
        windowsFrames[index] = stored[index].flatMap { storedWindowsFrames(snapshot.images[index], symbols: $0, locator: locator) }
      }
    }
    let readable = LayeredMemory(memory, files)
    let unwindImages = snapshot.images.indices.compactMap { index -> UnwindImage? in
      guard let loaded = snapshot.images[index].loaded else { return nil }
      var image: UnwindImage
      if let frames = storedFrames[index] {
        // The symbol file's addresses are offsets from the module's base; only the entries the walk
        // reaches are said in DWARF.
        image = UnwindImage(textRange: loaded.textRange, loadBias: loaded.loadAddress, addressSize: frames.addressSize)
        image.callFrames = frames
      } else if windowsFrames[index] != nil {
        // STACK WIN records are offsets from the module's base too.
        image = UnwindImage(textRange: loaded.textRange, loadBias: loaded.loadAddress, addressSize: 4)
      } else {
        image = UnwindImage.locate(loadAddress: loaded.loadAddress, loadBias: loaded.loadBias, textRange: loaded.textRange, in: readable)
      }
      image.windowsFrames = windowsFrames[index]
      if let symbols = stored[index] {
        // A module with symbols: a scanned word (whose code cannot be read) must be inside a function the
        // symbols name, as Breakpad's InstructionAddressSeemsValid and rust-minidump's
        // instruction_seems_valid_by_symbols require.
        let base = loaded.loadAddress
        image.namesAddress = { address in
          let (offset, below) = address.subtractingReportingOverflow(base)
          return !below && symbols.namesAddress(offset)
        }
      }
      return image
    }
    let wholeModules = snapshot.images.indices.compactMap { index -> Range<UInt64>? in
      guard stored[index] == nil, let loaded = snapshot.images[index].loaded, !loaded.loadRange.isEmpty else { return nil }
      var magic = [UInt8](repeating: 0, count: 4)
      guard magic.withUnsafeMutableBytes({ memory.read(loaded.loadAddress, into: $0) }), magic == [0x7F, 0x45, 0x4C, 0x46] else { return nil }
      return loaded.loadRange
    }
    let modulesHeld = RangeLimitedMemory(memory: memory, ranges: wholeModules)
    let unwinder = StackUnwinder(memory: readable, images: unwindImages, scanBytes: placed.contains(true) ? 8192 : 0,
                                 withoutCode: true, armFramePointers: snapshot.stackwalkOS.name == "iOS",
                                 pointerMask: pointerMask, x86_64FrameRecords: snapshot.stackwalkOS.name != "Windows NT")
    for index in snapshot.threads.indices where snapshot.threads[index].frames.isEmpty {
      guard let registers = snapshot.threads[index].registers else { continue }
      let stack = snapshot.threads[index].stack ?? BufferMemory([])
      let frames = unwinder.unwind(from: RegisterSet(registers), in: LayeredMemory(LayeredMemory(stack, files), modulesHeld))
      snapshot.threads[index].frames = frames.enumerated().map { ProcessSnapshot.Frame(number: $0.offset, $0.element) }
      if frames.isEmpty, snapshot.threads[index].problem == nil {
        snapshot.threads[index].problem = "the registers hold no pc and stack pointer"
      }
    }
    snapshot.placeFrames()
  }

  /// The mask arm64.rs strips pointer-authentication bits with: every bit below the least power of two
  /// at or above the greater of `end` and 2^47 - 1 (all bits past 2^63).
  static func addressMask(reaching end: UInt64) -> UInt64 {
    let highest = max(end, (1 << 47) - 1) - 1  // at least 2^47 - 2
    let bits = 64 - highest.leadingZeroBitCount
    return bits >= 64 ? .max : (1 << UInt64(bits)) - 1
  }

  /// Finds `image`'s file by identity and, when it holds the image's code (its `.eh_frame_hdr` is there:
  /// a debug file's is not), places the image by its program headers and lends its mappings to `files`.
  /// A name without a folder is looked for in `loaderFolders`, then the system's library folders.
  /// Returns the file's path, or nil when none was found.
  @discardableResult
  static func place(_ image: inout ProcessSnapshot.Image, files: MappedFileMemory, locator: DebugFileLocator,
                    loaderFolders: [String] = [], opened: OpenedFiles = OpenedFiles()) -> String? {
    guard var loaded = image.loaded, let buildID = loaded.buildID else { return nil }
    var candidates: [String] = []
    if case .found(let file, _) = locator.locate(image, architecture: image.architecture) {
      candidates.append(file.path)
    }
    // The locator prefers a separate debug file (/usr/lib/debug), which holds no code: the recorded path
    // comes next. A writer that records the loader's name for a library (Crashpad's `libc.so.6`): where
    // the loader finds it. Names only point at candidates; a candidate is used only with the image's build-id.
    let byName = image.path.map { !$0.contains("/") } ?? false
    let located = candidates.count
    if let path = image.path {
      candidates += byName ? (loaderFolders + libraryDirectories(loaded.architecture)).map { $0 + "/" + path } : [path]
    }
    for (index, path) in candidates.enumerated() {
      guard let (opened, headers) = opened.open(path), headers.buildID == buildID, holdsCode(opened, headers) else { continue }
      let bias = loaded.loadAddress &- headers.layout.firstVMAddress
      let loadEnd = max(bias &+ headers.layout.loadEndVMAddress, loaded.loadAddress)
      loaded.loadBias = bias
      loaded.textRange = loaded.loadAddress..<min(max(bias &+ headers.layout.textEndVMAddress, loaded.loadAddress), loadEnd)
      loaded.loadRange = loaded.loadAddress..<loadEnd
      loaded.fileMappedRange = loaded.loadRange
      if byName, index >= located { image.path = path }
      image.loaded = loaded
      files.add(opened, mappings: headers.fileMappings(loadBias: bias, path: path, pageSize: 4096))
      return path
    }
    return nil
  }

  /// The files a walk opened to place images, by path, each opened and its headers read once: a dump
  /// whose thousands of modules name one file (or one missing file) costs one open, not one per module.
  final class OpenedFiles {
    private var byPath: [String: (file: FileBytes, headers: ELFImageHeaders)?] = [:]

    /// The file at `path` and its headers; `nil` when it cannot be opened or is not an ELF file.
    func open(_ path: String) -> (file: FileBytes, headers: ELFImageHeaders)? {
      if let known = byPath[path] { return known }
      var result: (file: FileBytes, headers: ELFImageHeaders)?
      if let file = try? FileBytes(path: path),
         let headers = try? file.withRanges({ ranges throws(FormatError) in try ELFImageHeaders(file: ranges) }) {
        result = (file, headers)
      }
      byPath[path] = result
      return result
    }
  }

  /// The folders the loader searched for `executable`'s libraries before the system's: its `DT_RPATH`
  /// and `DT_RUNPATH` entries, `$ORIGIN` made its folder; entries with other tokens (`$LIB`) are left out.
  static func loaderFolders(of executable: String) -> [String] {
    guard let opened = try? FileBytes(path: executable),
          let file = try? opened.withRanges({ ranges throws(FormatError) in try ELFFile(source: ranges, names: .lookedFor) })
    else { return [] }
    let origin = executable.lastIndex(of: "/").map { String(executable[..<$0]) } ?? "."
    let entries = [file.rpath, file.runpath].compactMap { $0 }.flatMap { $0.split(separator: ":") }
    return entries.compactMap { entry in
      let folder = String(entry).replacing("${ORIGIN}", with: origin).replacing("$ORIGIN", with: origin)
      return folder.contains("$") || folder.isEmpty ? nil : folder
    }
  }

  /// Where Debian's loader looks for `architecture`'s libraries (multiarch first).
  static func libraryDirectories(_ architecture: String) -> [String] {
    let triple = switch Architecture(commandLine: architecture).name {
    case "arm64": "aarch64-linux-gnu"
    case "i386": "i386-linux-gnu"
    default: "x86_64-linux-gnu"
    }
    return ["/lib/\(triple)", "/usr/lib/\(triple)", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
  }

  /// True when the file's `PT_GNU_EH_FRAME` points at an `.eh_frame_hdr` in the file (version 1, a
  /// sorted table): a stripped debug file keeps the program header, not the bytes.
  static func holdsCode(_ file: FileBytes, _ headers: ELFImageHeaders) -> Bool {
    guard let segment = headers.programHeaders.first(where: { $0.type == 0x6474_E550 }),  // PT_GNU_EH_FRAME
          segment.fileSize >= 4, let offset = Int(exactly: segment.fileOffset) else { return false }
    return file.withRanges { ranges in
      guard var reader = try? ranges.slice(at: offset, length: 4),
            let version = try? reader.read(UInt8.self), version == 1,
            (try? reader.read(UInt16.self)) != nil, let table = try? reader.read(UInt8.self) else { return false }
      return table == 0x3B  // DW_EH_PE_datarel | DW_EH_PE_sdata4: the binary-searchable table
    }
  }
}

/// `memory` inside `ranges` only, each read held to one range, found by binary search (a hostile dump
/// may hold thousands of whole modules).
private struct RangeLimitedMemory<Base: MemoryReading>: MemoryReading {
  let memory: Base
  let ranges: [Range<UInt64>]
  let owners: RangeOwners

  init(memory: Base, ranges: [Range<UInt64>]) {
    self.memory = memory
    self.ranges = ranges
    // An empty range holds nothing (last < first).
    owners = RangeOwners(ranges.map { $0.isEmpty ? (first: UInt64.max, last: 0) : ($0.lowerBound, $0.upperBound - 1) },
                         claimOrder: Array(ranges.indices))
  }

  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    let (end, overflow) = address.addingReportingOverflow(UInt64(buffer.count))
    guard !overflow, let index = owners.owner(of: address), end <= ranges[index].upperBound else { return false }
    return memory.read(address, into: buffer)
  }
}
