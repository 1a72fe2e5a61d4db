public import ImageReaders

/// A report's own text or JSON, as it came: kept only so that a symbolicated report can be written in
/// its own layout, each frame annotated in place (the frames' `position`s point into it).
public struct ReportDocument: Sendable {
  /// A text report's lines, without line terminators (empty for JSON reports).
  public var lines: [String]
  /// `.ips`'s header line, and a `.crash` text's one-line JSON header.
  public var ipsHeader: JSONValue?
  /// The `.ips` body document.
  public var ipsBody: JSONValue?
  /// For the backtracer's JSON: the text before the document.
  public var preamble: String
  /// The backtracer's JSON document.
  public var swiftDocument: JSONValue?

  public init(lines: [String] = [], ipsHeader: JSONValue? = nil, ipsBody: JSONValue? = nil, preamble: String = "",
              swiftDocument: JSONValue? = nil) {
    self.lines = lines
    self.ipsHeader = ipsHeader
    self.ipsBody = ipsBody
    self.preamble = preamble
    self.swiftDocument = swiftDocument
  }
}
