import ImageReaders

// Mach-O's and universal files' part of `BinaryFormatter`: the detailed view's extra lines and
// entitlements.

/// The detailed view's Mach-O lines (after the `SliceSummary` lines every format has), unindented.
func renderMachODetails(_ file: MachOFile, universal: (member: FatFile.Slice, index: Int, count: Int, is64Bit: Bool)? = nil)
  -> [String]
{
  var lines: [String] = []
  func add(_ label: String, _ value: String) {
    let head = label.isEmpty ? "" : label + ":"
    lines.append(head + String(repeating: " ", count: max(1, 15 - head.count)) + value)
  }
  let header = file.header
  add("format", "Mach-O \(header.is64Bit ? 64 : 32)-bit \(header.endian == .little ? "little" : "big")-endian, "
      + "cputype 0x\(hexDigits(UInt64(header.cpuType), width: 8)) subtype 0x\(hexDigits(UInt64(header.cpuSubtype), width: 8))")
  if let universal {
    add("universal", "\(universal.is64Bit ? "FAT_MAGIC_64" : "FAT_MAGIC") slice \(universal.index + 1) of \(universal.count), "
        + "offset 0x\(hexDigits(universal.member.fileOffset)) size 0x\(hexDigits(universal.member.size)) "
        + "align 2^\(universal.member.alignment)")
  }
  add("flags", header.flagNames.isEmpty ? "none" : header.flagNames.joined(separator: " "))
  if let build = file.buildVersion {
    let tools = build.tools.map { "\(machOToolName($0.tool)) \($0.version.shortDescription)" }.joined(separator: ", ")
    add("platform", "\(build.platformName) \(build.minimumOS.shortDescription) (sdk \(build.sdk.rawValue == 0 ? "n/a" : build.sdk.shortDescription))"
        + (tools.isEmpty ? "" : ", built by \(tools)"))
  } else if let minimum = file.versionMin {
    add("platform", "\(minimum.platformName) \(minimum.version.shortDescription) (sdk \(minimum.sdk.rawValue == 0 ? "n/a" : minimum.sdk.shortDescription)), "
        + machOLoadCommandName(minimum.command))
  }
  if let entry = file.entryPoint {
    add("entry", "LC_MAIN entryoff 0x\(hexDigits(entry.entryOffset)), stack \(entry.stackSize == 0 ? "default" : "0x" + hexDigits(entry.stackSize))")
  }
  if let id = file.dylibID {
    add("versions", "current \(id.currentVersion), compatibility \(id.compatibilityVersion)")
  }
  if let info = file.encryptionInfo {
    add("encryption", "cryptoff 0x\(hexDigits(UInt64(info.cryptOffset))) cryptsize 0x\(hexDigits(UInt64(info.cryptSize))) "
        + "cryptid \(info.cryptID) (\(info.cryptID == 0 ? "not encrypted" : "encrypted"))")
  }
  let dependencies = file.dependencies
  if !dependencies.isEmpty {
    lines.append("dylibs:")
    for dylib in dependencies {
      lines.append("  " + pad(dylib.kind.rawValue, 9) + dylib.name + " (current \(dylib.currentVersion), "
                   + "compatibility \(dylib.compatibilityVersion))")
    }
  }
  for (index, path) in file.rpaths.enumerated() { add(index == 0 ? "rpath" : "", path) }
  if let symbols = file.symbolTable {
    add("symbols", "\(symbols.symbolCount) at 0x\(hexDigits(UInt64(symbols.symbolOffset))), strings "
        + "0x\(hexDigits(UInt64(symbols.stringOffset)))+0x\(hexDigits(UInt64(symbols.stringSize)))")
  }
  if let starts = file.functionStarts {
    add("func starts", "0x\(hexDigits(UInt64(starts.dataOffset)))+0x\(hexDigits(UInt64(starts.dataSize)))")
  }
  lines.append("segments:")
  lines.append("  " + [pad("name", 16), pad("vmaddr", 18), pad("vmsize", 12), pad("fileoff", 10), pad("filesize", 10),
                       "prot"].joined(separator: " "))
  for segment in file.segments {
    lines.append("  " + [pad(segment.name.isEmpty ? "(unnamed)" : segment.name, 16),
                         pad("0x" + hexDigits(segment.vmAddress), 18), pad("0x" + hexDigits(segment.vmSize), 12),
                         pad("0x" + hexDigits(segment.fileOffset), 10), pad("0x" + hexDigits(segment.fileSize), 10),
                         protectionText(segment.initialProtection) + "/" + protectionText(segment.maxProtection)]
      .joined(separator: " ") + (segment.sections.isEmpty ? "" : "  " + segment.sections.map(\.name).joined(separator: " ")))
  }
  switch file.codeSignature {
  case nil:
    add("signature", "none")
  case .failure(let error)?:
    add("signature", "unreadable: \(error)")
  case .success(let signature)?:
    if let directory = signature.codeDirectory {
      add("signature", "\(directory.identifier)" + (directory.teamID.map { ", team \($0)" } ?? ", no team")
          + (signature.hasCMSSignature ? ", CMS signed" : ", no CMS signature"))
      add("", "CodeDirectory v0x\(hexDigits(UInt64(directory.version))) \(directory.hashTypeName), "
          + "\(directory.codeSlotCount) pages of \(directory.pageSizeLog2 == 0 ? "all" : String(1 << min(directory.pageSizeLog2, 31))) bytes, "
          + "flags \(directory.flagNames.isEmpty ? "none" : directory.flagNames.joined(separator: " "))")
      for alternate in signature.alternateCodeDirectories {
        add("", "alternate CodeDirectory \(alternate.hashTypeName), \(alternate.codeSlotCount) pages")
      }
    } else {
      add("signature", "SuperBlob without a CodeDirectory")
    }
    add("", "blobs " + signature.blobs.map(\.slotName).joined(separator: ", "))
    let forms = [signature.entitlements != nil ? "XML" : nil, signature.derEntitlements != nil ? "DER" : nil].compactMap { $0 }
    if !forms.isEmpty {
      let keys: String
      if case .dictionary(let entries)? = try? signature.decodedEntitlements() { keys = "\(entries.count) keys" } else { keys = "unreadable" }
      add("entitlements", "\(keys) (\(forms.joined(separator: " and ")); see --entitlements)")
    }
  }
  return lines
}

