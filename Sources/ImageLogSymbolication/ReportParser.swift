import ImageLog
import ImageReaders

/// Reads crash reports of every supported kind, telling them apart by their content.
public enum ReportParser {
  /// The largest report accepted (crash reports are kilobytes; a 64 MiB one is not a report).
  public static let maximumSize = 64 << 20

  /// The most frames a report may have. Symbolication keeps each frame's address, image and answer
  /// (a few hundred bytes: README's "Limits" gives the peak memory), so this bounds memory where the
  /// size limit alone does not: 64 MiB of `0x1 ` would be 16 million frames. A list of more addresses is
  /// refused before any frame is kept; other kinds spend at least 20 bytes of text a frame.
  public static let maximumFrames = 2_000_000

  /// Reads `text` as whichever kind of report it is. `images` are the `--image PATH@LOADADDR` images
  /// for a list of bare addresses (ignored for other kinds).
  ///
  /// Throws only when nothing in the text is a report; unreadable parts of a report are named in
  /// `problems` and the rest is still returned.
  /// A report of any kind in which nothing was found to symbolicate (no frame and no image: an `.ips`
  /// whose body is `{}` or `[]`, a `.crash` with only headers) throws as text without frames does.
  public static func parse(_ text: String, images: [CrashReport.Image] = []) throws(ReportError) -> CrashReport {
    let report = try parseAnyKind(text, images: images)
    guard !report.frames.isEmpty || !report.images.isEmpty else {
      let kind = report.format == .appleIPS ? ".ips body (bug_type \(report.ipsHeader?["bug_type"]?.string ?? "?"))"
        : report.ipsHeader != nil ? "text after the JSON header line" : "\(report.format.rawValue) report"
      throw ReportError("not a crash report: no threads, frames or binary images found in the \(kind)")
    }
    return report
  }

  private static func parseAnyKind(_ text: String, images: [CrashReport.Image]) throws(ReportError) -> CrashReport {
    guard text.utf8.count <= maximumSize else {
      throw ReportError("too large for a crash report (\(text.utf8.count) bytes, limit \(maximumSize))")
    }
    // Nothing but addresses: no image to put them in is known before any line is kept, and with
    // --image no other kind of report is made of them alone (nor needs to look at each line).
    if AddressListParser.onlyAddresses(text) {
      if images.isEmpty { throw addressesWithoutImages }
      if let report = try AddressListParser.parse(splitLines(text), images: images) { return report }
    }
    let hasBrace = text.utf8.withContiguousStorageIfAvailable { $0.contains(UInt8(ascii: "{")) }
      ?? text.utf8.contains(UInt8(ascii: "{"))
    if hasBrace, SwiftBacktraceJSONParser.detect(text) {
      return try SwiftBacktraceJSONParser.parse(text)
    }
    let trimmed = text.drop { $0 == "\u{FEFF}" || $0.isWhitespace }
    if trimmed.first == "{" {
      if let report = try parseJSONReport(trimmed) { return report }
    }
    let lines = splitLines(text)
    if isSwiftBacktrace(lines) { return SwiftBacktraceParser.parse(lines) }
    // Before Apple's: a TSan `Thread T1 (tid=…) created by main thread at:` heading looks like a thread.
    if let report = LinuxLogParser.parse(lines) { return report }
    if isAppleStyle(lines) { return AppleCrashParser.parse(lines) }
    if let report = try AddressListParser.parse(lines, images: images) { return report }
    throw ReportError("not a crash report: no threads, frames or binary images found "
                      + "(expected imagelog, Apple .crash or .ips, Swift backtracer output, a sanitizer report, "
                      + "systemd-coredump, an Android tombstone or glibc backtrace_symbols lines)")
  }

  static let addressesWithoutImages =
    ReportError("addresses without images: give --image PATH@LOADADDR or image lines in imagelog's formats")

