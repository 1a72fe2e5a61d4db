import ImageReaders

/// ELF's part of `imagelog file --format detailed|json`: what `SliceSummary` does not carry.
extension ELFFile: FileDetailRendering {
  func detailedLines(slice index: Int) -> [String] {
    var lines: [String] = []
    func add(_ label: String, _ value: String) { lines.append(detailLine(label, value)) }
    add("format", "ELF\(header.is64Bit ? 64 : 32) \(header.endian == .little ? "little" : "big")-endian, e_machine \(header.machine)")
    add("entry", "0x" + hexDigits(header.entry))
    if let interpreter { add("interpreter", interpreter) }
    if let rpath { add("rpath", rpath) }
    if let runpath { add("runpath", runpath) }
    add("debug info", debugInfoText)
    lines.append("segments:")
    lines.append("  type         offset     vaddr              filesz     memsz      flags")
    for segment in programHeaders {
      lines.append("  " + [pad(Self.segmentTypeName(segment.type), 12), pad("0x" + hexDigits(segment.fileOffset), 10),
                           pad("0x" + hexDigits(segment.vmAddress), 18), pad("0x" + hexDigits(segment.fileSize), 10),
                           pad("0x" + hexDigits(segment.vmSize), 10), Self.flagText(segment.flags)].joined(separator: " "))
    }
    add("sections", "\(sections.count)")
    return lines
  }

  func jsonMembers(slice index: Int) -> [(String, JSONValue)] {
    let segments: [JSONValue] = programHeaders.map { segment in
      let members: [(String, JSONValue)] = [
        ("type", .string(Self.segmentTypeName(segment.type))),
        ("offset", .string(HexText.address(segment.fileOffset))),
        ("vmAddress", .string(HexText.address(segment.vmAddress))),
        ("fileSize", .number(segment.fileSize)),
        ("vmSize", .number(segment.vmSize)),
        ("flags", .string(Self.flagText(segment.flags))),
      ]
      return .object(members)
    }
    let crc: JSONValue = debugInfo.debugLinkCRC.map { .string("0x" + hexDigits(UInt64($0), width: 8)) } ?? .null
    let members: [(String, JSONValue)] = [
      ("class", .number(header.is64Bit ? 64 : 32)),
      ("endian", .string(header.endian == .little ? "little" : "big")),
      ("machine", .number(UInt64(header.machine))),
      ("entry", .string(HexText.address(header.entry))),
      ("interpreter", interpreter.map { .string($0) } ?? .null),
      ("soname", soname.map { .string($0) } ?? .null),
      ("needed", .array(needed.map { .string($0) })),
      ("rpath", rpath.map { .string($0) } ?? .null),
      ("runpath", runpath.map { .string($0) } ?? .null),
      ("debugInfo", .bool(debugInfo.hasDebugInfo)),
      ("debugLink", debugInfo.debugLinkFileName.map { .string($0) } ?? .null),
      ("debugLinkCRC", crc),
      ("gnuDebugData", .bool(debugInfo.hasGNUDebugData)),
      ("segments", .array(segments)),
      ("sectionCount", .number(UInt64(sections.count))),
    ]
    return [("elf", .object(members))]
  }

  private var debugInfoText: String {
    var parts: [String] = []
    if debugInfo.hasDebugInfo { parts.append(".debug_info") }
    if let name = debugInfo.debugLinkFileName {
      parts.append(".gnu_debuglink \(name) (crc 0x\(hexDigits(UInt64(debugInfo.debugLinkCRC ?? 0), width: 8)))")
    }
    if debugInfo.hasGNUDebugData { parts.append(".gnu_debugdata") }
    return parts.isEmpty ? "none" : parts.joined(separator: ", ")
  }

  private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
  }

  /// readelf's names for the segment types crash tooling meets.
  static func segmentTypeName(_ type: UInt32) -> String {
    switch type {
    case 0: "NULL"
    case 1: "LOAD"
    case 2: "DYNAMIC"
    case 3: "INTERP"
    case 4: "NOTE"
    case 5: "SHLIB"
    case 6: "PHDR"
    case 7: "TLS"
    case 0x6474_E550: "GNU_EH_FRAME"
    case 0x6474_E551: "GNU_STACK"
    case 0x6474_E552: "GNU_RELRO"
    case 0x6474_E553: "GNU_PROPERTY"
    default: "0x" + hexDigits(UInt64(type))
    }
  }

  static func flagText(_ flags: UInt32) -> String {
    (flags & 4 != 0 ? "R" : "-") + (flags & 2 != 0 ? "W" : "-") + (flags & 1 != 0 ? "X" : "-")
  }
}
