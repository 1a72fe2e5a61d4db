public import ImageReaders

/// The crash-tooling views of a binary on disk, exactly as `imagelog file` prints them: the Binary
/// Images line, the `--uuid` line, the detailed view and the JSON object of a slice, entitlements, and
/// the lines for universal slices that could not be read. The in-process counterpart is `ImageFormatter`.
///
/// A slice is named by its index in `BinaryFile.slices` and passed with its `SliceSummary` (for an ELF
/// file, `ELFFile.summary` and index 0, without making the array). Names, paths and strings from the
/// file are escaped with `TextEscaping` in the text views; JSON escapes them as JSON.
public enum BinaryFormatter {
  /// `0xSTART - 0xEND name arch  <uuid> path` (UTF-8, no newline): Apple's Binary Images line for a
  /// slice from its link-time text range (END is the last byte, inclusive; 32 zeros when the slice has
  /// no build-id or UUID). The text `ImageFormatter(style: .crash)` writes for a loaded image.
  public static func crashLine(_ slice: SliceSummary, path: String) -> [UInt8] {
    crashLineBytes(slice, path: path)
  }

  /// `UUID: XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX (arch) path`, as `llvm-dwarfdump --uuid` prints a slice.
  public static func uuidLine(_ buildID: BuildID, architecture: String, path: String) -> String {
    "UUID: \(buildID.uuid) (\(architecture)) \(TextEscaping.escaped(path))"
  }

  /// The detailed view of slice `index` (`summary`), lines ending in newlines: the `SliceSummary` fields
  /// every format has, then the format's own (ELF: entry, interpreter, rpath, debug info, segments;
  /// Mach-O: platform, dylibs, rpaths, segments and sections, code signature...). `sliceCount` > 1 names
  /// the architecture in the heading.
  public static func detailedText(_ binary: BinaryFile, slice index: Int, summary: SliceSummary, sliceCount: Int,
                                  path: String) -> String {
    var lines = commonDetailedLines(summary, path: path, sliceCount: sliceCount)
    lines += (binary.detailRenderer.detailedLines(slice: index)).map { "  " + $0 }
    // Names, paths and strings from the file are data: escaped, so none can forge a line or drive the terminal.
    return lines.map(TextEscaping.escaped).joined(separator: "\n") + "\n"
  }

  /// Writes slice `index`'s JSON object: the `SliceSummary` members every format has (`path`,
  /// `architecture`, `fileType`, `buildID`, `uuid`, `textStart`, `textEnd`, `textSize`, `loadStart`,
  /// `loadEnd`, `installName`, `dependencies`, `fileOffset`), then the format's own (`elf`, or
  /// `machO` and for a universal slice `universal`). Addresses are hex strings, sizes numbers.
  public static func writeJSON(_ binary: BinaryFile, slice index: Int, summary: SliceSummary, path: String,
                               into writer: inout JSONWriter) {
    writer.beginObject()
    writeCommonJSONMembers(summary, path: path, into: &writer)
    binary.detailRenderer.writeJSONMembers(slice: index, into: &writer)
    writer.endObject()
  }

  /// True when the format stores entitlements (Mach-O code signatures).
  package static func storesEntitlements(_ binary: BinaryFile) -> Bool {
    binary.formatRenderer is EntitlementsRendering
  }

  /// Slice `index`'s entitlements as stored (the XML plist, or the DER blob as an XML plist), or as
  /// JSON when `json`; `nil` when it has none or the format stores none. Throws when its signature or
  /// entitlements cannot be read.
  public static func entitlements(_ binary: BinaryFile, slice index: Int, json: Bool) throws -> String? {
    guard let source = binary.formatRenderer as? EntitlementsRendering else { return nil }
    return try source.entitlements(slice: index, json: json)
  }

