import ProcessInspection
import ImageReaders
import Snapshot

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
    var symbol: ProcessSnapshot.SymbolOffset?
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

  /// `Module … with build-id …` (or a `COREDUMP_PACKAGE_JSON` entry, which does not replace a Module line's).
  private struct ModuleLine {
    var line: Int
    var name: String
    var identity: ImageIdentity
    var fromPackage: Bool
  }

  /// The reports in `lines`, in order; none when no line is a frame of these formats. Without
  /// `splittingKinds` the whole log is one report, whatever kinds its stacks are; with it, a log holding reports of different kinds one after another (V8's `==== C stack
  /// trace` in glibc's form, then the AddressSanitizer trap it ends in) is one report per run of stacks
  /// of one kind, each with its own lines: a run starts on the line after the previous run's last frame,
  /// so the text between (`==ERROR: AddressSanitizer: …`) belongs to the report it introduces.
  static func parseReports(_ lines: [String], splittingKinds: Bool = true) -> [ProcessSnapshot] {
    var results: [LineResult] = []
    results.reserveCapacity(lines.count)
    var moduleLines: [ModuleLine] = []
    var sanitizerMarked = false, coredumpMarked = false
    for (lineIndex, line) in lines.enumerated() {
      let bytes = Array(line.utf8)
      let result = frameLine(bytes)
      if case .other = result {
        // Most lines of a log are neither: a byte search first, the string searches only on a hit.
        if contains(bytes, "build-id"), let (name, identity) = moduleLine(line) {
          moduleLines.append(ModuleLine(line: lineIndex, name: name, identity: identity, fromPackage: false))
          coredumpMarked = true
        } else if contains(bytes, "COREDUMP_PACKAGE_JSON="), let ids = packageJSON(line) {
          for (name, identity) in ids {
            moduleLines.append(ModuleLine(line: lineIndex, name: name, identity: identity, fromPackage: true))
          }
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
    var starts = [0]
    if splittingKinds {
      var previous: (kind: Kind, lastLine: Int)?
      for stack in stacks {
        guard let kind = stack.kind, let first = stack.lines.first, let last = stack.lines.last else { continue }
        // Stacks interleaved with another (logcat's tags) are not told apart by line: they stay one report.
        if let previous, previous.kind != kind, previous.lastLine < first { starts.append(previous.lastLine + 1) }
        previous = (kind, max(last, previous?.lastLine ?? last))
      }
    }
    var reports: [ProcessSnapshot] = []
    for (index, start) in starts.enumerated() {
      let range = start..<(index + 1 < starts.count ? starts[index + 1] : lines.count)
      if let report = report(lines, range, results: results, stacks: stacks, stackOfLine: stackOfLine,
                             moduleLines: moduleLines) {
        reports.append(report)
      }
    }
    return reports
  }

  /// The report of the frames in `lines[range]`, positions counted from the range's first line.
  private static func report(_ lines: [String], _ range: Range<Int>, results: [LineResult], stacks: [Stack],
                             stackOfLine: [Int], moduleLines: [ModuleLine]) -> ProcessSnapshot? {
    // The whole log (the usual case) shares its lines' array: a long log's lines are not held twice.
    let own = range == lines.indices ? lines : Array(lines[range])
    var report = ProcessSnapshot(format: .sanitizer, document: ReportDocument(lines: own))
    var firstKind: Kind?
    var imageKeys: [String: Int] = [:]
    var heading: String?  // the last non-blank line that is no frame, trimmed when a stack starts
    var threadOfStack = [Int](repeating: -1, count: stacks.count)
    var previousIndex: Int?
    var unreadable: [String] = []
    for lineIndex in range {
      let line = lines[lineIndex]
      let stackIndex = stackOfLine[lineIndex]
      guard stackIndex >= 0, let kind = stacks[stackIndex].kind else {
        if case .unreadable(let why) = results[lineIndex] {
          unreadable.append("line \(lineIndex - range.lowerBound + 1): \(why) '\(line.prefix(80))'")
        } else if line.utf8.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) {
          heading = line
        }
        continue
      }
      let parsed: FrameLine
      switch reading(results[lineIndex], as: kind) {
      case .frame(let frame): parsed = frame
      case .unreadable(let why):
        unreadable.append("line \(lineIndex - range.lowerBound + 1): \(why) '\(line.prefix(80))'")
        continue
      case .none:
        continue
      }
      if firstKind == nil { firstKind = kind }
      if threadOfStack[stackIndex] < 0 {
        threadOfStack[stackIndex] = report.threads.count
        report.threads.append(ReportThread(number: report.threads.count, name: heading.map { String($0.trimmingSpaces.prefix(120)) },
                                           crashed: report.threads.isEmpty))
        previousIndex = nil
      }
      let thread = threadOfStack[stackIndex]
      let index = parsed.number ?? (previousIndex.map { $0 + 1 } ?? 0)
      previousIndex = index
      let bytes = Array(line.utf8)
      var frame = ReportFrame(
        number: index, address: parsed.address,
        // Sanitizers print the call (pc - 1) already and Android's unwinder adjusts the pc itself;
        // coredump's and glibc's frames after the first are return addresses.
        isReturnAddress: kind == .glibc || (kind == .coredump && index > 0),
        reportedSymbol: parsed.reportedSymbol, symbolOffset: parsed.symbol,
        position: ProcessSnapshot.Position(
          line: lineIndex - range.lowerBound,
          column: String(decoding: bytes[..<min(parsed.insertByte, bytes.count)], as: UTF8.self).count))
      if let module = parsed.module {
        frame.imageIndex = image(for: parsed, module: module, stack: thread, in: &report, keys: &imageKeys)
      } else if kind != .android {
        // Android's `[vdso]` and `[anon:…]` name a mapping, not a file: they stay frames without an image.
        frame.namesNoModule = true
      }
      report.threads[thread].frames.append(frame)
    }
    guard let firstKind else { return nil }
    report.format = switch firstKind {
    case .sanitizer: .sanitizer
    case .coredump: .coredump
    case .android: .androidTombstone
    case .glibc: .glibcBacktrace
    }
    // coredump's build-ids come from its Module lines, which may follow the stacks (in the same report).
    var moduleIdentities: [String: ImageIdentity] = [:]
    for module in moduleLines where range.contains(module.line) {
      if !module.fromPackage || moduleIdentities[module.name] == nil { moduleIdentities[module.name] = module.identity }
    }
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
  private static func image(for parsed: FrameLine, module: String, stack: Int, in report: inout ProcessSnapshot,
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
    var image = ReportImage(name: Image.shortName(of: module), path: isPath ? module : nil, loadAddress: loadAddress,
                            endAddress: nil, identity: parsed.identity, architecture: nil)
    image.offsetsFromLoadBias = parsed.kind != .coredump
    image.loadAddressFromSymbols = fromSymbols
    report.images.append(image)
    keys[key] = report.images.count - 1
    return report.images.count - 1
  }
}
