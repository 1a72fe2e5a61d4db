import ImageReaders

/// Function names as a signature writes them, as siggen normalises C++ and Rust frames: the return
/// type and qualifiers dropped, template arguments `<T>`, parameters gone, the line added for the
/// functions the lists name, `, ` between arguments, Rust's hash suffix dropped. Worked on Unicode
/// scalars, as Python works on code points; text searched as UTF-8 (`utf8Range(of:)`: the generic
/// `contains`/`firstRange(of:)`'s first use cost a small `symbolicate` run more than the search:
/// BENCHMARKS.md, the .sym area).
enum SignatureNames {
  typealias Scalars = [Unicode.Scalar]

  static func cpp(_ function: String, line: Int?, lists: SignatureLists) -> String {
    var name = function
    for qualifier in ["const", "const&", "const &", "&&", "&"] where name.hasSuffix(qualifier) {
      name = trimmed(String(name.unicodeScalars.dropLast(qualifier.unicodeScalars.count)))
    }
    if name.utf8Range(of: "::operator") == nil { name = dropPrefixAndReturnType(name) }
    name = replacing(name, "`anonymous namespace'", with: "(anonymous namespace)")
    name = replacingLambdaNumbers(name)
    name = collapse(name, open: "<", close: ">", replacement: "<T>", exceptions: ["name omitted", "IPC::ParamTraits", " in "])
    name = collapse(name, open: "(", close: ")", replacement: "", exceptions: ["anonymous namespace", "operator"])
    if name.utf8Range(of: "clone .cold") != nil { name = collapse(name, open: "[", close: "]", replacement: "", exceptions: []) }
    if lists.lineNumberPattern.matches(name) { name += ":" + (line.map(String.init) ?? "None") }
    return fixCommas(fixSpaces(name))
  }

  static func rust(_ function: String, line: Int?, lists: SignatureLists) -> String {
    var name = dropPrefixAndReturnType(function)
    name = collapse(name, open: "<", close: ">", replacement: "<T>", exceptions: [" as "])
    name = collapse(name, open: "(", close: ")", replacement: "", exceptions: [])
    if lists.lineNumberPattern.matches(name) { name += ":" + (line.map(String.init) ?? "None") }
    name = fixCommas(fixSpaces(name))
    // `::h` and hex digits at the end: rustc's hash.
    var scalars = Array(name.unicodeScalars)
    var index = scalars.count
    while index > 0, scalars[index - 1].properties.isASCIIHexDigit { index -= 1 }
    if index < scalars.count, index >= 3, scalars[index - 1] == "h", scalars[index - 2] == ":", scalars[index - 3] == ":" {
      scalars.removeSubrange((index - 3)...)
      name = String(String.UnicodeScalarView(scalars))
    }
    return name
  }

  static func trimmed(_ text: String) -> String {
    var scalars = Substring(text).unicodeScalars[...]
    while let first = scalars.first, first.properties.isWhitespace { scalars = scalars.dropFirst() }
    while let last = scalars.last, last.properties.isWhitespace { scalars = scalars.dropLast() }
    return String(String.UnicodeScalarView(scalars))
  }

  static func replacing(_ text: String, _ target: String, with replacement: String) -> String {
    guard !target.isEmpty, text.utf8Range(of: target) != nil else { return text }
    var out = ""
    var rest = Substring(text)
    while let range = rest.utf8Range(of: target) {
      out += rest[..<range.lowerBound] + replacement
      rest = rest[range.upperBound...]
    }
    return out + rest
  }

  /// `::$_12::` becomes `::$::` (clang's numbered lambdas).
  static func replacingLambdaNumbers(_ text: String) -> String {
    let scalars = Array(text.unicodeScalars)
    var out = Scalars()
    var index = 0
    while index < scalars.count {
      if index + 4 < scalars.count, scalars[index] == ":", scalars[index + 1] == ":", scalars[index + 2] == "$",
         scalars[index + 3] == "_", scalars[index + 4].properties.numericType == .decimal {
        var end = index + 4
        while end < scalars.count, scalars[end].properties.numericType == .decimal { end += 1 }
        if end + 1 < scalars.count, scalars[end] == ":", scalars[end + 1] == ":" {
          out += Array("::$::".unicodeScalars)
          index = end + 2
          continue
        }
      }
      out.append(scalars[index])
      index += 1
    }
    return String(String.UnicodeScalarView(out))
  }

