/// A version packed in 32 bits as `xxxx.yy.zz` (`LC_BUILD_VERSION`, `LC_VERSION_MIN_*`, and dylib
/// current/compatibility versions).
public struct PackedVersion: Sendable, Equatable, Hashable, CustomStringConvertible {
  /// The raw 32-bit field.
  public var rawValue: UInt32
  package init(_ rawValue: UInt32) { self.rawValue = rawValue }

  /// The `xxxx` part.
  public var major: UInt32 { rawValue >> 16 }
  /// The `yy` part.
  public var minor: UInt32 { (rawValue >> 8) & 0xFF }
  /// The `zz` part.
  public var patch: UInt32 { rawValue & 0xFF }

  /// Always three components, `X.Y.Z`, as `otool -L` prints dylib versions.
  public var description: String { "\(major).\(minor).\(patch)" }

  /// `X.Y`, or `X.Y.Z` when the patch is not zero, as `otool -l` prints `minos` and `sdk`.
  public var shortDescription: String { patch == 0 ? "\(major).\(minor)" : description }
}

/// A section of a segment (`section` / `section_64`).
public struct MachOSection: Sendable, Equatable {
  /// `sectname` (up to 16 bytes).
  public var name: String
  /// `segname` as the section records it.
  public var segmentName: String
  /// `addr`
  public var address: UInt64
  /// `size`, in bytes.
  public var size: UInt64
  /// `offset` in the file (slice), in bytes.
  public var fileOffset: UInt32
  /// `align` as a power of two.
  public var alignment: UInt32
  /// `reloff`
  public var relocationOffset: UInt32
  /// `nreloc`
  public var relocationCount: UInt32
  /// `flags` (type in the low byte, attributes above).
  public var flags: UInt32
}

/// A segment (`LC_SEGMENT` / `LC_SEGMENT_64`) and its sections.
public struct MachOSegment: Sendable, Equatable {
  /// `segname` (up to 16 bytes): `__TEXT`, `__DATA`, `__LINKEDIT`, ... (empty in object files).
  public var name: String
  /// `vmaddr`, link-time.
  public var vmAddress: UInt64
  /// `vmsize`, in bytes.
  public var vmSize: UInt64
  /// `fileoff`, from the start of the slice.
  public var fileOffset: UInt64
  /// `filesize`, in bytes.
  public var fileSize: UInt64
  /// `maxprot` (`VM_PROT_READ` 1, `WRITE` 2, `EXECUTE` 4).
  public var maxProtection: UInt32
  /// `initprot`
  public var initialProtection: UInt32
  /// `flags` (`SG_*`).
  public var flags: UInt32
  /// The sections, in command order.
  public var sections: [MachOSection]
  /// True for `LC_SEGMENT_64`.
  public var is64Bit: Bool

  /// `vmaddr..<vmaddr+vmsize`, clamped at the top of the address space (the reader checks the sum).
  public var vmRange: Range<UInt64> { vmAddress..<(vmAddress &+ vmSize) }
}

/// Which dylib load command a `DylibReference` came from.
public enum DylibKind: String, Sendable, Equatable, CaseIterable {
  /// `LC_ID_DYLIB`: the library's own install name.
  case id
  /// `LC_LOAD_DYLIB`
  case load
  /// `LC_LOAD_WEAK_DYLIB`
  case weak
  /// `LC_REEXPORT_DYLIB`
  case reexport
  /// `LC_LAZY_LOAD_DYLIB`
  case lazy
  /// `LC_LOAD_UPWARD_DYLIB`
  case upward
}

/// A `dylib_command`: an install name and its versions.
public struct DylibReference: Sendable, Equatable {
  /// Which load command named the dylib (`LC_LOAD_DYLIB`, `LC_LOAD_WEAK_DYLIB`, ...).
  public var kind: DylibKind
  /// The install name (`@rpath/libfoo.dylib`, `/usr/lib/libSystem.B.dylib`).
  public var name: String
  /// `timestamp`
  public var timestamp: UInt32
  /// `current_version`
  public var currentVersion: PackedVersion
  /// `compatibility_version`
  public var compatibilityVersion: PackedVersion
}

