/// A property-list value, as entitlements are: decoded from the XML blob (0xfade7171) or from the DER
/// blob (0xfade7172). Dictionaries keep their stored order.
package indirect enum PropertyList: Sendable, Equatable {
  /// `<dict>`; DER `[CONTEXT 16]`.
  case dictionary([Entry])
  /// `<array>`; DER `SEQUENCE`.
  case array([PropertyList])
  /// `<string>`; DER `UTF8String`.
  case string(String)
  /// `<true/>` / `<false/>`; DER `BOOLEAN`.
  case bool(Bool)
  /// `<integer>`; DER `INTEGER` (up to 64 bits).
  case integer(Int64)
  /// `<real>`, `<date>` and `<data>`: kept as their text.
  case other(kind: String, text: String)

  /// One key and its value.
  package struct Entry: Sendable, Equatable {
    package var key: String
    package var value: PropertyList
    package init(key: String, value: PropertyList) { self.key = key; self.value = value }
  }

  /// Nesting deeper than this is refused (entitlements are a few levels deep; recursion stays bounded).
  package static let maximumDepth = 32

  /// The same value with every dictionary's keys sorted (the DER form stores them sorted).
  package var sortedKeys: PropertyList {
    switch self {
    case .dictionary(let entries):
      .dictionary(entries.map { Entry(key: $0.key, value: $0.value.sortedKeys) }.sorted { $0.key < $1.key })
    case .array(let values): .array(values.map(\.sortedKeys))
    default: self
    }
  }
}

// MARK: XML

extension PropertyList {
  /// Decodes an XML property list (the `<?xml`/`<!DOCTYPE` prologue optional).
  package init(xml text: String) throws(FormatError) {
    var parser = XMLPlistParser(Array(text.utf8))
    self = try parser.document()
  }

  /// An XML property list of this value, tab-indented as Apple's tools write it.
  package var xmlDocument: String {
    var text = """
      <?xml version="1.0" encoding="UTF-8"?>
      <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
      <plist version="1.0">

      """
    appendXML(to: &text, indent: "")
    return text + "</plist>\n"
  }

  func appendXML(to text: inout String, indent: String) {
    switch self {
    case .dictionary(let entries):
      if entries.isEmpty { text += indent + "<dict/>\n"; return }
      text += indent + "<dict>\n"
      for entry in entries {
        text += indent + "\t<key>" + Self.escaped(entry.key) + "</key>\n"
        entry.value.appendXML(to: &text, indent: indent + "\t")
      }
      text += indent + "</dict>\n"
    case .array(let values):
      if values.isEmpty { text += indent + "<array/>\n"; return }
      text += indent + "<array>\n"
      for value in values { value.appendXML(to: &text, indent: indent + "\t") }
      text += indent + "</array>\n"
    case .string(let string): text += indent + "<string>" + Self.escaped(string) + "</string>\n"
    case .bool(let value): text += indent + (value ? "<true/>\n" : "<false/>\n")
    case .integer(let value): text += indent + "<integer>\(value)</integer>\n"
    case let .other(kind, body): text += indent + "<\(kind)>" + Self.escaped(body) + "</\(kind)>\n"
    }
  }

  static func escaped(_ string: String) -> String { TextEscaping.markup(string) }
}

/// A small XML property-list reader: elements, text, the five entities and numeric references;
/// comments, processing instructions and the DOCTYPE are skipped. Bounded by the input and by depth.
struct XMLPlistParser {
  let bytes: [UInt8]
  var position = 0

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  func fail(_ what: String) -> FormatError { .codeSignature("entitlements plist: \(what) at byte \(position)") }

  mutating func document() throws(FormatError) -> PropertyList {
    try skipMisc()
    guard case .open(let name, let empty) = try tag(), name == "plist", !empty else { throw fail("expected <plist>") }
    try skipMisc()
    let value = try self.value(depth: 0)
    try skipMisc()
    guard case .close("plist") = try tag() else { throw fail("expected </plist>") }
    return value
  }

  enum Tag: Equatable { case open(String, empty: Bool), close(String) }

  mutating func skipSpace() {
    while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
  }

  func starts(with literal: String) -> Bool {
    let utf8 = Array(literal.utf8)
    return bytes.count - position >= utf8.count && Array(bytes[position..<position + utf8.count]) == utf8
  }

  mutating func skip(past literal: String) throws(FormatError) {
    let utf8 = Array(literal.utf8)
    while position < bytes.count {
      if starts(with: literal) { position += utf8.count; return }
      position += 1
    }
    throw fail("unterminated markup (no \(literal))")
  }

  /// Skips white space, `<?...?>`, `<!--...-->` and `<!DOCTYPE ...>`.
  mutating func skipMisc() throws(FormatError) {
    while true {
      skipSpace()
      if starts(with: "<?") { try skip(past: "?>") }
      else if starts(with: "<!--") { try skip(past: "-->") }
      else if starts(with: "<!") { try skip(past: ">") }
      else { return }
    }
  }

