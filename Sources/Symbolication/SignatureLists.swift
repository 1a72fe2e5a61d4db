import ProcessInspection
import Snapshot
import ImageReaders
import Synchronization

/// The lists a crash signature is made with, in Socorro's format (Mozilla's `siggen`, its `siglists/`
/// folder): one entry a line, blank lines and lines starting with `#` ignored, surrounding spaces
/// trimmed; `irrelevant_signature_re.txt`, `prefix_signature_re.txt` and
/// `signatures_with_line_numbers_re.txt` hold regular expressions (matched at the start of a
/// normalised frame, as Python's `re.match`), `signature_sentinels.txt` names (compared whole).
package struct SignatureLists: Sendable {
  /// Frames left out of the signature (`raise`, `abort`, a sanitizer's own frames...).
  package var irrelevant: [String]
  /// Frames the signature goes on past (`__assert_fail`, `std::terminate`, allocators...).
  package var prefix: [String]
  /// Functions whose line number is part of their frame (`name:LINE`).
  package var lineNumbers: [String]
  /// Frames the walk starts at when the stack holds one (`_purecall`, Rust's `core::panicking::panic`).
  package var sentinels: [String]

  let irrelevantPattern: SignaturePattern
  let prefixPattern: SignaturePattern
  let lineNumberPattern: SignaturePattern

  /// The four files' names, as siggen names them.
  package static let fileNames = (irrelevant: "irrelevant_signature_re.txt", prefix: "prefix_signature_re.txt",
                                  lineNumbers: "signatures_with_line_numbers_re.txt", sentinels: "signature_sentinels.txt")

  /// Lists from the four files' texts. Throws, naming the file and line, when an expression does not compile.
  /// `checked: false` leaves the expressions to be parsed when first needed (imagelog's own lists, which a test parses).
  package init(irrelevant: String, prefix: String, lineNumbers: String, sentinels: String,
               checked: Bool = true) throws(ReportError) {
    self.irrelevant = Self.entries(irrelevant)
    self.prefix = Self.entries(prefix)
    self.lineNumbers = Self.entries(lineNumbers)
    self.sentinels = Self.entries(sentinels)
    irrelevantPattern = try SignaturePattern(self.irrelevant, file: Self.fileNames.irrelevant, checked: checked)
    prefixPattern = try SignaturePattern(self.prefix, file: Self.fileNames.prefix, checked: checked)
    lineNumberPattern = try SignaturePattern(self.lineNumbers, file: Self.fileNames.lineNumbers, checked: checked)
  }

  /// The lists in `directory`, siggen's four files (`--signature-lists DIR`); a file that is not there
  /// is an empty list, as in a team's folder that keeps only some of them. Throws when one cannot be
  /// read or holds an expression that does not compile.
  package init(directory: String) throws(ReportError) {
    func read(_ name: String) throws(ReportError) -> String {
      let path = directory + "/" + name
      guard FileSystem.kind(path) != .missing else { return "" }
      do {
        return String(decoding: try ProcFile.read(path), as: UTF8.self)
      } catch {
        throw ReportError("\(path): \(error)")
      }
    }
    guard FileSystem.kind(directory) == .directory else { throw ReportError("\(directory): not a folder of signature lists") }
    try self.init(irrelevant: read(Self.fileNames.irrelevant), prefix: read(Self.fileNames.prefix),
                  lineNumbers: read(Self.fileNames.lineNumbers), sentinels: read(Self.fileNames.sentinels))
  }

  /// A list file's entries: lines trimmed, without blanks and `#` comments. Read as UTF-8 bytes (a
  /// Character walk was a large share of a small `symbolicate` run: BENCHMARKS.md, the .sym area):
  /// `\r\n` ends a line as `\n` does, its `\r` trimmed as whitespace; a line with other than ASCII at
  /// an end is trimmed by Unicode scalar.
  static func entries(_ text: String) -> [String] {
    var entries: [String] = []
    var start = text.utf8.startIndex
    let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
    while start < text.utf8.endIndex {
      let end = text.utf8[start...].firstIndex(of: 0x0A) ?? text.utf8.endIndex
      var line = text.utf8[start..<end]
      while let first = line.first, isSpace(first) { line = line.dropFirst() }
      while let last = line.last, isSpace(last) { line = line.dropLast() }
      start = end < text.utf8.endIndex ? text.utf8.index(after: end) : end
      var entry = Substring(line)
      if let first = line.first, let last = line.last, first >= 0x80 || last >= 0x80 {
        let scalars = entry.unicodeScalars
        guard let from = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let to = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { continue }
        entry = Substring(scalars[from..<scalars.index(after: to)])
      }
      if entry.isEmpty || entry.utf8.first == UInt8(ascii: "#") { continue }
      entries.append(String(entry))
    }
    return entries
  }

  /// imagelog's own lists, for Linux, Swift and Apple code (Resources/SignatureLists/*.txt, compiled in:
  /// imagelog runs without its source tree). They compile: a test holds the texts to the files.
  package static let imagelogDefaults: SignatureLists = {
    do {
      return try SignatureLists(irrelevant: DefaultSignatureLists.irrelevant, prefix: DefaultSignatureLists.prefix,
                                lineNumbers: DefaultSignatureLists.lineNumbers, sentinels: DefaultSignatureLists.sentinels,
                                checked: false)
    } catch {
      fatalError("imagelog's default signature lists do not compile: \(error)")  // programmer error, tested
    }
  }()
}

