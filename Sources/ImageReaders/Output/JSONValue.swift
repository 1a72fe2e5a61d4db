
/// A JSON document that keeps its objects' key order and its numbers' exact text, so an `.ips`
/// report re-written with symbols differs from the original only where a symbol was filled in.
///
/// Foundation's decoders lose key order (and FoundationEssentials has no `JSONSerialization`);
/// crash reports are small, so a plain recursive-descent parser with a depth limit does.
public indirect enum JSONValue: Sendable, Equatable {
  case null
  case bool(Bool)
  /// The number's text exactly as written.
  case number(String)
  case string(String)
  case array([JSONValue])
  /// Members in document order; a repeated key keeps both members (lookups see the first).
  case object([(String, JSONValue)])

  /// Structural equality; objects compare member by member, in order.
  public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
    switch (lhs, rhs) {
    case (.null, .null): true
    case let (.bool(a), .bool(b)): a == b
    case let (.number(a), .number(b)): a == b
    case let (.string(a), .string(b)): a == b
    case let (.array(a), .array(b)): a == b
    case let (.object(a), .object(b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    default: false
    }
  }

  /// The member named `key` of an object; `nil` for other values or a missing key.
  public subscript(key: String) -> JSONValue? {
    guard case .object(let members) = self else { return nil }
    return members.first { $0.0 == key }?.1
  }

  /// The elements of an array, else `nil`.
  public var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
  /// The text of a string, else `nil`.
  public var string: String? { if case .string(let s) = self { s } else { nil } }
  /// A non-negative integer number (decimal, as `.ips` writes addresses), else `nil`.
  public var unsigned: UInt64? {
    switch self {
    case .number(let text): UInt64(text)
    case .string(let text): text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
    default: nil
    }
  }
  /// A signed integer number, else `nil`.
  public var integer: Int? { if case .number(let text) = self { Int(text) } else { nil } }

  /// Sets (or appends) the member `key` of an object; other values are unchanged.
  package mutating func set(_ key: String, _ value: JSONValue) {
    guard case .object(var members) = self else { return }
    if let index = members.firstIndex(where: { $0.0 == key }) { members[index].1 = value } else { members.append((key, value)) }
    self = .object(members)
  }

  /// Removes the member `key` of an object.
  package mutating func remove(_ key: String) {
    guard case .object(var members) = self else { return }
    members.removeAll { $0.0 == key }
    self = .object(members)
  }
}

/// Why a JSON text could not be read: the byte offset and what was expected.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The byte offset where reading stopped.
  public var offset: Int
  /// What was expected there.
  public var problem: String
  /// `invalid JSON at byte N: problem`.
  public var description: String { "invalid JSON at byte \(offset): \(problem)" }
}

extension JSONValue {
  /// Parses one JSON value from `text` (surrounding whitespace allowed). Nesting deeper than
  /// `maximumDepth` is an error, so hostile input cannot exhaust the stack.
  public static func parse(_ text: Substring, maximumDepth: Int = 128) throws(JSONError) -> JSONValue {
    var parser = JSONParser(bytes: Array(text.utf8), maximumDepth: maximumDepth)
    parser.skipSpace()
    let value = try parser.value(depth: 0)
    parser.skipSpace()
    guard parser.position == parser.bytes.count else { throw parser.error("unexpected text after the value") }
    return value
  }

  /// Parses the first JSON value in `text` and returns it with the rest of the text (for a header line
  /// followed by a body).
  package static func parsePrefix(_ text: Substring, maximumDepth: Int = 128) throws(JSONError) -> (JSONValue, Substring) {
    let utf8 = Array(text.utf8)
    var parser = JSONParser(bytes: utf8, maximumDepth: maximumDepth)
    parser.skipSpace()
    let value = try parser.value(depth: 0)
    let rest = text.utf8.index(text.utf8.startIndex, offsetBy: parser.position)
    return (value, Substring(text[rest...]))
  }

  /// Writes the value as JSON. `indent` > 0 pretty-prints the way Apple's reports are laid out
  /// (`"key" : value`); 0 writes one line.
  public func serialized(indent: Int = 0) -> String {
    var out = ""
    write(to: &out, indent: indent, level: 0)
    return out
  }

  private func write(to out: inout String, indent: Int, level: Int) {
    switch self {
    case .null: out += "null"
    case .bool(let value): out += value ? "true" : "false"
    case .number(let text): out += text
    case .string(let text): Self.writeString(text, to: &out)
    case .array(let elements):
      if elements.isEmpty { out += "[]"; return }
      out += "["
      for (index, element) in elements.enumerated() {
        if index > 0 { out += "," }
        if indent > 0 { out += "\n" + String(repeating: " ", count: indent * (level + 1)) }
        element.write(to: &out, indent: indent, level: level + 1)
      }
      if indent > 0 { out += "\n" + String(repeating: " ", count: indent * level) }
      out += "]"
    case .object(let members):
      if members.isEmpty { out += "{}"; return }
      out += "{"
      for (index, (key, value)) in members.enumerated() {
        if index > 0 { out += "," }
        if indent > 0 { out += "\n" + String(repeating: " ", count: indent * (level + 1)) }
        Self.writeString(key, to: &out)
        out += indent > 0 ? " : " : ":"
        value.write(to: &out, indent: indent, level: level + 1)
      }
      if indent > 0 { out += "\n" + String(repeating: " ", count: indent * level) }
      out += "}"
    }
  }

