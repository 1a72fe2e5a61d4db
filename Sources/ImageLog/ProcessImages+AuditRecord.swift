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
    guard line.hasPrefix("IL1 ") else { return nil }
    let fields = line.dropFirst(4).split(separator: " ", maxSplits: 16, omittingEmptySubsequences: false)
    guard fields.count == 17 else { return nil }
    let kind: Kind
    switch fields[0] {
    case "+": kind = .added
    case "-": kind = .removed
    case "x": kind = .removedAtExit
    default: return nil
    }
    func hex(_ index: Int) -> UInt64? { UInt64(fields[index], radix: 16) }
    func decimal(_ index: Int) -> UInt64? { UInt64(fields[index]) }
    guard let pid = decimal(1).flatMap({ Int32(exactly: $0) }), let since = decimal(2), let step = decimal(3),
          let namespace = hex(4), let linkMap = hex(5), let bias = hex(6), let loadAddress = hex(7),
          let textEnd = hex(8), let loadEnd = hex(9), let fileEnd = hex(10), let buildIDAddress = hex(12),
          let machine = decimal(13).flatMap({ UInt16(exactly: $0) }), let elfClass = decimal(14),
          let isMain = decimal(15), textEnd >= loadAddress, loadEnd >= loadAddress, fileEnd >= loadAddress
    else { return nil }
    var buildID: BuildID?
    if fields[11] != "-" {
      let digits = Array(fields[11].utf8)
      guard digits.count % 2 == 0 else { return nil }
      var bytes: [UInt8] = []
      bytes.reserveCapacity(digits.count / 2)
      var index = 0
      while index + 1 < digits.count {
        guard let byte = UInt8(String(decoding: digits[index...(index + 1)], as: UTF8.self), radix: 16) else { return nil }
        bytes.append(byte)
        index += 2
      }
      buildID = BuildID(bytes)
    }
    let path = Self.unescape(fields[16])
    self.kind = kind
    self.pid = pid
    nanosecondsSinceStart = since
    stepNanoseconds = step
    self.namespace = namespace
    self.linkMap = linkMap
    image = Image(path: path, name: Image.shortName(of: path), loadAddress: loadAddress, loadBias: bias,
                  textRange: loadAddress..<textEnd, loadRange: loadAddress..<loadEnd, buildID: buildID,
                  architecture: elfArchitectureName(machine: machine, is64Bit: elfClass == 64),
                  isMainExecutable: isMain == 1, buildIDAddress: buildIDAddress == 0 ? nil : buildIDAddress,
                  fileMappedRange: loadAddress..<fileEnd)
  }

  /// Undoes the module's `\\` and `\xHH` escapes.
  static func unescape(_ text: Substring) -> String {
    guard text.contains("\\") else { return String(text) }
    var bytes: [UInt8] = []
    let utf8 = Array(text.utf8)
    var index = 0
    while index < utf8.count {
      if utf8[index] == 0x5C, index + 1 < utf8.count {
        if utf8[index + 1] == 0x5C { bytes.append(0x5C); index += 2; continue }
        if utf8[index + 1] == 0x78, index + 3 < utf8.count,
           let byte = UInt8(String(decoding: utf8[(index + 2)...(index + 3)], as: UTF8.self), radix: 16) {
          bytes.append(byte)
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
