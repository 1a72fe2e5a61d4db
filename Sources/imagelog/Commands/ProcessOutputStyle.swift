import ImageLog
import ImageReaders

// TEMPORARY until core's ImageFormatter lands on main; deleted after the merge.
enum ProcessOutputStyle: String {
  case logger, crash, unstrip, json

  static func parse(_ scanner: inout ArgumentScanner, command: String, usage: String,
                    default fallback: Self = .crash) throws(UsageError) -> Self {
    guard let value = try scanner.option("--format", command: command, usage: usage) else { return fallback }
    guard let style = Self(rawValue: value) else {
      throw UsageError(message: "The value '\(value)' is invalid for '--format <style>'", commandName: command, usage: usage)
    }
    return style
  }

  func format(_ image: Image, event: String? = nil) -> String {
    let id = image.buildID?.hex ?? "-"
    let line: String
    switch self {
    case .unstrip:
      let at = image.buildIDAddress.map { "@0x" + hexDigits($0) } ?? ""
      line = "0x\(hexDigits(image.fileMappedRange.lowerBound))+0x\(hexDigits(image.fileMappedRange.upperBound - image.fileMappedRange.lowerBound)) \(id)\(at) \(image.path)"
    default:
      line = "0x\(hexDigits(image.textRange.lowerBound)) - 0x\(hexDigits(image.textRange.upperBound &- 1)) \(image.isMainExecutable ? "+" : "")\(image.name) \(image.architecture)  <\(image.buildID?.compactUUID ?? "")> \(image.path)"
    }
    return event.map { "\($0): \(line)" } ?? line
  }

  /// `line` with when the image was added and how long mapping it took; inside the object for JSON.
  func appendTiming(to line: String, since: UInt64, step: UInt64) -> String {
    if self == .json, line.hasSuffix("}") {
      return String(line.dropLast()) + ",\"addedAtNanoseconds\":\(since),\"loadNanoseconds\":\(step)}"
    }
    return line + "  (+\(milliseconds(since)) ms, load \(milliseconds(step)) ms)"
  }

  func milliseconds(_ nanoseconds: UInt64) -> String {
    let micro = nanoseconds / 1000
    let fraction = String(micro % 1000)
    return "\(micro / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
  }
}
