import ProcessInspection
import ImageReaders
import Snapshot

extension ProcessSnapshot {
  // MARK: minidump-stackwalk's schema

  /// The snapshot in `minidump-stackwalk --json`'s schema (rust-minidump's `minidump-processor`,
  /// `ProcessState::print_json`, described in its `json-schema.md`), so that what reads that schema
  /// (Socorro's processor and `siggen`, dashboards) takes any crash imagelog reads: a minidump, a core, a
  /// report, a live process.
  ///
  /// Written as minidump-stackwalk writes them: `status`, `system_info` {`os`, `os_ver`, `cpu_arch`,
  /// `cpu_info`, `cpu_count`, `cpu_microcode_version`}, `crash_info` {`type`, `address`, `crashing_thread`,
  /// `assertion`, ...}, `main_module`, `modules` [{`base_addr`, `end_addr` (one past the last byte),
  /// `filename`, `code_id`, `debug_file`, `debug_id`, `missing_symbols`, `loaded_symbols`,
  /// `corrupt_symbols`, `symbol_url`, `cert_subject`}], `pid`, `thread_count`, `threads` [{`thread_id`,
  /// `thread_name`, `frame_count`, `last_error_value`, `frames` [{`frame`, `module`, `module_offset`,
  /// `offset`, `function`, `function_offset`, `file`, `line`, `inlines`, `trust`, `missing_symbols`,
  /// `unloaded_modules`}]}], `crashing_thread` (that thread again with `threads_index`, and `registers` on
  /// its frame 0), `unloaded_modules`; addresses as `0x` and 16 hex digits (8 on a 32-bit CPU); a
  /// caller's `offset` is its return address less one, as minidump-stackwalk gives it.
  ///
  /// Left out or left `null`, and why:
  /// - `crash_info.adjusted_address`, `instruction`, `memory_accesses`, `instruction_pointer_update`,
  ///   `possible_bit_flips`, `crash_inconsistencies`: minidump-stackwalk's analysis of the crashing
  ///   instruction (a disassembler); imagelog does not disassemble. `null` (`crash_inconsistencies`: `[]`).
  /// - `crash_info.assertion`, `last_error_value`, `handles`, `modules[].cert_subject`,
  ///   `modules_contains_cert_info`: Windows streams imagelog's model does not keep. `null`/`false`.
  /// - `modules[].version`: a Windows VERSIONINFO (`0.0.0.0` elsewhere); not in the model. Left out.
  /// - `modules[].corrupt_symbols`: whether a `.sym` failed minidump-stackwalk's own parse; imagelog
  ///   reads what it can of a file and does not keep that verdict. Always `false`.
  /// - `modules[].symbol_url`: imagelog names the file found, not a URL. `null`.
  /// - `lsb_release`, `proc_limits`, `mac_crash_info`, `mac_boot_args`, `linux_memory_map_count`,
  ///   `soft_errors`, `process_uptime`: streams the model does not keep. `null`.
  /// - `system_info.cpu_info`, `cpu_microcode_version`: `null`; `cpu_count`: the processors of a
  ///   `/proc/cpuinfo` a capture holds, else `null` (the model does not keep a minidump's SystemInfo,
  ///   whose count minidump-stackwalk gives, and which may differ from its `/proc/cpuinfo`'s).
  /// - `system_info.os_ver` of a Linux minidump: imagelog keeps the kernel's whole `uname` line, where
  ///   minidump-stackwalk joins SystemInfo's numbers and CSD string (`5.10.28 -1rodete2-amd64 ...`):
  ///   the same words, not always the same spacing.
  /// - `unloaded_modules[].code_id`: `null`: the model keeps an unloaded image's path, range and build-id,
  ///   not the stream's time stamp and size that make a Windows code id.
  /// - Trust: imagelog's `context`, `cfi`, `frame_pointer`, `scan`; `none` for frames a report gave
  ///   (minidump-stackwalk's `prewalked`/`cfi_scan` are never written).
  /// - A signature is no part of this schema: imagelog's own JSON carries it. Nor is an abort message or
  ///   a failed allocation's size: Socorro keeps them beside `json_dump` (`abort_message`,
  ///   `oom_allocation_size`), as imagelog's document does (`abortMessage`, `oomAllocationSize`);
  ///   `crash_info.assertion` is a Windows minidump's assertion stream's, and stays `null`.
  package func stackwalkJSONText() -> String {
    stackwalkJSON().serialized(indent: 2) + "\n"
  }

