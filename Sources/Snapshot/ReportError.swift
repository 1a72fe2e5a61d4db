/// Why a text could not be read as a crash report at all.
public struct ReportError: Error, Equatable, Sendable, CustomStringConvertible {
  public var description: String
  /// An error with this one-line description.
  public init(_ description: String) { self.description = description }
}
