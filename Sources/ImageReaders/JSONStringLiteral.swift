/// `text` as a JSON string literal: quotes, backslashes and control characters escaped, everything
/// else kept as is (RFC 8259 section 7). The one escaper for every hand-written JSON output.
public func jsonStringLiteral(_ text: String) -> String {
  var result = "\""
  for scalar in text.unicodeScalars {
    switch scalar {
    case "\"": result += "\\\""
    case "\\": result += "\\\\"
    case "\n": result += "\\n"
    case "\r": result += "\\r"
    case "\t": result += "\\t"
    case _ where scalar.value < 0x20: result += "\\u" + hexDigits(UInt64(scalar.value), width: 4)
    default: result.unicodeScalars.append(scalar)
    }
  }
  return result + "\""
}
