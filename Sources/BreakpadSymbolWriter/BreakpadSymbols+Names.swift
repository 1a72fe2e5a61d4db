import Symbolication

/// The source language a name is written in, as symbolic (under Mozilla's `dump_syms`) tells them
/// apart: from the unit's `DW_AT_language`, else from the name's look.
enum BreakpadLanguage: UInt8, Hashable {
  case unknown, c, cpp, objC, objCpp, rust, swift, other

  /// symbolic's `language_from_dwarf`: the `DW_LANG_*` values it knows; newer ones (C++17, C17) are
  /// unknown, so their names are told apart by their look.
  init(dwarf value: UInt64?) {
    switch value {
    case 0x01, 0x02, 0x0c, 0x1d: self = .c  // C89, C, C99, C11
    case 0x04, 0x19, 0x1a, 0x21: self = .cpp  // C++, C++03, C++11, C++14
    case 0x10: self = .objC
    case 0x11: self = .objCpp
    case 0x1c: self = .rust
    case 0x1e: self = .swift
    case 0x13, 0x16: self = .other  // D, Go: left as they are
    default: self = .unknown
    }
  }
}

/// Turns the names a binary stores into the names a `.sym` file holds, as `dump_syms` does: compiler
/// suffixes dropped (`.cold`, `.constprop.0`, `.isra.0`, `.part.0`, `.llvm.NNN`, ...), then C++ and
/// Swift names demangled, C and unknown ones kept.
///
/// The demangling differs from `dump_syms`' on purpose. `dump_syms` demangles C++ with the Rust crate
/// `cpp_demangle`, which prints `std::string` for `Ss`, `(unsigned long)0` for `0ul`, fails on some
/// names and misprints others (a lambda's parameters lost, `T&::member`); here C++ names are what
/// `c++filt` (libstdc++'s `__cxa_demangle`) prints, with the return type of a function template left
/// out as `dump_syms` leaves it out. Swift names are what Swift's own backtracer prints
/// (`_swift_backtrace_demangle`), where `dump_syms` has a Swift 5.3 demangler of its own with
/// argument types (`weigh([Int])` here is `weigh(_:)`) that leaves newer manglings as they are.
final class BreakpadNames {
  // `_swift_backtrace_demangle` demangles C++ with `__cxa_demangle`, which the imagelog executable
  // links in statically (out of `dlsym`'s reach, where `Demangler.Style.full` looks for it).
  private let demangler = Demangler(style: .simplified)

  /// A FUNC's or INLINE_ORIGIN's name (`Collector::demangle`): `isMangled` for a linkage name or a
  /// symbol table's name, `false` for a `DW_AT_name`.
  func functionName(_ text: String, isMangled: Bool, language: BreakpadLanguage) -> String {
    let fixed = Self.withoutCompilerSuffixes(text)
    if language == .c || !isMangled { return Self.printable(fixed) }
    let detected = language == .unknown ? Self.detectLanguage(fixed) : language
    return Self.printable(demangle(fixed, language: detected) ?? fixed)
  }

  /// A PUBLIC's name (`Collector::demangle_str`): the language from the name's look alone; a name of no
  /// known language is kept whole (its suffixes too).
  func publicName(_ text: String) -> String {
    let detected = Self.detectLanguage(text)
    guard detected != .unknown else { return Self.printable(text) }
    let fixed = Self.withoutCompilerSuffixes(text)
    return Self.printable(demangle(fixed, language: detected) ?? fixed)
  }

  private func demangle(_ name: String, language: BreakpadLanguage) -> String? {
    switch language {
    case .cpp, .objCpp, .rust:
      // Mach-O names keep extra leading underscores symbolic accepts (`__Z`); __cxa_demangle does not.
      let underscores = name.utf8.prefix { $0 == UInt8(ascii: "_") }.count
      guard underscores >= 1, underscores <= 4, name.utf8.dropFirst(underscores).first == UInt8(ascii: "Z") else { return nil }
      let mangled = underscores == 1 ? name : String(name.utf8.dropFirst(underscores - 1)) ?? name
      let stripped = Self.withoutHashSuffix(mangled)
      let demangled = demangler.demangle(stripped, cached: false)
      guard demangled != stripped else { return nil }
      if language == .rust { return Self.withoutRustHash(demangled) }
      return Self.withoutReturnType(demangled)
    case .swift:
      let demangled = demangler.demangle(name, cached: false)
      return demangled == name ? nil : demangled
    default:
      return nil
    }
  }

