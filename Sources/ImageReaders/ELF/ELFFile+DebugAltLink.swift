/// `.gnu_debugaltlink`: where a dwz-compressed debug file's supplementary file is, and its build-id.
package struct DebugAltLink: Sendable, Equatable {
  /// The supplementary file's path as `dwz -M` recorded it (absolute, or relative to the debug file's folder).
  package var path: String
  /// The supplementary file's GNU build-id; the file found must have exactly this one.
  package var buildID: BuildID
}

extension ELFFile {
  /// The `.gnu_debugaltlink` of this file (decoded with `names: .all`), or `nil` when it has none.
  /// Throws when the section is there but broken: no NUL after the path, or no build-id after it.
  package func debugAltLink(in file: ByteReader) throws(FormatError) -> DebugAltLink? {
    guard let section = section(named: ".gnu_debugaltlink"), section.occupiesFile else { return nil }
    let contents = try self.contents(of: section, in: file)
    let length = try contents.cStringLength(at: 0)
    // length < contents.count: the NUL is inside, so length + 1 <= contents.count.
    let idLength = contents.count - (length + 1)
    guard idLength > 0 else {
      throw .elf("section \(section.index) (.gnu_debugaltlink): no build-id after the file name")
    }
    guard idLength <= 64 else {
      throw .limitExceeded("section \(section.index) (.gnu_debugaltlink) build-id length", value: UInt64(idLength), limit: 64)
    }
    return DebugAltLink(path: try contents.cString(at: 0), buildID: BuildID(try contents.bytes(at: length + 1, length: idLength)))
  }
}