/// Expressions matched at the start of a string as Python's `re.match` matches them joined with `|`:
/// true when any one matches. An entry that is a literal (escaped punctuation allowed, a final `$`
/// anchoring it) is compared as text; only the others are compiled, and only when a string starts with
/// the literal text the expression's every match starts with (building a Swift `Regex` is slow beside a
/// run of `symbolicate`, which is mostly start-up; imagelog's own lists have four, all starting `__`).
struct SignaturePattern: Sendable {
  /// Literal entries: the text, and whether it must be the whole string.
  let literals: [(text: String, whole: Bool)]
  let expressions: [Expression]

  /// An expression, parsed when a string first gets past its literal start.
  final class Expression: Sendable {
    let source: String
    /// The text every match starts with ("" when the expression does not say).
    let start: String
    private let regex = Mutex<Regex<AnyRegexOutput>??>(nil)

    init(_ source: String) {
      self.source = source
      start = SignaturePattern.literalStart(source)
    }

    /// The expression, compiled once; `nil` when it is no regular expression.
    func compiled() -> Regex<AnyRegexOutput>? {
      regex.withLock { cached in
        if let cached { return cached }
        let made = try? Regex(source).matchingSemantics(.unicodeScalar)
        cached = .some(made)
        return made
      }
    }

    func matchesStart(of text: String) -> Bool {
      guard text.utf8.starts(with: start.utf8), let regex = compiled() else { return false }
      return (try? regex.prefixMatch(in: text)) != nil
    }
  }

  /// The entries, sorted into literals and expressions. `checked`: every expression is parsed now, and
  /// one that does not parse throws naming `file` and the entry (lists from a folder); imagelog's own
  /// lists are parsed by a test instead.
  init(_ entries: [String], file: String, checked: Bool = true) throws(ReportError) {
    var literals: [(String, Bool)] = []
    var expressions: [Expression] = []
    for (index, entry) in entries.enumerated() {
      if let literal = Self.literal(entry) {
        literals.append(literal)
        continue
      }
      let expression = Expression(entry)
      if checked, expression.compiled() == nil {
        throw ReportError("\(file): entry \(index + 1) is no regular expression: \(entry)")
      }
      expressions.append(expression)
    }
    self.literals = literals
    self.expressions = expressions
  }

  /// The literal text at the start of `entry` that every match of it starts with: up to the first
  /// operator, less the last character when a quantifier follows it; "" when an alternation outside
  /// parentheses or brackets (`a|b`) gives it another start.
  static func literalStart(_ entry: String) -> String {
    var text = String.UnicodeScalarView()
    var ended = false
    var escaped = false
    var depth = 0
    var inBrackets = false
    for scalar in entry.unicodeScalars {
      if escaped {
        escaped = false
        if !ended {
          if scalar.isASCII, !scalar.properties.isAlphabetic, !("0"..."9").contains(scalar) {
            text.append(scalar)
          } else {
            ended = true
          }
        }
        continue
      }
      if scalar == "\\" {
        escaped = true
        continue
      }
      if inBrackets {
        if scalar == "]" { inBrackets = false }
        continue
      }
      if "?*+{".unicodeScalars.contains(scalar), !ended {
        if !text.isEmpty { text.removeLast() }
        ended = true
      }
      switch scalar {
      case "[": inBrackets = true; ended = true
      case "(": depth += 1; ended = true
      case ")": depth -= 1; ended = true
      case "|" where depth <= 0: return ""
      default:
        if ".^$*+?{}|".unicodeScalars.contains(scalar) { ended = true } else if !ended { text.append(scalar) }
      }
    }
    return String(text)
  }

  /// `entry` as literal text when it has no operator: `\X` for punctuation X is X, a final `$` means
  /// the whole string; `nil` for an expression. Read as UTF-8 bytes: every operator is ASCII.
  static func literal(_ entry: String) -> (String, Bool)? {
    var bytes = entry.utf8[...]
    var whole = false
    if bytes.last == UInt8(ascii: "$"), bytes.dropLast().last != UInt8(ascii: "\\") {
      whole = true
      bytes = bytes.dropLast()
    }
    var text: [UInt8] = []
    text.reserveCapacity(bytes.count)
    var escaped = false
    for byte in bytes {
      if escaped {
        // Only ASCII punctuation stands for itself escaped (`\d`, `\w`, `\b` are classes and anchors).
        guard byte < 0x80, !Self.isAlphanumeric(byte) else { return nil }
        text.append(byte)
        escaped = false
      } else if byte == UInt8(ascii: "\\") {
        escaped = true
      } else if Self.isOperator(byte) {
        return nil
      } else {
        text.append(byte)
      }
    }
    return escaped ? nil : (String(decoding: text, as: UTF8.self), whole)
  }

  static func isAlphanumeric(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
  }

  /// `.^$*+?()[]{}|`
  static func isOperator(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "$"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "?"),
         UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "{"), UInt8(ascii: "}"),
         UInt8(ascii: "|"): true
    default: false
    }
  }

  /// True when an entry matches at the start of `text` (UTF-8 bytes compared: the same as comparing scalars).
  func matches(_ text: String) -> Bool {
    for (literal, whole) in literals where whole ? text.utf8.elementsEqual(literal.utf8) : text.utf8.starts(with: literal.utf8) {
      return true
    }
    return expressions.contains { $0.matchesStart(of: text) }
  }
}
