internal import Glibc
import ProcessInspection
import Snapshot
import ImageReaders
import Symbolication

/// Reading one file for its symbol file: ELF or Mach-O (a universal file's slice), its DWARF, the
/// module facts, and the debug and binary halves merged as dump_syms merges them.
extension BreakpadSymbols {
  /// One file opened: its module facts, symbols, call frame sections and DWARF, before its records
  /// are made; with what locating its debug file needs.
  struct Opened {
    var object: BreakpadObject
    var source: BreakpadObjectSource
    /// A reader over its DWARF (its unit sizes and sections; each worker thread reads with its own).
    var dwarf: DWARFReader?
    var identity: BuildID?
    var sliceArchitecture: String?
    /// A slice of a universal file (its DWARF is read from that slice).
    var universal = false
  }

  /// Reads the DWARF of `file` when it has any (`readDWARF` is apart from `open` so that the CFI
  /// threads start before compressed sections are inflated).
  static func readDWARF(_ file: inout Opened, supplementaryPath: String?) {
    guard file.object.hasDebugInfo else { return }
    file.dwarf = reader(path: file.object.path, architecture: file.universal ? file.sliceArchitecture : nil,
                        supplementaryPath: supplementaryPath, notes: &file.object.notes)
  }

  static func open(path: String, options: Options) throws -> Opened {
    let mapped: MappedFile
    do { mapped = try MappedFile(path: path) } catch { throw ReportError("\(path): \(error)") }
    let result = mapped.withReader { bytes -> Result<Opened, ReportError> in
      do {
        switch try BinaryFile.parse(bytes) {
        case .elf(let file):
          return .success(try elfObject(file, bytes: bytes, mapped: mapped))
        case .machO(let file):
          return .success(try machOObject(file, slice: bytes, path: path, mapped: mapped, universal: false))
        case .fat(let fat):
          let wanted = options.architecture
          let candidates = fat.members.filter { wanted == nil || $0.architecture == wanted }
          guard let member = candidates.count == 1 ? candidates.first : nil, let file = member.decoded else {
            let all = fat.members.map(\.architecture).joined(separator: ", ")
            return .failure(ReportError("\(path): " + (wanted.map { "no \($0) slice (slices: \(all))" }
              ?? "several slices (\(all)): name one with --arch")))
          }
          let range = try ByteReader.checkedRange(offset: member.fileOffset, size: member.size, limit: bytes.count,
                                                  "slice \(member.architecture)")
          return .success(try machOObject(file, slice: try bytes.slice(at: range.lowerBound, length: range.count),
                                          path: path, mapped: mapped, universal: true))
        }
      } catch let error as ReportError {
        return .failure(error)
      } catch {
        return .failure(ReportError("\(path): \(error)"))
      }
    }
    return try result.get()
  }

  static func elfObject(_ file: ELFFile, bytes: ByteReader, mapped: MappedFile) throws -> Opened {
    let path = mapped.path
    // symbolic's load address: the first PT_LOAD's p_vaddr, as it is (0 for libraries and PIE).
    let loadAddress = file.programHeaders.first { $0.type == ProgramHeader.load }?.vmAddress ?? 0
    let identityBytes = file.buildID?.bytes.isEmpty == false ? file.buildID?.bytes : nil
    var debugBytes = identityBytes ?? textHash(file, bytes: bytes)
    debugBytes += [UInt8](repeating: 0, count: max(0, 16 - debugBytes.count))
    debugBytes = Array(debugBytes.prefix(16))
    if file.header.endian == .little {
      debugBytes[0..<4].reverse()
      debugBytes[4..<6].reverse()
      debugBytes[6..<8].reverse()
    }
    var object = BreakpadObject(path: path, moduleName: lastComponent(file.soname ?? path), isMachO: false,
                                hasDebugInfo: file.debugInfo.hasDebugInfo,
                                debugID: HexText.bytes(debugBytes).uppercased() + "0",
                                codeID: identityBytes.map { HexText.bytes($0).uppercased() },
                                architecture: elfArchitecture(file.header.machine))
    // symbolic's symbols: STT_FUNC entries of executable sections at or above the load address,
    // `.symtab`'s then `.dynsym`'s.
    var symbols: [(name: String, address: UInt64, size: UInt64)] = []
    for tableType in [ELFSection.symbolTableType, ELFSection.dynamicSymbolTableType] {
      guard let table = file.sections.first(where: { $0.type == tableType && $0.occupiesFile }) else { continue }
      guard let strings = file.sections.first(where: { $0.index == Int(table.link) }), strings.occupiesFile,
            let entrySize = Int(exactly: table.entrySize) else {
        object.notes.append("\(path): symbol table section \(table.index) has no string table")
        continue
      }
      let entries = try SymbolEntry.elf(symbols: try file.contents(of: table, in: bytes),
                                        strings: try file.contents(of: strings, in: bytes), entrySize: entrySize,
                                        is64Bit: file.header.is64Bit) { type, section, address in
        type == SymbolEntry.functionType && address >= loadAddress && section > 0 && section < file.sections.count
          && file.sections[section].flags & ELFSection.executableFlag != 0
      }
      symbols += entries.map { ($0.name, $0.address - loadAddress, $0.size) }
    }
    let executable = file.sections.filter { $0.flags & ELFSection.executableFlag != 0 }
      .map { (name: $0.name.isEmpty ? "unknown" : $0.name, vmAddress: $0.vmAddress) }
    let source = BreakpadObjectSource(symbols: symbols, loadAddress: loadAddress, executableSections: executable)
    // `.debug_frame` first, then `.eh_frame`, as symbolic reads them.
    for sectionName in [".debug_frame", ".eh_frame"] {
      guard let section = file.sections.first(where: { $0.name == sectionName && $0.occupiesFile && $0.fileOffset != 0 }),
            section.flags & DWARFSections.compressedFlag == 0 else { continue }
      let contents = try file.contents(of: section, in: bytes)
      contents.withUnsafeBytes { raw in
        object.frames.append(BreakpadFrameSection(bytes: raw, owner: mapped, vmAddress: section.vmAddress,
                                                  isEHFrame: sectionName == ".eh_frame", loadAddress: loadAddress,
                                                  addressSize: file.header.is64Bit ? 8 : 4, path: path))
      }
    }
    return Opened(object: object, source: source, dwarf: nil, identity: file.buildID, sliceArchitecture: nil)
  }