  /// One diagnostic per universal slice that could not be read, `imagelog: PATH (arch): problem`.
  public static func universalFailures(_ file: FatFile, path: String) -> [String] {
    renderUniversalFailures(file, path: path)
  }
  /// `0xSTART - 0xEND name arch  <uuid> path`: Apple's Binary Images line for a slice, from its link-time
  /// text range (END is the last byte, inclusive), as UTF-8 without the newline: the text
  /// `ImageFormatter(style: .crash)` writes for `imagelog list` (32 zeros when the slice has no
  /// build-id or UUID), written straight into one array — no `Image`, no interpolated Strings, for
  /// thousands of files per run. `FileCommandTests` compares it with `ImageFormatter`'s line.
  static func crashLineBytes(_ slice: SliceSummary, path: String) -> [UInt8] {
    var path = path
    // Paths are data (`TextEscaping`): escaping is byte-local and keeps every "/", so the name taken
    // from the escaped path below is the escaped name.
    if !path.withUTF8({ TextEscaping.isPlain(UnsafeRawBufferPointer($0)) }) { path = TextEscaping.escaped(path) }
    var architecture = slice.architecture
    return path.withUTF8 { pathBytes in
      architecture.withUTF8 { architectureBytes in
        // ImageFormatter names the image by `Image.shortName(of:)`, the Characters after the last "/".
        // For an ASCII path that is the bytes after the last "/" byte; otherwise ask it.
        var nameStart = pathBytes.count
        while nameStart > 0 && pathBytes[nameStart - 1] != UInt8(ascii: "/") { nameStart -= 1 }
        var highBits: UInt8 = 0
        for byte in pathBytes { highBits |= byte }  // one pass, no branch per byte
        let ascii = highBits < 0x80
        var nonASCIIName: [UInt8] = []
        if !ascii { nonASCIIName = Array(Image.shortName(of: String(decoding: pathBytes, as: UTF8.self)).utf8) }
        let nameLength = ascii ? pathBytes.count - nameStart : nonASCIIName.count
        let start = slice.textVMRange.lowerBound
        // END is inclusive; an empty text range prints START as END.
        let end = slice.textVMRange.isEmpty ? start : slice.textVMRange.upperBound - 1
        let id = slice.buildID?.bytes ?? []
        // "0x" + 16 digits, " - ", the same, " ", name, " ", arch, "  <", 32 digits, "> ", path.
        let capacity = 2 * 18 + 3 + 1 + nameLength + 1 + architectureBytes.count + 3 + 32 + 2 + pathBytes.count
        return [UInt8](unsafeUninitializedCapacity: capacity) { line, count in
          var out = 0
          out = writeHex(start, into: line, at: out)
          out = write(" - ", into: line, at: out)
          out = writeHex(end, into: line, at: out)
          out = write(" ", into: line, at: out)
          if ascii {
            out = write(UnsafeBufferPointer(rebasing: pathBytes[nameStart...]), into: line, at: out)
          } else {
            out = nonASCIIName.withUnsafeBufferPointer { write($0, into: line, at: out) }
          }
          out = write(" ", into: line, at: out)
          out = write(architectureBytes, into: line, at: out)
          out = write("  <", into: line, at: out)
          // BuildID.compactUUID: the first 16 bytes (zero-padded) as 32 lowercase hex digits.
          for index in 0..<16 {
            let byte = index < id.count ? id[index] : 0
            line[out] = HexText.digit(Int(byte >> 4))
            line[out + 1] = HexText.digit(Int(byte & 0xF))
            out += 2
          }
          out = write("> ", into: line, at: out)
          out = write(pathBytes, into: line, at: out)
          count = out
        }
      }
    }
  }

  /// Copies `bytes` into `line` at `position`; returns the position after them. The caller sized `line`.
  @inline(__always)
  private static func write(_ bytes: UnsafeBufferPointer<UInt8>, into line: UnsafeMutableBufferPointer<UInt8>,
                            at position: Int) -> Int {
    guard let source = bytes.baseAddress, let target = line.baseAddress, !bytes.isEmpty else { return position }
    precondition(bytes.count <= line.count - position, "crash line buffer too small")
    (target + position).update(from: source, count: bytes.count)
    return position + bytes.count
  }

