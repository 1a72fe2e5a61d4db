import ImageLog
import ImageReaders

// TEMPORARY until core's ImageFormatter lands on main; deleted after the merge.
enum ProcessOutputStyle: String {
  case logger, crash, unstrip, json

  static func parse(_ scanner: inout ArgumentScanner, command: String, usage: String) throws(UsageError) -> Self {
    guard let value = try scanner.option("--format", command: command, usage: usage) else { return .crash }
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
}
