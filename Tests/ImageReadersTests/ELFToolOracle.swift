import ImageLogTestSupport

/// What readelf and llvm-readobj say about ELF files, parsed from their text output. The tests compare
/// the reader against these, never against values copied from our own output.
struct ReadelfFacts {
  struct Segment: Equatable {
    var type: String
    var offset: UInt64
    var vmAddress: UInt64
    var fileSize: UInt64
    var vmSize: UInt64
    var flags: String
    var alignment: UInt64
  }

  struct Section: Equatable {
    var index: Int
    var name: String
    var type: String
    var address: UInt64
    var offset: UInt64
    var size: UInt64
    var entrySize: UInt64
    var link: UInt32
  }

  var path: String
  var fileType: String?          // EXEC, DYN, REL, CORE (from -h or -l)
  var is64Bit: Bool?
  var littleEndian: Bool?
  var entry: UInt64?
  var segments: [Segment] = []
  var interpreter: String?
  var sections: [Section] = []
  var buildID: String?
  var needed: [String] = []
  var soname: String?
  var rpath: String?
  var runpath: String?
  var pieFlag = false
  var hasDynamicSection = false
  var debugLinkName: String?
  var debugLinkCRC: UInt32?

  /// Runs `readelf` with `options` over `paths` (one process for all of them) and splits the output
  /// by file. readelf prints `File: PATH` before each file when given more than one.
  static func run(_ options: [String], paths: [String]) throws -> [String: ReadelfFacts] {
    let list = paths.count == 1 ? paths + [paths[0]] : paths  // force the `File:` headers
    let output = try runTool(["readelf"] + options + list).output
    var result: [String: ReadelfFacts] = [:]
    var current: ReadelfFacts?
    var mode = ""
    for rawLine in output.split(separator: "\n", omittingEmptySubsequences: false) {
      let line = Substring(rawLine)
      if line.hasPrefix("File: ") {
        if let current { result[current.path] = current }
        current = ReadelfFacts(path: String(line.dropFirst(6)))
        mode = ""
        continue
      }
      guard current != nil else { continue }
      current!.consume(line, mode: &mode)
    }
    if let current { result[current.path] = current }
    return result
  }

  mutating func consume(_ line: Substring, mode: inout String) {
    let trimmed = line.drop { $0 == " " }
    let words = trimmed.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    if line.hasPrefix("Program Headers:") { mode = "segments"; return }
    if line.hasPrefix("Section Headers:") { mode = "sections"; return }
    if line.isEmpty || line.hasPrefix(" Section to Segment") || line.hasPrefix("Key to Flags") { mode = "" }
    if trimmed.hasPrefix("Class:") { is64Bit = words.last == "ELF64" }
    if trimmed.hasPrefix("Data:") { littleEndian = trimmed.contains("little endian") }
    if trimmed.hasPrefix("Type:"), words.count > 1, fileType == nil { fileType = words[1] }
    if line.hasPrefix("Elf file type is "), words.count > 4 { fileType = words[4] }
    if trimmed.hasPrefix("Entry point address:") { entry = hex(words.last) }
    if let range = line.firstRange(of: "[Requesting program interpreter: ") {
      interpreter = String(line[range.upperBound...].dropLast())
    }
    if let range = line.firstRange(of: "Build ID: "), buildID == nil {
      buildID = String(line[range.upperBound...]).split(separator: " ").first.map(String.init)
    }
    if line.hasPrefix("Dynamic section at offset") { hasDynamicSection = true }
    if let value = bracketed(line, after: "(NEEDED)") { needed.append(value) }
    if let value = bracketed(line, after: "(SONAME)") { soname = value }
    if let value = bracketed(line, after: "(RPATH)") { rpath = rpath.map { $0 + ":" + value } ?? value }
    if let value = bracketed(line, after: "(RUNPATH)") { runpath = runpath.map { $0 + ":" + value } ?? value }
    if line.contains("(FLAGS_1)"), words.contains("PIE") { pieFlag = true }
    if let range = line.firstRange(of: "Separate debug info file: ") {
      debugLinkName = String(line[range.upperBound...])
    }
    if trimmed.hasPrefix("CRC value: 0x") { debugLinkCRC = hex(words.last).map { UInt32(truncatingIfNeeded: $0) } }
    if mode == "segments", words.count >= 7, words[0] != "Type", let offset = hex(words[1]) {
      // Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg... Align; Flg is 1-3 words ("R E", "RW", "R").
      let alignment = hex(words.last) ?? 0
      let flags = words[6..<(words.count - 1)].joined()
      segments.append(Segment(type: words[0], offset: offset, vmAddress: hex(words[2]) ?? 0,
                              fileSize: hex(words[4]) ?? 0, vmSize: hex(words[5]) ?? 0, flags: flags,
                              alignment: alignment))
    }
    if mode == "sections", trimmed.hasPrefix("["), let close = trimmed.firstIndex(of: "]") {
      let number = trimmed[trimmed.index(after: trimmed.startIndex)..<close].drop { $0 == " " }
      guard let index = Int(number), number != "Nr" else { return }
      let fields = trimmed[trimmed.index(after: close)...].split(separator: " ").map(String.init)
      // Name Type Address Off Size ES [Flg] Lk Inf Al; section 0 has no name.
      let named = index == 0 && fields.first == "NULL" ? [""] + fields : fields
      guard named.count >= 9 else { return }
      let link = UInt32(named[named.count - 3]) ?? 0
      sections.append(Section(index: index, name: named[0], type: named[1], address: hex(named[2]) ?? 0,
                              offset: hex(named[3]) ?? 0, size: hex(named[4]) ?? 0, entrySize: hex(named[5]) ?? 0,
                              link: link))
    }
  }

