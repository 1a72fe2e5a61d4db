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

  func writeJSONMembers(slice index: Int, into json: inout JSONWriter) {
    json.key("elf")
    writeJSON(into: &json)
  }

  /// The `elf` object of `--format json`, written straight into bytes (thousands of files per run).
  func writeJSON(into json: inout JSONWriter) {
    json.beginObject()
    json.member("class", number: header.is64Bit ? 64 : 32)
    json.member("endian", string: header.endian == .little ? "little" : "big")
    json.member("machine", number: UInt64(header.machine))
    json.member("entry", address: header.entry)
    json.member("interpreter", string: interpreter)
    json.member("soname", string: soname)
    json.member("needed", strings: needed)
    json.member("rpath", string: rpath)
    json.member("runpath", string: runpath)
    json.member("debugInfo", bool: debugInfo.hasDebugInfo)
    json.member("debugLink", string: debugInfo.debugLinkFileName)
    json.key("debugLinkCRC")
    if let crc = debugInfo.debugLinkCRC { json.hex32(crc) } else { json.null() }
    json.member("gnuDebugData", bool: debugInfo.hasGNUDebugData)
    json.key("segments")
    json.beginArray()
    for segment in programHeaders {
      // Every segment has the same members: their keys and punctuation are written as fragments.
      json.beginObject()
      json.key("type")
      if let name = Self.segmentTypeLiteral(segment.type) {
        json.literal(name)  // no String, nothing to scan for escapes
      } else {
        json.string(Self.segmentTypeName(segment.type))
      }
      json.fragment(",\"offset\":\"0x")
      json.hexDigits(segment.fileOffset)
      json.fragment("\",\"vmAddress\":\"0x")
      json.hexDigits(segment.vmAddress)
      json.fragment("\",\"fileSize\":")
      json.decimalDigits(segment.fileSize)
      json.fragment(",\"vmSize\":")
      json.decimalDigits(segment.vmSize)
      json.fragment(",\"flags\":")
      json.literal(Self.flagTexts[Int(segment.flags & 7)])
      json.endObject()
    }
    json.endArray()
    json.key("sectionCount")
    json.number(UInt64(sections.count))
    json.endObject()
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

  /// `segmentTypeName` of the named types, as literals; nil for the others.
  static func segmentTypeLiteral(_ type: UInt32) -> StaticString? {
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
    default: nil
    }
  }

  /// readelf's names for the segment types crash tooling meets.
  static func segmentTypeName(_ type: UInt32) -> String {
    segmentTypeLiteral(type).map { $0.description } ?? "0x" + hexDigits(UInt64(type))
  }

  /// `flagText` of the flags 0...7 (`PF_X` 1, `PF_W` 2, `PF_R` 4), for writers that take literals.
  static let flagTexts: [StaticString] = ["---", "--X", "-W-", "-WX", "R--", "R-X", "RW-", "RWX"]

  static func flagText(_ flags: UInt32) -> String {
    (flags & 4 != 0 ? "R" : "-") + (flags & 2 != 0 ? "W" : "-") + (flags & 1 != 0 ? "X" : "-")
  }
}