  mutating func tag() throws(FormatError) -> Tag {
    guard position < bytes.count, bytes[position] == UInt8(ascii: "<") else { throw fail("expected a tag") }
    position += 1
    let closing = position < bytes.count && bytes[position] == UInt8(ascii: "/")
    if closing { position += 1 }
    let start = position
    while position < bytes.count, bytes[position] != UInt8(ascii: ">") { position += 1 }
    guard position < bytes.count else { throw fail("unterminated tag") }
    var inside = bytes[start..<position]
    position += 1
    let empty = inside.last == UInt8(ascii: "/")
    if empty { inside = inside.dropLast() }
    let name = String(decoding: inside.prefix { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A }, as: UTF8.self)
    return closing ? .close(name) : .open(name, empty: empty)
  }

  mutating func text(until name: String) throws(FormatError) -> String {
    let start = position
    while position < bytes.count, bytes[position] != UInt8(ascii: "<") { position += 1 }
    let raw = bytes[start..<position]
    guard case .close(name) = try tag() else { throw fail("expected </\(name)>") }
    return try decodeEntities(raw)
  }

  func decodeEntities(_ raw: ArraySlice<UInt8>) throws(FormatError) -> String {
    var result: [UInt8] = []
    result.reserveCapacity(raw.count)
    var index = raw.startIndex
    while index < raw.endIndex {
      guard raw[index] == UInt8(ascii: "&") else { result.append(raw[index]); index += 1; continue }
      guard let semicolon = raw[index...].firstIndex(of: UInt8(ascii: ";")), semicolon - index <= 12 else {
        throw fail("unterminated entity")
      }
      let name = String(decoding: raw[(index + 1)..<semicolon], as: UTF8.self)
      switch name {
      case "lt": result.append(UInt8(ascii: "<"))
      case "gt": result.append(UInt8(ascii: ">"))
      case "amp": result.append(UInt8(ascii: "&"))
      case "quot": result.append(UInt8(ascii: "\""))
      case "apos": result.append(UInt8(ascii: "'"))
      default:
        let number: UInt32? = name.hasPrefix("#x") ? UInt32(name.dropFirst(2), radix: 16)
          : name.hasPrefix("#") ? UInt32(name.dropFirst()) : nil
        guard let number, let scalar = Unicode.Scalar(number) else { throw fail("unknown entity &\(name);") }
        result += Array(String(Character(scalar)).utf8)
      }
      index = semicolon + 1
    }
    return String(decoding: result, as: UTF8.self)
  }

  mutating func value(depth: Int) throws(FormatError) -> PropertyList {
    guard depth < PropertyList.maximumDepth else { throw fail("nesting deeper than \(PropertyList.maximumDepth)") }
    guard case .open(let name, let empty) = try tag() else { throw fail("expected a value") }
    switch name {
    case "true", "false":
      if !empty { guard case .close(name) = try tag() else { throw fail("expected </\(name)>") } }
      return .bool(name == "true")
    case "string": return .string(empty ? "" : try text(until: name))
    case "integer":
      let text = empty ? "" : try text(until: name)
      let trimmed = text.filter { $0 != " " && $0 != "\n" && $0 != "\t" }
      guard let value = Int64(trimmed) else { throw fail("bad integer '\(trimmed)'") }
      return .integer(value)
    case "real", "date", "data": return .other(kind: name, text: empty ? "" : try text(until: name))
    case "array":
      var values: [PropertyList] = []
      if empty { return .array(values) }
      while true {
        try skipMisc()
        if starts(with: "</") {
          guard case .close("array") = try tag() else { throw fail("expected </array>") }
          return .array(values)
        }
        values.append(try value(depth: depth + 1))  // each value consumes at least one tag: bounded by input
      }
    case "dict":
      var entries: [PropertyList.Entry] = []
      if empty { return .dictionary(entries) }
      while true {
        try skipMisc()
        if starts(with: "</") {
          guard case .close("dict") = try tag() else { throw fail("expected </dict>") }
          return .dictionary(entries)
        }
        guard case .open("key", false) = try tag() else { throw fail("expected <key>") }
        let key = try text(until: "key")
        try skipMisc()
        entries.append(.init(key: key, value: try value(depth: depth + 1)))
      }
    default:
      throw fail("unknown element <\(name)>")
    }
  }
}

// MARK: DER

extension PropertyList {
  /// Decodes Apple's DER entitlements: `[APPLICATION 16] { INTEGER 1, [CONTEXT 16] dictionary }`, where
  /// a dictionary holds `SEQUENCE { UTF8String key, value }` entries and values are BOOLEAN, INTEGER,
  /// UTF8String, SEQUENCE (array) or a nested dictionary.
  package init(der bytes: [UInt8]) throws(FormatError) {
    var reader = DERReader(bytes: bytes, position: 0, end: bytes.count)
    let (tag, outer) = try reader.element()
    guard tag == 0x70 else { throw DERReader.fail("outer tag 0x\(hexDigits(UInt64(tag))) is not [APPLICATION 16]") }
    var inside = outer
    let (versionTag, version) = try inside.element()
    guard versionTag == 0x02, version.end - version.position == 1, bytes[version.position] == 1 else {
      throw DERReader.fail("version is not INTEGER 1")
    }
    let (dictTag, dict) = try inside.element()
    guard dictTag == 0xB0 else { throw DERReader.fail("top level is not a dictionary ([CONTEXT 16])") }
    self = try DERReader.value(tag: dictTag, dict, depth: 0)
    guard reader.position == bytes.count else { throw DERReader.fail("\(bytes.count - reader.position) bytes after the value") }
  }
}

