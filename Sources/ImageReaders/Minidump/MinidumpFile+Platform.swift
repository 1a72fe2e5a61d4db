// What a minidump says about its platform, read as the platform means it: the OS and CPU of
// SystemInfo, the crash in the platform's own terms (a Windows exception code, a Mach exception, a
// Linux signal), and each module's identity in every CodeView form. The names and texts are the ones
// Breakpad's processor and rust-minidump's minidump-stackwalk print, so a report can be compared with
// theirs line by line.

extension MinidumpFile.SystemInfo {
  /// The platform family whose exception codes the dump's exception stream carries.
  package enum Family: Sendable, Equatable {
    case windows, apple, linux, other
  }

  /// Which codes the exception stream holds: Windows' `EXCEPTION_*`/`NTSTATUS`, Mach exceptions on
  /// macOS and iOS, signals on Linux and Android.
  package var family: Family {
    switch platformID {
    case 1, 2: .windows
    case 0x8101, 0x8102: .apple
    case 0x8201, 0x8203: .linux
    default: .other
    }
  }

  /// `ProcessorArchitecture` as minidump-stackwalk names the CPU (`x86`, `amd64`, `arm`, `arm64`,
  /// `ppc`, `ppc64`, `sparc`, `mips`, `mips64`, `unknown`).
  package var cpuName: String {
    switch processorArchitecture {
    case 0, 10: "x86"  // INTEL, IA32_ON_WIN64
    case 9: "amd64"
    case 5: "arm"
    case 12, 0x8003: "arm64"
    case 3: "ppc"
    case 0x8002: "ppc64"
    case 0x8001: "sparc"
    case 1: "mips"
    case 0x8004: "mips64"
    default: "unknown"
    }
  }

  /// True when pointers are 32 bits wide on the dump's CPU (addresses are shown and compared in 32 bits).
  package var is32Bit: Bool { [0, 10, 5, 3, 0x8001, 1].contains(processorArchitecture) }

  /// The OS version as minidump-stackwalk prints it: `MAJOR.MINOR.BUILD` and the CSD version after a
  /// space (`5.1.2600 Service Pack 2`, `11.6.7 20G630`, `3.13.0-53-generic #89-Ubuntu SMP …`). A Linux
  /// dump whose numbers are all 0 takes them from the `uname` line in the CSD version instead (its
  /// second word; the machine, and a trailing `GNU/Linux`-style word, dropped).
  package var osVersionText: String {
    let numbers = "\(majorVersion).\(minorVersion).\(buildNumber)"
    let build = csdVersion.map(Self.trimmed).flatMap { $0.isEmpty ? nil : $0 }
    if platformID == 0x8201, numbers == "0.0.0" {
      var words = (csdVersion ?? "").split(separator: " ", omittingEmptySubsequences: false).map(String.init)
      if words.count >= 2, words[1] != "0.0.0" {
        let version = words[1]
        words.removeFirst(2)
        if words.last == "Linux/GNU" { words.removeLast() }
        if !words.isEmpty { words.removeLast() }
        return version + " " + words.joined(separator: " ")
      }
    }
    return build.map { numbers + " " + $0 } ?? numbers
  }

  /// `text` without whitespace at its ends, by Unicode scalar (a reversed Character walk was a
  /// measurable share of a small `symbolicate` run: BENCHMARKS.md, the .sym area's paragraph).
  static func trimmed(_ text: String) -> String {
    let scalars = text.unicodeScalars
    guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
          let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
    return String(Substring(scalars[first..<scalars.index(after: last)]))
  }
}

extension MinidumpFile {
  /// The last component of a path written with `/` or `\` (Windows module names are `C:\…\x.dll`).
  package static func baseName(_ path: String) -> String {
    // By UTF-8 byte: both separators are ASCII, so what follows one starts a scalar.
    guard let separator = path.utf8.lastIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") }) else { return path }
    return String(path[path.utf8.index(after: separator)...])
  }
}

extension MinidumpFile.Module {
  /// The module's file name: the last component of `name` (after a `/` or a `\`).
  package var codeFileName: String { MinidumpFile.baseName(name) }

  /// The debug file as the CodeView record names it: the PDB's name of a PDB record (a whole path in
  /// some dumps: see `debugFileBaseName`), the module's own name for an ELF build-id; `nil` without a
  /// record.
  package var debugFile: String? {
    switch codeView {
    case .pdb70(_, _, let fileName), .pdb20(_, _, let fileName): fileName
    case .elf: name
    case .other, nil: nil
    }
  }

