/// A thin Mach-O file (or one slice of a universal file) decoded from bytes: header, load commands,
/// and the code signature. Checks follow LLVM's `MachOObjectFile` validation: the load command area
/// fits the file, `ncmds` fits `sizeofcmds`, each `cmdsize` is at least 8 and its struct's size,
/// aligned, and inside `sizeofcmds`; every file range a command names fits the file.
public struct MachOFile: Sendable, Equatable {
  /// The `mach_header`.
  public var header: MachOHeader
  /// Every load command in file order; unknown ones are `.other`.
  public var loadCommands: [LoadCommand]
  /// The decoded SuperBlob behind `LC_CODE_SIGNATURE`: `nil` when the file has none, a failure when
  /// its blobs are malformed (the rest of the file still reads; the CLI reports it where it shows it).
  public var codeSignature: Result<CodeSignature, FormatError>? {
    get {
      switch signature {
      case .absent: nil
      case .decoded(let found): .success(found)
      case .failed(let error): .failure(error)
      }
    }
    set {
      switch newValue {
      case nil: signature = .absent
      case .success(let found)?: signature = .decoded(found)
      case .failure(let error)?: signature = .failed(error)
      }
    }
  }
  /// `codeSignature`, stored without `Result`: a generic type with an `Error` requirement in a stored
  /// property makes the runtime instantiate its metadata, scanning the conformance records, the first
  /// time a value is copied or destroyed, in every run that reads a Mach-O file, for a property
  /// `--uuid` and crash lines never look at (the cost: BENCHMARKS.md).
  private var signature: SignatureState

  /// What `LC_CODE_SIGNATURE` led to (`codeSignature`).
  enum SignatureState: Sendable, Equatable {
    case absent
    case decoded(CodeSignature)
    case failed(FormatError)
  }
  /// The size in bytes of the file or slice this was read from.
  public var fileSize: Int

  /// The bytes the header is fetched with (`init(source:)`).
  static let headerFetchSize = 4096

  /// True for `MH_MAGIC`, `MH_MAGIC_64` and their byte-swapped forms, read in either order.
  package static func isMagic(_ magic: UInt32) -> Bool {
    magic == MachOHeader.magic32 || magic == MachOHeader.magic64
  }

  /// Decodes `bytes` (a whole thin file or one slice; offsets are relative to its start).
  package init(_ bytes: ByteReader) throws(FormatError) {
    try self.init(source: bytes)
  }

  /// Decodes the thin Mach-O file (or slice) whose bytes `source` fetches, offsets relative to its
  /// start: the same checks and the same values or errors as `init(_:)` over the bytes in memory,
  /// reading only the header, the load commands and the code signature.
  package init<Source: RandomAccessBytes>(source: Source) throws(FormatError) {
    // The header with the bytes after it, so a reader that fetches on demand gets the load commands
    // of a typical file in the same fetch; the header itself needs at most 32 (and names the file's
    // size only when it has fewer).
    header = try MachOHeader(source.slice(at: 0, length: min(source.count, Self.headerFetchSize)))
    fileSize = source.count
    var reader = source
    reader.endian = header.endian
    let headerSize = header.size
    // sizeofcmds is UInt32 and headerSize <= 32: the sum cannot overflow Int on 64-bit hosts.
    guard Int(header.commandsSize) <= reader.count - headerSize else {
      throw .machO("load commands extend past the end of the file (sizeofcmds \(header.commandsSize), "
                   + "\(reader.count - headerSize) bytes after the header)")
    }
    let area = try reader.slice(at: headerSize, length: Int(header.commandsSize))
    guard UInt64(header.commandCount) <= UInt64(area.count / 8) else {
      throw .machO("ncmds \(header.commandCount) cannot fit in sizeofcmds \(header.commandsSize) "
                   + "(8 bytes each at least)")
    }
    let alignment = header.is64Bit ? 8 : 4
    var commands: [LoadCommand] = []
    commands.reserveCapacity(Int(header.commandCount))  // bounded by sizeofcmds / 8 just above
    var seen = SingletonCommands()
    var offset = 0
    var signatureCommand: LinkEditData?
    for index in 0..<Int(header.commandCount) {
      guard area.count - offset >= 8 else {
        throw .loadCommand(index, "extends past the end of all load commands in the file (sizeofcmds "
                           + "\(header.commandsSize))")
      }
      let cmd = try area.peek(UInt32.self, at: offset)
      let size64 = try area.peek(UInt32.self, at: offset + 4)
      let size = Int(size64)  // UInt32 -> Int is exact on 64-bit hosts
      guard size >= 8 else { throw .loadCommand(index, "cmdsize \(size) is less than 8") }
      guard size % alignment == 0 else {
        throw .loadCommand(index, "cmdsize \(size) not a multiple of \(alignment)")
      }
      guard size <= area.count - offset else {
        throw .loadCommand(index, "extends past the end of all load commands in the file (cmdsize \(size) at "
                           + "offset \(offset), sizeofcmds \(header.commandsSize))")
      }
      let body = try area.slice(at: offset, length: size)
      let command = try Self.decode(cmd: cmd, body: body, index: index, header: header, fileSize: reader.count)
      try seen.note(command, index: index)
      if case .codeSignature(let data) = command { signatureCommand = data }
      commands.append(command)
      offset += size  // size <= area.count - offset, so offset stays within the area
    }
    loadCommands = commands
    if let data = signatureCommand {
      // decode() proved dataoff+datasize fits the file.
      do {
        signature = .decoded(try CodeSignature(reader.slice(at: Int(data.dataOffset), length: Int(data.dataSize))))
      } catch {
        signature = .failed(error)
      }
    } else {
      signature = .absent
    }
  }