  /// symbolic's `detect_language` for a name with no unit language: Objective-C's `-[...]`, a Rust
  /// legacy name (`_ZN...17h<16 hex>E`), an Itanium C++ name (`_Z`, `__Z`, ...), a Swift name.
  static func detectLanguage(_ name: String) -> BreakpadLanguage {
    let utf8 = name.utf8
    guard let first = utf8.first else { return .unknown }
    if (first == UInt8(ascii: "-") || first == UInt8(ascii: "+")) && utf8.dropFirst().first == UInt8(ascii: "[")
      && utf8.last == UInt8(ascii: "]") { return .objC }
    if isRustLegacy(name) { return .rust }
    let underscores = utf8.prefix { $0 == UInt8(ascii: "_") }.count
    if underscores >= 1, underscores <= 4, utf8.dropFirst(underscores).first == UInt8(ascii: "Z") { return .cpp }
    if Demangler.looksMangled(name) { return .swift }
    return .unknown
  }

  /// `_ZN` ... `17h` and 16 hex digits `E`, optionally followed by `.llvm.` suffixes: rustc's legacy
  /// mangling, which rustc-demangle accepts and symbolic then calls Rust.
  static func isRustLegacy(_ name: String) -> Bool {
    let utf8 = name.utf8
    guard utf8.starts(with: "_ZN".utf8) else { return false }
    let body = utf8.prefix { $0 != UInt8(ascii: ".") }
    // `17h`, 16 hex digits, `E`: 20 bytes at the end.
    guard body.count > 23, body.last == UInt8(ascii: "E") else { return false }
    let hash = body.dropLast().suffix(19)
    return hash.starts(with: "17h".utf8) && hash.dropFirst(3).allSatisfy { byte in
      (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102)
    }
  }

  /// `dump_syms`' `fix_symbol_name`: trailing `.cold`, `.constprop`, `.llvm`, `.localalias`,
  /// `.lto_priv`, `.isra`, `.part`, `.str` (each optionally `.N`) and ` [clone ...]` parts removed;
  /// MSVC's `` `anonymous namespace' `` written `(anonymous namespace)`.
  static func withoutCompilerSuffixes(_ name: String) -> String {
    var utf8 = name
    return utf8.withUTF8 { bytes -> String in
      var end = bytes.count
      // Each pass removes at least one byte: the loop ends.
      while end > 0 {
        if bytes[end - 1] == UInt8(ascii: " "), end > 1, bytes[end - 2] == UInt8(ascii: "]") {
          end -= 1
          continue
        }
        if bytes[end - 1] == UInt8(ascii: "]") {
          // ` ?[clone[^\]]*]`
          var open = end - 2
          while open >= 0, bytes[open] != UInt8(ascii: "[") && bytes[open] != UInt8(ascii: "]") { open -= 1 }
          guard open >= 0, bytes[open] == UInt8(ascii: "["), end - open >= 7,
                bytes[(open + 1)..<(open + 6)].elementsEqual("clone".utf8) else { break }
          end = open > 0 && bytes[open - 1] == UInt8(ascii: " ") ? open - 1 : open
          continue
        }
        // `.WORD` or `.WORD.DIGITS`.
        var candidate = end
        var digits = end
        while digits > 0, bytes[digits - 1] >= UInt8(ascii: "0"), bytes[digits - 1] <= UInt8(ascii: "9") { digits -= 1 }
        if digits < end, digits > 0, bytes[digits - 1] == UInt8(ascii: "."),
           Self.suffixWords.contains(where: { Self.endsWithWord(bytes, at: digits - 1, $0) }) {
          candidate = digits - 1
        }
        guard let word = Self.suffixWords.first(where: { Self.endsWithWord(bytes, at: candidate, $0) }) else { break }
        end = candidate - word.count - 1
      }
      var result = end == bytes.count ? name : String(decoding: bytes[..<end], as: UTF8.self)
      if bytes[..<end].contains(UInt8(ascii: "`")), result.contains("`anonymous namespace'") {
        result = result.replacing("`anonymous namespace'", with: "(anonymous namespace)")
      }
      return result
    }
  }

  /// True when `bytes[..<end]` ends with `.` and `word`.
  private static func endsWithWord(_ bytes: UnsafeBufferPointer<UInt8>, at end: Int, _ word: [UInt8]) -> Bool {
    guard end >= word.count + 1, bytes[end - word.count - 1] == UInt8(ascii: ".") else { return false }
    return bytes[(end - word.count)..<end].elementsEqual(word)
  }

