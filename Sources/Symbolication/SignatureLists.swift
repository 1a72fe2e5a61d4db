import ProcessInspection
import Snapshot
import ImageReaders

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
  package init(irrelevant: String, prefix: String, lineNumbers: String, sentinels: String) throws(ReportError) {
    self.irrelevant = Self.entries(irrelevant)
    self.prefix = Self.entries(prefix)
    self.lineNumbers = Self.entries(lineNumbers)
    self.sentinels = Self.entries(sentinels)
    irrelevantPattern = try SignaturePattern(self.irrelevant, file: Self.fileNames.irrelevant)
    prefixPattern = try SignaturePattern(self.prefix, file: Self.fileNames.prefix)
    lineNumberPattern = try SignaturePattern(self.lineNumbers, file: Self.fileNames.lineNumbers)
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

  /// A list file's entries: lines trimmed, without blanks and `#` comments.
  static func entries(_ text: String) -> [String] {
    text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).compactMap { line in
      let trimmed = line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()
      let entry = String(trimmed)
      return entry.isEmpty || entry.hasPrefix("#") ? nil : entry
    }
  }

  /// imagelog's own lists, for Linux, Swift and Apple code (Resources/SignatureLists/*.txt, compiled in:
  /// imagelog runs without its source tree). They compile: a test holds the texts to the files.
  package static let imagelogDefaults: SignatureLists = {
    do {
      return try SignatureLists(irrelevant: DefaultSignatureLists.irrelevant, prefix: DefaultSignatureLists.prefix,
                                lineNumbers: DefaultSignatureLists.lineNumbers, sentinels: DefaultSignatureLists.sentinels)
    } catch {
      fatalError("imagelog's default signature lists do not compile: \(error)")  // programmer error, tested
    }
  }()
}

/// Expressions matched at the start of a string as Python's `re.match` matches them joined with `|`:
/// true when any one matches. An entry that is a literal (escaped punctuation allowed, a final `$`
/// anchoring it) is compared as text; only the others are compiled (building a Swift `Regex` is slow
/// beside a run of `symbolicate`, which is mostly start-up).
struct SignaturePattern: @unchecked Sendable {  // a compiled Regex is immutable; it is not marked Sendable
  /// Literal entries: the text, and whether it must be the whole string.
  let literals: [(text: String, whole: Bool)]
  let expressions: [Regex<AnyRegexOutput>]

  init(_ entries: [String], file: String) throws(ReportError) {
    var literals: [(String, Bool)] = []
    var expressions: [Regex<AnyRegexOutput>] = []
    for (index, entry) in entries.enumerated() {
      if let literal = Self.literal(entry) {
        literals.append(literal)
        continue
      }
      do {
        expressions.append(try Regex(entry).matchingSemantics(.unicodeScalar))
      } catch {
        throw ReportError("\(file): entry \(index + 1) is no regular expression: \(entry)")
      }
    }
    self.literals = literals
    self.expressions = expressions
  }

  /// `entry` as literal text when it has no operator: `\X` for punctuation X is X, a final `$` means
  /// the whole string; `nil` for an expression.
  static func literal(_ entry: String) -> (String, Bool)? {
    var text = String.UnicodeScalarView()
    var scalars = entry.unicodeScalars[...]
    var whole = false
    if scalars.last == "$", scalars.dropLast().last != "\\" {
      whole = true
      scalars = scalars.dropLast()
    }
    var escaped = false
    for scalar in scalars {
      if escaped {
        // Only punctuation stands for itself escaped (`\d`, `\w`, `\b` are classes and anchors).
        guard scalar.isASCII, !scalar.properties.isAlphabetic, !("0"..."9").contains(scalar) else { return nil }
        text.append(scalar)
        escaped = false
      } else if scalar == "\\" {
        escaped = true
      } else if ".^$*+?()[]{}|".unicodeScalars.contains(scalar) {
        return nil
      } else {
        text.append(scalar)
      }
    }
    return escaped ? nil : (String(text), whole)
  }

  /// True when an entry matches at the start of `text`.
  func matches(_ text: String) -> Bool {
    for (literal, whole) in literals
      where whole ? text.unicodeScalars.elementsEqual(literal.unicodeScalars) : text.unicodeScalars.starts(with: literal.unicodeScalars) {
      return true
    }
    return expressions.contains { (try? $0.prefixMatch(in: text)) != nil }
  }
}
