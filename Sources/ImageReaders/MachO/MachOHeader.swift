/// The `mach_header` / `mach_header_64` at the start of a thin Mach-O file or slice.
public struct MachOHeader: Sendable, Equatable {
  /// `MH_MAGIC` (0xfeedface): 32-bit, in the byte order the magic reads correctly in.
  package static let magic32: UInt32 = 0xFEED_FACE
  /// `MH_MAGIC_64` (0xfeedfacf).
  package static let magic64: UInt32 = 0xFEED_FACF

  /// True for the 64-bit layout (`MH_MAGIC_64`/`MH_CIGAM_64`): a 32-byte header and 8-byte-aligned commands.
  public var is64Bit: Bool
  /// The byte order every field of this slice is stored in (`MH_CIGAM*` files are big-endian on our hosts).
  public var endian: ByteReader.Endian
  /// `cputype` (`CPU_TYPE_*`, with `CPU_ARCH_ABI64` / `CPU_ARCH_ABI64_32` bits).
  public var cpuType: UInt32
  /// `cpusubtype` with the capability bits (`CPU_SUBTYPE_MASK`, 0xff000000) kept.
  public var cpuSubtype: UInt32
  /// `filetype` (`MH_EXECUTE`, `MH_DYLIB`, ...).
  public var fileType: UInt32
  /// `ncmds`
  package var commandCount: UInt32
  /// `sizeofcmds`, in bytes.
  package var commandsSize: UInt32
  /// `flags` (`MH_*`).
  public var flags: UInt32

  /// The header's size in bytes: 28 (32-bit) or 32 (64-bit, with `reserved`).
  package var size: Int { is64Bit ? 32 : 28 }

  /// Decodes the header at the start of `bytes`, whichever of the four magics it has.
  package init(_ bytes: ByteReader) throws(FormatError) {
    var reader = bytes
    reader.endian = .little
    let little = try reader.peek(UInt32.self, at: 0)
    switch little {
    case Self.magic32: is64Bit = false; endian = .little
    case Self.magic64: is64Bit = true; endian = .little
    case Self.magic32.byteSwapped: is64Bit = false; endian = .big
    case Self.magic64.byteSwapped: is64Bit = true; endian = .big
    default: throw .notRecognized(magic: little.byteSwapped)
    }
    reader.endian = endian
    guard reader.count >= (is64Bit ? 32 : 28) else {
      throw .machO("truncated Mach-O header: \(is64Bit ? 32 : 28) bytes needed, \(reader.count) in the file")
    }
    try reader.skip(4)
    cpuType = try reader.read(UInt32.self)
    cpuSubtype = try reader.read(UInt32.self)
    fileType = try reader.read(UInt32.self)
    commandCount = try reader.read(UInt32.self)
    commandsSize = try reader.read(UInt32.self)
    flags = try reader.read(UInt32.self)
  }

  /// The architecture name `lipo` and crash reports use (`arm64e`, `x86_64h`, `armv7s`, ...).
  public var architecture: String { machOArchitectureName(cpuType: cpuType, cpuSubtype: cpuSubtype) }

  /// The short `filetype` name: `object`, `execute`, `dylib`, `bundle`, `dsym`, ...
  public var fileTypeName: String { machOFileTypeName(fileType) }

  /// The names of the set `MH_*` flags without the prefix (`NOUNDEFS`, `PIE`, ...), lowest bit first;
  /// unknown bits appear as `0x...`.
  public var flagNames: [String] { machOFlagNames(flags) }
}

/// `CPU_ARCH_ABI64`
let cpuArchABI64: UInt32 = 0x0100_0000
/// `CPU_ARCH_ABI64_32`
let cpuArchABI64_32: UInt32 = 0x0200_0000

