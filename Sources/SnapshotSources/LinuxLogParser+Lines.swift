import ProcessInspection
import ImageReaders
import Snapshot

/// Reading one line of a Linux log as a frame of each kind, on its UTF-8 bytes.
extension LinuxLogParser {
  static func frameLine(_ bytes: [UInt8]) -> LineResult {
    if let result = numberedFrame(bytes) { return result }
    if let (frame, strong) = glibcFrame(bytes) { return .glibc(frame, strong: strong) }
    return .other
  }

  /// `#N` then `0x…` (sanitizer, coredump) or `pc …` (Android), anywhere in the line.
  static func numberedFrame(_ b: [UInt8]) -> LineResult? {
    var start = 0
    while let hash = b[start...].firstIndex(of: UInt8(ascii: "#")) {
      var position = hash + 1
      let digitsStart = position
      while position < b.count, isDigit(b[position]), position - digitsStart < 6 { position += 1 }
      let digitsEnd = position
      let spacesStart = position
      while position < b.count, b[position] == UInt8(ascii: " ") || b[position] == UInt8(ascii: "\t") { position += 1 }
      start = hash + 1
      guard digitsEnd > digitsStart, position > spacesStart, let number = Int(ascii(b, digitsStart..<digitsEnd)) else { continue }
      if hasPrefix(b, position, "pc ") {
        return switch androidFrame(b, number: number, from: position + 3) {
        case .frame(let frame): .android(frame)
        case .unreadable(let why): .unreadable(why)
        case .none: .other
        }
      }
      if hasPrefix(b, position, "0x") { return addressFrame(b, number: number, from: position, hasAddress: true) }
      // TSan prints no address: `#0 <null> <null> (race+0xfb9d8)`, or `#0 main /src/a.c:5 (a.out+0x1139)` symbolized.
      // Or `#3 <null> <null> (0x7f…)`, a frame in no module. Both end in a group: tested first, so a line
      // of many `#N ` costs one pass.
      let end = trimmedEnd(b, b.count)
      if end > position, b[end - 1] == UInt8(ascii: ")"),
         case .numbered(let line)? = addressFrame(b, number: number, from: position, hasAddress: false),
         case .frame(let frame) = line.asSanitizer,
         frame.offset != nil || (frame.module == nil && (frame.reportedSymbol.map { ProcessSnapshot.ReportedFunction.functionAndLocation($0).1 != nil } ?? false
                                                          || contains(b, "<null>"))) {
        return .numbered(line)
      }
    }
    return nil
  }

  /// A parenthesised group at the end of a frame line, `(` preceded by a blank: `(/tmp/uaf+0x10)`,
  /// `(BuildId: …)`, `(libc.so.6 + 0x3ee2b)`, `(discriminator 1)`; not `new(unsigned long)`.
  struct Group {
    var open: Int
    /// The bytes between the parentheses.
    var content: Range<Int>
  }

  /// `0xADDR [in] [NAME [LOCATION]] [(MODULE+0xOFF)] [(BuildId: ID)]` (sanitizer) or
  /// `0xADDR NAME (MODULE + 0xOFF)` (coredump), read both ways (`hasAddress` false: TSan's `NAME LOCATION (MODULE+0xOFF)`).
  /// `nil` when the line is gdb's `bt` (`in main () at a.c:5`, `in raise () from /lib/libc.so.6`), which is not read.
  static func addressFrame(_ b: [UInt8], number: Int, from start: Int, hasAddress: Bool) -> LineResult? {
    var position = start
    var address: Address?
    if hasAddress {
      while position < b.count, b[position] != UInt8(ascii: " "), b[position] != UInt8(ascii: "\t") { position += 1 }
      guard let value = hex(b, start + 2..<position) else { return .unreadable("unreadable frame address") }
      address = value
    }
    let addressEnd = position
    let end = max(addressEnd, trimmedEnd(b, b.count))  // TSan's form: the number's blanks may end the line
    if isGDBFrame(b, addressEnd..<end) { return nil }
    var groups: [Group] = []  // last first
    var groupsEnd = end
    while groups.count < 4, groupsEnd > addressEnd, b[groupsEnd - 1] == UInt8(ascii: ")"),
          let open = matchingOpen(b, closeAt: groupsEnd - 1, lowerBound: addressEnd),
          open == addressEnd || b[open - 1] == UInt8(ascii: " ") || b[open - 1] == UInt8(ascii: "\t") {
      groups.append(Group(open: open, content: open + 1..<groupsEnd - 1))
      groupsEnd = trimmedEnd(b, open)
    }
    var evidence = Evidence.none
    var hasBareGroup = false
    if hasAddress, hasPrefix(b, trimmedStart(b, addressEnd), "in ") { evidence = .sanitizer }
    if !hasAddress { evidence = .sanitizer }
    for group in groups {
      let content = ascii(b, group.content)
      switch groupShape(content) {
      case .buildID, .unknownModule, .address, .discriminator, .module(spaced: false): evidence = .sanitizer
      case .module(spaced: true): if evidence == .none { evidence = .coredump }
      case .other: hasBareGroup = true
      }
    }
    let line = NumberedLine(
      number: number, evidence: evidence, hasBareGroup: hasBareGroup,
      asSanitizer: sanitizerReading(b, number: number, address: address, addressEnd: addressEnd, end: end, groups: groups),
      asCoredump: hasAddress ? coredumpReading(b, number: number, address: address ?? 0, addressEnd: addressEnd, end: end,
                                               groups: groups) : .none)
    return .numbered(line)
  }