  /// Lines without their terminators (`\n` or `\r\n`).
  static func splitLines(_ text: String) -> [String] {
    // On UTF-8 bytes: a long address list splits without grapheme breaking or substrings.
    var text = text
    return text.withUTF8 { bytes -> [String] in
      var lines: [String] = []
      var start = 0
      for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") {
        lines.append(line(bytes, start..<index))
        start = index + 1
      }
      if start < bytes.count { lines.append(line(bytes, start..<bytes.count)) }  // no empty last line
      return lines
    }
  }

  private static func line(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    let end = range.upperBound > range.lowerBound && bytes[range.upperBound - 1] == UInt8(ascii: "\r") ? range.upperBound - 1 : range.upperBound
    return String(decoding: UnsafeBufferPointer(rebasing: bytes[range.lowerBound..<end]), as: UTF8.self)
  }

  /// `.ips` (a header line and a JSON body, or one JSON body), or a `.crash` behind a JSON header line.
  static func parseJSONReport(_ text: Substring) throws(ReportError) -> CrashReport? {
    let header: JSONValue
    let rest: Substring
    do {
      (header, rest) = try JSONValue.parsePrefix(text)
    } catch {
      // A half-written .ips: say where it broke rather than falling back to text.
      if text.contains("\"usedImages\"") || text.contains("\"bug_type\"") {
        throw ReportError("unreadable .ips header: \(error)")
      }
      return nil
    }
    let body = rest.drop { $0.isWhitespace }
    if body.isEmpty {
      guard header["usedImages"] != nil || header["threads"] != nil else {
        throw ReportError("a JSON document without threads or usedImages is not a crash report")
      }
      return try IPSParser.parse(header: nil, body: header)
    }
    if body.first == "{" {
      do {
        // Console's "Full Report", as people paste it, has the machine's profile (`Model: …`) after the body.
        let (document, after) = try JSONValue.parsePrefix(body)
        var report = try IPSParser.parse(header: header, body: document)
        if let first = after.split(separator: "\n").first(where: { !$0.allSatisfy(\.isWhitespace) }) {
          report.problems.append("text after the .ips body is not read: '\(first.prefix(80))'")
        }
        return report
      } catch let error as JSONError {
        throw ReportError("unreadable .ips body (bug_type \(header["bug_type"]?.string ?? "?")): \(error)")
      } catch let error as ReportError {
        throw error
      } catch {
        throw ReportError("\(error)")
      }
    }
    // bug_type 109 and friends: a one-line JSON header, then the classic text.
    let lines = splitLines(String(text))
    var report = AppleCrashParser.parse(lines)
    report.ipsHeader = header
    return report
  }

  // Both tests first look at a line's first byte: most lines of a long address list start with `0`.
  static func isSwiftBacktrace(_ lines: [String]) -> Bool {
    lines.contains { line in
      guard let first = line.utf8.first, first == UInt8(ascii: "*") || first == UInt8(ascii: "T") else { return false }
      return line.hasPrefix("*** Program crashed:") || (line.hasPrefix("Thread ") && line.hasSuffix(" crashed:"))
    }
  }

  static func isAppleStyle(_ lines: [String]) -> Bool {
    lines.contains { line in
      guard let first = line.utf8.first, first == UInt8(ascii: "B") || first == UInt8(ascii: "C")
        || first == UInt8(ascii: "T") || first == UInt8(ascii: "L") || first == UInt8(ascii: "A") else { return false }
      return line.hasPrefix("Binary Images:") || line.hasPrefix("Crashed Thread:")
        || (line.hasPrefix("Application Specific Backtrace ") && line.hasSuffix(":"))
        || ((line.hasPrefix("Thread ") || line.hasPrefix("Last Exception Backtrace")) && line.hasSuffix(":"))
    }
  }

  /// `0x` (or `0X`) and 1 to 16 hex digits, read from UTF-8 bytes without making a string; `nil` for
  /// anything else (as `hexNumber(_:)` reads a string).
  static func plainHexNumber(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64? {
    guard bytes.count >= 3, bytes[0] == UInt8(ascii: "0"),
          bytes[1] == UInt8(ascii: "x") || bytes[1] == UInt8(ascii: "X") else { return nil }
    return hexDigitsValue(bytes[2...])
  }

  /// The value of 1 to 16 hex digits (UTF-8 bytes), else nil.
  static func hexDigitsValue(_ digits: some Collection<UInt8>) -> UInt64? {
    guard !digits.isEmpty, digits.count <= 16 else { return nil }
    var value: UInt64 = 0
    for byte in digits {
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: return nil
      }
      value = value << 4 | UInt64(digit)  // at most 16 digits: no bits are lost
    }
    return value
  }

  /// `0x` followed by hex digits (or bare hex digits when `requirePrefix` is false).
  /// Read as UTF-8 bytes: no digit is more than one, and a token with any other byte is no number.
  static func hexNumber(_ token: some StringProtocol, requirePrefix: Bool = true) -> UInt64? {
    var bytes = Substring(token).utf8[...]
    if bytes.starts(with: "0x".utf8) || bytes.starts(with: "0X".utf8) { bytes = bytes.dropFirst(2) } else if requirePrefix { return nil }
    return hexDigitsValue(bytes)
  }

  /// Architecture names as crash reports write them (`ARM-64`, `X86-64 (Native)`, `x86_64`).
  static func architectureName(_ text: some StringProtocol) -> String? {
    let word = text.split(separator: " ").first.map { $0.lowercased() } ?? ""
    switch word {
    case "arm-64", "arm64": return "arm64"
    case "arm64e": return "arm64e"
    case "x86-64", "x86_64": return "x86_64"
    case "x86_64h": return "x86_64h"
    case "x86", "i386": return "i386"
    case "arm", "armv7": return "armv7"
    case "armv7s": return "armv7s"
    case "armv7k": return "armv7k"
    case "arm64_32": return "arm64_32"
    case "aarch64": return "arm64"
    default: return nil
    }
  }

  /// Architecture names as Binary Images lines write them after the image name.
  static func isKnownArchitecture(_ word: some StringProtocol) -> Bool {
    switch String(word) {
    case "arm64", "arm64e", "x86_64", "x86_64h", "i386", "armv7", "armv7s", "armv7k", "arm64_32", "armv6", "armv7m",
         "armv7em", "ppc": true
    default: false
    }
  }

  /// Assigns each frame without an image the image whose address range contains it (the narrowest,
  /// when ranges overlap; never an image with neither identity nor path, such as Apple's
  /// `0x0 - 0xffffffffffffffff ???`), then the one named like the frame's image column.
  static func attachImages(_ report: inout CrashReport, frameImageNames: [Int: String]) {
    let ranged = report.images.indices.filter { report.images[$0].isRanged }
    for index in report.frames.indices where report.frames[index].imageIndex == nil {
      let address = report.frames[index].address
      // The narrowest image containing the address (the first of equals); no array per frame.
      var found: Int?
      var foundSpan: UInt64 = 0
      for candidate in ranged {
        let start = report.images[candidate].loadAddress
        guard address >= start, let end = report.images[candidate].endAddress, address <= end else { continue }
        let span = end - start  // start <= address <= end
        if found == nil || span < foundSpan { (found, foundSpan) = (candidate, span) }
      }
      if let found {
        report.frames[index].imageIndex = found
      } else if let name = frameImageNames[index], let found = report.images.firstIndex(where: { $0.name == name }) {
        report.frames[index].imageIndex = found
      } else if let found = report.images.indices.filter({
        report.images[$0].endAddress == nil && report.images[$0].loadAddress <= address
      }).max(by: { report.images[$0].loadAddress < report.images[$1].loadAddress }) {
        report.frames[index].imageIndex = found  // an image of unknown size: the nearest one below
      }
    }
  }
}
