import ProcessInspection
import ImageReaders
import Snapshot

/// A crash's signature, as Socorro makes it (Mozilla's `siggen`, its `SignatureGenerator` with the
/// default rules): the crashing thread's frames normalised (C++ and Rust names without parameters and
/// templates, `file#line` or the module for a frame without a name), walked from the top, the
/// irrelevant ones skipped, the prefix ones kept and the walk going on, up to the first significant one,
/// joined with ` | `; then the rules that rewrite it: out of memory (`OOM | small`, `OOM | large | ...`),
/// an abort message (`Abort | MESSAGE | ...`), a hang (`hang: TYPE | ...`), a stack overflow, bad
/// hardware, whitespace, and 255 characters at most.
///
/// Left out of siggen's rules: Java stacks, Firefox's shutdown-hang, IPC and async-shutdown
/// annotations, minidump-stackwalk's error status, and its table of Rust 1.34 panic frames named
/// without their module (none of these come from what imagelog reads).
package struct SignatureInput: Sendable, Equatable {
  /// One frame as minidump-stackwalk's JSON gives it.
  package struct Frame: Sendable, Equatable {
    package var module: String?
    package var function: String?
    package var file: String?
    package var line: Int?
    /// The frame's instruction address, `0x` and hex digits.
    package var offset: String?
    /// The functions inlined at the frame, innermost first: each a frame of the signature's walk.
    package var inlines: [Frame] = []

    package init(module: String? = nil, function: String? = nil, file: String? = nil, line: Int? = nil,
                 offset: String? = nil, inlines: [Frame] = []) {
      self.module = module
      self.function = function
      self.file = file
      self.line = line
      self.offset = offset
      self.inlines = inlines
    }
  }

  /// Each thread's frames.
  package var threads: [[Frame]]
  /// The crashing (or requesting) thread's index; siggen walks thread 0 without one.
  package var crashingThread: Int?
  /// minidump-stackwalk's `system_info.os` (`Windows NT` lowers module names).
  package var os: String?
  /// minidump-stackwalk's `crash_info.type` (`EXCEPTION_STACK_OVERFLOW`, `SIGSEGV / SEGV_MAPERR`).
  package var reason: String?
  /// The message the process gave as it aborted.
  package var abortMessage: String?
  /// The size of the allocation that failed, when the crash is an out-of-memory one.
  package var oomAllocationSize: UInt64?
  /// The kind of hang, when the crash is a hang.
  package var hang: String?

  package init(threads: [[Frame]], crashingThread: Int?, os: String? = nil, reason: String? = nil,
               abortMessage: String? = nil, oomAllocationSize: UInt64? = nil, hang: String? = nil) {
    self.threads = threads
    self.crashingThread = crashingThread
    self.os = os
    self.reason = reason
    self.abortMessage = abortMessage
    self.oomAllocationSize = oomAllocationSize
    self.hang = hang
  }
}