  // MARK: Accessors

  /// The architecture name (`arm64`, `x86_64h`, `armv7s`, ...).
  public var architecture: String { header.architecture }

  /// `LC_UUID`; `nil` when the file has none.
  public var uuid: BuildID? {
    for case .uuid(let id) in loadCommands { return id }
    return nil
  }

  /// Every segment, in command order.
  public var segments: [MachOSegment] {
    loadCommands.compactMap { if case .segment(let segment) = $0 { segment } else { nil } }
  }

  /// The segment named `name` (the first one, if several are).
  public func segment(named name: String) -> MachOSegment? {
    segments.first { $0.name == name }
  }

  /// `LC_ID_DYLIB`; `nil` for executables and bundles.
  public var dylibID: DylibReference? {
    for case .dylib(let dylib) in loadCommands where dylib.kind == .id { return dylib }
    return nil
  }

  /// The dependent dylibs (every dylib command but `LC_ID_DYLIB`), in file order.
  public var dependencies: [DylibReference] {
    loadCommands.compactMap { if case .dylib(let dylib) = $0, dylib.kind != .id { dylib } else { nil } }
  }

  /// `LC_RPATH` entries, in file order.
  public var rpaths: [String] {
    loadCommands.compactMap { if case .rpath(let path) = $0 { path } else { nil } }
  }

  /// `LC_BUILD_VERSION` (the first; a file may carry one per platform).
  public var buildVersion: BuildVersion? {
    for case .buildVersion(let version) in loadCommands { return version }
    return nil
  }

  /// `LC_VERSION_MIN_*`
  public var versionMin: VersionMin? {
    for case .versionMin(let version) in loadCommands { return version }
    return nil
  }

  /// `LC_MAIN`
  public var entryPoint: (entryOffset: UInt64, stackSize: UInt64)? {
    for case let .main(entry, stack) in loadCommands { return (entry, stack) }
    return nil
  }

  /// `LC_ENCRYPTION_INFO(_64)`
  public var encryptionInfo: EncryptionInfo? {
    for case .encryptionInfo(let info) in loadCommands { return info }
    return nil
  }

  /// `LC_SYMTAB`: where the symbol and string tables are.
  public var symbolTable: SymbolTableCommand? {
    for case .symbolTable(let table) in loadCommands { return table }
    return nil
  }

  /// `LC_FUNCTION_STARTS`: the ULEB128 function-start deltas' range in `__LINKEDIT`.
  public var functionStarts: LinkEditData? {
    for case .functionStarts(let data) in loadCommands { return data }
    return nil
  }

  /// `LC_CODE_SIGNATURE`: the SuperBlob's range in `__LINKEDIT`.
  public var codeSignatureRange: LinkEditData? {
    for case .codeSignature(let data) in loadCommands { return data }
    return nil
  }

  /// The crash-tooling view of this file.
  public var summary: SliceSummary {
    let all = segments
    let text = all.first { $0.name == "__TEXT" } ?? all.first { $0.initialProtection & 4 != 0 }
    var low = UInt64.max
    var high: UInt64 = 0
    for segment in all where segment.name != "__PAGEZERO" && segment.vmSize > 0 {
      low = min(low, segment.vmAddress)
      high = max(high, segment.vmRange.upperBound)
    }
    return SliceSummary(architecture: architecture, fileType: header.fileTypeName, buildID: uuid,
                        textVMRange: text?.vmRange ?? 0..<0, loadVMRange: low <= high ? low..<high : 0..<0,
                        installName: dylibID?.name, dependencies: dependencies.map(\.name))
  }
}

