// The streams of a minidump, each decoded from its bytes by the decoder (bounds, counts and the copy
// budget checked there).
extension MinidumpDecoder {
  mutating func systemInfo(_ reader: ByteReader) throws(FormatError) -> MinidumpFile.SystemInfo {
    guard reader.count >= 56 else { throw .minidump("\(reader.count) bytes, MINIDUMP_SYSTEM_INFO needs 56") }
    let csdRVA = reader.field(UInt32.self, at: 24)
    return MinidumpFile.SystemInfo(
      processorArchitecture: reader.field(UInt16.self, at: 0), processorLevel: reader.field(UInt16.self, at: 2),
      processorRevision: reader.field(UInt16.self, at: 4), processorCount: reader.field(UInt8.self, at: 6),
      productType: reader.field(UInt8.self, at: 7), majorVersion: reader.field(UInt32.self, at: 8),
      minorVersion: reader.field(UInt32.self, at: 12), buildNumber: reader.field(UInt32.self, at: 16),
      platformID: reader.field(UInt32.self, at: 20),
      csdVersion: csdRVA == 0 ? nil : try string(at: UInt64(csdRVA), "CSDVersion"),
      suiteMask: reader.field(UInt16.self, at: 28), cpuInformation: try reader.bytes(at: 32, length: 24))
  }

  mutating func miscInfo(_ reader: ByteReader) throws(FormatError) -> MinidumpFile.MiscInfo {
    guard reader.count >= 24 else { throw .minidump("\(reader.count) bytes, MINIDUMP_MISC_INFO needs 24") }
    let declared = reader.field(UInt32.self, at: 0)
    let size = min(Int(declared), reader.count)  // UInt32 -> Int is exact on 64-bit
    let flags = reader.field(UInt32.self, at: 4)
    var info = MinidumpFile.MiscInfo(size: declared, flags: flags)
    // Each field is read only when `size` (<= reader.count) reaches past it.
    if flags & 1 != 0 { info.processID = reader.field(UInt32.self, at: 8) }
    if flags & 2 != 0 {
      info.processCreateTime = reader.field(UInt32.self, at: 12)
      info.processUserTime = reader.field(UInt32.self, at: 16)
      info.processKernelTime = reader.field(UInt32.self, at: 20)
    }
    if size >= 44, flags & 4 != 0 {
      info.processorMHz = (reader.field(UInt32.self, at: 24), reader.field(UInt32.self, at: 28), reader.field(UInt32.self, at: 32))
    }
    // The time zone and the build strings are read whenever the size has room for them: Crashpad fills
    // them without setting their flags (rust-minidump reads them the same way).
    if size >= 232 {
      let standard = Self.utf16(try reader.slice(at: 64, length: 64), count: 32)
      let daylight = Self.utf16(try reader.slice(at: 148, length: 64), count: 32)
      info.timeZone = (standard, daylight, Int32(bitPattern: reader.field(UInt32.self, at: 60)))
    }
    if size >= 832 {
      info.buildString = Self.utf16(try reader.slice(at: 232, length: 520), count: 260)
      info.debugBuildString = Self.utf16(try reader.slice(at: 752, length: 80), count: 40)
    }
    if size >= 1364, flags & 0x200 != 0 { info.processCookie = reader.field(UInt32.self, at: 1360) }
    return info
  }

  /// A context at `location`, or `nil` with the problem named (`what` says whose).
  mutating func context(_ location: MinidumpFile.Location, _ what: String) -> MinidumpContext? {
    do {
      let bytes = try bytes(location, "\(what) context")
      return try MinidumpContext.decode(bytes, architecture: architecture, "\(what) context")
    } catch {
      note(error)
      return nil
    }
  }

  mutating func threads(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.Thread] {
    try list(reader, entrySize: 48, label) { d, index, entry throws(FormatError) in
      let tid = entry.field(UInt32.self, at: 0)
      let stack = MinidumpFile.MemoryDescriptor(
        startAddress: entry.field(UInt64.self, at: 24),
        location: MinidumpFile.Location(dataSize: entry.field(UInt32.self, at: 32), rva: entry.field(UInt32.self, at: 36)))
      let contextLocation = MinidumpFile.Location(dataSize: entry.field(UInt32.self, at: 40), rva: entry.field(UInt32.self, at: 44))
      let what = "\(label): thread \(index) (tid \(tid))"
      if stack.location.dataSize > 0 {
        d.memory.append((stack.startAddress, UInt64(stack.location.dataSize), UInt64(stack.location.rva), "\(what) stack"))
      }
      return MinidumpFile.Thread(tid: tid, suspendCount: entry.field(UInt32.self, at: 4),
                                 priorityClass: entry.field(UInt32.self, at: 8), priority: entry.field(UInt32.self, at: 12),
                                 teb: entry.field(UInt64.self, at: 16), stack: stack, contextLocation: contextLocation,
                                 context: d.context(contextLocation, what), name: nil)
    }
  }