struct DERReader {
  let bytes: [UInt8]
  var position: Int
  let end: Int

  static func fail(_ what: String) -> FormatError { .codeSignature("DER entitlements: \(what)") }

  /// Reads one tag-length-value; returns the tag and a reader over the value.
  mutating func element() throws(FormatError) -> (UInt8, DERReader) {
    guard end - position >= 2 else { throw Self.fail("truncated element at byte \(position)") }
    let tag = bytes[position]
    var length = Int(bytes[position + 1])
    position += 2
    if length & 0x80 != 0 {
      let count = length & 0x7F
      guard count >= 1, count <= 4, end - position >= count else { throw Self.fail("bad length at byte \(position)") }
      length = 0
      for _ in 0..<count { length = length << 8 | Int(bytes[position]); position += 1 }  // at most 32 bits
    }
    guard length <= end - position else {
      throw Self.fail("length \(length) at byte \(position) runs past its container (\(end - position) left)")
    }
    let value = DERReader(bytes: bytes, position: position, end: position + length)
    position += length
    return (tag, value)
  }

  var text: String { String(decoding: bytes[position..<end], as: UTF8.self) }

  static func value(tag: UInt8, _ reader: DERReader, depth: Int) throws(FormatError) -> PropertyList {
    guard depth < PropertyList.maximumDepth else { throw fail("nesting deeper than \(PropertyList.maximumDepth)") }
    var inside = reader
    switch tag {
    case 0x01:
      guard reader.end - reader.position == 1 else { throw fail("BOOLEAN of \(reader.end - reader.position) bytes") }
      return .bool(reader.bytes[reader.position] != 0)
    case 0x02:
      let count = reader.end - reader.position
      guard count >= 1, count <= 8 else { throw fail("INTEGER of \(count) bytes") }
      var value: Int64 = reader.bytes[reader.position] & 0x80 != 0 ? -1 : 0
      for index in reader.position..<reader.end { value = value << 8 | Int64(reader.bytes[index]) }
      return .integer(value)
    case 0x0C:
      return .string(reader.text)
    case 0x30:
      var values: [PropertyList] = []
      while inside.position < inside.end {  // each element consumes at least 2 bytes
        let (elementTag, element) = try inside.element()
        values.append(try value(tag: elementTag, element, depth: depth + 1))
      }
      return .array(values)
    case 0xB0:
      var entries: [PropertyList.Entry] = []
      while inside.position < inside.end {
        let (pairTag, pair) = try inside.element()
        guard pairTag == 0x30 else { throw fail("dictionary entry tag 0x\(hexDigits(UInt64(pairTag))) is not SEQUENCE") }
        var pairReader = pair
        let (keyTag, key) = try pairReader.element()
        guard keyTag == 0x0C else { throw fail("dictionary key is not a UTF8String") }
        let (valueTag, valueReader) = try pairReader.element()
        guard pairReader.position == pairReader.end else { throw fail("dictionary entry has more than a key and a value") }
        entries.append(.init(key: key.text, value: try value(tag: valueTag, valueReader, depth: depth + 1)))
      }
      return .dictionary(entries)
    default:
      throw fail("unsupported tag 0x\(hexDigits(UInt64(tag)))")
    }
  }
}

// MARK: JSON

extension PropertyList {
  /// The value as JSON, indented by two spaces per level (dictionaries keep their order).
  package func json(indent: String = "") -> String {
    switch self {
    case .dictionary(let entries):
      if entries.isEmpty { return "{}" }
      let inner = indent + "  "
      return "{\n" + entries.map { inner + jsonStringLiteral($0.key) + ": " + $0.value.json(indent: inner) }
        .joined(separator: ",\n") + "\n" + indent + "}"
    case .array(let values):
      if values.isEmpty { return "[]" }
      let inner = indent + "  "
      return "[\n" + values.map { inner + $0.json(indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
    case .string(let string): return jsonStringLiteral(string)
    case .bool(let value): return value ? "true" : "false"
    case .integer(let value): return String(value)
    case .other(_, let text): return jsonStringLiteral(text)
    }
  }
}


extension CodeSignature {
  /// The entitlements as a value: from the XML blob when present, else from the DER blob; `nil` when
  /// the signature carries neither.
  package func decodedEntitlements() throws(FormatError) -> PropertyList? {
    if let entitlements { return try PropertyList(xml: entitlements) }
    if let derEntitlements { return try PropertyList(der: derEntitlements) }
    return nil
  }
}