  /// The code identifier as minidump-stackwalk prints it, `platformID` being the dump's `SystemInfo`
  /// platform: the whole ELF build-id in hex; a Mach-O UUID (a PDB 7.0 record's GUID on macOS and iOS)
  /// as 32 lowercase digits; else, for a PDB record or any Windows module, the PE time stamp (8 digits)
  /// and the image size, as symbol servers index executables. `nil` otherwise.
  package func codeIdentifier(platformID: UInt32?) -> String? {
    let apple = platformID == 0x8101 || platformID == 0x8102
    switch codeView {
    case .pdb70(let guid, _, _) where apple: return HexText.bytes(BuildID.swappingGUIDFields(guid))
    case .pdb70, .pdb20: return hexDigits(UInt64(timeDateStamp), width: 8) + hexDigits(UInt64(size))
    case .elf: return buildID?.hex
    case .other, nil:
      return platformID == 1 || platformID == 2 ? hexDigits(UInt64(timeDateStamp), width: 8) + hexDigits(UInt64(size)) : nil
    }
  }
}

extension MinidumpFile.Exception {
  /// The crash as its platform names it, as minidump-stackwalk prints it: `EXCEPTION_ACCESS_VIOLATION_READ`,
  /// `EXCEPTION_STACK_BUFFER_OVERRUN / FAST_FAIL_FATAL_APP_EXIT`, `STATUS_INVALID_PARAMETER` (Windows);
  /// `EXC_BAD_ACCESS / KERN_INVALID_ADDRESS` (macOS, iOS); `SIGSEGV / SEGV_MAPERR`, `SIGABRT`,
  /// `DUMP_REQUESTED` (Linux, Android); `unknown 0x… / 0x…` for a code the platform does not name.
  package func reason(_ system: MinidumpFile.SystemInfo?) -> String {
    let unknown = "unknown 0x\(hexDigits(UInt64(code), width: 8)) / 0x\(hexDigits(UInt64(flags), width: 8))"
    switch system?.family ?? .other {
    case .windows: return windowsReason
    case .apple: return appleReason(cpu: system?.cpuName ?? "") ?? unknown
    case .linux: return linuxReason ?? unknown
    case .other: return unknown
    }
  }

  /// The address the crash is about, as minidump-stackwalk gives it: for a Windows access violation or
  /// in-page error, the address accessed (`ExceptionInformation[1]`); else `ExceptionAddress`. Cut to
  /// 32 bits on a 32-bit CPU (writers sign-extend it there).
  package func crashAddress(_ system: MinidumpFile.SystemInfo?) -> UInt64 {
    var address = self.address
    if system?.family == .windows, code == 0xC000_0005 || code == 0xC000_0006, parameters.count >= 2 {
      address = parameters[1]
    }
    return system?.is32Bit == true ? address & 0xFFFF_FFFF : address
  }

  /// True when the writer was asked for a dump and nothing crashed: Breakpad's and Crashpad's
  /// `DUMP_REQUESTED` signal (-1) on Linux and Android, Crashpad's simulated exception on macOS, iOS
  /// (`'CPsx'`) and Windows (`0x0517A7ED`).
  package func isDumpRequested(_ system: MinidumpFile.SystemInfo?) -> Bool {
    switch system?.family ?? .other {
    case .linux: code == 0xFFFF_FFFF
    case .apple: code == 0x4350_7378
    case .windows: code == 0x0517_A7ED
    case .other: false
    }
  }

  var windowsReason: String {
    let first = parameters.first.map { $0 & 0xFFFF_FFFF }
    switch code {
    case 0xC000_0005 where first.flatMap(Self.accessKind) != nil:
      return "EXCEPTION_ACCESS_VIOLATION_" + (first.flatMap(Self.accessKind) ?? "")
    case 0xC000_0006 where parameters.count >= 3 && first.flatMap(Self.accessKind) != nil:
      let status = parameters[2] & 0xFFFF_FFFF
      return "EXCEPTION_IN_PAGE_ERROR_\(first.flatMap(Self.accessKind) ?? "") / "
        + (Self.ntStatusNames[UInt32(status)] ?? "0x" + hexDigits(status, width: 8))
    case 0xC000_0409 where first != nil:
      let failure = first ?? 0
      return "EXCEPTION_STACK_BUFFER_OVERRUN / "
        + (Self.fastFailName(failure) ?? "0x" + hexDigits(failure, width: 8))
    default:
      if let name = Self.windowsExceptionNames[code] { return name }
      if let name = Self.ntStatusNames[code] { return name }
      return "unknown 0x" + hexDigits(UInt64(code), width: 8)
    }
  }

