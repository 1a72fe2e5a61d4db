import ImageLog
import ImageReaders

/// The stack traces Linux tools print, found line by line anywhere in a longer log (a CI log, a
/// journal, logcat), each frame line read where it stands:
/// - sanitizers (and LLVM's own stack dumps), with `symbolize=0` (`#0 0x55a720bade1b  (/tmp/uaf+0x171e1b) (BuildId: 93ac…)`)
///   or symbolized (`#0 0x55d0 in main /src/a.c:12:3`, `#3 0x… in operator new(unsigned long) (/usr/lib/libasan.so.8+0x…)`);
/// - systemd-coredump / `coredumpctl info`: `#0  0x00007f… name (libfoo.so.1 + 0x1234)`, with the
///   `Module libfoo.so.1 with build-id …` lines (also `from deb …`, `Found module …`, `COREDUMP_PACKAGE_JSON=`);
/// - Android tombstones and logcat: `#00 pc 000000000004e2b0  /system/lib64/libc.so (abort+160) (BuildId: …)`;
/// - glibc's `backtrace_symbols(_fd)`: `/lib/x86_64-linux-gnu/libc.so.6(gsignal+0x12)[0x7f71d9059fb2]`, `./prog(+0x11a9) [0x55…]`,
///   `./prog[0x4005d4]`, and a bare `[0x3c13f38d]` where no module holds the address.
///
/// Every stack is a thread of the report (the first is the one marked crashed), named by the line
/// before it (`freed by thread T1 here:`, `Stack trace of thread 827:`). Every frame line of a stack
/// is a frame, also one that names no module (it keeps the report's own function, file and line).
///
/// A `#N 0x…` line alone may be either a sanitizer's or systemd-coredump's: the two are told apart
/// by the shape of the whole stack (`in NAME`, `(module+0x…)`, `(BuildId: …)` are a sanitizer's;
/// `(module + 0x…)` is coredump's), never by how one line ends.
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
    /// The name (and a sanitizer's location) the line already gives, as written.
    var reportedSymbol: String?
  }

  /// How a frame line reads as one kind: a frame, a line that looks like a frame but cannot be
  /// read (named in the report's problems), or not a frame of that kind.
  enum Reading { case frame(FrameLine), unreadable(String), none }

  /// What a `#N 0x…` line says of its kind: `in NAME`, `(module+0x…)`, `(BuildId: …)`, `(<unknown module>)`,
  /// TSan's `(0x…)` and `(discriminator N)` are a sanitizer's; `(module + 0x…)` is systemd-coredump's.
  enum Evidence { case sanitizer, coredump, none }

  /// A `#N 0x…` line read both ways; its stack decides which reading stands.
  struct NumberedLine {
    var number: Int
    var evidence: Evidence
    /// An old coredump line's `(libc.so.6)`: a module without an offset.
    var hasBareGroup: Bool
    var asSanitizer: Reading
    var asCoredump: Reading
  }

  /// One line, read alone. Indirect: a log's lines are mostly `.other`, and each costs only a tag.
  indirect enum LineResult {
    case numbered(NumberedLine)
    case android(FrameLine)
    /// `strong` when the line alone has glibc's shape (`MODULE(…) [0x…]`, `/path/module[0x…]`); a bare
    /// `[0x…]` or `name[0x…]` is a frame only in a stack with a strong line.
    case glibc(FrameLine, strong: Bool)
    case unreadable(String)
    case other
  }

  private enum Family { case numbered, android, glibc }

  /// A run of frame lines: numbered ones while the numbers rise (across other lines of the log: logcat
  /// interleaves other tags), glibc's while they follow each other (they carry no number).
  private struct Stack {
    var family: Family
    var lines: [Int] = []
    /// The kind its frames are read as; `nil` when the run is no stack after all.
    var kind: Kind?
  }

  /// A report of the frames in `lines`, or `nil` when no line is a frame of these formats.
  static func parse(_ lines: [String]) -> CrashReport? {
    var results: [LineResult] = []
    results.reserveCapacity(lines.count)
    var moduleIdentities: [String: ImageIdentity] = [:]
    var sanitizerMarked = false, coredumpMarked = false
    for line in lines {
      let bytes = Array(line.utf8)
      let result = frameLine(bytes)
      if case .other = result {
        // Most lines of a log are neither: a byte search first, the string searches only on a hit.
        if contains(bytes, "build-id"), let (name, identity) = moduleLine(line) {
          moduleIdentities[name] = identity
          coredumpMarked = true
        } else if contains(bytes, "COREDUMP_PACKAGE_JSON="), let ids = packageJSON(line) {
          for (name, identity) in ids where moduleIdentities[name] == nil { moduleIdentities[name] = identity }
          coredumpMarked = true
        }
        if contains(bytes, "Sanitizer") || contains(bytes, "runtime error:") || contains(bytes, "==ERROR:") {
          sanitizerMarked = true
        }
        if contains(bytes, "Stack trace of thread") || contains(bytes, "coredump") || contains(bytes, "dumped core") {
          coredumpMarked = true
        }
      }
      results.append(result)
    }
    var stacks = Self.stacks(results)
    decideKinds(&stacks, results, documentKind: sanitizerMarked == coredumpMarked ? nil : sanitizerMarked ? .sanitizer : .coredump)
    var stackOfLine = [Int](repeating: -1, count: lines.count)
    for (index, stack) in stacks.enumerated() where stack.kind != nil {
      for line in stack.lines { stackOfLine[line] = index }
    }

    var report = CrashReport(format: .sanitizer, lines: lines)
    var firstKind: Kind?
    var imageKeys: [String: Int] = [:]
    var heading: String?  // the last non-blank line that is no frame, trimmed when a stack starts
    var threadOfStack = [Int](repeating: -1, count: stacks.count)
    var previousIndex: Int?
    var unreadable: [String] = []
    for (lineIndex, line) in lines.enumerated() {
      let stackIndex = stackOfLine[lineIndex]
      guard stackIndex >= 0, let kind = stacks[stackIndex].kind else {
        if case .unreadable(let why) = results[lineIndex] {
          unreadable.append("line \(lineIndex + 1): \(why) '\(line.prefix(80))'")
        } else if line.utf8.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) {
          heading = line
        }
        continue
      }
      let parsed: FrameLine
      switch reading(results[lineIndex], as: kind) {
      case .frame(let frame): parsed = frame
      case .unreadable(let why):
        unreadable.append("line \(lineIndex + 1): \(why) '\(line.prefix(80))'")
        continue
      case .none:
        continue
      }
      if firstKind == nil { firstKind = kind }
      if threadOfStack[stackIndex] < 0 {
        threadOfStack[stackIndex] = report.threads.count
        report.threads.append(CrashReport.Thread(number: report.threads.count, crashed: report.threads.isEmpty,
                                                 name: heading.map { String($0.trimmingSpaces.prefix(120)) }))
        previousIndex = nil
      }
      let thread = threadOfStack[stackIndex]
      let index = parsed.number ?? (previousIndex.map { $0 + 1 } ?? 0)
      previousIndex = index
      let bytes = Array(line.utf8)
      var frame = CrashReport.Frame(
        thread: thread, index: index, address: parsed.address, imageIndex: nil,
        // Sanitizers print the call (pc - 1) already and Android's unwinder adjusts the pc itself;
        // coredump's and glibc's frames after the first are return addresses.
        isReturnAddress: kind == .glibc || (kind == .coredump && index > 0),
        line: lineIndex, symbolColumn: String(decoding: bytes[..<min(parsed.insertByte, bytes.count)], as: UTF8.self).count,
        reportedSymbol: parsed.reportedSymbol, ipsThread: nil)
      frame.symbolOffset = parsed.symbol
      if let module = parsed.module {
        frame.imageIndex = image(for: parsed, module: module, stack: thread, in: &report, keys: &imageKeys)
      } else if kind != .android {
        // Android's `[vdso]` and `[anon:…]` name a mapping, not a file: they stay frames without an image.
        frame.namesNoModule = true
      }
      report.frames.append(frame)
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

  /// The runs of frame lines in `results`, in order, each with its family (kinds are decided after).
  private static func stacks(_ results: [LineResult]) -> [Stack] {
    var stacks: [Stack] = []
    var previousNumber: Int?
    var previousFamily: Family?
    var glibcAdjacent = false  // the line before was a glibc frame
    for (lineIndex, result) in results.enumerated() {
      let family: Family
      var number: Int?
      switch result {
      case .numbered(let line): (family, number) = (.numbered, line.number)
      case .android(let frame): (family, number) = (.android, frame.number)
      case .glibc: family = .glibc
      case .unreadable, .other:
        glibcAdjacent = false
        continue
      }
      let continues = !stacks.isEmpty && previousFamily == family
        && (family == .glibc ? glibcAdjacent : number.map { number in previousNumber.map { number > $0 } ?? false } ?? false)
      if !continues { stacks.append(Stack(family: family)) }
      stacks[stacks.count - 1].lines.append(lineIndex)
      previousFamily = family
      previousNumber = number
      glibcAdjacent = family == .glibc
    }
    return stacks
  }

  /// Gives each stack its kind, or none when it is no stack: a numbered stack is a sanitizer's or
  /// coredump's by what its lines say (`Evidence`); one whose lines say nothing either way takes the kind
  /// the rest of the log names (a `==ERROR: AddressSanitizer` line, `Stack trace of thread`), else that of
  /// its neighbours, else coredump's when it names modules without offsets (`(libc.so.6)`, as systemd
  /// wrote them before offsets), else it is no stack. A glibc stack needs one line of glibc's own shape.
  private static func decideKinds(_ stacks: inout [Stack], _ results: [LineResult], documentKind: Kind?) {
    for index in stacks.indices {
      switch stacks[index].family {
      case .android: stacks[index].kind = .android
      case .glibc:
        let strong = stacks[index].lines.contains { if case .glibc(_, true) = results[$0] { true } else { false } }
        stacks[index].kind = strong ? .glibc : nil
      case .numbered:
        var sanitizer = 0, coredump = 0
        for line in stacks[index].lines {
          guard case .numbered(let numbered) = results[line] else { continue }
          switch numbered.evidence {
          case .sanitizer: sanitizer += 1
          case .coredump: coredump += 1
          case .none: break
          }
        }
        if sanitizer + coredump > 0 { stacks[index].kind = sanitizer >= coredump ? .sanitizer : .coredump }
      }
    }
    // The nearest numbered stack decided by its own lines, before (else after) each: two passes.
    var before = [Kind?](repeating: nil, count: stacks.count)
    var after = [Kind?](repeating: nil, count: stacks.count)
    var last: Kind?
    for index in stacks.indices {
      before[index] = last
      if stacks[index].family == .numbered, let kind = stacks[index].kind { last = kind }
    }
    last = nil
    for index in stacks.indices.reversed() {
      after[index] = last
      if stacks[index].family == .numbered, let kind = stacks[index].kind { last = kind }
    }
    for index in stacks.indices where stacks[index].family == .numbered && stacks[index].kind == nil {
      let bareGroups = stacks[index].lines.contains {
        if case .numbered(let line) = results[$0] { line.hasBareGroup } else { false }
      }
      stacks[index].kind = documentKind ?? before[index] ?? after[index] ?? (bareGroups ? .coredump : nil)
    }
  }

  /// The reading of `result` for a stack of `kind`.
  private static func reading(_ result: LineResult, as kind: Kind) -> Reading {
    switch result {
    case .numbered(let line): kind == .coredump ? line.asCoredump : line.asSanitizer
    case .android(let frame), .glibc(let frame, _): .frame(frame)
    case .unreadable(let why): .unreadable(why)
    case .other: .none
    }
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
         frame.offset != nil || (frame.module == nil && (frame.reportedSymbol.map { functionAndLocation($0).1 != nil } ?? false
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
    if ReportParser.hexNumber(content) != nil { return .address }
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
        address = ReportParser.hexNumber(content)
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
      if var name = module, name.hasSuffix(" (deleted)") { name.removeLast(" (deleted)".count); module = name }
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
    guard offsetText.hasPrefix("0x"), let value = ReportParser.hexNumber(offsetText) else { return nil }
    var module = content[..<plus].trimmingSpaces
    if module.hasSuffix(" (deleted)") { module.removeLast(" (deleted)".count) }
    return (module == "<unknown module>" || module == "n/a" || module.isEmpty ? nil : module, value)
  }

  /// A sanitizer frame's text before its groups, as the report wrote it: `in NAME LOCATION`, `in NAME`,
  /// TSan's `NAME LOCATION` and `<null> <null>`. The location is the rest after the first blank outside
  /// parentheses (`operator new(unsigned long) ../src/new.cpp:98`) that reads as `FILE:LINE[:COLUMN]`
  /// with no parenthesis in FILE, or as a file name alone (`worker sanitizer-uaf.c`: a symbol table's
  /// `STT_FILE`, no line); `??:0` and `??:?` (addr2line's unknown) are no location.
  static func functionAndLocation(_ text: String) -> (String?, String?, Int?, Int?) {
    var rest = Substring(text)
    if rest.hasPrefix("in ") { rest = rest.dropFirst(3) }
    guard !rest.isEmpty, rest != "n/a" else { return (nil, nil, nil, nil) }
    // A location holds no parenthesis: only blanks after the last one can start it, and a few are tried
    // (a line is bounded by the report alone).
    var index = rest.lastIndex { $0 == "(" || $0 == ")" }.map { rest.index(after: $0) } ?? rest.startIndex
    var tries = 0
    while index < rest.endIndex, tries < 32 {
      if rest[index] == " " {
        tries += 1
        let name = rest[..<index].trimmingSpaces
        let tail = rest[rest.index(after: index)...].trimmingSpaces
        if tail == "<null>" || tail == "??:0" || tail == "??:?" { return (function(name), nil, nil, nil) }
        if let (file, line, column) = location(tail) { return (function(name), file, line, column) }
        if isFileName(tail) { return (function(name), tail, nil, nil) }
      }
      index = rest.index(after: index)
    }
    return (function(rest.trimmingSpaces), nil, nil, nil)
  }

  private static func function(_ name: String) -> String? { name.isEmpty || name == "<null>" ? nil : name }

  /// A file's name with a short extension of letters (`a.c`, `asan_malloc_linux.cpp`), no blank or parenthesis.
  static func isFileName(_ text: String) -> Bool {
    guard !text.contains(" "), !text.contains("("), !text.contains(")"), let dot = text.lastIndex(of: "."),
          dot > text.startIndex else { return false }
    let suffix = text[text.index(after: dot)...]
    return (1...5).contains(suffix.count) && suffix.allSatisfy { $0.isLetter || $0.isNumber } && suffix.first?.isLetter == true
  }

  /// `FILE:LINE` or `FILE:LINE:COLUMN`, FILE without parentheses.
  static func location(_ text: String) -> (String, Int, Int?)? {
    guard !text.contains("("), !text.contains(")") else { return nil }
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count >= 2 else { return nil }
    if parts.count >= 3, let line = Int(parts[parts.count - 2]), let column = Int(parts[parts.count - 1]) {
      let file = parts.dropLast(2).joined(separator: ":")
      return file.isEmpty ? nil : (file, line, column)
    }
    guard let line = Int(parts[parts.count - 1]) else { return nil }
    let file = parts.dropLast().joined(separator: ":")
    return file.isEmpty ? nil : (file, line, nil)
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
      var symbol: CrashReport.SymbolOffset?
      if let plus = content.lastIndex(of: "+") {
        guard let value = ReportParser.hexNumber(content[content.index(after: plus)...]) else { continue }
        let name = String(content[..<plus])
        if name.isEmpty { offset = value } else { symbol = CrashReport.SymbolOffset(name: name, offset: value) }
      } else if !content.isEmpty {
        symbol = CrashReport.SymbolOffset(name: content, offset: 0)
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
