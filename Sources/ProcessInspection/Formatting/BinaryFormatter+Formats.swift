import ImageReaders

// Mach-O's and universal files' part of `BinaryFormatter`'s views, wired to the rendering functions in
// BinaryFormatter+MachO.swift (`renderMachODetails`, `renderEntitlements`, `renderUniversalFailures`).
// ELF's are in BinaryFormatter+ELF.swift. `index` is always an index in `BinaryFile.slices`.

extension MachOFile: FileDetailRendering, EntitlementsRendering {
  func detailedLines(slice index: Int) -> [String] { renderMachODetails(self) }

  func writeJSONMembers(slice index: Int, into json: inout JSONWriter) {
    json.key("machO")
    json.value(machOJSON(self))
  }

  func entitlements(slice index: Int, json: Bool) throws -> String? { try renderEntitlements(self, json: json) }
}

extension FatFile: FileDetailRendering, EntitlementsRendering {
  /// The members that decoded, in header order: `BinaryFile.slices` lists exactly these.
  var decodedMembers: [(memberIndex: Int, member: Slice, file: MachOFile)] {
    members.enumerated().compactMap { index, member in
      guard let file = member.decoded else { return nil }
      return (index, member, file)
    }
  }

  func detailedLines(slice index: Int) -> [String] {
    let decoded = decodedMembers
    guard decoded.indices.contains(index) else { return [] }
    let (memberIndex, member, file) = decoded[index]
    return renderMachODetails(file, universal: (member, memberIndex, members.count, is64Bit))
  }

  func writeJSONMembers(slice index: Int, into json: inout JSONWriter) {
    let decoded = decodedMembers
    guard decoded.indices.contains(index) else { return }
    let (memberIndex, member, file) = decoded[index]
    json.key("universal")
    json.value(.object([
      ("magic", .string(is64Bit ? "FAT_MAGIC_64" : "FAT_MAGIC")),
      ("slice", .number(String(memberIndex))),
      ("sliceCount", .number(String(members.count))),
      ("offset", .string(HexText.address(member.fileOffset))),
      ("size", .number(String(member.size))),
      ("alignment", .number(String(member.alignment))),
    ]))
    json.key("machO")
    json.value(machOJSON(file))
  }

  func entitlements(slice index: Int, json: Bool) throws -> String? {
    let decoded = decodedMembers
    guard decoded.indices.contains(index) else { return nil }
    return try renderEntitlements(decoded[index].file, json: json)
  }
}

/// The Mach-O facts `SliceSummary` does not carry, for the JSON view.
func machOJSON(_ file: MachOFile) -> JSONValue {
  let segments: [JSONValue] = file.segments.map { segment in
    .object([
      ("name", .string(segment.name)),
      ("vmAddress", .string(HexText.address(segment.vmAddress))),
      ("vmSize", .number(String(segment.vmSize))),
      ("fileOffset", .string(HexText.address(segment.fileOffset))),
      ("fileSize", .number(String(segment.fileSize))),
    ])
  }
  let dylibs: [JSONValue] = file.dependencies.map { dylib in
    .object([("kind", .string(dylib.kind.rawValue)), ("name", .string(dylib.name)),
             ("currentVersion", .string("\(dylib.currentVersion)")),
             ("compatibilityVersion", .string("\(dylib.compatibilityVersion)"))])
  }
  var platform: JSONValue = .null
  if let build = file.buildVersion {
    platform = .object([("name", .string(build.platformName)), ("minimumOS", .string(build.minimumOS.shortDescription)),
                        ("sdk", .string(build.sdk.shortDescription))])
  } else if let minimum = file.versionMin {
    platform = .object([("name", .string(minimum.platformName)), ("minimumOS", .string(minimum.version.shortDescription)),
                        ("sdk", .string(minimum.sdk.shortDescription))])
  }
  var signature: JSONValue = .null
  if case .success(let found)? = file.codeSignature {
    let directory = found.codeDirectory
    signature = .object([
      ("identifier", directory.map { .string($0.identifier) } ?? .null),
      ("teamID", directory?.teamID.map { .string($0) } ?? .null),
      ("hashType", directory.map { .string($0.hashTypeName) } ?? .null),
      ("flags", .array((directory?.flagNames ?? []).map { .string($0) })),
      ("entitlements", .bool(found.entitlements != nil || found.derEntitlements != nil)),
    ])
  }
  let members: [(String, JSONValue)] = [
    ("fileType", .string(file.header.fileTypeName)),
    ("flags", .array(file.header.flagNames.map { .string($0) })),
    ("platform", platform),
    ("dylibs", .array(dylibs)),
    ("rpaths", .array(file.rpaths.map { .string($0) })),
    ("segments", .array(segments)),
    ("codeSignature", signature),
  ]
  return .object(members)
}