/// `--entitlements` for one Mach-O slice: the XML plist exactly as stored (or the DER blob rendered as an
/// XML plist when only it is present), or JSON when `json`. `nil` when the slice has no entitlements;
/// throws when its signature or entitlements cannot be read.
func renderEntitlements(_ file: MachOFile, json: Bool) throws(FormatError) -> String? {
  guard let result = file.codeSignature else { return nil }
  let signature = try result.get()
  if json { return try signature.decodedEntitlements()?.json() }
  if let xml = signature.entitlements { return xml.hasSuffix("\n") ? String(xml.dropLast()) : xml }
  if let der = signature.derEntitlements { return String(try PropertyList(der: der).xmlDocument.dropLast()) }
  return nil
}

/// One diagnostic per universal slice that could not be read, `imagelog: PATH (arch): problem`, for
/// the CLI to print on standard error (the readable slices are still shown; the exit status is 1).
func renderUniversalFailures(_ file: FatFile, path: String) -> [String] {
  file.failures.map { "imagelog: \(path) (\($0.architecture)): \($0.error)" }
}

private func protectionText(_ protection: UInt32) -> String {
  (protection & 1 != 0 ? "r" : "-") + (protection & 2 != 0 ? "w" : "-") + (protection & 4 != 0 ? "x" : "-")
}

private func pad(_ text: String, _ width: Int) -> String {
  text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}