  mutating func threadNames(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.ThreadName] {
    try list(reader, entrySize: 12, label) { d, index, entry throws(FormatError) in
      let tid = entry.field(UInt32.self, at: 0)
      do throws(FormatError) {
        return MinidumpFile.ThreadName(tid: tid, name: try d.string(at: entry.field(UInt64.self, at: 4), "\(label): name \(index) (tid \(tid))"))
      } catch {
        d.note(error)
        return nil
      }
    }
  }

  mutating func modules(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.Module] {
    try list(reader, entrySize: 108, label) { d, index, entry throws(FormatError) in
      let what = "\(label): module \(index)"
      var name = ""
      do throws(FormatError) { name = try d.string(at: UInt64(entry.field(UInt32.self, at: 20)), "\(what) name") } catch { d.note(error) }
      func word(_ at: Int) -> UInt32 { entry.field(UInt32.self, at: at) }
      let version = MinidumpFile.VersionInfo(signature: word(24), structVersion: word(28), fileVersion: (word(32), word(36)),
                                             productVersion: (word(40), word(44)), fileFlagsMask: word(48),
                                             fileFlags: word(52), fileOS: word(56), fileType: word(60),
                                             fileSubtype: word(64), fileDate: (word(68), word(72)))
      let codeViewLocation = MinidumpFile.Location(dataSize: word(76), rva: word(80))
      var codeView: MinidumpFile.CodeView?
      if codeViewLocation.dataSize > 0 {
        do throws(FormatError) { codeView = try d.codeView(codeViewLocation, "\(what) (\(name)) CodeView record") } catch { d.note(error) }
      }
      return MinidumpFile.Module(baseAddress: entry.field(UInt64.self, at: 0), size: word(8), checksum: word(12),
                                 timeDateStamp: word(16), name: name, versionInfo: version, codeView: codeView,
                                 miscRecord: MinidumpFile.Location(dataSize: word(84), rva: word(88)))
    }
  }