// MARK: Decoding one command

extension MachOFile {
  /// Minimum `cmdsize` of each decoded command (its struct's size).
  static func structSize(_ cmd: UInt32) -> Int {
    switch cmd {
    case LC.segment: 56
    case LC.segment64: 72
    case LC.symtab: 24
    case LC.uuid: 24
    case LC.idDylib, LC.loadDylib, LC.loadWeakDylib, LC.reexportDylib, LC.lazyLoadDylib, LC.loadUpwardDylib: 24
    case LC.rpath, LC.loadDylinker: 12
    case LC.buildVersion: 24
    case LC.versionMinMacOSX, LC.versionMinIPhoneOS, LC.versionMinTvOS, LC.versionMinWatchOS: 16
    case LC.main: 24
    case LC.encryptionInfo: 20
    case LC.encryptionInfo64: 24
    case LC.codeSignature, LC.functionStarts: 16
    default: 8
    }
  }

  static func decode(cmd: UInt32, body: ByteReader, index: Int, header: MachOHeader,
                     fileSize: Int) throws(FormatError) -> LoadCommand {
    let name = machOLoadCommandName(cmd)
    let minimum = structSize(cmd)
    guard body.count >= minimum else {
      throw .loadCommand(index, "\(name) cmdsize \(body.count) is less than its struct (\(minimum))")
    }
    var reader = body
    try reader.skip(8)
    switch cmd {
    case LC.segment, LC.segment64:
      return .segment(try decodeSegment(&reader, is64Bit: cmd == LC.segment64, index: index, header: header,
                                        fileSize: fileSize))
    case LC.uuid:
      guard body.count == 24 else { throw .loadCommand(index, "LC_UUID cmdsize \(body.count) is not 24") }
      return .uuid(BuildID(try reader.readBytes(16)))
    case LC.idDylib, LC.loadDylib, LC.loadWeakDylib, LC.reexportDylib, LC.lazyLoadDylib, LC.loadUpwardDylib:
      let kind: DylibKind = switch cmd {
      case LC.idDylib: .id
      case LC.loadDylib: .load
      case LC.loadWeakDylib: .weak
      case LC.reexportDylib: .reexport
      case LC.lazyLoadDylib: .lazy
      default: .upward
      }
      let nameOffset = try reader.read(UInt32.self)
      let timestamp = try reader.read(UInt32.self)
      let current = try reader.read(UInt32.self)
      let compatibility = try reader.read(UInt32.self)
      let path = try commandString(body, offset: nameOffset, structSize: 24, index: index, name: name, field: "name")
      return .dylib(DylibReference(kind: kind, name: path, timestamp: timestamp,
                                   currentVersion: PackedVersion(current),
                                   compatibilityVersion: PackedVersion(compatibility)))
    case LC.rpath:
      let pathOffset = try reader.read(UInt32.self)
      return .rpath(try commandString(body, offset: pathOffset, structSize: 12, index: index, name: name, field: "path"))
    case LC.loadDylinker:
      let nameOffset = try reader.read(UInt32.self)
      return .dylinker(try commandString(body, offset: nameOffset, structSize: 12, index: index, name: name,
                                         field: "name"))
    case LC.buildVersion:
      let platform = try reader.read(UInt32.self)
      let minOS = try reader.read(UInt32.self)
      let sdk = try reader.read(UInt32.self)
      let toolCount = try reader.read(UInt32.self)
      // toolCount is UInt32: 24 + 8 * toolCount fits UInt64.
      guard UInt64(body.count) == 24 + 8 * UInt64(toolCount) else {
        throw .loadCommand(index, "LC_BUILD_VERSION cmdsize \(body.count) does not match ntools \(toolCount)")
      }
      var tools: [(tool: UInt32, version: PackedVersion)] = []
      tools.reserveCapacity(Int(toolCount))  // equals (cmdsize - 24) / 8, checked above
      for _ in 0..<Int(toolCount) {
        let tool = try reader.read(UInt32.self)
        tools.append((tool, PackedVersion(try reader.read(UInt32.self))))
      }
      return .buildVersion(BuildVersion(platform: platform, minimumOS: PackedVersion(minOS), sdk: PackedVersion(sdk),
                                        tools: tools))
    case LC.versionMinMacOSX, LC.versionMinIPhoneOS, LC.versionMinTvOS, LC.versionMinWatchOS:
      guard body.count == 16 else { throw .loadCommand(index, "\(name) cmdsize \(body.count) is not 16") }
      let version = try reader.read(UInt32.self)
      return .versionMin(VersionMin(command: cmd, version: PackedVersion(version),
                                    sdk: PackedVersion(try reader.read(UInt32.self))))
    case LC.main:
      guard body.count == 24 else { throw .loadCommand(index, "LC_MAIN cmdsize \(body.count) is not 24") }
      let entry = try reader.read(UInt64.self)
      return .main(entryOffset: entry, stackSize: try reader.read(UInt64.self))
    case LC.encryptionInfo, LC.encryptionInfo64:
      let is64 = cmd == LC.encryptionInfo64
      guard body.count == minimum else { throw .loadCommand(index, "\(name) cmdsize \(body.count) is not \(minimum)") }
      let cryptOffset = try reader.read(UInt32.self)
      let cryptSize = try reader.read(UInt32.self)
      let cryptID = try reader.read(UInt32.self)
      _ = try ByteReader.checkedRange(offset: UInt64(cryptOffset), size: UInt64(cryptSize), limit: fileSize,
                                      "load command \(index) \(name) cryptoff+cryptsize")
      return .encryptionInfo(EncryptionInfo(cryptOffset: cryptOffset, cryptSize: cryptSize, cryptID: cryptID,
                                            is64Bit: is64))
    case LC.codeSignature, LC.functionStarts:
      guard body.count == 16 else { throw .loadCommand(index, "\(name) cmdsize \(body.count) is not 16") }
      let dataOffset = try reader.read(UInt32.self)
      let dataSize = try reader.read(UInt32.self)
      _ = try ByteReader.checkedRange(offset: UInt64(dataOffset), size: UInt64(dataSize), limit: fileSize,
                                      "load command \(index) \(name) dataoff+datasize")
      let data = LinkEditData(dataOffset: dataOffset, dataSize: dataSize)
      return cmd == LC.codeSignature ? .codeSignature(data) : .functionStarts(data)
    case LC.symtab:
      guard body.count == 24 else { throw .loadCommand(index, "LC_SYMTAB cmdsize \(body.count) is not 24") }
      let symbolOffset = try reader.read(UInt32.self)
      let symbolCount = try reader.read(UInt32.self)
      let stringOffset = try reader.read(UInt32.self)
      let stringSize = try reader.read(UInt32.self)
      // nsyms is UInt32 and an nlist is at most 16 bytes: the product fits UInt64.
      let entrySize: UInt64 = header.is64Bit ? 16 : 12
      _ = try ByteReader.checkedRange(offset: UInt64(symbolOffset), size: UInt64(symbolCount) * entrySize,
                                      limit: fileSize, "load command \(index) LC_SYMTAB symoff+nsyms")
      _ = try ByteReader.checkedRange(offset: UInt64(stringOffset), size: UInt64(stringSize), limit: fileSize,
                                      "load command \(index) LC_SYMTAB stroff+strsize")
      return .symbolTable(SymbolTableCommand(symbolOffset: symbolOffset, symbolCount: symbolCount,
                                             stringOffset: stringOffset, stringSize: stringSize))
    case LC.dataInCode, LC.segmentSplitInfo, LC.dylibCodeSignDRs, LC.linkerOptimizationHint, LC.dyldExportsTrie,
         LC.dyldChainedFixups:
      // linkedit_data_command ranges we do not decode are still checked, as LLVM checks them.
      guard body.count == 16 else { throw .loadCommand(index, "\(name) cmdsize \(body.count) is not 16") }
      let dataOffset = try reader.read(UInt32.self)
      let dataSize = try reader.read(UInt32.self)
      _ = try ByteReader.checkedRange(offset: UInt64(dataOffset), size: UInt64(dataSize), limit: fileSize,
                                      "load command \(index) \(name) dataoff+datasize")
      return .other(cmd: cmd, size: body.count)
    default:
      return .other(cmd: cmd, size: body.count)
    }
  }