  static func machOObject(_ file: MachOFile, slice bytes: ByteReader, path: String, mapped: MappedFile,
                                  universal: Bool) throws -> Opened {
    var slice = bytes
    slice.endian = file.header.endian
    let loadAddress = file.segment(named: "__TEXT")?.vmAddress ?? 0
    let uuid = file.uuid.map { HexText.bytes($0.uuidBytes).uppercased() }
    let architecture = file.architecture == "i386" ? "x86" : file.architecture
    var object = BreakpadObject(path: path, moduleName: lastComponent(file.dylibID?.name ?? path), isMachO: true,
                                hasDebugInfo: file.segment(named: "__DWARF") != nil,
                                debugID: (uuid ?? String(repeating: "0", count: 32)) + "0", codeID: uuid,
                                architecture: architecture)
    // symbolic's symbols: section-defined entries of __TEXT,__text and __TEXT,__stubs at or above
    // __TEXT's address, one leading `_` dropped (not from Swift's `__hidden#` names).
    var codeSections = Set<Int>()
    var ordinal = 0
    for segment in file.segments {
      for section in segment.sections {
        ordinal += 1
        if segment.name == "__TEXT", section.name == "__text" || section.name == "__stubs" { codeSections.insert(ordinal) }
      }
    }
    var symbols: [(name: String, address: UInt64, size: UInt64)] = []
    if let table = try file.symbolTableBytes(in: slice) {
      let entries = try SymbolEntry.machO(symbols: table.symbols, count: table.count, strings: table.strings,
                                          is64Bit: file.header.is64Bit) { type, section, address in
        // N_STAB 0xe0, N_TYPE 0x0e, N_SECT 0x0e
        type & 0xE0 == 0 && type & 0x0E == 0x0E && codeSections.contains(section) && address >= loadAddress
      }
      for entry in entries {
        var name = entry.name
        if name.hasPrefix("_"), !name.hasPrefix("__hidden#") { name.removeFirst() }
        symbols.append((name, entry.address - loadAddress, 0))
      }
    }
    let source = BreakpadObjectSource(symbols: symbols, loadAddress: loadAddress, executableSections: [])
    // `__unwind_info` (compact unwinding) is not turned into STACK CFI; `__eh_frame` and a dSYM's
    // `__debug_frame` are.
    for segment in file.segments {
      for section in segment.sections where section.name == "__eh_frame" || section.name == "__debug_frame" {
        guard section.fileOffset != 0, section.size > 0,
              let range = try? ByteReader.checkedRange(offset: UInt64(section.fileOffset), size: section.size,
                                                       limit: slice.count, section.name) else { continue }
        let contents = try slice.slice(at: range.lowerBound, length: range.count)
        contents.withUnsafeBytes { raw in
          object.frames.append(BreakpadFrameSection(bytes: raw, owner: mapped, vmAddress: section.address,
                                                    isEHFrame: section.name == "__eh_frame", loadAddress: loadAddress,
                                                    addressSize: file.header.is64Bit ? 8 : 4, path: path))
        }
      }
    }
    return Opened(object: object, source: source, dwarf: nil, identity: file.uuid, sliceArchitecture: file.architecture,
                  universal: universal)
  }

  /// A reader over the file's DWARF (unit headers only: the workers walk it), or `nil` with a note
  /// when it cannot be read.
  static func reader(path: String, architecture: String?, supplementaryPath: String?,
                             notes: inout [String]) -> DWARFReader? {
    do {
      let sections = try DebugInfoFile.dwarfSections(path: path, architecture: architecture,
                                                     supplementaryPath: supplementaryPath)
      let reader = try DWARFReader(sections, indexed: false)
      notes += reader.problems.map { "\(path): \($0)" }
      return reader
    } catch {
      notes.append("\(path): \(error)")
      return nil
    }
  }