  mutating func codeView(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> MinidumpFile.CodeView {
    guard location.dataSize <= MinidumpFile.codeViewLimit else {
      throw .limitExceeded("\(what) size", value: UInt64(location.dataSize), limit: UInt64(MinidumpFile.codeViewLimit))
    }
    let record = try bytes(location, what)
    guard record.count >= 4 else { throw .minidump("\(what): \(record.count) bytes, no room for a signature") }
    try spend(record.count, what)
    let signature = record.field(UInt32.self, at: 0)
    func name(from start: Int) throws(FormatError) -> String { try record.fixedString(at: start, width: record.count - start) }
    switch signature {
    case 0x4270_454C:  // 'BpEL'
      return .elf(BuildID(try record.bytes(at: 4, length: record.count - 4)))
    case 0x5344_5352:  // 'RSDS'
      guard record.count >= 24 else { throw .minidump("\(what): \(record.count) bytes, a PDB 7.0 record needs 24") }
      return .pdb70(guid: try record.bytes(at: 4, length: 16), age: record.field(UInt32.self, at: 20), fileName: try name(from: 24))
    case 0x3031_424E:  // 'NB10'
      guard record.count >= 16 else { throw .minidump("\(what): \(record.count) bytes, a PDB 2.0 record needs 16") }
      return .pdb20(signature: record.field(UInt32.self, at: 8), age: record.field(UInt32.self, at: 12), fileName: try name(from: 16))
    default:
      return .other(signature: signature, bytes: try record.bytes(at: 4, length: record.count - 4))
    }
  }

  mutating func unloadedModules(_ reader: ByteReader, _ label: String) throws(FormatError) -> [MinidumpFile.UnloadedModule] {
    let (start, entrySize, count) = try Self.extendedList(reader, minimumEntry: 24, countIs64Bit: false, label)
    var modules: [MinidumpFile.UnloadedModule] = []
    modules.reserveCapacity(count)
    for index in 0..<count {
      let entry = try reader.slice(at: start + index * entrySize, length: entrySize)
      var name = ""
      do { name = try string(at: UInt64(entry.field(UInt32.self, at: 20)), "\(label): module \(index) name") } catch {
        note(error)
      }
      modules.append(MinidumpFile.UnloadedModule(baseAddress: entry.field(UInt64.self, at: 0), size: entry.field(UInt32.self, at: 8),
                                                 checksum: entry.field(UInt32.self, at: 12),
                                                 timeDateStamp: entry.field(UInt32.self, at: 16), name: name))
    }
    return modules
  }

  mutating func memoryInfo(_ reader: ByteReader) throws(FormatError) -> [MinidumpFile.MemoryInfo] {
    let (start, entrySize, count) = try Self.extendedList(reader, minimumEntry: 48, countIs64Bit: true, "MINIDUMP_MEMORY_INFO_LIST")
    var regions: [MinidumpFile.MemoryInfo] = []
    regions.reserveCapacity(count)
    for index in 0..<count {
      let entry = try reader.slice(at: start + index * entrySize, length: entrySize)
      regions.append(MinidumpFile.MemoryInfo(baseAddress: entry.field(UInt64.self, at: 0), allocationBase: entry.field(UInt64.self, at: 8),
                                             allocationProtection: entry.field(UInt32.self, at: 16),
                                             regionSize: entry.field(UInt64.self, at: 24), state: entry.field(UInt32.self, at: 32),
                                             protection: entry.field(UInt32.self, at: 36), type: entry.field(UInt32.self, at: 40)))
    }
    return regions
  }

  /// A list with a header of its own sizes (`SizeOfHeader`, `SizeOfEntry`, `NumberOfEntries`): where
  /// the entries start, their size and count, checked against `reader`.
  static func extendedList(_ reader: ByteReader, minimumEntry: Int, countIs64Bit: Bool,
                           _ what: String) throws(FormatError) -> (start: Int, entrySize: Int, count: Int) {
    let headerSize = Int(try reader.peek(UInt32.self, at: 0)), entrySize = Int(try reader.peek(UInt32.self, at: 4))
    let count = countIs64Bit ? try reader.peek(UInt64.self, at: 8) : UInt64(try reader.peek(UInt32.self, at: 8))
    let minimumHeader = countIs64Bit ? 16 : 12
    guard headerSize >= minimumHeader, headerSize <= reader.count else {
      throw .minidump("\(what): header size \(headerSize) is not between \(minimumHeader) and the stream's \(reader.count) bytes")
    }
    guard entrySize >= minimumEntry else { throw .minidump("\(what): entry size \(entrySize) is less than \(minimumEntry)") }
    guard count <= UInt64((reader.count - headerSize) / entrySize) else {
      throw .minidump("\(what): \(count) entries of \(entrySize) bytes do not fit in its \(reader.count) bytes")
    }
    return (headerSize, entrySize, Int(count))  // count <= reader.count: exact
  }

  mutating func exception(_ reader: ByteReader, _ label: String) throws(FormatError) -> MinidumpFile.Exception {
    guard reader.count >= 168 else { throw .minidump("\(label): \(reader.count) bytes, MINIDUMP_EXCEPTION_STREAM needs 168") }
    let tid = reader.field(UInt32.self, at: 0)
    var count = Int(reader.field(UInt32.self, at: 32))
    if count > 15 {
      note(.minidump("\(label): NumberParameters \(count) is more than 15; the first 15 read"))
      count = 15
    }
    let contextLocation = MinidumpFile.Location(dataSize: reader.field(UInt32.self, at: 160), rva: reader.field(UInt32.self, at: 164))
    return MinidumpFile.Exception(tid: tid, code: reader.field(UInt32.self, at: 8), flags: reader.field(UInt32.self, at: 12),
                                  recordAddress: reader.field(UInt64.self, at: 16), address: reader.field(UInt64.self, at: 24),
                                  parameters: (0..<count).map { reader.field(UInt64.self, at: 40 + 8 * $0) },
                                  contextLocation: contextLocation,
                                  context: contextLocation.dataSize == 0 ? nil : context(contextLocation, "\(label): thread \(tid)"))
  }

  /// True when the dumped process had 64-bit pointers (from `SystemInfo`; 64-bit without one).
  var is64Bit: Bool { MinidumpFile.is64Bit(architecture: architecture) }

  mutating func dsoDebug(_ reader: ByteReader, _ label: String) throws(FormatError) -> MinidumpFile.DSODebug {
    let wide = is64Bit
    let headerSize = wide ? 40 : 24, entrySize = wide ? 24 : 12
    guard reader.count >= headerSize else {
      throw .minidump("\(label): \(reader.count) bytes, MDRawDebug\(wide ? 64 : 32) needs \(headerSize)")
    }
    let mapRVA = reader.field(UInt32.self, at: 4), count = reader.field(UInt32.self, at: 8)
    var debug = MinidumpFile.DSODebug(version: reader.field(UInt32.self, at: 0),
                                      breakpointAddress: reader.field(is64Bit: wide, at: wide ? 16 : 12),
                                      linkerBase: reader.field(is64Bit: wide, at: wide ? 24 : 16),
                                      dynamicAddress: reader.field(is64Bit: wide, at: wide ? 32 : 20), linkMaps: [],
                                      dynamicSection: [])
    try spend(reader.count - headerSize, label)
    debug.dynamicSection = try reader.bytes(at: headerSize, length: reader.count - headerSize)
    guard count > 0 else { return debug }
    // count is a UInt32 and entrySize at most 24: the product fits.
    let table = try bytes(at: UInt64(mapRVA), size: UInt64(count) * UInt64(entrySize), "\(label): \(count) link_map entries")
    debug.linkMaps.reserveCapacity(Int(count))
    for index in 0..<Int(count) {
      let entry = try table.slice(at: index * entrySize, length: entrySize)
      var name = ""
      do { name = try string(at: UInt64(entry.field(UInt32.self, at: wide ? 8 : 4)), "\(label): link_map \(index) name") } catch {
        note(error)
      }
      debug.linkMaps.append(MinidumpFile.DSODebug.LinkMap(loadBias: entry.field(is64Bit: wide, at: 0), name: name,
                                                          dynamicAddress: entry.field(is64Bit: wide, at: wide ? 16 : 8)))
    }
    return debug
  }

  mutating func crashpadInfo(_ reader: ByteReader, _ label: String) throws(FormatError) -> MinidumpFile.CrashpadInfo {
    guard reader.count >= 52 else { throw .minidump("\(label): \(reader.count) bytes, MinidumpCrashpadInfo needs 52") }
    let simple = MinidumpFile.Location(dataSize: reader.field(UInt32.self, at: 36), rva: reader.field(UInt32.self, at: 40))
    let moduleList = MinidumpFile.Location(dataSize: reader.field(UInt32.self, at: 44), rva: reader.field(UInt32.self, at: 48))
    var info = MinidumpFile.CrashpadInfo(version: reader.field(UInt32.self, at: 0), reportID: try reader.bytes(at: 4, length: 16),
                                         clientID: try reader.bytes(at: 20, length: 16), simpleAnnotations: [], moduleInfos: [],
                                         addressMask: reader.count >= 64 ? reader.field(UInt64.self, at: 56) : nil)
    info.simpleAnnotations = try dictionary(simple, "\(label): simple_annotations")
    info.moduleInfos = try list(at: moduleList, entrySize: 12, "\(label): module_list") { d, index, link throws(FormatError) in
      let what = "\(label): module_list entry \(index)"
      do throws(FormatError) {
        let body = try d.bytes(MinidumpFile.Location(dataSize: link.field(UInt32.self, at: 4), rva: link.field(UInt32.self, at: 8)), what)
        // Crashpad before 2017 wrote the record without annotation_objects (20 bytes); its header reads
        // the fields the record's size has room for.
        guard body.count >= 20 else { throw FormatError.minidump("\(what): \(body.count) bytes, MinidumpModuleCrashpadInfo needs 20") }
        func location(_ at: Int) -> MinidumpFile.Location {
          MinidumpFile.Location(dataSize: body.field(UInt32.self, at: at), rva: body.field(UInt32.self, at: at + 4))
        }
        return MinidumpFile.CrashpadInfo.ModuleInfo(
          moduleIndex: link.field(UInt32.self, at: 0), version: body.field(UInt32.self, at: 0),
          listAnnotations: try d.stringList(location(4), "\(what) list_annotations"),
          simpleAnnotations: try d.dictionary(location(12), "\(what) simple_annotations"),
          annotationObjects: body.count >= 28 ? try d.annotations(location(20), "\(what) annotation_objects") : [])
      } catch {
        d.note(error)
        return nil
      }
    }
    return info
  }

  /// A `MinidumpSimpleStringDictionary`: a count and (key, value) string RVAs.
  mutating func dictionary(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> [(key: String, value: String)] {
    try list(at: location, entrySize: 8, what) { d, index, entry throws(FormatError) in
      (key: try d.utf8String(at: entry.field(UInt32.self, at: 0), "\(what) key \(index)"),
       value: try d.utf8String(at: entry.field(UInt32.self, at: 4), "\(what) value \(index)"))
    }
  }

  /// A `MinidumpRVAList` of UTF-8 strings.
  mutating func stringList(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> [String] {
    try list(at: location, entrySize: 4, what) { d, index, entry throws(FormatError) in
      try d.utf8String(at: entry.field(UInt32.self, at: 0), "\(what) \(index)")
    }
  }

  /// A `MinidumpAnnotationList`: a count and (name, type, reserved, value) entries.
  mutating func annotations(_ location: MinidumpFile.Location, _ what: String) throws(FormatError) -> [MinidumpFile.CrashpadInfo.Annotation] {
    try list(at: location, entrySize: 12, what) { d, index, entry throws(FormatError) in
      MinidumpFile.CrashpadInfo.Annotation(
        name: try d.utf8String(at: entry.field(UInt32.self, at: 0), "\(what) \(index) name"), type: entry.field(UInt16.self, at: 4),
        value: try d.byteArray(at: entry.field(UInt32.self, at: 8), "\(what) \(index) value"))
    }
  }
}