package enum Signature {
  /// siggen's limits: frames looked at (inlined ones counted), and the signature's length.
  static let maximumFrames = 40
  static let maximumLength = 255

  /// The signature of `input` with `lists`.
  package static func signature(of input: SignatureInput, lists: SignatureLists) -> String {
    var signature = stackSignature(input, thread: input.crashingThread ?? 0, lists: lists)
    // The rules, in siggen's order.
    if let reason = input.reason, reason.utf8Range(of: "STATUS_DEVICE_DATA_ERROR") != nil { signature = "bad hardware | " + signature }
    let oomFragments = ["NS_ABORT_OOM", "mozalloc_handle_oom", "CrashAtUnhandlableOOM", "AutoEnterOOMUnsafeRegion",
                        "alloc::oom::oom"]
    let oomReasons = ["STATUS_FATAL_MEMORY_EXHAUSTION", "STATUS_NO_MEMORY"]
    if (input.oomAllocationSize ?? 0) != 0 || (!signature.isEmpty && oomFragments.contains { signature.utf8Range(of: $0) != nil })
      || oomReasons.contains(input.reason ?? "") {
      if let size = input.oomAllocationSize {
        signature = size <= 262_144 ? "OOM | small" : "OOM | large | " + signature
      } else {
        signature = "OOM | unknown | " + signature
      }
    }
    if let message = input.abortMessage, !message.isEmpty { signature = abortSignature(message, signature) }
    if input.reason == "EXCEPTION_STACK_OVERFLOW" { signature = "stackoverflow | " + signature }
    if let hang = input.hang { signature = "hang: \(hang) | " + signature }
    signature = fixWhitespace(signature)
    let scalars = Array(signature.unicodeScalars)
    if scalars.count > maximumLength {
      signature = String(String.UnicodeScalarView(scalars.prefix(maximumLength - 3))) + "..."
    }
    return signature
  }

  /// The frames' walk: from a sentinel when the stack holds one, irrelevant frames skipped, prefix
  /// frames kept, up to the first other frame.
  static func stackSignature(_ input: SignatureInput, thread: Int, lists: SignatureLists) -> String {
    let frames = input.threads.indices.contains(thread) ? input.threads[thread] : []
    var names: [String] = []
    walk: for frame in frames {
      for part in frame.inlines + [frame] {
        guard names.count < maximumFrames else { break walk }
        var module = frame.module
        if input.os == "Windows NT" { module = module?.lowercased() }
        names.append(normalized(module: module, function: part.function, file: part.file, line: part.line,
                                offset: frame.offset, lists: lists))
      }
    }
    var list = names[...]
    if let start = lists.sentinels.compactMap({ names.firstIndex(of: $0) }).min() { list = names[start...] }
    var kept: [String] = []
    for name in list where !name.isEmpty && !lists.irrelevantPattern.matches(name) {
      let lowered = name.lowercased()
      let library = lowered.hasSuffix(".dll") || lowered.hasSuffix(".so") || name == "XUL" || name == "<name omitted>"
        || name.hasPrefix("<unknown in")
      if !name.hasPrefix("(unloaded"), library, kept.last == name { continue }
      kept.append(name)
      if !lists.prefixPattern.matches(name) { break }
    }
    if !kept.isEmpty { return kept.joined(separator: " | ") }
    // All irrelevant: the first frame; no frames at all: said so.
    return names.first ?? "EMPTY: no frame data available"
  }

  /// A frame as the signature names it: its function normalised, else `file#line`, else its module,
  /// else `@0xOFFSET`; empty when it has none of them.
  static func normalized(module: String?, function: String?, file: String?, line: Int?, offset: String?,
                         lists: SignatureLists) -> String {
    if let function, !function.isEmpty {
      if let file, sourceFile(file)?.hasSuffix(".rs") == true {
        return SignatureNames.rust(function, line: line, lists: lists)
      }
      return SignatureNames.cpp(function, line: line, lists: lists)
    }
    if let file, !file.isEmpty, let line, line != 0 {
      var trimmed = Substring(file)
      while let last = trimmed.last, last == "/" || last == "\\" { trimmed = trimmed.dropLast() }
      let separator: Character = trimmed.contains("\\") ? "\\" : "/"
      let name = trimmed.split(separator: separator, omittingEmptySubsequences: false).last ?? trimmed
      return "\(name)#\(line)"
    }
    if let module, !module.isEmpty {
      var name = Substring(module)
      while name.first == "[" || name.first == "]" { name = name.dropFirst() }
      while name.last == "[" || name.last == "]" { name = name.dropLast() }
      return String(name)
    }
    if let offset, !offset.isEmpty {
      let digits = offset.hasPrefix("0x") || offset.hasPrefix("0X") ? offset.dropFirst(2) : Substring(offset)
      if let value = UInt64(digits, radix: 16) { return "@0x" + String(value, radix: 16) }
      return "@" + offset
    }
    return ""
  }

  /// The source path siggen takes a file for: a VCS path's (`hg:host/repo:path:rev`, `git:path`) path,
  /// else an absolute path; `nil` otherwise (a relative path is not looked at).
  static func sourceFile(_ file: String) -> String? {
    let parts = file.split(separator: ":", omittingEmptySubsequences: false)
    if parts.count == 4 { return String(parts[2]) }
    if parts.count == 2 { return String(parts[1]) }
    return file.hasPrefix("/") ? file : nil
  }

  /// siggen's abort rule: `Abort | MESSAGE | signature`, the message without Gecko's lead and file
  /// part, printable ASCII only, 80 characters at most.
  static func abortSignature(_ abortMessage: String, _ signature: String) -> String {
    var message = abortMessage
    if message.utf8Range(of: "###!!! ABORT: file ") != nil { return "Abort | " + signature }
    if let range = message.utf8Range(of: "###!!! ABORT:") { message = String(message[range.upperBound...]) }
    if let range = message.utf8Range(of: ": file ") { message = String(message[..<range.lowerBound]) }
    if message.utf8Range(of: "unable to find a usable font") != nil, let open = message.firstIndex(of: "("),
       let close = message.lastIndex(of: ")") {
      message = String(message[..<open]) + String(message[message.index(after: close)...])
    }
    let printable = String(String.UnicodeScalarView(message.unicodeScalars.filter { $0.value >= 32 && $0.value < 127 }))
    var trimmed = Substring(printable)
    while trimmed.first == " " { trimmed = trimmed.dropFirst() }
    while trimmed.last == " " { trimmed = trimmed.dropLast() }
    message = String(trimmed)
    if message.unicodeScalars.count > 80 { message = String(String.UnicodeScalarView(message.unicodeScalars.prefix(77))) + "..." }
    return "Abort | \(message) | \(signature)"
  }

  /// Surrounding whitespace trimmed, other whitespace a space, runs of it one space.
  static func fixWhitespace(_ text: String) -> String {
    var out = String.UnicodeScalarView()
    var pendingSpace = false
    for scalar in text.unicodeScalars {
      if scalar.properties.isWhitespace {
        pendingSpace = true
      } else {
        if pendingSpace, !out.isEmpty { out.append(" ") }
        pendingSpace = false
        out.append(scalar)
      }
    }
    return String(out)
  }
}

