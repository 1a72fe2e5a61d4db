/// Turns every `NT_FILE` note of the little-endian ELF core `bytes` into a note of a type no reader
/// knows (`NT_FILE` 0x46494c45 becomes 0x4e4f4e45), as a core from QEMU, an older kernel or a dumper
/// that writes no `NT_FILE` looks to a reader: the note's bytes stay where they were. Returns how many
/// notes were changed; a core whose headers do not parse is left alone (0). For tests only: the bytes
/// are the test's own core, so the reads trap rather than throw when the core is not what it seems.
public func hideFileNotes(_ bytes: inout [UInt8]) -> Int {
  func value(_ at: Int, _ size: Int) -> Int {
    guard at >= 0, size <= bytes.count, at <= bytes.count - size else { return -1 }
    var result = 0
    for index in (0..<size).reversed() { result = result << 8 | Int(bytes[at + index]) }
    return result
  }
  guard bytes.count >= 64, bytes[0..<4] == [0x7F, 0x45, 0x4C, 0x46], bytes[5] == 1 else { return 0 }
  let is64Bit = bytes[4] == 2
  let tableOffset = is64Bit ? value(32, 8) : value(28, 4)
  let entrySize = value(is64Bit ? 54 : 42, 2), count = value(is64Bit ? 56 : 44, 2)
  var changed = 0
  for index in 0..<max(count, 0) {
    let entry = tableOffset + index * entrySize
    guard value(entry, 4) == 4 else { continue }  // PT_NOTE
    let start = is64Bit ? value(entry + 8, 8) : value(entry + 4, 4)
    let size = is64Bit ? value(entry + 32, 8) : value(entry + 16, 4)
    guard start >= 0, size >= 0 else { continue }
    var at = start
    while at + 12 <= start + size, at + 12 <= bytes.count {
      let nameSize = value(at, 4), descriptorSize = value(at + 4, 4)
      if value(at + 8, 4) == 0x4649_4C45 {
        bytes.replaceSubrange(at + 8..<at + 12, with: [0x45, 0x4E, 0x4F, 0x4E])
        changed += 1
      }
      at += 12 + (nameSize + 3) / 4 * 4 + (descriptorSize + 3) / 4 * 4
    }
  }
  return changed
}