/// `LC_BUILD_VERSION`: target platform, minimum OS, SDK and the tools that built the file.
public struct BuildVersion: Sendable, Equatable {
  /// `platform` (`PLATFORM_MACOS` 1, `PLATFORM_IOS` 2, ...).
  public var platform: UInt32
  /// `minos`
  public var minimumOS: PackedVersion
  /// `sdk`
  public var sdk: PackedVersion
  /// The `build_tool_version` entries: `tool` (`TOOL_CLANG` 1, `TOOL_SWIFT` 2, `TOOL_LD` 3, `TOOL_LLD` 4) and version.
  public var tools: [(tool: UInt32, version: PackedVersion)]

  /// The platform name as `otool -l` prints it (`macos`, `ios`, `watchos`, ...).
  public var platformName: String { machOPlatformName(platform) }

  /// True when the platform, versions and tools are equal.
  public static func == (lhs: BuildVersion, rhs: BuildVersion) -> Bool {
    lhs.platform == rhs.platform && lhs.minimumOS == rhs.minimumOS && lhs.sdk == rhs.sdk
      && lhs.tools.map(\.tool) == rhs.tools.map(\.tool) && lhs.tools.map(\.version) == rhs.tools.map(\.version)
  }
}

/// The platform name of an `LC_BUILD_VERSION` platform number, as `otool -l` prints it.
func machOPlatformName(_ platform: UInt32) -> String {
  switch platform {
  case 1: "macos"
  case 2: "ios"
  case 3: "tvos"
  case 4: "watchos"
  case 5: "bridgeos"
  case 6: "macCatalyst"
  case 7: "iossim"
  case 8: "tvossim"
  case 9: "watchossim"
  case 10: "driverkit"
  case 11: "xros"
  case 12: "xrsim"
  default: "platform-\(platform)"
  }
}

/// The name of a `build_tool_version` tool, as `otool -l` prints it.
package func machOToolName(_ tool: UInt32) -> String {
  switch tool {
  case 1: "clang"
  case 2: "swift"
  case 3: "ld"
  case 4: "lld"
  default: "tool-\(tool)"
  }
}

/// `LC_VERSION_MIN_MACOSX`, `_IPHONEOS`, `_TVOS`, `_WATCHOS`: the older form of the minimum OS.
public struct VersionMin: Sendable, Equatable {
  /// The command (`LC_VERSION_MIN_MACOSX` 0x24, `_IPHONEOS` 0x25, `_TVOS` 0x2f, `_WATCHOS` 0x30).
  public var command: UInt32
  /// `version`
  public var version: PackedVersion
  /// `sdk` (0 means "n/a" to `otool`).
  public var sdk: PackedVersion

  /// The platform the command implies (`macos`, `ios`, `tvos`, `watchos`).
  public var platformName: String {
    switch command {
    case 0x24: "macos"
    case 0x25: "ios"
    case 0x2F: "tvos"
    default: "watchos"
    }
  }
}

/// `LC_ENCRYPTION_INFO` / `LC_ENCRYPTION_INFO_64`: the encrypted file range of an App Store binary.
public struct EncryptionInfo: Sendable, Equatable {
  /// `cryptoff`, from the start of the slice.
  public var cryptOffset: UInt32
  /// `cryptsize`, in bytes.
  public var cryptSize: UInt32
  /// `cryptid`: 0 means not encrypted (or already decrypted).
  public var cryptID: UInt32
  /// True for `LC_ENCRYPTION_INFO_64`.
  public var is64Bit: Bool
}

/// A `linkedit_data_command`: a range of `__LINKEDIT` (code signature, function starts, ...).
public struct LinkEditData: Sendable, Equatable {
  /// `dataoff`, from the start of the slice.
  public var dataOffset: UInt32
  /// `datasize`, in bytes.
  public var dataSize: UInt32
}