  enum GroupShape {
    case buildID, unknownModule, address, discriminator
    /// `MODULE+0xOFF` (sanitizers) or `MODULE + 0xOFF` (coredump: `spaced`).
    case module(spaced: Bool)
    case other
  }

  static func groupShape(_ content: String) -> GroupShape {
    if content.hasPrefix("BuildId: ") { return .buildID }
    if content == "<unknown module>" { return .unknownModule }
    if content.hasPrefix("discriminator ") { return .discriminator }
    if ReportText.hexNumber(content) != nil { return .address }
    if let plus = content.lastIndex(of: "+"), plus > content.startIndex {
      return .module(spaced: content[content.index(before: plus)] == " ")
    }
    return .other
  }

  /// gdb's `bt` lines: an argument list after the function, then ` at FILE:LINE`, ` from LIBRARY` or nothing.
  static func isGDBFrame(_ b: [UInt8], _ range: Range<Int>) -> Bool {
    let text = ascii(b, range)
    return text.contains(") at ") || text.contains(") from ") || text.hasSuffix(" ()")
  }

  /// The line as a sanitizer's: trailing groups a sanitizer writes (module and offset, build-id,
  /// `(<unknown module>)`, TSan's `(0x…)`, `(discriminator N)`); before them the function and the
  /// location, kept as written.
  static func sanitizerReading(_ b: [UInt8], number: Int, address lineAddress: Address?, addressEnd: Int, end: Int,
                               groups: [Group]) -> Reading {
    var address = lineAddress
    var identity: ImageIdentity?
    var module: String?
    var offset: UInt64?
    var middleEnd = end
    for group in groups {  // from the line's end
      let content = ascii(b, group.content)
      let shape = groupShape(content)
      if case .other = shape { break }  // not a sanitizer's (`(anonymous namespace)`): it and what precedes are text
      if case .module = shape {
        guard module == nil, offset == nil else { break }
        guard let (name, value) = moduleAndOffset(content) else { return .unreadable("unreadable module offset in frame") }
        (module, offset) = (name, value)
      } else if case .buildID = shape {
        identity = ImageIdentity(content.dropFirst("BuildId: ".count))
      } else if case .address = shape, address == nil {
        address = ReportText.hexNumber(content)
      }
      // `(discriminator N)` ends the location (`a.c:12 (discriminator 1)`): kept in the line, not read.
      middleEnd = trimmedEnd(b, group.open)
    }
    let middle = ascii(b, addressEnd..<max(addressEnd, middleEnd)).trimmingSpaces
    // Without an address (TSan) the frame is placed by its module offset alone.
    guard let address = address ?? offset else { return .unreadable("frame without an address or a module offset") }
    let written = middle.hasPrefix("in ") ? String(middle.dropFirst(3)) : middle
    return .frame(FrameLine(kind: .sanitizer, number: number, address: address, module: module, offset: offset, symbol: nil,
                            identity: identity, insertByte: middle.isEmpty ? addressEnd : trimmedEnd(b, middleEnd),
                            reportedSymbol: written.isEmpty || written == "n/a" || written == "<null> <null>" ? nil : written))
  }

