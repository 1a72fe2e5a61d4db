/// One line of `readelf -SW`'s section list.
public struct ReadelfSection: Sendable {
  public var index: Int
  public var name: String
  public var fileOffset: UInt64
  public var size: UInt64
  /// The `Flg` column's letters (`C` for `SHF_COMPRESSED`, `A` for `SHF_ALLOC`, ...).
  public var flags: String
}

/// The sections `readelf -SW` lists for the file at `path`.
public func readelfSections(_ path: String) throws -> [ReadelfSection] {
  let listing = try runChild(["readelf", "-SW", path])
  guard listing.exitCode == 0 else { throw TestSupportError("readelf -SW \(path): \(listing.error)") }
  return listing.output.split(separator: "\n").compactMap { line in
    // "  [28] .debug_info  PROGBITS  0000000000000000 005418 00012d 00  C  0   0  1": after "[Nr]", Name Type
    // Address Off Size ES, then Flg when the section has flags, then Lk Inf Al.
    let halves = line.split(separator: "]", maxSplits: 1)
    guard halves.count == 2, let open = halves[0].firstIndex(of: "["),
          let index = Int(halves[0][open...].dropFirst().drop { $0 == " " }) else { return nil }
    let words = halves[1].split(separator: " ")
    guard words.count == 9 || words.count == 10, let offset = UInt64(words[3], radix: 16),
          let size = UInt64(words[4], radix: 16) else { return nil }
    return ReadelfSection(index: index, name: String(words[0]), fileOffset: offset, size: size,
                          flags: words.count == 10 ? String(words[6]) : "")
  }
}

/// The section called `name` in `readelf -SW`'s list for the file at `path`.
public func readelfSection(_ path: String, _ name: String) throws -> ReadelfSection {
  guard let section = try readelfSections(path).first(where: { $0.name == name }) else {
    throw TestSupportError("readelf -SW \(path) lists no \(name)")
  }
  return section
}
