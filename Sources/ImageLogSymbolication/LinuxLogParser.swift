import ImageLog
import ImageReaders

/// The stack traces Linux tools print, found line by line anywhere in a longer log (a CI log, a
/// journal, logcat), each frame line read where it stands:
/// - sanitizers (and LLVM's own stack dumps) with `symbolize=0`: `#0 0x55a720bade1b  (/tmp/uaf+0x171e1b) (BuildId: 93ac…)`;
/// - systemd-coredump / `coredumpctl info`: `#0  0x00007f… name (libfoo.so.1 + 0x1234)`, with the
///   `Module libfoo.so.1 with build-id …` lines (also `from deb …`, `Found module …`, `COREDUMP_PACKAGE_JSON=`);
/// - Android tombstones and logcat: `#00 pc 000000000004e2b0  /system/lib64/libc.so (abort+160) (BuildId: …)`;
/// - glibc's `backtrace_symbols(_fd)`: `/lib/x86_64-linux-gnu/libc.so.6(gsignal+0x12)[0x7f71d9059fb2]`, `./prog(+0x11a9) [0x55…]`.
///
/// Every stack is a thread of the report (the first is the one marked crashed), named by the line
/// before it (`freed by thread T1 here:`, `Stack trace of thread 827:`).
enum LinuxLogParser {
  enum Kind { case sanitizer, coredump, android, glibc }

  /// One frame line as read, before images are made.
  struct FrameLine {
    var kind: Kind
    /// `#N`; `nil` for glibc's lines, which carry no number.
    var number: Int?
    /// The absolute address (Android: the module-relative pc).
    var address: Address
    /// The module's path or name, when the line names one.
    var module: String?
    /// The frame's offset in the module, when the line gives one.
    var offset: UInt64?
    /// glibc's `symbol+0xoffset`, when the line gives a symbol instead of a module offset.
    var symbol: CrashReport.SymbolOffset?
    var identity: ImageIdentity?
    /// Where the symbol is written, in UTF-8 bytes of the line.
    var insertByte: Int
    var reportedSymbol: String?
  }

  enum LineResult { case frame(FrameLine), unreadable(String), other }

