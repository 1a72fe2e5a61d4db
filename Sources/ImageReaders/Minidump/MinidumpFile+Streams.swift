extension MinidumpFile {
  /// `VS_FIXEDFILEINFO`: a module's version resource (all zeros but the signature on Linux).
  package struct VersionInfo: Sendable, Equatable {
    /// `dwSignature`: `0xFEEF04BD` when the structure is filled in.
    package var signature: UInt32
    /// `dwStrucVersion`
    var structVersion: UInt32
    /// `dwFileVersionMS`, `dwFileVersionLS`
    package var fileVersion: (high: UInt32, low: UInt32)
    /// `dwProductVersionMS`, `dwProductVersionLS`
    package var productVersion: (high: UInt32, low: UInt32)
    /// `dwFileFlagsMask`
    var fileFlagsMask: UInt32
    /// `dwFileFlags`
    var fileFlags: UInt32
    /// `dwFileOS`
    var fileOS: UInt32
    /// `dwFileType`: `VFT_APP` 1 for the main executable, `VFT_DLL` 2 for a library (Crashpad's choice).
    package var fileType: UInt32
    /// `dwFileSubtype`
    var fileSubtype: UInt32
    /// `dwFileDateMS`, `dwFileDateLS`
    package var fileDate: (high: UInt32, low: UInt32)

    /// Field by field (the version pairs are tuples).
    package static func == (lhs: VersionInfo, rhs: VersionInfo) -> Bool {
      lhs.signature == rhs.signature && lhs.structVersion == rhs.structVersion && lhs.fileVersion == rhs.fileVersion
        && lhs.productVersion == rhs.productVersion && lhs.fileFlagsMask == rhs.fileFlagsMask
        && lhs.fileFlags == rhs.fileFlags && lhs.fileOS == rhs.fileOS && lhs.fileType == rhs.fileType
        && lhs.fileSubtype == rhs.fileSubtype && lhs.fileDate == rhs.fileDate
    }
  }

  /// A module's CodeView record: how a symbol server knows which build it is.
  package enum CodeView: Sendable, Equatable {
    /// `'BpEL'` (`MD_CVINFOELF_SIGNATURE`): the ELF GNU build-id, as Breakpad and Crashpad write it.
    case elf(BuildID)
    /// `'RSDS'` (`MD_CVINFOPDB70_SIGNATURE`): a GUID (its 16 bytes as stored), an age and a PDB file
    /// name. Older Breakpad wrote Linux modules this way, the build-id's first 16 bytes as the GUID.
    case pdb70(guid: [UInt8], age: UInt32, fileName: String)
    /// `'NB10'` (`MD_CVINFOPDB20_SIGNATURE`): a time stamp, an age and a PDB file name.
    case pdb20(signature: UInt32, age: UInt32, fileName: String)
    /// Another signature, with the record's bytes after it.
    case other(signature: UInt32, bytes: [UInt8])
  }

  /// One `MINIDUMP_MODULE`.
  package struct Module: Sendable, Equatable {
    /// `BaseOfImage`: where the module's first mapping starts.
    package var baseAddress: UInt64
    /// `SizeOfImage`: the bytes from `baseAddress` the module spans.
    package var size: UInt32
    /// `CheckSum`
    package var checksum: UInt32
    /// `TimeDateStamp`
    package var timeDateStamp: UInt32
    /// The module's path (`ModuleNameRva`, a `MINIDUMP_STRING`); empty when it could not be read.
    package var name: String
    /// `VersionInfo`
    package var versionInfo: VersionInfo
    /// `CvRecord`, decoded; `nil` when the module has none (or it was broken: see `problems`).
    package var codeView: CodeView?
    /// `MiscRecord`: where an `IMAGE_DEBUG_MISC` record is (size 0 on Linux).
    var miscRecord: Location

    /// `baseAddress ..< baseAddress + size`, ending at 2^64 - 1 for a module that would wrap past it.
    package var addressRange: Range<UInt64> {
      let (end, overflow) = baseAddress.addingReportingOverflow(UInt64(size))
      return baseAddress..<(overflow ? UInt64.max : end)
    }

    /// The ELF build-id of a `'BpEL'` record; `nil` for other records and for an empty or all-zero one
    /// (writers leave those for mappings that are not ELF images).
    package var buildID: BuildID? {
      guard case .elf(let id) = codeView, id.bytes.contains(where: { $0 != 0 }) else { return nil }
      return id
    }

    /// Breakpad's debug identifier, as `dump_syms` and `minidump-stackwalk` print it: from a build-id,
    /// its first 16 bytes as a GUID with the first three fields byte-swapped and age 0 (33 hex digits);
    /// from a PDB 7.0 record (Windows, and Mach-O UUIDs on macOS and iOS), its GUID and age; from a PDB
    /// 2.0 record, its time stamp (8 digits) and age. `nil` without any of these (or with a nil GUID).
    package var debugIdentifier: String? {
      switch codeView {
      case .elf: return buildID?.breakpadDebugID()
      case .pdb70(let guid, let age, _):
        guard guid.contains(where: { $0 != 0 }) else { return nil }
        return BuildID(guid).breakpadDebugID(age: age)
      case .pdb20(let signature, let age, _):
        return hexDigits(UInt64(signature), width: 8).uppercased() + hexDigits(UInt64(age))
      default: return nil
      }
    }

    /// The debug file's name as `minidump-stackwalk` prints it (`debug_file`), the folder a Breakpad
    /// store files the module's symbols under: the last component of `debugFile` (`test_app.pdb`,
    /// `libc.so.6`), empty when the module has no CodeView record.
    package var debugFileName: String { debugFile.map(MinidumpFile.baseName) ?? "" }
  }

  /// One `MINIDUMP_UNLOADED_MODULE`.
  package struct UnloadedModule: Sendable, Equatable {
    /// `BaseOfImage`
    package var baseAddress: UInt64
    /// `SizeOfImage`
    package var size: UInt32
    /// `CheckSum`
    package var checksum: UInt32
    /// `TimeDateStamp`
    package var timeDateStamp: UInt32
    /// `ModuleNameRva`, a `MINIDUMP_STRING`; empty when it could not be read.
    package var name: String
  }

  /// One `MINIDUMP_MEMORY_INFO`: a region of the process and its protection.
  package struct MemoryInfo: Sendable, Equatable {
    /// `BaseAddress`
    package var baseAddress: UInt64
    /// `AllocationBase`
    package var allocationBase: UInt64
    /// `AllocationProtect` (`PAGE_*`)
    package var allocationProtection: UInt32
    /// `RegionSize`
    package var regionSize: UInt64
    /// `State` (`MEM_COMMIT` 0x1000, `MEM_RESERVE` 0x2000, `MEM_FREE` 0x10000)
    package var state: UInt32
    /// `Protect` (`PAGE_*`)
    package var protection: UInt32
    /// `Type` (`MEM_PRIVATE`, `MEM_MAPPED`, `MEM_IMAGE`)
    package var type: UInt32
  }

  /// `MINIDUMP_EXCEPTION_STREAM`. On Linux `code` is the signal number and `flags` its `si_code`.
  package struct Exception: Sendable, Equatable {
    /// `ThreadId`: the thread that received the signal.
    package var tid: UInt32
    /// `ExceptionCode`: the signal (`SIGSEGV` 11, ...) on Linux.
    package var code: UInt32
    /// `ExceptionFlags`: the signal's `si_code` on Linux (`SEGV_MAPERR` 1, ...).
    package var flags: UInt32
    /// `ExceptionRecord`: the address of a nested record in the dumped process (0 on Linux).
    package var recordAddress: UInt64
    /// `ExceptionAddress`: the faulting address (`si_addr`) on Linux.
    package var address: UInt64
    /// `ExceptionInformation[0 ..< NumberParameters]`.
    package var parameters: [UInt64]
    /// `ThreadContext`: the registers when the signal arrived.
    var contextLocation: Location
    /// Those registers, decoded; `nil` when they could not be (see `problems`).
    package var context: MinidumpContext?
  }

  /// `MINIDUMP_SYSTEM_INFO`.
  package struct SystemInfo: Sendable, Equatable {
    /// `ProcessorArchitecture`: `PROCESSOR_ARCHITECTURE_AMD64` 9, `ARM64` 12, Breakpad's `ARM64_OLD`
    /// 0x8003, `INTEL` 0, `ARM` 5, ...
    package var processorArchitecture: UInt16
    /// `ProcessorLevel`: the x86 family, the ARM architecture version.
    package var processorLevel: UInt16
    /// `ProcessorRevision`: x86 model << 8 | stepping.
    package var processorRevision: UInt16
    /// `NumberOfProcessors`
    package var processorCount: UInt8
    /// `ProductType`
    package var productType: UInt8
    /// `MajorVersion`: the kernel's major version on Linux.
    package var majorVersion: UInt32
    /// `MinorVersion`
    package var minorVersion: UInt32
    /// `BuildNumber`: the kernel's patch level on Linux.
    package var buildNumber: UInt32
    /// `PlatformId`: Breakpad's `MD_OS_LINUX` 0x8201, `MD_OS_ANDROID` 0x8203, `VER_PLATFORM_WIN32_NT` 2...
    package var platformID: UInt32
    /// `CSDVersionRva`'s string: on Linux the rest of `uname` (Breakpad: `uname -srvm`; Crashpad:
    /// the release's suffix, version and machine); `nil` when absent.
    package var csdVersion: String?
    /// `SuiteMask`
    package var suiteMask: UInt16
    /// `Cpu`: the 24 bytes of `CPU_INFORMATION` as stored (see `x86VendorID`, `armCPUID`).
    package var cpuInformation: [UInt8]

    /// The architecture's name as crash tooling writes it (`x86_64`, `arm64`, `i386`, `arm`, ...).
    package var architectureName: String { MinidumpFile.architectureName(processorArchitecture) }

    /// The operating system as minidump-stackwalk names it (`Linux`, `Android`, `Mac OS X`, `Windows NT`, ...), or `0x…`.
    package var platformName: String { MinidumpFile.platformName(platformID) }

    /// `x86_cpu_info.vendor_id` as text (`GenuineIntel`, `AuthenticAMD`) on x86, `nil` elsewhere or when
    /// empty.
    package var x86VendorID: String? {
      guard processorArchitecture == 0 || processorArchitecture == 9 else { return nil }
      let text = cpuInformation.prefix(12).prefix { $0 != 0 }
      return text.isEmpty ? nil : String(decoding: text, as: UTF8.self)
    }

    /// `arm_cpu_info.cpuid` and `elf_hwcaps` on ARM and arm64, `nil` elsewhere.
    package var armCPUID: (cpuid: UInt32, hardwareCapabilities: UInt32)? {
      guard [5, 12, 0x8003].contains(processorArchitecture), cpuInformation.count >= 8 else { return nil }
      func word(_ at: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(cpuInformation[at + $1]) << (8 * UInt32($1)) }
      }
      return (word(0), word(4))
    }
  }

  /// `MINIDUMP_MISC_INFO` through `MINIDUMP_MISC_INFO_5`: each field `nil` when the dump's size has no
  /// room for it or `Flags1` says it is not valid.
  package struct MiscInfo: Sendable, Equatable {
    /// `SizeOfInfo`: 24, 44, 232, 832 or 1364 (which version).
    package var size: UInt32
    /// `Flags1`: which fields are valid (`MINIDUMP_MISC1_PROCESS_ID` 1, `..._PROCESS_TIMES` 2, ...).
    package var flags: UInt32
    /// `ProcessId`
    package var processID: UInt32?
    /// `ProcessCreateTime`: seconds since 1970 (UTC).
    package var processCreateTime: UInt32?
    /// `ProcessUserTime`, seconds.
    package var processUserTime: UInt32?
    /// `ProcessKernelTime`, seconds.
    package var processKernelTime: UInt32?
    /// `ProcessorMaxMhz`, `ProcessorCurrentMhz`, `ProcessorMhzLimit` (`MINIDUMP_MISC1_PROCESSOR_POWER_INFO`).
    package var processorMHz: (maximum: UInt32, current: UInt32, limit: UInt32)?
    /// `TimeZone.StandardName`, `DaylightName` and `Bias` (minutes) when `MINIDUMP_MISC3_TIMEZONE`.
    package var timeZone: (standardName: String, daylightName: String, bias: Int32)?
    /// `BuildString` (`MINIDUMP_MISC4_BUILDSTRING`): on Linux the kernel's `uname -srvm`.
    package var buildString: String?
    /// `DbgBldStr`: the writer and its version (`crashpad.amd64,0.8.0,linux`).
    package var debugBuildString: String?
    /// `ProcessCookie` (`MINIDUMP_MISC5_PROCESS_COOKIE`).
    package var processCookie: UInt32?

    /// Field by field (the processor speeds and time zone are tuples).
    package static func == (lhs: MiscInfo, rhs: MiscInfo) -> Bool {
      lhs.size == rhs.size && lhs.flags == rhs.flags && lhs.processID == rhs.processID
        && lhs.processCreateTime == rhs.processCreateTime && lhs.processUserTime == rhs.processUserTime
        && lhs.processKernelTime == rhs.processKernelTime
        && lhs.processorMHz.map { [$0.maximum, $0.current, $0.limit] } == rhs.processorMHz.map { [$0.maximum, $0.current, $0.limit] }
        && lhs.timeZone?.standardName == rhs.timeZone?.standardName && lhs.timeZone?.daylightName == rhs.timeZone?.daylightName
        && lhs.timeZone?.bias == rhs.timeZone?.bias && lhs.buildString == rhs.buildString
        && lhs.debugBuildString == rhs.debugBuildString && lhs.processCookie == rhs.processCookie
    }
  }

  /// Breakpad's `MDRawBreakpadInfo`: which thread wrote the dump and which asked for it.
  package struct BreakpadInfo: Sendable, Equatable {
    /// `validity`: `MD_BREAKPAD_INFO_VALID_DUMP_THREAD_ID` 1, `..._REQUESTING_THREAD_ID` 2.
    package var validity: UInt32
    /// `dump_thread_id` when valid.
    package var dumpThreadID: UInt32?
    /// `requesting_thread_id` when valid.
    package var requestingThreadID: UInt32?
  }

  /// The Linux streams of Breakpad's writer, each the file's bytes as the writer read them (or `nil`
  /// when the dump does not hold it), with the decodings crash tooling uses.
  package struct LinuxStreams: Sendable, Equatable {
    /// `MD_LINUX_CPU_INFO` (`0x47670003`): `/proc/cpuinfo`.
    package var cpuInfo: [UInt8]?
    /// `MD_LINUX_PROC_STATUS` (`0x47670004`): `/proc/PID/status`.
    package var procStatus: [UInt8]?
    /// `MD_LINUX_LSB_RELEASE` (`0x47670005`): `/etc/lsb-release` (or `/etc/os-release`).
    package var lsbRelease: [UInt8]?
    /// `MD_LINUX_CMD_LINE` (`0x47670006`): `/proc/PID/cmdline`.
    package var commandLine: [UInt8]?
    /// `MD_LINUX_ENVIRON` (`0x47670007`): `/proc/PID/environ`.
    package var environment: [UInt8]?
    /// `MD_LINUX_AUXV` (`0x47670008`): `/proc/PID/auxv`.
    package var auxiliaryVector: [UInt8]?
    /// `MD_LINUX_MAPS` (`0x47670009`): `/proc/PID/maps`.
    package var maps: [UInt8]?
    /// `MD_LINUX_DSO_DEBUG` (`0x4767000A`), decoded.
    package var dsoDebug: DSODebug?

    /// No Linux streams.
    package init() {}

    /// The command line's arguments (NUL-separated; a final NUL ends the last).
    package var arguments: [String]? { commandLine.map(Self.nulSeparated) }

    /// The environment's `NAME=value` entries.
    package var environmentEntries: [String]? { environment.map(Self.nulSeparated) }

    static func nulSeparated(_ bytes: [UInt8]) -> [String] {
      var parts = bytes.split(separator: 0, omittingEmptySubsequences: false).map { PathBytes.string($0) }  // paths keep their bytes
      if bytes.last == 0 { parts.removeLast() }
      return parts
    }

    /// The value of `/proc/PID/status`'s line `key` (`Pid`, `PPid`, `Name`...), trimmed, or `nil`.
    package func procStatusValue(_ key: String) -> String? {
      guard let procStatus else { return nil }
      for line in procStatus.split(separator: UInt8(ascii: "\n")) {
        let text = PathBytes.string(line)  // `Name:` is the process's name, bytes and all
        guard let colon = text.firstIndex(of: ":"), text[..<colon] == key else { continue }
        return String(text[text.index(after: colon)...].drop { $0 == " " || $0 == "\t" })
      }
      return nil
    }
  }

  /// `MD_LINUX_DSO_DEBUG`: the dynamic linker's `r_debug` and its `link_map` list, as Breakpad's
  /// writer copies them (the 64-bit layout on 64-bit processes, the 32-bit one otherwise).
  package struct DSODebug: Sendable, Equatable {
    /// `r_version`
    package var version: UInt32
    /// `r_brk`
    package var breakpointAddress: UInt64
    /// `r_ldbase`: where the dynamic linker is loaded.
    package var linkerBase: UInt64
    /// The address of the executable's `_DYNAMIC`.
    package var dynamicAddress: UInt64
    /// The `link_map` entries, in list order.
    package var linkMaps: [LinkMap]
    /// The bytes of the executable's dynamic section the writer copied after the structure.
    package var dynamicSection: [UInt8]

    /// One `link_map`.
    package struct LinkMap: Sendable, Equatable {
      /// `l_addr`: the load bias.
      package var loadBias: UInt64
      /// `l_name`: the path (empty for the executable).
      package var name: String
      /// `l_ld`: the address of the object's dynamic section.
      package var dynamicAddress: UInt64
    }
  }

  /// Crashpad's `MinidumpCrashpadInfo`: the report's and client's ids and the annotations.
  package struct CrashpadInfo: Sendable, Equatable {
    /// `version`
    package var version: UInt32
    /// `report_id`, 16 bytes as stored (a GUID: see `reportIDString`).
    package var reportID: [UInt8]
    /// `client_id`, 16 bytes as stored.
    package var clientID: [UInt8]
    /// `simple_annotations`: the process's key-value pairs, in stream order.
    package var simpleAnnotations: [(key: String, value: String)]
    /// `module_list`: each module's annotations, by index in `modules`.
    package var moduleInfos: [ModuleInfo]
    /// `address_mask` (newer Crashpad), or `nil`.
    package var addressMask: UInt64?

    /// `reportID` printed as Crashpad names the report file (`xxxxxxxx-xxxx-...`, lowercase).
    package var reportIDString: String { HexText.uuid(BuildID.swappingGUIDFields(reportID), uppercase: false) }
    /// `clientID` printed the same way.
    package var clientIDString: String { HexText.uuid(BuildID.swappingGUIDFields(clientID), uppercase: false) }

    /// `MinidumpModuleCrashpadInfo` of one module.
    package struct ModuleInfo: Sendable, Equatable {
      /// `minidump_module_list_index`: the module's index in `MinidumpFile.modules`.
      package var moduleIndex: UInt32
      /// `version`
      package var version: UInt32
      /// `list_annotations`
      package var listAnnotations: [String]
      /// `simple_annotations`
      package var simpleAnnotations: [(key: String, value: String)]
      /// `annotation_objects`: name, type (`1` a string, `0x8000` and above user-defined) and value.
      package var annotationObjects: [Annotation]

      /// Field by field, annotations in order.
      package static func == (lhs: ModuleInfo, rhs: ModuleInfo) -> Bool {
        lhs.moduleIndex == rhs.moduleIndex && lhs.version == rhs.version && lhs.listAnnotations == rhs.listAnnotations
          && lhs.simpleAnnotations.elementsEqual(rhs.simpleAnnotations, by: ==)
          && lhs.annotationObjects == rhs.annotationObjects
      }
    }

    /// One `MinidumpAnnotation`.
    package struct Annotation: Sendable, Equatable {
      /// `name`
      package var name: String
      /// `type`: `1` (`kString`) is UTF-8 text.
      package var type: UInt16
      /// `value`'s bytes.
      package var value: [UInt8]
      /// `value` as text when `type` is `kString`.
      package var stringValue: String? { type == 1 ? String(decoding: value.prefix { $0 != 0 }, as: UTF8.self) : nil }
    }

    /// Field by field, annotations in order.
    package static func == (lhs: CrashpadInfo, rhs: CrashpadInfo) -> Bool {
      lhs.version == rhs.version && lhs.reportID == rhs.reportID && lhs.clientID == rhs.clientID
        && lhs.simpleAnnotations.elementsEqual(rhs.simpleAnnotations, by: ==) && lhs.moduleInfos == rhs.moduleInfos
        && lhs.addressMask == rhs.addressMask
    }
  }
}