  static func accessKind(_ value: UInt64) -> String? {
    switch value {
    case 0: "READ"
    case 1: "WRITE"
    case 8: "EXEC"
    default: nil
    }
  }

  /// `EXCEPTION_*` of WinBase.h and the codes Chromium, Visual C++, .NET and Crashpad add.
  static let windowsExceptionNames: [UInt32: String] = [
    0x8000_0001: "EXCEPTION_GUARD_PAGE", 0x8000_0002: "EXCEPTION_DATATYPE_MISALIGNMENT",
    0x8000_0003: "EXCEPTION_BREAKPOINT", 0x8000_0004: "EXCEPTION_SINGLE_STEP",
    0xC000_0005: "EXCEPTION_ACCESS_VIOLATION", 0xC000_0006: "EXCEPTION_IN_PAGE_ERROR",
    0xC000_0008: "EXCEPTION_INVALID_HANDLE", 0xC000_001D: "EXCEPTION_ILLEGAL_INSTRUCTION",
    0xC000_0025: "EXCEPTION_NONCONTINUABLE_EXCEPTION", 0xC000_0026: "EXCEPTION_INVALID_DISPOSITION",
    0xC000_008C: "EXCEPTION_BOUNDS_EXCEEDED", 0xC000_008D: "EXCEPTION_FLT_DENORMAL_OPERAND",
    0xC000_008E: "EXCEPTION_FLT_DIVIDE_BY_ZERO", 0xC000_008F: "EXCEPTION_FLT_INEXACT_RESULT",
    0xC000_0090: "EXCEPTION_FLT_INVALID_OPERATION", 0xC000_0091: "EXCEPTION_FLT_OVERFLOW",
    0xC000_0092: "EXCEPTION_FLT_STACK_CHECK", 0xC000_0093: "EXCEPTION_FLT_UNDERFLOW",
    0xC000_0094: "EXCEPTION_INT_DIVIDE_BY_ZERO", 0xC000_0095: "EXCEPTION_INT_OVERFLOW",
    0xC000_0096: "EXCEPTION_PRIV_INSTRUCTION", 0xC000_00FD: "EXCEPTION_STACK_OVERFLOW",
    0xC000_0194: "EXCEPTION_POSSIBLE_DEADLOCK", 0xE000_0008: "Out of Memory",
    0xE06D_7363: "Unhandled C++ Exception", 0xE043_4352: "MANAGED_EXCEPTION_CODE_V4",
    0x0517_A7ED: "Simulated Exception",
  ]

  /// The `NTSTATUS` codes crashes end in (ntstatus.h); other codes print as `unknown 0x…`.
  static let ntStatusNames: [UInt32: String] = [
    0x4000_0015: "STATUS_FATAL_APP_EXIT", 0x4000_001F: "STATUS_WX86_BREAKPOINT",
    0x8000_0029: "STATUS_UNWIND_CONSOLIDATE", 0xC000_000D: "STATUS_INVALID_PARAMETER",
    0xC000_0017: "STATUS_NO_MEMORY", 0xC000_0028: "STATUS_BAD_STACK", 0xC000_0029: "STATUS_INVALID_UNWIND_TARGET",
    0xC000_012D: "STATUS_COMMITMENT_LIMIT", 0xC000_0135: "STATUS_DLL_NOT_FOUND",
    0xC000_0139: "STATUS_ENTRYPOINT_NOT_FOUND", 0xC000_013A: "STATUS_CONTROL_C_EXIT",
    0xC000_0264: "STATUS_RESOURCE_NOT_OWNED", 0xC000_0374: "STATUS_HEAP_CORRUPTION",
    0xC000_0409: "STATUS_STACK_BUFFER_OVERRUN", 0xC000_0417: "STATUS_INVALID_CRUNTIME_PARAMETER",
    0xC000_0420: "STATUS_ASSERTION_FAILURE", 0xC000_0602: "STATUS_FAIL_FAST_EXCEPTION",
    0xC000_070A: "STATUS_THREADPOOL_HANDLE_EXCEPTION",
  ]