  /// No space before `*`, `&` and `,`.
  static func fixSpaces(_ text: String) -> String {
    let scalars = Array(text.unicodeScalars)
    var out = Scalars()
    for (index, scalar) in scalars.enumerated() {
      if scalar == " ", index + 1 < scalars.count, ["*", "&", ","].contains(scalars[index + 1]) { continue }
      out.append(scalar)
    }
    return String(String.UnicodeScalarView(out))
  }

  /// A space after every comma.
  static func fixCommas(_ text: String) -> String {
    let scalars = Array(text.unicodeScalars)
    var out = Scalars()
    for (index, scalar) in scalars.enumerated() {
      out.append(scalar)
      if scalar == ",", index + 1 >= scalars.count || scalars[index + 1] != " " { out.append(" ") }
    }
    return String(String.UnicodeScalarView(out))
  }

  static func hasSuffix(_ scalars: ArraySlice<Unicode.Scalar>, _ suffix: Scalars) -> Bool {
    scalars.count >= suffix.count && scalars.suffix(suffix.count).elementsEqual(suffix)
  }

  static func contains(_ scalars: Scalars, _ part: Scalars) -> Bool {
    guard !part.isEmpty else { return true }
    guard scalars.count >= part.count else { return false }
    for start in 0...(scalars.count - part.count) where scalars[start..<start + part.count].elementsEqual(part) { return true }
    return false
  }

  /// Whether the text before an open delimiter ends with an exception, or the token holds one.
  static func isException(_ exceptions: [Scalars], before: ArraySlice<Unicode.Scalar>, token: Scalars) -> Bool {
    exceptions.contains { hasSuffix(before, $0) || contains(token, $0) }
  }

  /// The text between `open` and `close` (nested) replaced by `replacement`, unless the text before it
  /// ends with an exception or it holds one.
  static func collapse(_ function: String, open: Unicode.Scalar, close: Unicode.Scalar, replacement: String,
                       exceptions: [String]) -> String {
    let scalars = Array(function.unicodeScalars)
    let exceptions = exceptions.map { Array($0.unicodeScalars) }
    var collapsed = Scalars()
    var depth = 0
    var token = Scalars()
    for (index, scalar) in scalars.enumerated() {
      if depth == 0 {
        if scalar == open, !isException(exceptions, before: scalars[..<index], token: []) {
          depth = 1
          token = [scalar]
        } else {
          collapsed.append(scalar)
        }
      } else if scalar == open {
        depth += 1
        token.append(scalar)
      } else if scalar == close {
        depth -= 1
        token.append(scalar)
        if depth == 0 {
          collapsed += isException(exceptions, before: scalars[..<index], token: token) ? token : Array(replacement.unicodeScalars)
          token = []
        }
      } else {
        token.append(scalar)
      }
    }
    if depth > 0 {
      // Unclosed at the end: as siggen, judged with the text before the last character.
      let before = scalars[..<(scalars.count - 1)]
      collapsed += isException(exceptions, before: before, token: token) ? token : Array(replacement.unicodeScalars)
    }
    return String(String.UnicodeScalarView(collapsed))
  }

  /// The last space-separated token (delimiters `()`, `{}`, `[]`, `<>`, `` `' `` nest and hide spaces),
  /// with the parameter lists and `[clone ...]` suffixes that follow a space joined back to it.
  static func dropPrefixAndReturnType(_ function: String) -> String {
    let pairs: [Unicode.Scalar: Unicode.Scalar] = ["(": ")", "{": "}", "[": "]", "<": ">", "`": "'"]
    let closers = Set(pairs.values)
    var tokens: [Scalars] = []
    var levels: [Unicode.Scalar] = []
    var current = Scalars()
    for scalar in function.unicodeScalars {
      if pairs[scalar] != nil {
        levels.append(scalar)
        current.append(scalar)
      } else if closers.contains(scalar) {
        if let last = levels.last, pairs[last] == scalar { levels.removeLast() }
        current.append(scalar)
      } else if !levels.isEmpty {
        current.append(scalar)
      } else if scalar == " " {
        tokens.append(current)
        current = []
      } else {
        current.append(scalar)
      }
    }
    if !current.isEmpty { tokens.append(current) }
    while tokens.count > 1, let last = tokens.last,
          last.first == "(" || last.starts(with: Array("[clone".unicodeScalars)) {
      let joined = tokens[tokens.count - 2] + [" "] + last
      tokens.removeLast(2)
      tokens.append(joined)
    }
    return String(String.UnicodeScalarView(tokens.last ?? []))
  }
}
