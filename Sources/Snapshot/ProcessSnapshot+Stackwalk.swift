import ProcessInspection
import ImageReaders

/// What minidump-stackwalk's JSON and a crash signature (which is made from that JSON) read alike:
/// each frame's module, function and instruction, the OS and the crash by minidump-stackwalk's names.
extension ProcessSnapshot {
  /// A frame as minidump-stackwalk gives it: the module's file name, the function (imagelog's answer,
  /// else the report's own name for the frame), and the instruction: a caller's return address less
  /// one (inside the call), less 4 on arm64 and 2 on arm (the stackwalkers' `ip - 4` and `ip - 2`).
  package func stackwalkFrameName(_ frame: Frame) -> (module: String?, function: FrameSymbols.Function?, instruction: Address) {
    let image = frame.imageIndex.flatMap { images.indices.contains($0) ? images[$0] : nil }
    let reported = frame.symbols.function == nil ? reportedFunction(of: frame) : nil
    let function = frame.symbols.function ?? reported.map {
      FrameSymbols.Function(name: $0.name, rawName: nil, offset: $0.offset, file: $0.file, line: $0.line,
                            column: $0.column, isInlined: false)
    }
    let back: UInt64 = switch Self.stackwalkCPU(process.architecture ?? image?.architecture) {
    case "arm64": 4
    case "arm": 2
    default: 1
    }
    let instruction = frame.isReturnAddress && frame.address >= back ? frame.address - back : frame.address
    return (image.map { Self.stackwalkBaseName($0.name) }, function, instruction)
  }

  /// `cpu_arch` as minidump-stackwalk names it (`amd64`, `x86`, `arm64`, `arm`).
  package static func stackwalkCPU(_ architecture: String?) -> String? {
    guard let architecture else { return nil }
    switch Architecture(commandLine: architecture).name {
    case "x86_64", "x86_64h": return "amd64"
    case "i386": return "x86"
    case "arm64", "arm64e", "aarch64": return "arm64"
    case let name where name.hasPrefix("arm"): return "arm"
    case let name: return name
    }
  }

  /// The last component of a path, either separator (a Windows module's `C:\...\kernel32.dll`).
  package static func stackwalkBaseName(_ path: String) -> String {
    String(path.split(omittingEmptySubsequences: false) { $0 == "/" || $0 == "\\" }.last ?? Substring(path))
  }

  /// `os` and `os_ver` as minidump-stackwalk names them (`Linux`, `Windows NT`, `Mac OS X`, `iOS`,
  /// `Android`), from the snapshot's OS line.
  package var stackwalkOS: (name: String?, version: String?) {
    guard let line = process.osVersion, !line.isEmpty else { return (nil, nil) }
    let names = [("Mac OS X", "Mac OS X"), ("macOS", "Mac OS X"), ("Windows NT", "Windows NT"), ("iPhone OS", "iOS"),
                 ("iOS", "iOS"), ("Android", "Android"), ("Linux", "Linux"), ("Solaris", "Solaris"), ("Fuchsia", "Fuchsia")]
    for (prefix, name) in names where line.hasPrefix(prefix) {
      let rest = line.dropFirst(prefix.count).drop { $0 == " " }
      return (name, rest.isEmpty ? nil : String(rest))
    }
    let words = line.split(separator: " ", maxSplits: 1)
    return (words.first.map(String.init), words.count > 1 ? String(words[1]) : nil)
  }

  /// The crash as minidump-stackwalk's `crash_info.type` names it: the platform's name, or a Linux
  /// signal with its `si_code` (`SIGSEGV / SEGV_MAPERR`); `nil` without a crash.
  package var stackwalkCrashType: String? {
    guard let exception else { return nil }
    return exception.reason
      ?? MinidumpFile.Exception.linuxReason(signal: UInt32(bitPattern: exception.signal), code: UInt32(bitPattern: exception.code))
      ?? "signal \(exception.signal)"
  }
}