  static func decodeSegment(_ reader: inout ByteReader, is64Bit: Bool, index: Int, header: MachOHeader,
                            fileSize: Int) throws(FormatError) -> MachOSegment {
    let commandName = is64Bit ? "LC_SEGMENT_64" : "LC_SEGMENT"
    let commandSize = reader.count
    let name = try reader.fixedString(at: 8, width: 16)
    try reader.skip(16)
    let vmAddress = try reader.readWord(is64Bit: is64Bit)
    let vmSize = try reader.readWord(is64Bit: is64Bit)
    let fileOffset = try reader.readWord(is64Bit: is64Bit)
    let fileSizeField = try reader.readWord(is64Bit: is64Bit)
    let maxProtection = try reader.read(UInt32.self)
    let initialProtection = try reader.read(UInt32.self)
    let sectionCount = try reader.read(UInt32.self)
    let flags = try reader.read(UInt32.self)
    let structSize: UInt64 = is64Bit ? 72 : 56
    let sectionSize: UInt64 = is64Bit ? 80 : 68
    // nsects is UInt32: the product and sum fit UInt64.
    guard UInt64(commandSize) == structSize + UInt64(sectionCount) * sectionSize else {
      throw .loadCommand(index, "\(commandName) cmdsize \(commandSize) inconsistent with nsects \(sectionCount)")
    }
    guard !vmAddress.addingReportingOverflow(vmSize).overflow else {
      throw .loadCommand(index, "\(commandName) \(name) vmaddr 0x\(hexDigits(vmAddress)) + vmsize "
                         + "0x\(hexDigits(vmSize)) overflows")
    }
    _ = try ByteReader.checkedRange(offset: fileOffset, size: fileSizeField, limit: fileSize,
                                    "load command \(index) \(commandName) \(name) fileoff+filesize")
    var sections: [MachOSection] = []
    sections.reserveCapacity(Int(sectionCount))  // equals (cmdsize - struct) / section size, checked above
    for _ in 0..<Int(sectionCount) {
      let sectionName = try reader.fixedString(at: reader.offset, width: 16)
      let segmentName = try reader.fixedString(at: reader.offset + 16, width: 16)
      try reader.skip(32)
      let address = try reader.readWord(is64Bit: is64Bit)
      let size = try reader.readWord(is64Bit: is64Bit)
      let offset = try reader.read(UInt32.self)
      let alignment = try reader.read(UInt32.self)
      let relocationOffset = try reader.read(UInt32.self)
      let relocationCount = try reader.read(UInt32.self)
      let sectionFlags = try reader.read(UInt32.self)
      try reader.skip(is64Bit ? 12 : 8)  // reserved1..3 / reserved1..2
      let type = sectionFlags & 0xFF
      let zeroFill = type == 0x1 || type == 0xC || type == 0x12  // S_ZEROFILL, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL
      // LLVM skips the file check for dSYM companions and stubs, whose sections keep sizes but not bytes.
      if !zeroFill && header.fileType != 10 && header.fileType != 9 && offset != 0 {
        _ = try ByteReader.checkedRange(offset: UInt64(offset), size: size, limit: fileSize,
                                        "load command \(index) section \(segmentName),\(sectionName) offset+size")
      }
      sections.append(MachOSection(name: sectionName, segmentName: segmentName, address: address, size: size,
                                   fileOffset: offset, alignment: alignment, relocationOffset: relocationOffset,
                                   relocationCount: relocationCount, flags: sectionFlags))
    }
    return MachOSegment(name: name, vmAddress: vmAddress, vmSize: vmSize, fileOffset: fileOffset,
                        fileSize: fileSizeField, maxProtection: maxProtection, initialProtection: initialProtection,
                        flags: flags, sections: sections, is64Bit: is64Bit)
  }