/// `LC_SYMTAB`: where the `nlist` table and its string table are (the symbolicator reads them).
public struct SymbolTableCommand: Sendable, Equatable {
  /// `symoff`, from the start of the slice.
  public var symbolOffset: UInt32
  /// `nsyms`
  public var symbolCount: UInt32
  /// `stroff`
  public var stringOffset: UInt32
  /// `strsize`, in bytes.
  public var stringSize: UInt32
}

/// One decoded load command. The reader checks each command's size and the file ranges it names.
public enum LoadCommand: Sendable, Equatable {
  /// `LC_SEGMENT` / `LC_SEGMENT_64`
  case segment(MachOSegment)
  /// `LC_UUID`
  case uuid(BuildID)
  /// `LC_ID_DYLIB`, `LC_LOAD_DYLIB`, `LC_LOAD_WEAK_DYLIB`, `LC_REEXPORT_DYLIB`, `LC_LAZY_LOAD_DYLIB`,
  /// `LC_LOAD_UPWARD_DYLIB`
  case dylib(DylibReference)
  /// `LC_RPATH`
  case rpath(String)
  /// `LC_LOAD_DYLINKER` (`/usr/lib/dyld`)
  case dylinker(String)
  /// `LC_BUILD_VERSION`
  case buildVersion(BuildVersion)
  /// `LC_VERSION_MIN_MACOSX`, `_IPHONEOS`, `_TVOS`, `_WATCHOS`
  case versionMin(VersionMin)
  /// `LC_MAIN`: the entry point as an offset into `__TEXT`, and the stack size (0 = default).
  case main(entryOffset: UInt64, stackSize: UInt64)
  /// `LC_ENCRYPTION_INFO` / `LC_ENCRYPTION_INFO_64`
  case encryptionInfo(EncryptionInfo)
  /// `LC_CODE_SIGNATURE`
  case codeSignature(LinkEditData)
  /// `LC_FUNCTION_STARTS`
  case functionStarts(LinkEditData)
  /// `LC_SYMTAB`
  case symbolTable(SymbolTableCommand)
  /// Not decoded here; `cmd` keeps the `LC_REQ_DYLD` bit.
  case other(cmd: UInt32, size: Int)
}

/// Load command numbers (`LC_*`) the reader decodes.
enum LC {
  static let reqDyld: UInt32 = 0x8000_0000
  static let segment: UInt32 = 0x1
  static let symtab: UInt32 = 0x2
  static let loadDylib: UInt32 = 0xC
  static let idDylib: UInt32 = 0xD
  static let loadDylinker: UInt32 = 0xE
  static let loadWeakDylib: UInt32 = 0x18 | reqDyld
  static let segment64: UInt32 = 0x19
  static let uuid: UInt32 = 0x1B
  static let rpath: UInt32 = 0x1C | reqDyld
  static let codeSignature: UInt32 = 0x1D
  static let reexportDylib: UInt32 = 0x1F | reqDyld
  static let lazyLoadDylib: UInt32 = 0x20
  static let encryptionInfo: UInt32 = 0x21
  static let loadUpwardDylib: UInt32 = 0x23 | reqDyld
  static let versionMinMacOSX: UInt32 = 0x24
  static let versionMinIPhoneOS: UInt32 = 0x25
  static let functionStarts: UInt32 = 0x26
  static let main: UInt32 = 0x28 | reqDyld
  static let encryptionInfo64: UInt32 = 0x2C
  static let versionMinTvOS: UInt32 = 0x2F
  static let versionMinWatchOS: UInt32 = 0x30
  static let buildVersion: UInt32 = 0x32
  static let segmentSplitInfo: UInt32 = 0x1E
  static let dataInCode: UInt32 = 0x29
  static let dylibCodeSignDRs: UInt32 = 0x2B
  static let linkerOptimizationHint: UInt32 = 0x2E
  static let dyldExportsTrie: UInt32 = 0x33 | reqDyld
  static let dyldChainedFixups: UInt32 = 0x34 | reqDyld