extension ProcessSnapshot {
  /// The snapshot as the signature's input: the frames as `--format stackwalk-json` writes them
  /// (`stackwalkFrameName`), the crash as minidump-stackwalk names it. Only the thread the signature
  /// walks has its frames (the others are empty): naming every thread's frames for a signature that
  /// reads one thread is work thrown away.
  package func signatureInput() -> SignatureInput {
    let requesting = crashedThreadIndex ?? self.threads.firstIndex(where: \.requestedDump)
    let threads = threads.enumerated().map { index, thread in
      guard index == requesting ?? 0 else { return [SignatureInput.Frame]() }
      return thread.frames.map { frame -> SignatureInput.Frame in
        let name = stackwalkFrameName(frame)
        let inlines = frame.symbols.functions.count > 1 ? frame.symbols.functions.dropLast().map {
          SignatureInput.Frame(function: $0.name, file: $0.file, line: $0.line)
        } : []
        return SignatureInput.Frame(module: name.module, function: name.function?.name, file: name.function?.file,
                                    line: name.function?.line, offset: "0x" + hexDigits(name.instruction, width: 16),
                                    inlines: inlines)
      }
    }
    return SignatureInput(threads: threads, crashingThread: requesting, os: stackwalkOS.name, reason: stackwalkCrashType,
                          abortMessage: abortMessage, oomAllocationSize: oomAllocationSize)
  }

  /// The signature of the snapshot's crashing thread (thread 0 when none is marked), with `lists`.
  package func signature(lists: SignatureLists) -> String {
    Signature.signature(of: signatureInput(), lists: lists)
  }

  /// Sets `signature` from the symbolicated frames, with `options`' lists (imagelog's own when none).
  package mutating func sign(with options: SymbolicationOptions) {
    signature = signature(lists: options.signatureLists ?? .imagelogDefaults)
  }
}