  private func bracketed(_ line: Substring, after tag: String) -> String? {
    guard line.contains(tag), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]"),
          open < close else { return nil }
    return String(line[line.index(after: open)..<close])
  }
}

/// `0x1F`, `0001f8` or `1f` as a number.
func hex<S: StringProtocol>(_ text: S?) -> UInt64? {
  guard let input = text else { return nil }
  var text = String(input)
  if text.hasPrefix("0x") || text.hasPrefix("0X") { text = String(text.dropFirst(2)) }
  return UInt64(text, radix: 16)
}

/// What `llvm-readobj-14 --file-headers --needed-libs --notes` says, per file.
struct ReadobjFacts {
  var path: String
  var arch: String?
  var is64Bit: Bool?
  var bigEndian: Bool?
  var machine: UInt16?
  var elfType: UInt16?
  var buildID: String?
  var needed: [String] = []
  var loadName: String?

  static func run(paths: [String]) throws -> [String: ReadobjFacts] {
    let output = try runTool(["llvm-readobj-14", "--file-headers", "--needed-libs", "--notes"] + paths).output
    var result: [String: ReadobjFacts] = [:]
    var current: ReadobjFacts?
    var inNeeded = false
    for line in output.split(separator: "\n") {
      let trimmed = String(line.drop { $0 == " " })
      if line.hasPrefix("File: ") {
        if let current { result[current.path] = current }
        current = ReadobjFacts(path: String(line.dropFirst(6)))
        continue
      }
      guard current != nil else { continue }
      if inNeeded {
        if trimmed == "]" { inNeeded = false } else { current!.needed.append(trimmed) }
        continue
      }
      if trimmed.hasPrefix("NeededLibraries [") { inNeeded = true }
      if line.hasPrefix("Arch: ") { current!.arch = String(line.dropFirst(6)) }
      if line.hasPrefix("LoadName: ") { current!.loadName = String(line.dropFirst(10)) }
      if line.hasPrefix("AddressSize: ") { current!.is64Bit = line.hasSuffix("64bit") }
      if trimmed.hasPrefix("DataEncoding: ") { current!.bigEndian = trimmed.contains("BigEndian") }
      if trimmed.hasPrefix("Machine: "), let open = trimmed.lastIndex(of: "("), let value = hex(trimmed[trimmed.index(after: open)...].dropLast()) {
        current!.machine = UInt16(truncatingIfNeeded: value)
      }
      if trimmed.hasPrefix("Type: "), current!.elfType == nil, let open = trimmed.lastIndex(of: "("),
         let value = hex(trimmed[trimmed.index(after: open)...].dropLast()) {
        current!.elfType = UInt16(truncatingIfNeeded: value)
      }
      if trimmed.hasPrefix("Build ID: "), current!.buildID == nil { current!.buildID = String(trimmed.dropFirst(10)) }
    }
    if let current { result[current.path] = current }
    return result
  }
}