  /// `stackwalkJSONText()` as a value.
  package func stackwalkJSON() -> JSONValue {
    let width = Self.isThirtyTwoBit(process.architecture ?? images.first?.architecture) ? 8 : 16
    func hex(_ value: UInt64) -> JSONValue { .string("0x" + hexDigits(value, width: width)) }
    let requesting = crashedThreadIndex ?? threads.firstIndex(where: \.requestedDump)
    let threadValues = threads.map { stackwalkThread($0, hex: hex) }
    var crash: [(String, JSONValue)] = [
      ("type", stackwalkCrashType.map(JSONValue.string) ?? .null),
      ("address", exception.map { hex($0.address) } ?? .null),
      ("adjusted_address", .null), ("instruction", .null), ("memory_accesses", .null),
      ("instruction_pointer_update", .null), ("possible_bit_flips", .null),
      ("crash_inconsistencies", exception == nil ? .null : .array([])),
    ]
    crash += [("crashing_thread", requesting.map { .number(String($0)) } ?? .null), ("assertion", .null)]
    // A minidump's count is its SystemInfo's (which the model does not keep), not its /proc/cpuinfo's.
    let cpuCount = format == .minidump ? nil : process.linuxFiles.cpuInfo.map { info in
      info.split(separator: UInt8(ascii: "\n")).filter { $0.starts(with: Array("processor".utf8)) }.count
    }
    let (os, osVersion) = stackwalkOS
    var members: [(String, JSONValue)] = [
      ("status", .string("OK")),
      ("system_info", .object([
        ("os", os.map(JSONValue.string) ?? .null), ("os_ver", osVersion.map(JSONValue.string) ?? .null),
        ("cpu_arch", Self.stackwalkCPU(process.architecture ?? images.first?.architecture).map(JSONValue.string) ?? .null),
        ("cpu_info", .null), ("cpu_count", cpuCount.map { .number(String($0)) } ?? .null),
        ("cpu_microcode_version", .null),
      ])),
      ("crash_info", .object(crash)),
      ("lsb_release", .null), ("proc_limits", .null), ("soft_errors", .null), ("mac_crash_info", .null),
      ("mac_boot_args", .null), ("linux_memory_map_count", .null),
      ("main_module", .number(String(images.firstIndex { $0.loaded?.isMainExecutable == true } ?? 0))),
      ("modules_contains_cert_info", .bool(false)),
      ("modules", .array(images.map { stackwalkModule($0, hex: hex) })),
      ("pid", process.pid.map { .number(String($0)) } ?? .null),
      ("process_uptime", .null),
      ("thread_count", .number(String(threads.count))),
      ("threads", .array(threadValues)),
      ("unloaded_modules", .array(unloadedImages.map { gone in
        .object([("base_addr", hex(gone.baseAddress)), ("cert_subject", .null), ("code_id", .null),
                 ("end_addr", hex(gone.baseAddress &+ gone.size)), ("filename", .string(gone.name))])
      })),
      ("handles", .null),
    ]
    // As minidump-stackwalk: the requesting thread again, with its index and frame 0's registers.
    if let requesting, var frames = threadValues[requesting]["frames"]?.array, !frames.isEmpty {
      var thread = threadValues[requesting]
      if let registers = threads[requesting].registers {
        frames[0].set("registers", .object(registers.threadStateRows.joined().map { ($0.name, hex($0.value)) }))
      }
      thread.set("frames", .array(frames))
      thread.set("threads_index", .number(String(requesting)))
      members.append(("crashing_thread", thread))
    }
    return .object(members)
  }

  func stackwalkThread(_ thread: Thread, hex: (UInt64) -> JSONValue) -> JSONValue {
    let frames = thread.frames.enumerated().map { index, frame in stackwalkFrame(frame, index: index, hex: hex) }
    return .object([
      ("frame_count", .number(String(frames.count))), ("last_error_value", .null),
      ("thread_name", thread.name.map(JSONValue.string) ?? .null),
      ("thread_id", thread.tid.map { .number(String($0)) } ?? .null),
      ("frames", .array(frames)),
    ])
  }