  /// symbolic's debug id for an ELF file without a build-id: the first page of `.text` folded into 16
  /// bytes by XOR.
  static func textHash(_ file: ELFFile, bytes: ByteReader) -> [UInt8] {
    guard let text = file.sections.first(where: { $0.name == ".text" && $0.occupiesFile }),
          let contents = try? file.contents(of: text, in: bytes) else { return [] }
    var hash = [UInt8](repeating: 0, count: 16)
    contents.withUnsafeBytes { raw in
      for index in 0..<min(raw.count, 4096) { hash[index % 16] ^= raw[index] }
    }
    return hash
  }

  /// symbolic's architecture names for `e_machine`.
  static func elfArchitecture(_ machine: UInt16) -> String {
    switch machine {
    case 3: "x86"
    case 62: "x86_64"
    case 183: "arm64"
    case 40: "arm"
    case 20: "ppc"
    case 21: "ppc64"
    case 8, 10: "mips"
    default: "unknown"
    }
  }

  /// `dump_syms`' merge of a binary and its debug file (`ObjectInfo::merge`): the one with more
  /// records receives the other's; the binary names the module. Where the two name one address: a
  /// package of the other file is dropped (a made-up one replaced by it), and a FUNC replaces a PUBLIC;
  /// two different names mark the record `m`.
  static func merge(debug: BreakpadObject, binary: BreakpadObject) -> BreakpadObject {
    var (left, right) = debug.symbols.count > binary.symbols.count ? (debug, binary) : (binary, debug)
    left.frames += right.frames
    left.frameFiles += right.frameFiles
    left.notes += right.notes
    let fileNumbers = left.files.merge(right.files)
    let originNumbers = left.origins.merge(right.origins)
    var predecessors = BreakpadPredecessors(candidates: left.symbols.symbols.map(\.address)
                                              + right.symbols.symbols.map(\.address))
    for symbol in left.symbols.symbols { predecessors.add(symbol.address, end: BreakpadObject.end(symbol.address, symbol.size)) }
    for var symbol in right.symbols.sorted {
      if !symbol.isPublic {
        // The FUNC's records, renumbered, follow the left file's.
        let lines = right.records.lines[symbol.lines].map {
          BreakpadLineRecord(address: $0.address, size: $0.size, line: $0.line, file: fileNumbers[Int($0.file)])
        }
        let lineStart = left.records.lines.count
        left.records.lines += lines
        let inlineStart = left.records.inlines.count
        for inline in right.records.inlines[symbol.inlines] {
          let rangeStart = left.records.inlineRanges.count
          left.records.inlineRanges += right.records.inlineRanges[inline.ranges]
          left.records.inlines.append(BreakpadInlineRecord(depth: inline.depth, callLine: inline.callLine,
                                                           callFile: fileNumbers[Int(inline.callFile)],
                                                           origin: originNumbers[Int(inline.origin)],
                                                           ranges: rangeStart..<left.records.inlineRanges.count))
        }
        symbol.lines = lineStart..<left.records.lines.count
        symbol.inlines = inlineStart..<left.records.inlines.count
      }
      if symbol.isPublic, predecessors.isInside(symbol.address) { continue }
      if let index = left.symbols.index(at: symbol.address) {
        let existing = left.symbols[index]
        if symbol.isPublic {
          if symbol.isSynthetic { continue }
          if existing.isSynthetic {
            left.symbols[index] = symbol
          } else if existing.name != symbol.name {
            left.symbols[index].isMultiple = true
          }
        } else if existing.isPublic {
          symbol.isMultiple = existing.name != symbol.name || existing.isMultiple
          left.symbols[index] = symbol
          predecessors.add(symbol.address, end: BreakpadObject.end(symbol.address, symbol.size))
        } else {
          left.symbols[index].isMultiple = true
        }
        continue
      }
      left.symbols.insert(symbol)
      predecessors.add(symbol.address, end: BreakpadObject.end(symbol.address, symbol.size))
    }
    if left.codeID == nil { left.codeID = right.codeID }
    left.moduleName = binary.moduleName
    left.path = binary.path
    return left
  }

  /// For a `.dSYM` bundle, its one DWARF file (`Contents/Resources/DWARF/NAME`); `nil` otherwise.
  static func dwarfFileOfBundle(_ path: String) -> String? {
    guard FileSystem.kind(path) == .directory else { return nil }
    let folder = (path.hasSuffix("/") ? String(path.dropLast()) : path) + "/Contents/Resources/DWARF"
    let names = FileSystem.contents(folder)
    return names.count == 1 ? folder + "/" + names[0] : nil
  }

  static func lastComponent(_ path: String) -> String {
    path.split(separator: "/").last.map(String.init) ?? path
  }
}