  /// `FAST_FAIL_*` of winnt.h: the reason `__fastfail` was called with, by its number.
  static func fastFailName(_ code: UInt64) -> String? {
    let names = [
      "LEGACY_GS_VIOLATION", "VTGUARD_CHECK_FAILURE", "STACK_COOKIE_CHECK_FAILURE", "CORRUPT_LIST_ENTRY",
      "INCORRECT_STACK", "INVALID_ARG", "GS_COOKIE_INIT", "FATAL_APP_EXIT", "RANGE_CHECK_FAILURE",
      "UNSAFE_REGISTRY_ACCESS", "GUARD_ICALL_CHECK_FAILURE", "GUARD_WRITE_CHECK_FAILURE", "INVALID_FIBER_SWITCH",
      "INVALID_SET_OF_CONTEXT", "INVALID_REFERENCE_COUNT", "", "", "", "INVALID_JUMP_BUFFER", "MRDATA_MODIFIED",
      "CERTIFICATION_FAILURE", "INVALID_EXCEPTION_CHAIN", "CRYPTO_LIBRARY", "INVALID_CALL_IN_DLL_CALLOUT",
      "INVALID_IMAGE_BASE", "DLOAD_PROTECTION_FAILURE", "UNSAFE_EXTENSION_CALL", "DEPRECATED_SERVICE_INVOKED",
      "INVALID_BUFFER_ACCESS", "INVALID_BALANCED_TREE", "INVALID_NEXT_THREAD", "GUARD_ICALL_CHECK_SUPPRESSED",
      "APCS_DISABLED", "INVALID_IDLE_STATE", "MRDATA_PROTECTION_FAILURE", "UNEXPECTED_HEAP_EXCEPTION",
      "INVALID_LOCK_STATE", "GUARD_JUMPTABLE", "INVALID_LONGJUMP_TARGET", "INVALID_DISPATCH_CONTEXT",
      "INVALID_THREAD", "INVALID_SYSCALL_NUMBER", "INVALID_FILE_OPERATION", "LPAC_ACCESS_DENIED",
      "GUARD_SS_FAILURE", "LOADER_CONTINUITY_FAILURE", "GUARD_EXPORT_SUPPRESSION_FAILURE", "INVALID_CONTROL_STACK",
      "SET_CONTEXT_DENIED", "INVALID_IAT", "HEAP_METADATA_CORRUPTION", "PAYLOAD_RESTRICTION_VIOLATION",
      "LOW_LABEL_ACCESS_DENIED", "ENCLAVE_CALL_FAILURE", "UNHANDLED_LSS_EXCEPTON", "ADMINLESS_ACCESS_DENIED",
      "UNEXPECTED_CALL", "CONTROL_INVALID_RETURN_ADDRESS", "UNEXPECTED_HOST_BEHAVIOR", "FLAGS_CORRUPTION",
      "VEH_CORRUPTION", "ETW_CORRUPTION", "RIO_ABORT", "INVALID_PFN", "GUARD_ICALL_CHECK_FAILURE_XFG", "CAST_GUARD",
      "HOST_VISIBILITY_CHANGE", "KERNEL_CET_SHADOW_STACK_ASSIST", "PATCH_CALLBACK_FAILED", "NTDLL_PATCH_FAILED",
      "INVALID_FLS_DATA", "ASAN_ERROR", "CLR_EXCEPTION_AOT", "POINTER_AUTH_INVALID_RETURN_ADDRESS",
      "INVALID_THREAD_STATE", "CORRUPT_WOW64_STATE", "INVALID_EXTENDED_STATE",
    ]
    guard code < UInt64(names.count), !names[Int(code)].isEmpty else { return nil }  // code < names.count: exact
    return "FAST_FAIL_" + names[Int(code)]
  }