  /// The line as systemd-coredump's: `NAME (MODULE + 0xOFF)`, or `NAME (MODULE)` as it wrote lines before offsets.
  static func coredumpReading(_ b: [UInt8], number: Int, address: Address, addressEnd: Int, end: Int,
                              groups: [Group]) -> Reading {
    var module: String?
    var offset: UInt64?
    var middleEnd = end
    if let group = groups.first {
      let content = ascii(b, group.content)
      middleEnd = trimmedEnd(b, group.open)
      switch groupShape(content) {
      case .module:
        guard let (name, value) = moduleAndOffset(content) else { return .unreadable("unreadable module offset in frame") }
        (module, offset) = (name, value)
      case .other: module = content.trimmingSpaces  // no offset to place it
      default: middleEnd = end
      }
      module = module.map { ProcessInspection.Image.withoutDeletedMark($0).path }
      if module == "n/a" || module?.isEmpty == true { module = nil }
    }
    let middle = ascii(b, addressEnd..<max(addressEnd, middleEnd)).trimmingSpaces
    let insert = middle.isEmpty ? addressEnd : trimmedEnd(b, middleEnd)
    return .frame(FrameLine(kind: .coredump, number: number, address: address, module: module, offset: offset, symbol: nil,
                            identity: nil, insertByte: insert, reportedSymbol: middle.isEmpty || middle == "n/a" ? nil : middle))
  }

  /// `MODULE+0xOFF` or `MODULE + 0xOFF` (a `(deleted)` file's mark removed); `nil` when the offset is not hex.
  /// The module is `nil` for `<unknown module>`, `n/a` or nothing.
  static func moduleAndOffset(_ content: String) -> (String?, UInt64)? {
    guard let plus = content.lastIndex(of: "+") else { return nil }
    let offsetText = content[content.index(after: plus)...].trimmingSpaces
    guard offsetText.hasPrefix("0x"), let value = ReportText.hexNumber(offsetText) else { return nil }
    let module = ProcessInspection.Image.withoutDeletedMark(content[..<plus].trimmingSpaces).path
    return (module == "<unknown module>" || module == "n/a" || module.isEmpty ? nil : module, value)
  }

  /// `pc 000000000004e2b0  /system/lib64/libc.so (abort+160) (BuildId: …)`; `[vdso]`, `[anon:…]` have no file.
  static func androidFrame(_ b: [UInt8], number: Int, from start: Int) -> Reading {
    var position = start
    while position < b.count, b[position] == UInt8(ascii: " ") { position += 1 }
    // Some consoles (Play Console, Firebase) print the pc as `pc 0x0000000000042f64`.
    let pcStart = hasPrefix(b, position, "0x") ? position + 2 : position
    while position < b.count, b[position] != UInt8(ascii: " "), b[position] != UInt8(ascii: "\t") { position += 1 }
    guard let pc = hex(b, pcStart..<position) else { return .unreadable("unreadable pc") }
    while position < b.count, b[position] == UInt8(ascii: " ") { position += 1 }
    let pathStart = position
    var pathEnd = b.count
    var scan = position
    while scan + 1 < b.count {
      if b[scan] == UInt8(ascii: " "), b[scan + 1] == UInt8(ascii: "(") { pathEnd = scan; break }
      scan += 1
    }
    let path = ascii(b, pathStart..<pathEnd).trimmingSpaces
    guard !path.isEmpty else { return .unreadable("frame without a module") }
    var identity: ImageIdentity?
    var reported: String?
    var groupStart = pathEnd
    for _ in 0..<8 {  // a frame has at most a symbol, an apk offset and a build-id group
      while groupStart < b.count, b[groupStart] == UInt8(ascii: " ") { groupStart += 1 }
      guard groupStart < b.count, b[groupStart] == UInt8(ascii: "("), let close = matchingClose(b, openAt: groupStart) else { break }
      let content = ascii(b, groupStart + 1..<close)
      if content.hasPrefix("BuildId: ") { identity = ImageIdentity(content.dropFirst("BuildId: ".count)) }
      else if !content.hasPrefix("offset ") { reported = content }
      groupStart = close + 1
    }
    let module: String? = path.hasPrefix("[") ? nil : path
    return .frame(FrameLine(kind: .android, number: number, address: pc, module: module, offset: pc, symbol: nil,
                            identity: identity, insertByte: trimmedEnd(b, b.count), reportedSymbol: reported))
  }