  private static let suffixWords: [[UInt8]] = ["cold", "constprop", "llvm", "localalias", "lto_priv", "isra", "part", "str"]
    .map { Array($0.utf8) }

  /// symbolic's `strip_hash_suffix`: a trailing `$` and 32 hex digits (clang's `-funique-internal-linkage-names`).
  static func withoutHashSuffix(_ name: String) -> String {
    let utf8 = name.utf8
    guard utf8.count >= 33, utf8.dropLast(32).last == UInt8(ascii: "$"),
          utf8.suffix(32).allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) })
    else { return name }
    return String(decoding: utf8.dropLast(33), as: UTF8.self)
  }

  /// A demangled Rust legacy name without its `::h` and 16 hex digits, as rustc-demangle's alternate form.
  static func withoutRustHash(_ name: String) -> String {
    let utf8 = Array(name.utf8)
    guard utf8.count > 19, utf8[utf8.count - 19] == UInt8(ascii: ":"), utf8[utf8.count - 18] == UInt8(ascii: ":"),
          utf8[utf8.count - 17] == UInt8(ascii: "h"), String(decoding: utf8.suffix(16), as: UTF8.self).allSatisfy(\.isHexDigit)
    else { return name }
    return String(decoding: utf8[..<(utf8.count - 19)], as: UTF8.self)
  }

  /// Characters that would end or split a record (ASCII controls) removed, as `dump_syms` removes them
  /// from inline origins (here from every name and path).
  static func printable(_ text: String) -> String {
    var utf8 = text
    let plain = utf8.withUTF8 { bytes in !bytes.contains { $0 < 0x20 || $0 == 0x7F } }
    if plain { return text }
    return String(decoding: text.utf8.filter { $0 >= 0x20 && $0 != 0x7F }, as: UTF8.self)
  }

  /// The special names `__cxa_demangle` writes before an encoding (`virtual thunk to f()`): the return
  /// type rule applies to what follows them.
  private static let specialPrefixes: [[UInt8]] = [
    "non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ", "transaction clone for ",
    "construction vtable for ", "typeinfo for ", "typeinfo name for ", "vtable for ", "VTT for ",
    "guard variable for ", "TLS init function for ", "TLS wrapper function for ", "reference temporary #",
  ].map { Array($0.utf8) }

  /// `__cxa_demangle`'s text of a function with the return type left out (which libiberty prints for
  /// function templates, and `cpp_demangle`'s `no_return_type` leaves out): what comes before the
  /// qualified name, at the top level of brackets, up to the last space there. Conversion operators
  /// (`operator char const*()`) have no return type and are kept whole.
  static func withoutReturnType(_ text: String) -> String {
    var utf8 = text
    return utf8.withUTF8 { all -> String in
      // A name without a space has no return type.
      guard all.contains(UInt8(ascii: " ")) else { return text }
      var start = 0
      // `virtual thunk to `, `transaction clone for `: the rule applies to what follows.
      while let special = specialPrefixes.first(where: { start + $0.count <= all.count
                                                        && all[start..<start + $0.count].elementsEqual($0) }) {
        if special.first == UInt8(ascii: "r") { return text }  // `reference temporary #N for`: no function
        start += special.count
      }
      let bytes = UnsafeBufferPointer(rebasing: all[start...])
      guard let (name, parameters) = nameAndParameters(bytes, end: bytes.count) else { return text }
      // `R (*f<T>(A))(B)`: a function returning a function pointer, its name and parameters inside the
      // group before the last parameter list.
      if name.upperBound > 0, bytes[name.upperBound - 1] == UInt8(ascii: ")"), name.upperBound == parameters.lowerBound,
         let group = Self.groupStart(bytes, closingAt: name.upperBound - 1), group >= name.lowerBound,
         let (inner, _) = nameAndParameters(bytes, end: name.upperBound - 1, from: group + 1) {
        // The declarator's `*`, `&`, `&&` and member pointer come before the name.
        var nameStart = inner.lowerBound
        var index = inner.lowerBound
        var level = 0
        while index < inner.upperBound {
          switch bytes[index] {
          case UInt8(ascii: "<"), UInt8(ascii: "("): level += 1
          case UInt8(ascii: ">"), UInt8(ascii: ")"): level -= 1
          case UInt8(ascii: "*"), UInt8(ascii: "&"), UInt8(ascii: " "): if level == 0 { nameStart = index + 1 }
          default: break
          }
          index += 1
        }
        return String(decoding: all[..<start], as: UTF8.self)
          + String(decoding: bytes[nameStart..<(name.upperBound - 1)], as: UTF8.self)
      }
      if name.lowerBound == 0 { return text }
      return String(decoding: all[..<start], as: UTF8.self) + String(decoding: bytes[name.lowerBound...], as: UTF8.self)
    }
  }

  private static let newWord = Array("new".utf8), deleteWord = Array("delete".utf8)
  private static let operatorWord = Array("operator".utf8)

  /// The operator tokens `__cxa_demangle` writes after `operator`, longest first.
  private static let operatorTokens: [[UInt8]] = [
    "<=>", "->*", "<<=", ">>=", "()", "[]", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "+=", "-=",
    "*=", "/=", "%=", "^=", "&=", "|=", "->", ",", "<", ">", "+", "-", "*", "/", "%", "^", "&", "|", "~", "!", "=",
  ].map { Array($0.utf8) }

  /// Where the bracket group closing at `close` (a `)`) opens.
  private static func groupStart(_ bytes: UnsafeBufferPointer<UInt8>, closingAt close: Int) -> Int? {
    var depth = 0
    var index = close
    while index >= 0 {
      switch bytes[index] {
      case UInt8(ascii: ")"): depth += 1
      case UInt8(ascii: "("): depth -= 1
      default: break
      }
      if depth == 0 { return index }
      index -= 1
    }
    return nil
  }

  /// In `bytes[from..<end]`: the qualified name (after the return type, if any) and the parameter
  /// list (the bracket group ending at the last `)`); `nil` when the text has no such shape, or names a
  /// conversion operator (which has no return type).
  private static func nameAndParameters(_ bytes: UnsafeBufferPointer<UInt8>, end: Int, from: Int = 0)
    -> (name: Range<Int>, parameters: Range<Int>)? {
    guard let close = bytes[from..<end].lastIndex(of: UInt8(ascii: ")")),
          let open = groupStart(bytes, closingAt: close), open >= from else { return nil }
    // The last top-level space before the parameter list, skipping `operator` tokens, whose `<`, `>`,
    // `(` are not brackets.
    var index = from
    var level = 0
    var lastSpace: Int?
    while index < open {
      let byte = bytes[index]
      if byte == UInt8(ascii: "o"), index + operatorWord.count <= open,
         bytes[index..<index + operatorWord.count].elementsEqual(operatorWord),
         index == from || bytes[index - 1] == UInt8(ascii: ":") || bytes[index - 1] == UInt8(ascii: " ") {
        var after = index + operatorWord.count
        if after < open, bytes[after] == UInt8(ascii: " ") {
          // `operator new`, `operator delete[]`; any other word is a conversion.
          let rest = bytes[(after + 1)..<open]
          guard rest.starts(with: Self.newWord) || rest.starts(with: Self.deleteWord) else { return nil }
          after += 1
          while after < open, bytes[after] != UInt8(ascii: "[") && bytes[after] != UInt8(ascii: "<") { after += 1 }
          if after + 1 < open, bytes[after] == UInt8(ascii: "["), bytes[after + 1] == UInt8(ascii: "]") { after += 2 }
        } else if after + 1 < open, bytes[after] == UInt8(ascii: "\""), bytes[after + 1] == UInt8(ascii: "\"") {
          // A literal operator: `operator"" _km`, `operator"" s[abi:cxx11]` (__cxa_demangle writes a space
          // before the suffix, which is the name's, not the return type's end).
          after += 2
          if after < open, bytes[after] == UInt8(ascii: " ") { after += 1 }
        } else if let token = operatorTokens.first(where: { after + $0.count <= open && bytes[after..<after + $0.count].elementsEqual($0) }) {
          after += token.count
          // `operator<` with template arguments is written `operator< <int>`: that space is the name's.
          if after + 1 < open, bytes[after] == UInt8(ascii: " "), bytes[after + 1] == UInt8(ascii: "<") { after += 1 }
        }
        index = after
        continue
      }
      switch byte {
      case UInt8(ascii: "<"), UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"): level += 1
      case UInt8(ascii: ">"), UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"): level -= 1
      case UInt8(ascii: " ") where level == 0: lastSpace = index
      default: break
      }
      index += 1
    }
    guard level == 0 else { return nil }
    return ((lastSpace.map { $0 + 1 } ?? from)..<open, open..<(close + 1))
  }
}
