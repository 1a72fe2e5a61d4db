internal import ImageReaders

/// One line the rtld-audit module (`libImageLogAudit.so`, used by `imagelog run`) writes for each
/// image the dynamic loader adds or removes. The format is documented in `CImageLogAudit.h`.
public struct AuditRecord: Sendable, Equatable {
  /// What happened to the image.
  public enum Kind: Sendable, Equatable {
    /// `la_objopen`: mapped, before its relocation and constructors.
    case added
    /// `la_objclose` from `dlclose`: about to be unmapped.
    case removed
    /// `la_objclose` of the main executable from `_dl_fini`: the process is exiting (the module
    /// reports no image after it).
    case removedAtExit
  }

  public var kind: Kind
  /// The process that loaded the image (a forked child reports with its own PID).
  public var pid: Int32
  /// Nanoseconds from when `imagelog run` started the program to this event.
  public var nanosecondsSinceStart: UInt64
  /// For `.added`: nanoseconds the loader spent finding, opening and mapping this image (since it
  /// began searching for it: `la_objsearch`), before relocation and constructors. 0 otherwise.
  public var stepNanoseconds: UInt64
  /// The link-map namespace (`Lmid_t`; 0 is `LM_ID_BASE`).
  public var namespace: UInt64
  /// The loader's `struct link_map` address: the key that pairs a remove with its add.
  public var linkMap: Address
  /// The image, with the fields the in-process snapshot has.
  public var image: Image

  /// Parses one record line (without its newline); `nil` when it is not a record.
  public init?(line: Substring) {
    var line = line
    guard let record = line.withUTF8({ Self(utf8: $0) }) else { return nil }
    self = record
  }