  /// `MODULE(SYMBOL+0xOFF)[0xADDR]`, `MODULE(+0xOFF) [0xADDR]`, `MODULE() [0xADDR]` (the last such group in
  /// the line), `MODULE[0xADDR]` (glibc's `backtrace_symbols_fd` for an address without a symbol in a
  /// non-PIE program, and older glibc's for any) and a bare `[0xADDR]` (no module holds the address: JIT
  /// code). `strong` when the line alone shows the shape: a parenthesised group, or a module that is a
  /// path or a `.so`; a bare `[0x…]` or `name[0x…]` is a frame only beside a strong line (`parse`).
  static func glibcFrame(_ b: [UInt8]) -> (FrameLine, strong: Bool)? {
    var searchEnd = b.count
    var weak: (FrameLine, strong: Bool)?
    var triedModuleOnly = false  // only the last `[0x…]` can be one: each try walks back over the line
    while let bracket = b[..<searchEnd].lastIndex(of: UInt8(ascii: "[")) {
      searchEnd = bracket
      guard hasPrefix(b, bracket + 1, "0x"), let close = b[bracket...].firstIndex(of: UInt8(ascii: "]")),
            let address = hex(b, bracket + 3..<close) else { continue }
      var parenClose = bracket - 1
      if parenClose >= 0, b[parenClose] == UInt8(ascii: " ") { parenClose -= 1 }
      guard parenClose > 0, b[parenClose] == UInt8(ascii: ")"), let open = matchingOpen(b, closeAt: parenClose, lowerBound: 0) else {
        if !triedModuleOnly { weak = moduleOnlyFrame(b, bracket: bracket, close: close, address: address) }
        triedModuleOnly = true
        continue
      }
      var moduleStart = open
      while moduleStart > 0, b[moduleStart - 1] != UInt8(ascii: " "), b[moduleStart - 1] != UInt8(ascii: "\t") { moduleStart -= 1 }
      guard moduleStart < open else { continue }
      let module = ascii(b, moduleStart..<open)
      let content = ascii(b, open + 1..<parenClose)
      var offset: UInt64?
      var symbol: ProcessSnapshot.SymbolOffset?
      if let plus = content.lastIndex(of: "+") {
        guard let value = ReportText.hexNumber(content[content.index(after: plus)...]) else { continue }
        let name = String(content[..<plus])
        if name.isEmpty { offset = value } else { symbol = ProcessSnapshot.SymbolOffset(name: name, offset: value) }
      } else if !content.isEmpty {
        symbol = ProcessSnapshot.SymbolOffset(name: content, offset: 0)
      }
      return (FrameLine(kind: .glibc, number: nil, address: address, module: module, offset: offset, symbol: symbol,
                        identity: nil, insertByte: close + 1, reportedSymbol: symbol.map { "\($0.name)+0x\(hexDigits($0.offset))" }),
              true)
    }
    return weak
  }

  /// `MODULE[0xADDR]` or a bare `[0xADDR]` (the `[` at `bracket`, the `]` at `close`), the bracket after a
  /// blank, the line's start, or the module's name.
  private static func moduleOnlyFrame(_ b: [UInt8], bracket: Int, close: Int, address: Address) -> (FrameLine, strong: Bool)? {
    var moduleStart = bracket
    while moduleStart > 0, b[moduleStart - 1] != UInt8(ascii: " "), b[moduleStart - 1] != UInt8(ascii: "\t") { moduleStart -= 1 }
    let module = ascii(b, moduleStart..<bracket)
    guard !module.contains("("), !module.contains(")"), !module.contains("["), !module.contains("]") else { return nil }
    let frame = FrameLine(kind: .glibc, number: nil, address: address, module: module.isEmpty ? nil : module, offset: nil,
                          symbol: nil, identity: nil, insertByte: close + 1, reportedSymbol: nil)
    return (frame, module.contains("/") || module.contains(".so"))
  }