  /// A Mach exception (`exception_type_t`) with its code as `<mach/exception_types.h>` and the CPU's
  /// `exception.h` name them; `nil` for a type that is not one.
  func appleReason(cpu: String) -> String? {
    let types: [UInt32: String] = [
      1: "EXC_BAD_ACCESS", 2: "EXC_BAD_INSTRUCTION", 3: "EXC_ARITHMETIC", 4: "EXC_EMULATION", 5: "EXC_SOFTWARE",
      6: "EXC_BREAKPOINT", 7: "EXC_SYSCALL", 8: "EXC_MACH_SYSCALL", 9: "EXC_RPC_ALERT", 11: "EXC_RESOURCE", 12: "EXC_GUARD",
    ]
    if code == 0x4350_7378 { return "Simulated Exception" }
    guard let type = types[code] else { return nil }
    let x86 = cpu == "x86" || cpu == "amd64", arm = cpu == "arm64"
    var detail: String?
    switch code {
    case 1:
      let kern: [UInt32: String] = [1: "KERN_INVALID_ADDRESS", 2: "KERN_PROTECTION_FAILURE", 5: "KERN_FAILURE",
                                    8: "KERN_NO_ACCESS", 9: "KERN_MEMORY_FAILURE", 10: "KERN_MEMORY_ERROR",
                                    50: "KERN_CODESIGN_ERROR"]
      let armCodes: [UInt32: String] = [0x101: "EXC_ARM_DA_ALIGN", 0x102: "EXC_ARM_DA_DEBUG", 0x103: "EXC_ARM_SP_ALIGN",
                                        0x104: "EXC_ARM_SWP", 0x105: "EXC_ARM_PAC_FAIL"]
      detail = kern[flags] ?? (arm ? armCodes[flags] : x86 && flags == 13 ? "EXC_I386_GPFLT" : nil)
    case 2:
      let x86Codes: [UInt32: String] = [1: "EXC_I386_INVOP", 10: "EXC_I386_INVTSSFLT", 11: "EXC_I386_SEGNPFLT",
                                        12: "EXC_I386_STKFLT", 13: "EXC_I386_GPFLT", 17: "EXC_I386_ALIGNFLT"]
      detail = arm ? (flags == 1 ? "EXC_ARM_UNDEFINED" : nil) : x86 ? x86Codes[flags] : nil
    case 3:
      let armCodes = ["EXC_ARM_FP_IO", "EXC_ARM_FP_DZ", "EXC_ARM_FP_OF", "EXC_ARM_FP_UF", "EXC_ARM_FP_IX", "EXC_ARM_FP_ID"]
      let x86Codes = ["EXC_I386_DIV", "EXC_I386_INTO", "EXC_I386_NOEXT", "EXC_I386_EXTOVR", "EXC_I386_EXTERR",
                      "EXC_I386_EMERR", "EXC_I386_BOUND", "EXC_I386_SSEEXTERR"]
      let names = arm ? armCodes : x86 ? x86Codes : []
      detail = flags >= 1 && Int(flags) <= names.count ? names[Int(flags) - 1] : nil  // 1 <= flags <= count: exact
    case 5:
      let software: [UInt32: String] = [0x0001_0002: "SIGABRT", 0xDEAD_C0DE: "UNCAUGHT_NS_EXCEPTION"]
      detail = software[flags]
    case 6:
      detail = arm ? (flags == 1 ? "EXC_ARM_BREAKPOINT" : nil) : x86 ? [1: "EXC_I386_SGL", 2: "EXC_I386_BPT"][flags] : nil
    default: break
    }
    return type + " / " + (detail ?? "0x" + hexDigits(UInt64(flags), width: 8))
  }

  /// A Linux signal with its `si_code`, as minidump-stackwalk writes it (`SIGSEGV / SEGV_MAPERR`,
  /// `SIGABRT` for `SI_USER`); `nil` for a number that is no signal.
  var linuxReason: String? { Self.linuxReason(signal: code, code: flags) }

  /// `linuxReason` of a signal number and `si_code` from any source (a core, a report), as
  /// minidump-stackwalk names them.
  package static func linuxReason(signal code: UInt32, code flags: UInt32) -> String? {
    if code == 0xFFFF_FFFF { return "DUMP_REQUESTED" }
    let signals = ["SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL",
                   "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT",
                   "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF",
                   "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS"]
    guard code >= 1, Int(code) <= signals.count else { return nil }  // 1 <= code <= 31: exact
    let signal = signals[Int(code) - 1]
    // Switches, not dictionaries: a dictionary's first use costs more than the rest of this (its
    // generic metadata and conformances are looked up at run time).
    let kinds: [String]
    switch code {
    case 4: kinds = ["ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK",
                     "ILL_BADIADDR"]
    case 5: kinds = ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"]
    case 8: kinds = ["FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB"]
    case 11: kinds = ["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"]
    case 7: kinds = ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]
    case 31: kinds = ["SYS_SECCOMP", "SYS_USER_DISPATCH"]
    default: kinds = []
    }
    if flags >= 1, Int(flags) <= kinds.count { return signal + " / " + kinds[Int(flags) - 1] }
    let generic: String?
    switch Int32(bitPattern: flags) {
    case 0x80: generic = "SI_KERNEL"
    case -1: generic = "SI_QUEUE"
    case -2: generic = "SI_TIMER"
    case -3: generic = "SI_MESGQ"
    case -4: generic = "SI_ASYNCIO"
    case -5: generic = "SI_SIGIO"
    case -6: generic = "SI_TKILL"
    case -7: generic = "SI_DETHREAD"
    case -60: generic = "SI_ASYNCNL"
    default: generic = nil
    }
    let siCode = Int32(bitPattern: flags)
    if siCode == 0 { return signal }  // SI_USER
    return signal + " / " + (generic ?? "0x" + hexDigits(UInt64(flags), width: 8))
  }
}