  /// Parses one record line from its bytes (without the newline): fields split at single spaces,
  /// the path is the rest of the line. `imagelog run` reads hundreds per program, so this works on
  /// the bytes rather than on `Character`s.
  init?(utf8 line: UnsafeBufferPointer<UInt8>) {
    guard line.count >= 4, line[0] == 0x49, line[1] == 0x4C, line[2] == 0x31, line[3] == 0x20 else {  // "IL1 "
      return nil
    }
    // Where each of the 16 fields before the path starts, and the path: field n is
    // line[starts[n] ..< starts[n + 1] - 1].
    var starts: [Int] = [4]
    starts.reserveCapacity(17)
    var index = 4
    while starts.count < 17 && index < line.count {
      if line[index] == 0x20 { starts.append(index + 1) }
      index += 1
    }
    guard starts.count == 17 else { return nil }
    let pathRange = starts[16]..<line.count
    func bytes(_ range: Range<Int>) -> Slice<UnsafeBufferPointer<UInt8>> { line[range] }
    func field(_ index: Int) -> Slice<UnsafeBufferPointer<UInt8>> { line[starts[index]..<(starts[index + 1] - 1)] }
    func number(_ index: Int, radix: UInt64) -> UInt64? {
      let digits = field(index)
      guard !digits.isEmpty else { return nil }
      var value: UInt64 = 0
      for byte in digits {
        let digit: UInt64
        switch byte {
        case 0x30...0x39: digit = UInt64(byte - 0x30)
        case 0x61...0x66 where radix == 16: digit = UInt64(byte - 0x61 + 10)
        case 0x41...0x46 where radix == 16: digit = UInt64(byte - 0x41 + 10)
        default: return nil
        }
        let (shifted, overflow) = value.multipliedReportingOverflow(by: radix)
        let (sum, carry) = shifted.addingReportingOverflow(digit)
        guard !overflow, !carry else { return nil }
        value = sum
      }
      return value
    }
    func hex(_ index: Int) -> UInt64? { number(index, radix: 16) }
    func decimal(_ index: Int) -> UInt64? { number(index, radix: 10) }
    let kindField = field(0)
    guard kindField.count == 1, let kindByte = kindField.first else { return nil }
    let kind: Kind
    switch kindByte {
    case 0x2B: kind = .added            // "+"
    case 0x2D: kind = .removed          // "-"
    case 0x78: kind = .removedAtExit    // "x"
    default: return nil
    }
    guard let pid = decimal(1).flatMap({ Int32(exactly: $0) }), let since = decimal(2), let step = decimal(3),
          let namespace = hex(4), let linkMap = hex(5), let bias = hex(6), let loadAddress = hex(7),
          let textEnd = hex(8), let loadEnd = hex(9), let fileEnd = hex(10), let buildIDAddress = hex(12),
          let machine = decimal(13).flatMap({ UInt16(exactly: $0) }), let elfClass = decimal(14),
          let isMain = decimal(15), textEnd >= loadAddress, loadEnd >= loadAddress, fileEnd >= loadAddress
    else { return nil }
    var buildID: BuildID?
    let idDigits = field(11)
    if !(idDigits.count == 1 && idDigits.first == 0x2D) {  // "-": none
      guard idDigits.count % 2 == 0 else { return nil }
      var idBytes: [UInt8] = []
      idBytes.reserveCapacity(idDigits.count / 2)
      var at = idDigits.startIndex
      while at < idDigits.endIndex {
        guard let high = nibble(idDigits[at]), let low = nibble(idDigits[at + 1]) else { return nil }
        idBytes.append(high << 4 | low)
        at += 2
      }
      buildID = BuildID(idBytes)
    }
    let pathBytes = bytes(pathRange)
    let path = Self.unescape(pathBytes)
    // The name from the bytes when the path has no escapes (the usual case): Image.shortName walks
    // Characters.
    let name: String
    if !pathBytes.contains(0x5C), let slash = pathBytes.lastIndex(of: 0x2F) {
      name = String(decoding: pathBytes[(slash + 1)...], as: UTF8.self)
    } else {
      name = Image.shortName(of: path)
    }
    self.kind = kind
    self.pid = pid
    nanosecondsSinceStart = since
    stepNanoseconds = step
    self.namespace = namespace
    self.linkMap = linkMap
    image = Image(path: path, name: name, loadAddress: loadAddress, loadBias: bias,
                  textRange: loadAddress..<textEnd, loadRange: loadAddress..<loadEnd, buildID: buildID,
                  architecture: elfArchitectureName(machine: machine, is64Bit: elfClass == 64),
                  isMainExecutable: isMain == 1, buildIDAddress: buildIDAddress == 0 ? nil : buildIDAddress,
                  fileMappedRange: loadAddress..<fileEnd)
  }

  /// Undoes the module's `\\` and `\xHH` escapes.
  static func unescape(_ text: Substring) -> String {
    var text = text
    return text.withUTF8 { unescape($0[...]) }
  }

  /// Undoes the module's `\\` and `\xHH` escapes, on the line's bytes.
  static func unescape(_ utf8: Slice<UnsafeBufferPointer<UInt8>>) -> String {
    guard utf8.contains(0x5C) else { return String(decoding: utf8, as: UTF8.self) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = utf8.startIndex
    while index < utf8.endIndex {
      if utf8[index] == 0x5C, utf8.endIndex - index > 1 {
        if utf8[index + 1] == 0x5C { bytes.append(0x5C); index += 2; continue }
        if utf8[index + 1] == 0x78, utf8.endIndex - index > 3,
           let high = nibble(utf8[index + 2]), let low = nibble(utf8[index + 3]) {
          bytes.append(high << 4 | low)
          index += 4
          continue
        }
      }
      bytes.append(utf8[index])
      index += 1
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// The value of one hexadecimal digit (either case), or nil.
private func nibble(_ byte: UInt8) -> UInt8? {
  switch byte {
  case 0x30...0x39: byte - 0x30
  case 0x61...0x66: byte - 0x61 + 10
  case 0x41...0x46: byte - 0x41 + 10
  default: nil
  }
}
