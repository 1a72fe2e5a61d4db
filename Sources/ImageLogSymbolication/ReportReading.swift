/// Reading report files for the CLI (no Foundation): whole files, `-` for standard input.
public enum ReportReading {
  /// The text of the report at `path` (`-`: standard input), UTF-8 with replacement, at most
  /// `ReportParser.maximumSize` bytes.
  public static func readText(_ path: String) throws(ReportError) -> String {
    try FileSystem.readText(path, limit: ReportParser.maximumSize)
  }

  /// True when `path` names an existing file or folder.
  public static func exists(_ path: String) -> Bool { FileSystem.kind(path) != .missing }
}