  /// `Module libfoo.so.1 with build-id 1234…` (also `from deb foo-1.0 with build-id`, `Found module X with build-id: Y`).
  static func moduleLine(_ line: String) -> (String, ImageIdentity)? {
    guard let module = line.firstRange(of: "odule "), let idRange = line.firstRange(of: "build-id") else { return nil }
    let before = line[..<module.lowerBound]
    guard before.hasSuffix("M") || before.hasSuffix("m") else { return nil }
    guard let name = line[module.upperBound...].split(separator: " ").first else { return nil }
    let idText = line[idRange.upperBound...].drop { $0 == ":" || $0 == " " || $0 == "=" }.prefix { $0.isHexDigit }
    guard let identity = ImageIdentity(idText) else { return nil }
    return (String(name), identity)
  }

  /// `COREDUMP_PACKAGE_JSON={"/path/libx.so":{"type":"deb",…,"buildId":"…"}}`: module to build-id.
  static func packageJSON(_ line: String) -> [(String, ImageIdentity)]? {
    guard let range = line.firstRange(of: "COREDUMP_PACKAGE_JSON="),
          let document = try? JSONValue.parse(line[range.upperBound...]), case .object(let members) = document else { return nil }
    return members.compactMap { name, value in
      value["buildId"]?.string.flatMap(ImageIdentity.init).map { (name, $0) }
    }
  }

  // MARK: Bytes

  /// True when `needle` occurs in `b`.
  static func contains(_ b: [UInt8], _ needle: StaticString) -> Bool {
    needle.withUTF8Buffer { needle in
      guard let first = needle.first, needle.count <= b.count else { return false }
      var start = 0
      while start <= b.count - needle.count {
        guard let found = b[start...].firstIndex(of: first), found <= b.count - needle.count else { return false }
        if b[found..<found + needle.count].elementsEqual(needle) { return true }
        start = found + 1
      }
      return false
    }
  }

  static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

  static func ascii(_ b: [UInt8], _ range: Range<Int>) -> String { String(decoding: b[range], as: UTF8.self) }

  static func hasPrefix(_ b: [UInt8], _ at: Int, _ prefix: StaticString) -> Bool {
    let count = prefix.utf8CodeUnitCount
    guard at >= 0, count <= b.count - at else { return false }
    return prefix.withUTF8Buffer { Array($0) == Array(b[at..<at + count]) }
  }

  /// 1 to 16 hex digits (no `0x`).
  static func hex(_ b: [UInt8], _ range: Range<Int>) -> UInt64? {
    guard !range.isEmpty, range.count <= 16, range.upperBound <= b.count else { return nil }
    return UInt64(ascii(b, range), radix: 16)
  }

  /// The first byte at or after `start` that is not a blank.
  static func trimmedStart(_ b: [UInt8], _ start: Int) -> Int {
    var start = start
    while start < b.count, b[start] == UInt8(ascii: " ") || b[start] == UInt8(ascii: "\t") { start += 1 }
    return start
  }

  static func trimmedEnd(_ b: [UInt8], _ end: Int) -> Int {
    var end = end
    while end > 0, b[end - 1] == UInt8(ascii: " ") || b[end - 1] == UInt8(ascii: "\t") || b[end - 1] == UInt8(ascii: "\r") { end -= 1 }
    return end
  }

  /// The `(` that the `)` at `closeAt` closes, not before `lowerBound`.
  static func matchingOpen(_ b: [UInt8], closeAt: Int, lowerBound: Int) -> Int? {
    var depth = 0
    var position = closeAt
    while position >= lowerBound {
      if b[position] == UInt8(ascii: ")") { depth += 1 }
      if b[position] == UInt8(ascii: "(") { depth -= 1; if depth == 0 { return position } }
      position -= 1
    }
    return nil
  }

  /// The `)` that closes the `(` at `openAt`.
  static func matchingClose(_ b: [UInt8], openAt: Int) -> Int? {
    var depth = 0
    for position in openAt..<b.count {
      if b[position] == UInt8(ascii: "(") { depth += 1 }
      if b[position] == UInt8(ascii: ")") { depth -= 1; if depth == 0 { return position } }
    }
    return nil
  }
}
