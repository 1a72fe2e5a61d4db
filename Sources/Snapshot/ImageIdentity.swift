public import ImageReaders

/// An image's identity as a crash report writes it, in any of the forms in use: a full GNU
/// build-id, its 16-byte UUID prefix, dashed or compact, any case, with or without `<>`, or a
/// Breakpad/Sentry debug-id (the UUID with its first three fields byte-swapped, optionally followed
/// by an age digit).
public struct ImageIdentity: Hashable, Sendable, CustomStringConvertible {
  /// The bytes as written (for a debug-id, as written too: the swap is undone only when matching).
  public var bytes: [UInt8]
  /// The text the report had.
  public var text: String

  /// Parses `text`; `nil` when it is not hex of at least 8 bytes, or is all zeros (Apple's `???`
  /// images and Swift's `<no build ID>` carry no identity).
  public init?(_ text: some StringProtocol) {
    var digits: [UInt8] = []
    for character in text.utf8 {
      switch character {
      case UInt8(ascii: "-"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: " "): continue
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digits.append(character - UInt8(ascii: "0"))
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digits.append(character - UInt8(ascii: "a") + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digits.append(character - UInt8(ascii: "A") + 10)
      default: return nil
      }
    }
    if digits.count == 33 { digits.removeLast() }  // Breakpad's age suffix on a 16-byte debug-id
    guard digits.count >= 16, digits.count % 2 == 0, digits.count <= 128 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(digits.count / 2)
    for index in stride(from: 0, to: digits.count, by: 2) { bytes.append(digits[index] << 4 | digits[index + 1]) }
    guard bytes.contains(where: { $0 != 0 }) else { return nil }
    self.bytes = bytes
    self.text = String(text)
  }

  /// The identity of a file's build-id or `LC_UUID`.
  public init(_ buildID: BuildID) {
    bytes = buildID.bytes
    text = buildID.hex
  }

  /// The identity as reports write it (`text`).
  public var description: String { text }

  /// Lowercase hex of every byte.
  public var hex: String { BuildID(bytes).hex }

  /// How a file's identity relates to this one.
  public enum Match: Sendable, Equatable {
    /// The same bytes, or one is the 16-byte UUID prefix of the other.
    case same
    /// The same after undoing Breakpad's byte swap of the first three UUID fields.
    case debugID
    case different
  }

  /// Compares with a file's build-id or UUID, in every form a report may have written it.
  public func match(_ file: BuildID) -> Match {
    let fileBytes = file.bytes
    if bytes == fileBytes { return .same }
    let shorter = min(bytes.count, fileBytes.count)
    if shorter >= 16, bytes.prefix(shorter) == fileBytes.prefix(shorter), bytes.count == 16 || fileBytes.count == 16 {
      return .same
    }
    if bytes.count == 16, fileBytes.count >= 16, bytes == Self.swapped(file.uuidBytes) { return .debugID }
    // A build-id shorter than 16 bytes (lld's 8-byte `--build-id=fast`) is padded with zeros in a
    // Breakpad debug id (`dump_syms`, a minidump's CodeView record): the same build when the padded
    // bytes are.
    if shorter < 16, bytes.count != fileBytes.count, fileBytes.count <= 16, bytes.count <= 16 {
      func padded(_ value: [UInt8]) -> [UInt8] { value + [UInt8](repeating: 0, count: 16 - value.count) }
      if padded(bytes) == padded(fileBytes) { return .same }
    }
    return .different
  }

  static func swapped(_ sixteen: [UInt8]) -> [UInt8] {
    var result = sixteen
    result[0..<4].reverse()
    result[4..<6].reverse()
    result[6..<8].reverse()
    return result
  }
}