  /// The `LC_*` name of a command number, as `otool -l` prints it; `nil` for numbers we do not name.
  static func name(_ cmd: UInt32) -> String? {
    switch cmd {
    case segment: "LC_SEGMENT"
    case symtab: "LC_SYMTAB"
    case 0xB: "LC_DYSYMTAB"
    case loadDylib: "LC_LOAD_DYLIB"
    case idDylib: "LC_ID_DYLIB"
    case loadDylinker: "LC_LOAD_DYLINKER"
    case loadWeakDylib: "LC_LOAD_WEAK_DYLIB"
    case segment64: "LC_SEGMENT_64"
    case uuid: "LC_UUID"
    case rpath: "LC_RPATH"
    case codeSignature: "LC_CODE_SIGNATURE"
    case 0x1E: "LC_SEGMENT_SPLIT_INFO"
    case reexportDylib: "LC_REEXPORT_DYLIB"
    case lazyLoadDylib: "LC_LAZY_LOAD_DYLIB"
    case encryptionInfo: "LC_ENCRYPTION_INFO"
    case 0x22: "LC_DYLD_INFO"
    case 0x22 | reqDyld: "LC_DYLD_INFO_ONLY"
    case loadUpwardDylib: "LC_LOAD_UPWARD_DYLIB"
    case versionMinMacOSX: "LC_VERSION_MIN_MACOSX"
    case versionMinIPhoneOS: "LC_VERSION_MIN_IPHONEOS"
    case functionStarts: "LC_FUNCTION_STARTS"
    case 0x27: "LC_DYLD_ENVIRONMENT"
    case main: "LC_MAIN"
    case 0x29: "LC_DATA_IN_CODE"
    case 0x2A: "LC_SOURCE_VERSION"
    case 0x2B: "LC_DYLIB_CODE_SIGN_DRS"
    case encryptionInfo64: "LC_ENCRYPTION_INFO_64"
    case 0x2D: "LC_LINKER_OPTION"
    case 0x2E: "LC_LINKER_OPTIMIZATION_HINT"
    case versionMinTvOS: "LC_VERSION_MIN_TVOS"
    case versionMinWatchOS: "LC_VERSION_MIN_WATCHOS"
    case 0x31: "LC_NOTE"
    case buildVersion: "LC_BUILD_VERSION"
    case 0x33 | reqDyld: "LC_DYLD_EXPORTS_TRIE"
    case 0x34 | reqDyld: "LC_DYLD_CHAINED_FIXUPS"
    case 0x35 | reqDyld: "LC_FILESET_ENTRY"
    default: nil
    }
  }
}

/// The `LC_*` name `otool -l` prints for a command number, or `cmd 0x...` for one it does not name.
package func machOLoadCommandName(_ cmd: UInt32) -> String {
  LC.name(cmd) ?? "cmd 0x\(hexDigits(UInt64(cmd)))"
}

extension LoadCommand {
  /// The `LC_*` name of this command.
  public var name: String {
    switch self {
    case .segment(let segment): segment.is64Bit ? "LC_SEGMENT_64" : "LC_SEGMENT"
    case .uuid: "LC_UUID"
    case .dylib(let dylib):
      switch dylib.kind {
      case .id: "LC_ID_DYLIB"
      case .load: "LC_LOAD_DYLIB"
      case .weak: "LC_LOAD_WEAK_DYLIB"
      case .reexport: "LC_REEXPORT_DYLIB"
      case .lazy: "LC_LAZY_LOAD_DYLIB"
      case .upward: "LC_LOAD_UPWARD_DYLIB"
      }
    case .rpath: "LC_RPATH"
    case .dylinker: "LC_LOAD_DYLINKER"
    case .buildVersion: "LC_BUILD_VERSION"
    case .versionMin(let version): machOLoadCommandName(version.command)
    case .main: "LC_MAIN"
    case .encryptionInfo(let info): info.is64Bit ? "LC_ENCRYPTION_INFO_64" : "LC_ENCRYPTION_INFO"
    case .codeSignature: "LC_CODE_SIGNATURE"
    case .functionStarts: "LC_FUNCTION_STARTS"
    case .symbolTable: "LC_SYMTAB"
    case .other(let cmd, _): machOLoadCommandName(cmd)
    }
  }
}