  static func writeString(_ text: String, to out: inout String) {
    out += jsonStringLiteral(text)
  }
}

struct JSONParser {
  let bytes: [UInt8]
  let maximumDepth: Int
  var position = 0

  func error(_ problem: String) -> JSONError { JSONError(offset: position, problem: problem) }

  mutating func skipSpace() {
    while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
  }

  mutating func value(depth: Int) throws(JSONError) -> JSONValue {
    guard depth < maximumDepth else { throw error("nested deeper than \(maximumDepth)") }
    guard position < bytes.count else { throw error("unexpected end of input") }
    switch bytes[position] {
    case UInt8(ascii: "{"):
      position += 1
      var members: [(String, JSONValue)] = []
      skipSpace()
      if position < bytes.count, bytes[position] == UInt8(ascii: "}") { position += 1; return .object(members) }
      while true {  // each member consumes input, so the loop ends with the bytes
        skipSpace()
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw error("expected a member name") }
        let key = try string()
        skipSpace()
        try expect(UInt8(ascii: ":"))
        skipSpace()
        members.append((key, try value(depth: depth + 1)))
        skipSpace()
        guard position < bytes.count else { throw error("unexpected end of input in an object") }
        if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
        try expect(UInt8(ascii: "}"))
        return .object(members)
      }
    case UInt8(ascii: "["):
      position += 1
      var elements: [JSONValue] = []
      skipSpace()
      if position < bytes.count, bytes[position] == UInt8(ascii: "]") { position += 1; return .array(elements) }
      while true {
        skipSpace()
        elements.append(try value(depth: depth + 1))
        skipSpace()
        guard position < bytes.count else { throw error("unexpected end of input in an array") }
        if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
        try expect(UInt8(ascii: "]"))
        return .array(elements)
      }
    case UInt8(ascii: "\""): return .string(try string())
    case UInt8(ascii: "t"): try literal("true"); return .bool(true)
    case UInt8(ascii: "f"): try literal("false"); return .bool(false)
    case UInt8(ascii: "n"): try literal("null"); return .null
    default: return try number()
    }
  }

  mutating func expect(_ byte: UInt8) throws(JSONError) {
    guard position < bytes.count, bytes[position] == byte else {
      throw error("expected '\(Character(Unicode.Scalar(byte)))'")
    }
    position += 1
  }

  mutating func literal(_ word: String) throws(JSONError) {
    for byte in word.utf8 { try expect(byte) }
  }

  mutating func number() throws(JSONError) -> JSONValue {
    let start = position
    while position < bytes.count, "+-0123456789.eE".utf8.contains(bytes[position]) { position += 1 }
    guard position > start else { throw error("expected a value") }
    let text = String(decoding: bytes[start..<position], as: UTF8.self)
    guard text.first != "+", Double(text) != nil else { position = start; throw error("malformed number '\(text)'") }
    return .number(text)
  }

  mutating func string() throws(JSONError) -> String {
    position += 1  // the opening quote
    var run = position
    var result = ""
    while true {
      guard position < bytes.count else { throw error("unterminated string") }
      let byte = bytes[position]
      if byte == UInt8(ascii: "\"") {
        result += String(decoding: bytes[run..<position], as: UTF8.self)
        position += 1
        return result
      }
      if byte == UInt8(ascii: "\\") {
        result += String(decoding: bytes[run..<position], as: UTF8.self)
        position += 1
        guard position < bytes.count else { throw error("unterminated escape") }
        let escape = bytes[position]
        position += 1
        switch escape {
        case UInt8(ascii: "n"): result += "\n"
        case UInt8(ascii: "t"): result += "\t"
        case UInt8(ascii: "r"): result += "\r"
        case UInt8(ascii: "b"): result += "\u{8}"
        case UInt8(ascii: "f"): result += "\u{C}"
        case UInt8(ascii: "u"):
          var code = try hex4()
          if (0xD800..<0xDC00).contains(code), position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
             bytes[position + 1] == UInt8(ascii: "u") {
            position += 2
            let low = try hex4()
            code = 0x10000 + ((code - 0xD800) << 10) + (low &- 0xDC00 & 0x3FF)
          }
          result.unicodeScalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
        default: result.unicodeScalars.append(Unicode.Scalar(escape))
        }
        run = position
        continue
      }
      position += 1
    }
  }

  mutating func hex4() throws(JSONError) -> UInt32 {
    guard position <= bytes.count - 4 else { throw error("short \\u escape") }
    guard let value = UInt32(String(decoding: bytes[position..<position + 4], as: UTF8.self), radix: 16) else {
      throw error("malformed \\u escape")
    }
    position += 4
    return value
  }
}