/// The architecture name of a Mach-O `cputype`/`cpusubtype` pair, as `lipo -info` and crash reports
/// write it. The subtype's capability bits (`CPU_SUBTYPE_MASK`, e.g. `CPU_SUBTYPE_LIB64` or arm64e's
/// pointer-authentication ABI bits) are ignored. Unknown pairs read `cputype-N-subtype-M`.
func machOArchitectureName(cpuType: UInt32, cpuSubtype: UInt32) -> String {
  let subtype = cpuSubtype & 0x00FF_FFFF  // ~CPU_SUBTYPE_MASK
  switch cpuType {
  case 7:  // CPU_TYPE_X86
    return "i386"
  case 7 | cpuArchABI64:  // CPU_TYPE_X86_64
    return subtype == 8 ? "x86_64h" : "x86_64"
  case 12:  // CPU_TYPE_ARM
    switch subtype {  // a switch, not a dictionary: no Hashable lookups at run time
    case 0: return "arm"
    case 5: return "armv4t"
    case 6: return "armv6"
    case 7: return "armv5"
    case 8: return "xscale"
    case 9: return "armv7"
    case 10: return "armv7f"
    case 11: return "armv7s"
    case 12: return "armv7k"
    case 13: return "armv8"
    case 14: return "armv6m"
    case 15: return "armv7m"
    case 16: return "armv7em"
    default: return "arm-subtype-\(subtype)"
    }
  case 12 | cpuArchABI64:  // CPU_TYPE_ARM64
    return subtype == 2 ? "arm64e" : "arm64"
  case 12 | cpuArchABI64_32:  // CPU_TYPE_ARM64_32
    return "arm64_32"
  case 18:  // CPU_TYPE_POWERPC
    switch subtype {  // a switch, not a dictionary: no Hashable lookups at run time
    case 1: return "ppc601"
    case 3: return "ppc603"
    case 4: return "ppc603e"
    case 5: return "ppc603ev"
    case 6: return "ppc604"
    case 7: return "ppc604e"
    case 8: return "ppc620"
    case 9: return "ppc750"
    case 10: return "ppc7400"
    case 11: return "ppc7450"
    case 100: return "ppc970"
    default: return "ppc"
    }
  case 18 | cpuArchABI64:  // CPU_TYPE_POWERPC64
    return subtype == 100 ? "ppc970-64" : "ppc64"
  case 6: return "m68k"
  case 13: return "m88k"
  case 14: return "sparc"
  case 15: return "i860"
  case 11: return "hppa"
  default: return "cputype-\(cpuType)-subtype-\(subtype)"
  }
}

/// The short name of a Mach-O `filetype`.
func machOFileTypeName(_ fileType: UInt32) -> String {
  switch fileType {
  case 1: "object"       // MH_OBJECT
  case 2: "execute"      // MH_EXECUTE
  case 3: "fvmlib"       // MH_FVMLIB
  case 4: "core"         // MH_CORE
  case 5: "preload"      // MH_PRELOAD
  case 6: "dylib"        // MH_DYLIB
  case 7: "dylinker"     // MH_DYLINKER
  case 8: "bundle"       // MH_BUNDLE
  case 9: "dylib-stub"   // MH_DYLIB_STUB
  case 10: "dsym"        // MH_DSYM
  case 11: "kext-bundle" // MH_KEXT_BUNDLE
  case 12: "fileset"     // MH_FILESET
  default: "filetype-\(fileType)"
  }
}

private let machOFlagTable: [(UInt32, String)] = [
  (0x1, "NOUNDEFS"), (0x2, "INCRLINK"), (0x4, "DYLDLINK"), (0x8, "BINDATLOAD"), (0x10, "PREBOUND"),
  (0x20, "SPLIT_SEGS"), (0x40, "LAZY_INIT"), (0x80, "TWOLEVEL"), (0x100, "FORCE_FLAT"), (0x200, "NOMULTIDEFS"),
  (0x400, "NOFIXPREBINDING"), (0x800, "PREBINDABLE"), (0x1000, "ALLMODSBOUND"),
  (0x2000, "SUBSECTIONS_VIA_SYMBOLS"), (0x4000, "CANONICAL"), (0x8000, "WEAK_DEFINES"),
  (0x10000, "BINDS_TO_WEAK"), (0x20000, "ALLOW_STACK_EXECUTION"), (0x40000, "ROOT_SAFE"),
  (0x80000, "SETUID_SAFE"), (0x100000, "NO_REEXPORTED_DYLIBS"), (0x200000, "PIE"),
  (0x400000, "DEAD_STRIPPABLE_DYLIB"), (0x800000, "HAS_TLV_DESCRIPTORS"), (0x1000000, "NO_HEAP_EXECUTION"),
  (0x2000000, "APP_EXTENSION_SAFE"), (0x4000000, "NLIST_OUTOFSYNC_WITH_DYLDINFO"), (0x8000000, "SIM_SUPPORT"),
  (0x80000000, "DYLIB_IN_CACHE"),
]

/// The names of the `MH_*` flags set in `flags`, without the prefix, lowest bit first.
func machOFlagNames(_ flags: UInt32) -> [String] {
  var names: [String] = []
  var known: UInt32 = 0
  for (bit, name) in machOFlagTable {
    known |= bit
    if flags & bit != 0 { names.append(name) }
  }
  if flags & ~known != 0 { names.append("0x" + hexDigits(UInt64(flags & ~known))) }
  return names
}