  /// A report of the frames in `lines`, or `nil` when no line is a frame of these formats.
  static func parse(_ lines: [String]) -> CrashReport? {
    var report = CrashReport(format: .sanitizer, lines: lines)
    var firstKind: Kind?
    var imageKeys: [String: Int] = [:]
    var moduleIdentities: [String: ImageIdentity] = [:]
    var heading: String?  // the last non-blank line before a stack, trimmed when a stack starts
    var previousNumber: Int?
    var previousKind: Kind?
    var inStack = false
    var stack = -1
    var unreadable: [String] = []
    for (lineIndex, line) in lines.enumerated() {
      let bytes = Array(line.utf8)
      switch frameLine(bytes) {
      case .unreadable(let why):
        unreadable.append("line \(lineIndex + 1): \(why) '\(line.prefix(80))'")
        inStack = false
        continue
      case .other:
        // Most lines of a log are neither: a byte search first, the string searches only on a hit.
        if contains(bytes, "build-id"), let (name, identity) = moduleLine(line) {
          moduleIdentities[name] = identity
        } else if contains(bytes, "COREDUMP_PACKAGE_JSON="), let ids = packageJSON(line) {
          for (name, identity) in ids where moduleIdentities[name] == nil { moduleIdentities[name] = identity }
        }
        if bytes.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) { heading = line }
        inStack = false
        continue
      case .frame(let parsed):
        if firstKind == nil { firstKind = parsed.kind }
        // A numbered stack goes on while the numbers rise, across other lines of the log (logcat
        // interleaves other tags); glibc's lines carry no number, so any other line ends their stack.
        let continues = previousKind == parsed.kind
          && (parsed.number.map { number in previousNumber.map { number > $0 } ?? false } ?? inStack)
        if !continues {
          stack += 1
          report.threads.append(CrashReport.Thread(number: stack, crashed: stack == 0,
                                                   name: heading.map { String($0.trimmingSpaces.prefix(120)) }))
          previousNumber = nil
        }
        inStack = true
        previousKind = parsed.kind
        let index = parsed.number ?? (previousNumber.map { $0 + 1 } ?? 0)
        previousNumber = index
        var frame = CrashReport.Frame(
          thread: stack, index: index, address: parsed.address, imageIndex: nil,
          // Sanitizers print the call (pc - 1) already and Android's unwinder adjusts the pc itself;
          // coredump's and glibc's frames after the first are return addresses.
          isReturnAddress: parsed.kind == .glibc || (parsed.kind == .coredump && index > 0),
          line: lineIndex, symbolColumn: String(decoding: bytes[..<parsed.insertByte], as: UTF8.self).count,
          reportedSymbol: parsed.reportedSymbol, ipsThread: nil)
        frame.symbolOffset = parsed.symbol
        if let module = parsed.module {
          frame.imageIndex = image(for: parsed, module: module, stack: stack, in: &report, keys: &imageKeys)
        }
        report.frames.append(frame)
      }
    }
    guard let firstKind else { return nil }
    report.format = switch firstKind {
    case .sanitizer: .sanitizer
    case .coredump: .coredump
    case .android: .androidTombstone
    case .glibc: .glibcBacktrace
    }
    // coredump's build-ids come from its Module lines, which may follow the stacks.
    for index in report.images.indices where report.images[index].identity == nil {
      let name = report.images[index].path ?? report.images[index].name
      report.images[index].identity = moduleIdentities[name] ?? moduleIdentities[report.images[index].name]
    }
    report.problems = Array(unreadable.prefix(20))
    if unreadable.count > 20 { report.problems.append("\(unreadable.count - 20) more unreadable frame lines") }
    return report
  }

  /// The image `parsed` is in: one per module and load address (per stack for glibc's symbol-only frames).
  private static func image(for parsed: FrameLine, module: String, stack: Int, in report: inout CrashReport,
                            keys: inout [String: Int]) -> Int? {
    var loadAddress: Address = 0
    var fromSymbols = false
    switch parsed.kind {
    case .android:
      loadAddress = 0  // the pc is already module-relative
    case .sanitizer, .coredump:
      guard let offset = parsed.offset else { return nil }  // `(<unknown module>)`, or old coredump without offsets
      loadAddress = parsed.address &- offset
    case .glibc:
      if let offset = parsed.offset { loadAddress = parsed.address &- offset } else { fromSymbols = true }
    }
    let key: String
    switch parsed.kind {
    case .android: key = "a \(module) \(parsed.identity?.hex ?? "")"
    case .glibc: key = "g \(stack) \(module)"
    default: key = "\(parsed.kind) \(module) \(loadAddress)"
    }
    if let existing = keys[key] {
      if report.images[existing].identity == nil { report.images[existing].identity = parsed.identity }
      if report.images[existing].loadAddressFromSymbols && !fromSymbols {
        report.images[existing].loadAddress = loadAddress
        report.images[existing].loadAddressFromSymbols = false
      }
      return existing
    }
    let isPath = module.hasPrefix("/") || module.hasPrefix("./") || module.hasPrefix("../")
    var image = CrashReport.Image(name: Image.shortName(of: module), path: isPath ? module : nil, loadAddress: loadAddress,
                                  endAddress: nil, identity: parsed.identity, architecture: nil)
    image.offsetsFromLoadBias = parsed.kind != .coredump
    image.loadAddressFromSymbols = fromSymbols
    report.images.append(image)
    keys[key] = report.images.count - 1
    return report.images.count - 1
  }

  // MARK: Lines

  static func frameLine(_ bytes: [UInt8]) -> LineResult {
    if let result = numberedFrame(bytes) { return result }
    if let frame = glibcFrame(bytes) { return .frame(frame) }
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
      if hasPrefix(b, position, "pc ") { return androidFrame(b, number: number, from: position + 3) }
      if hasPrefix(b, position, "0x") { return addressFrame(b, number: number, from: position, hasAddress: true) }
      // TSan prints no address: `#0 <null> <null> (race+0xfb9d8)`, or `#0 main /src/a.c:5 (a.out+0x1139)` symbolized.
      if trimmedEnd(b, b.count) > position, b[trimmedEnd(b, b.count) - 1] == UInt8(ascii: ")"),
         case .frame(let frame) = addressFrame(b, number: number, from: position, hasAddress: false), frame.offset != nil {
        return .frame(frame)
      }
    }
    return nil
  }

  /// `0xADDR [name] (MODULE+0xOFF) [(BuildId: ID)]` (sanitizer) or `0xADDR name (MODULE + 0xOFF)` (coredump).
  static func addressFrame(_ b: [UInt8], number: Int, from start: Int, hasAddress: Bool) -> LineResult {
    var position = start
    var address: Address?
    if hasAddress {
      while position < b.count, b[position] != UInt8(ascii: " "), b[position] != UInt8(ascii: "\t") { position += 1 }
      guard let value = hex(b, start + 2..<position) else { return .unreadable("unreadable frame address") }
      address = value
    }
    let addressEnd = position
    var end = trimmedEnd(b, b.count)
    var identity: ImageIdentity?
    var module: String?
    var offset: UInt64?
    var kind = Kind.sanitizer
    if end > addressEnd, b[end - 1] == UInt8(ascii: ")"), let open = matchingOpen(b, closeAt: end - 1, lowerBound: addressEnd) {
      let content = ascii(b, open + 1..<end - 1)
      if content.hasPrefix("BuildId: ") {
        identity = ImageIdentity(content.dropFirst("BuildId: ".count))
        end = trimmedEnd(b, open)
      }
    }
    var middleEnd = end
    if end > addressEnd, b[end - 1] == UInt8(ascii: ")"), let open = matchingOpen(b, closeAt: end - 1, lowerBound: addressEnd) {
      let content = b[(open + 1)..<(end - 1)]
      middleEnd = open
      if let plus = content.lastIndex(of: UInt8(ascii: "+")) {
        let offsetText = ascii(b, plus + 1..<end - 1).trimmingSpaces
        guard offsetText.hasPrefix("0x"), let value = ReportParser.hexNumber(offsetText) else {
          return .unreadable("unreadable module offset in frame")
        }
        offset = value
        if plus > content.startIndex, b[plus - 1] == UInt8(ascii: " ") { kind = .coredump }
        module = ascii(b, content.startIndex..<plus).trimmingSpaces
      } else {
        module = ascii(b, content.startIndex..<content.endIndex).trimmingSpaces
        if identity == nil { kind = .coredump }  // an old coredump line `(libc.so.6)`: no offset to place it
      }
      if var name = module, name.hasSuffix(" (deleted)") { name.removeLast(" (deleted)".count); module = name }
      if module == "<unknown module>" || module == "n/a" || module?.isEmpty == true { module = nil }
    } else if identity == nil {
      return .unreadable("frame without a module")
    }
    let middle = ascii(b, addressEnd..<middleEnd).trimmingSpaces
    let reported: String? = middle.isEmpty || middle == "n/a" || middle == "<null> <null>" ? nil
      : middle.hasPrefix("in ") ? String(middle.dropFirst(3)) : middle
    // The symbol goes after the address, or after the name the line already has: before the module.
    let insert = middle.isEmpty ? addressEnd : trimmedEnd(b, middleEnd)
    // Without an address (TSan) the frame is placed by its module offset alone.
    guard let address = address ?? offset else { return .unreadable("frame without an address or a module offset") }
    return .frame(FrameLine(kind: kind, number: number, address: address, module: module, offset: offset, symbol: nil,
                            identity: identity, insertByte: insert, reportedSymbol: reported))
  }

  /// `pc 000000000004e2b0  /system/lib64/libc.so (abort+160) (BuildId: …)`; `[vdso]`, `[anon:…]` have no file.
  static func androidFrame(_ b: [UInt8], number: Int, from start: Int) -> LineResult {
    var position = start
    while position < b.count, b[position] == UInt8(ascii: " ") { position += 1 }
    let pcStart = position
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

  /// `MODULE(SYMBOL+0xOFF)[0xADDR]`, `MODULE(+0xOFF) [0xADDR]`, `MODULE() [0xADDR]`: the last such group in the line.
  static func glibcFrame(_ b: [UInt8]) -> FrameLine? {
    var searchEnd = b.count
    while let bracket = b[..<searchEnd].lastIndex(of: UInt8(ascii: "[")) {
      searchEnd = bracket
      guard hasPrefix(b, bracket + 1, "0x"), let close = b[bracket...].firstIndex(of: UInt8(ascii: "]")),
            let address = hex(b, bracket + 3..<close) else { continue }
      var parenClose = bracket - 1
      if parenClose >= 0, b[parenClose] == UInt8(ascii: " ") { parenClose -= 1 }
      guard parenClose > 0, b[parenClose] == UInt8(ascii: ")"), let open = matchingOpen(b, closeAt: parenClose, lowerBound: 0) else {
        continue
      }
      var moduleStart = open
      while moduleStart > 0, b[moduleStart - 1] != UInt8(ascii: " "), b[moduleStart - 1] != UInt8(ascii: "\t") { moduleStart -= 1 }
      guard moduleStart < open else { continue }
      let module = ascii(b, moduleStart..<open)
      let content = ascii(b, open + 1..<parenClose)
      var offset: UInt64?
      var symbol: CrashReport.SymbolOffset?
      if let plus = content.lastIndex(of: "+") {
        guard let value = ReportParser.hexNumber(content[content.index(after: plus)...]) else { continue }
        let name = String(content[..<plus])
        if name.isEmpty { offset = value } else { symbol = CrashReport.SymbolOffset(name: name, offset: value) }
      } else if !content.isEmpty {
        symbol = CrashReport.SymbolOffset(name: content, offset: 0)
      }
      return FrameLine(kind: .glibc, number: nil, address: address, module: module, offset: offset, symbol: symbol,
                       identity: nil, insertByte: close + 1, reportedSymbol: symbol.map { "\($0.name)+0x\(hexDigits($0.offset))" })
    }
    return nil
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
