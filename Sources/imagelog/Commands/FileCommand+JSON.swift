/// A JSON value written by hand (no Foundation in the CLI's hot path): strings are escaped as RFC 8259
/// requires, numbers are unsigned integers, objects keep their members' order.
enum JSONValue {
  case string(String)
  case number(UInt64)
  case bool(Bool)
  case null
  case array([JSONValue])
  case object([(String, JSONValue)])

  /// The compact text of this value.
  var text: String {
    var result = ""
    write(into: &result)
    return result
  }

  func write(into result: inout String) {
    switch self {
    case .string(let string): Self.writeString(string, into: &result)
    case .number(let number): result += String(number)
    case .bool(let bool): result += bool ? "true" : "false"
    case .null: result += "null"
    case .array(let elements):
      result += "["
      for (index, element) in elements.enumerated() {
        if index > 0 { result += "," }
        element.write(into: &result)
      }
      result += "]"
    case .object(let members):
      result += "{"
      for (index, (key, value)) in members.enumerated() {
        if index > 0 { result += "," }
        Self.writeString(key, into: &result)
        result += ":"
        value.write(into: &result)
      }
      result += "}"
    }
  }

  static func writeString(_ string: String, into result: inout String) {
    result += "\""
    for scalar in string.unicodeScalars {
      switch scalar {
      case "\"": result += "\\\""
      case "\\": result += "\\\\"
      case "\n": result += "\\n"
      case "\r": result += "\\r"
      case "\t": result += "\\t"
      case let control where control.value < 0x20:
        result += "\\u00" + (control.value < 0x10 ? "0" : "") + String(control.value, radix: 16)
      default: result.unicodeScalars.append(scalar)
      }
    }
    result += "\""
  }
}

/// Streams a JSON array to standard output, one element per line, so a long walk prints as it goes.
struct JSONArrayPrinter {
  private var pending: String?

  mutating func begin() { printOutput("[") }

  mutating func element(_ value: JSONValue) {
    if let pending { printOutput(pending + ",") }
    pending = value.text
  }

  mutating func end() {
    if let pending { printOutput(pending) }
    pending = nil
    printOutput("]")
  }
}