  /// An `lc_str`: its offset must lie past the struct and inside the command, and the string must end
  /// with a NUL inside the command.
  static func commandString(_ body: ByteReader, offset: UInt32, structSize: Int, index: Int, name: String,
                            field: String) throws(FormatError) -> String {
    guard Int(offset) >= structSize else {
      throw .loadCommand(index, "\(name) \(field).offset \(offset) lies inside the command's struct (\(structSize))")
    }
    guard Int(offset) < body.count else {
      throw .loadCommand(index, "\(name) \(field).offset \(offset) extends past the end of the command "
                         + "(cmdsize \(body.count))")
    }
    do {
      return try body.cString(at: Int(offset))
    } catch {
      throw .loadCommand(index, "\(name) \(field) extends past the end of the command (no NUL)")
    }
  }
}

/// Commands LLVM allows at most once in a file.
struct SingletonCommands {
  // At most seven names: a list, not a Set (no Hashable lookups at run time for a few files).
  private var seen: [String] = []

  mutating func note(_ command: LoadCommand, index: Int) throws(FormatError) {
    let name: String
    switch command {
    case .uuid, .main, .codeSignature, .functionStarts, .symbolTable, .encryptionInfo: name = command.name
    case .dylib(let dylib) where dylib.kind == .id: name = command.name
    case .versionMin: name = "LC_VERSION_MIN_*"
    default: return
    }
    guard !seen.contains(name) else { throw .loadCommand(index, "more than one \(name) command") }
    seen.append(name)
  }
}