  func stackwalkFrame(_ frame: Frame, index: Int, hex: (UInt64) -> JSONValue) -> JSONValue {
    let symbols = frame.symbols
    let (module, function, instruction) = stackwalkFrameName(frame)
    let named = function?.name.flatMap { $0.isEmpty ? nil : $0 }
    // A caller's `offset` is its return address less one (inside the call), as minidump-stackwalk
    // writes it; `module_offset` and `function_offset` are measured to it.
    let back = frame.address &- instruction  // what the instruction is short of the return address (1; arm 2, arm64 4)
    let functionOffset = named == nil ? nil : function.flatMap { stackwalkFunctionOffset($0, of: frame, back: back) }
    let inlined = symbols.functions.count > 1 ? Array(symbols.functions.dropLast()) : []
    let trust: String
    switch frame.trust {
    case .context?: trust = "context"
    case .callFrameInfo?: trust = "cfi"
    case .framePointer?: trust = "frame_pointer"
    case .stackScan?: trust = "scan"
    case nil: trust = "none"
    }
    let null = JSONValue.null
    let inlines: JSONValue = inlined.isEmpty ? null : .array(inlined.map(Self.stackwalkInline))
    let line: JSONValue = function?.line.map { .number(String($0)) } ?? null
    let file: JSONValue = function?.file.map(JSONValue.string) ?? null
    let name: JSONValue = named.map(JSONValue.string) ?? null
    let offset: JSONValue = functionOffset.map(hex) ?? null
    let image = frame.imageIndex.flatMap { images.indices.contains($0) ? images[$0] : nil }
    let moduleName: JSONValue = module.map(JSONValue.string) ?? null
    let moduleOffset: JSONValue = image.map { hex(instruction &- $0.loadAddress) } ?? null
    // As minidump-stackwalk: a pc in no module but in one removed before the crash names it, with the offset.
    let gone = image == nil ? unloadedImage(holding: instruction) : nil
    let unloaded: JSONValue = gone.map { gone in
      .array([.object([("module", .string(gone.name)), ("offsets", .array([hex(instruction &- gone.baseAddress)]))])])
    } ?? null
    let members: [(String, JSONValue)] = [
      ("file", file), ("frame", .number(String(index))), ("function", name), ("function_offset", offset),
      ("inlines", inlines), ("line", line), ("missing_symbols", .bool(named == nil)), ("module", moduleName),
      ("module_offset", moduleOffset), ("offset", hex(instruction)), ("trust", .string(trust)),
      ("unloaded_modules", unloaded),
    ]
    return .object(members)
  }

  /// minidump-stackwalk's `function_offset`: bytes from the function's start to the frame's
  /// instruction, `back` short of its address (0 for a frame that is no return address). From the
  /// start where a file gave it; else from the offset the report wrote, which counts from the frame's
  /// address or, in Swift's backtracer, from the address less one. Short of `back`, the offset stands.
  func stackwalkFunctionOffset(_ function: FrameSymbols.Function, of frame: Frame, back: UInt64) -> UInt64? {
    let offset: UInt64, measuredBack: UInt64
    if let start = function.startAddress, let link = frame.symbols.linkAddress, link >= start {
      (offset, measuredBack) = (link - start, 0)
    } else if let written = function.offset {
      (offset, measuredBack) = (written, format.measuresOffsetsFromLookup && frame.isReturnAddress ? 1 : 0)
    } else {
      return nil
    }
    let (total, overflow) = offset.addingReportingOverflow(measuredBack)
    return !overflow && total >= back ? total - back : offset
  }

  /// One inlined function of a frame: `{function, file, line}`.
  static func stackwalkInline(_ inline: FrameSymbols.Function) -> JSONValue {
    let line: JSONValue = inline.line.map { .number(String($0)) } ?? .null
    let members: [(String, JSONValue)] = [
      ("function", inline.name.map(JSONValue.string) ?? .null), ("file", inline.file.map(JSONValue.string) ?? .null),
      ("line", line),
    ]
    return .object(members)
  }

  func stackwalkModule(_ image: Image, hex: (UInt64) -> JSONValue) -> JSONValue {
    let buildID = image.loaded?.buildID ?? image.identity.map { BuildID($0.bytes) }
    let size = image.loaded?.loadSize ?? image.endAddress.map { $0 &- image.loadAddress &+ 1 } ?? 0
    let looked = image.resolution.map { $0 != .notSearched } ?? false
    let loaded: Bool
    switch image.resolution {
    case .found?, .unverified?: loaded = true
    default: loaded = false
    }
    return .object([
      ("base_addr", hex(image.loadAddress)),
      ("cert_subject", .null),
      ("code_id", .string(image.codeID ?? buildID?.hex ?? "")),
      ("corrupt_symbols", .bool(false)),
      // A minidump's module without a CodeView record has no debug file (`""`) and the nil debug id.
      ("debug_file", .string(Self.stackwalkBaseName(image.debugFileName ?? (format == .minidump ? "" : image.name)))),
      ("debug_id", .string(image.debugID ?? buildID?.breakpadDebugID() ?? String(repeating: "0", count: 33))),
      ("end_addr", hex(image.loadAddress &+ size)),
      ("filename", .string(Self.stackwalkBaseName(image.name))),
      ("loaded_symbols", .bool(loaded)),
      ("missing_symbols", .bool(looked && !loaded)),
      ("symbol_url", .null),
    ])
  }

  static func isThirtyTwoBit(_ architecture: String?) -> Bool {
    guard let architecture else { return false }
    let name = Architecture(commandLine: architecture).name
    return name == "i386" || (name.hasPrefix("arm") && !name.hasPrefix("arm64"))
  }
}