  @inline(__always)
  private static func write(_ text: StaticString, into line: UnsafeMutableBufferPointer<UInt8>, at position: Int) -> Int {
    write(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount), into: line, at: position)
  }

  /// `0x` and `value` in lowercase hex without leading zeros (`hexDigits`), at `position`.
  @inline(__always)
  private static func writeHex(_ value: UInt64, into line: UnsafeMutableBufferPointer<UInt8>, at position: Int) -> Int {
    precondition(position >= 0 && 18 <= line.count - position, "crash line buffer too small")
    guard let base = line.baseAddress else { return position }  // not reached: line has room for 18
    base[position] = UInt8(ascii: "0")
    base[position + 1] = UInt8(ascii: "x")
    return JSONWriter.writeHex(value, to: base, at: position + 2)
  }

  /// The detailed view's lines that every format has (from `SliceSummary`).
  static func commonDetailedLines(_ slice: SliceSummary, path: String, sliceCount: Int) -> [String] {
    var lines = [sliceCount > 1 ? "\(path) (\(slice.architecture)):" : "\(path):"]
    func add(_ label: String, _ value: String) { lines.append("  " + detailLine(label, value)) }
    add("architecture", slice.architecture)
    add("type", slice.fileType)
    if let buildID = slice.buildID {
      add(buildID.bytes.count == 16 ? "uuid" : "build-id", buildID.bytes.count == 16 ? buildID.uuid : buildID.hex)
      if buildID.bytes.count != 16 { add("uuid", buildID.uuid) }
    } else {
      add("build-id", "none")
    }
    add("text", rangeText(slice.textVMRange))
    add("load extent", rangeText(slice.loadVMRange))
    if slice.fileOffset != 0 { add("file offset", "0x" + hexDigits(slice.fileOffset)) }
    if let installName = slice.installName { add("install name", installName) }
    for (index, dependency) in slice.dependencies.enumerated() { add(index == 0 ? "needs" : "", dependency) }
    return lines
  }

  static func rangeText(_ range: Range<UInt64>) -> String {
    "0x\(hexDigits(range.lowerBound)) - 0x\(hexDigits(range.upperBound)) (0x\(hexDigits(range.upperBound - range.lowerBound)) bytes)"
  }

  /// The JSON members every format has (from `SliceSummary`); addresses as hex strings, sizes as numbers.
  static func writeCommonJSONMembers(_ slice: SliceSummary, path: String, into json: inout JSONWriter) {
    json.member("path", string: path)
    json.member("architecture", string: slice.architecture)
    json.member("fileType", string: slice.fileType)
    json.key("buildID")
    if let buildID = slice.buildID { json.hexString(buildID.bytes) } else { json.null() }
    json.key("uuid")
    if let buildID = slice.buildID { json.uuidString(buildID.bytes) } else { json.null() }
    json.member("textStart", address: slice.textVMRange.lowerBound)
    json.member("textEnd", address: slice.textVMRange.upperBound)
    json.member("textSize", number: slice.textVMRange.upperBound - slice.textVMRange.lowerBound)
    json.member("loadStart", address: slice.loadVMRange.lowerBound)
    json.member("loadEnd", address: slice.loadVMRange.upperBound)
    json.member("installName", string: slice.installName)
    json.member("dependencies", strings: slice.dependencies)
    json.member("fileOffset", number: slice.fileOffset)
  }
}

/// One `label:  value` line of the detailed view, values aligned in one column (label "" continues
/// the previous line's list). Every format's renderer uses the same column (15, as
/// `renderMachODetails` does) so the lines agree.
func detailLine(_ label: String, _ value: String) -> String {
  let head = label.isEmpty ? "" : label + ":"
  return head + String(repeating: " ", count: max(1, 15 - head.count)) + value
}

/// A format's own part of the detailed and JSON views: ELF's is in BinaryFormatter+ELF.swift,
/// Mach-O's and universal files' in BinaryFormatter+Formats.swift and BinaryFormatter+MachO.swift. `index` is the slice's index in `BinaryFile.slices`.
protocol FileDetailRendering {
  /// Lines after the common ones in the detailed view (the caller indents them by two spaces).
  func detailedLines(slice index: Int) -> [String]
  /// Writes the members after the common ones in the slice's JSON object.
  func writeJSONMembers(slice index: Int, into json: inout JSONWriter)
}

/// `--entitlements`: formats that store entitlements (Mach-O code signatures) conform.
protocol EntitlementsRendering {
  /// Slice `index`'s entitlements as stored (the XML plist), or as JSON when `json`; `nil` when it has none.
  func entitlements(slice index: Int, json: Bool) throws -> String?
}

/// One slice's architecture and build-id/UUID (what `--uuid` prints).
package struct SliceIdentity: Sendable, Equatable {
  package var architecture: String
  package var buildID: BuildID?
}

extension BinaryFile {
  /// Each slice's architecture and build-id/UUID, in the order and with the slices of `slices`,
  /// without making the summaries.
  package var sliceIdentities: [SliceIdentity] {
    switch self {
    case .elf(let file): [SliceIdentity(architecture: file.architecture, buildID: file.buildID)]
    case .machO(let file): [SliceIdentity(architecture: file.architecture, buildID: file.uuid)]
    case .fat(let file):
      file.members.compactMap { member in
        guard let slice = member.decoded else { return nil }
        return SliceIdentity(architecture: slice.architecture, buildID: slice.uuid)
      }
    }
  }

  /// The decoded file's own part of the detailed and JSON views (a plain conversion: no dynamic cast
  /// per file).
  var detailRenderer: any FileDetailRendering {
    switch self {
    case .elf(let file): file
    case .machO(let file): file
    case .fat(let file): file
    }
  }

  /// The decoded file as a value the per-format views can be asked of (`as? EntitlementsRendering`).
  var formatRenderer: Any {
    switch self {
    case .elf(let file): file
    case .machO(let file): file
    case .fat(let file): file
    }
  }
}
