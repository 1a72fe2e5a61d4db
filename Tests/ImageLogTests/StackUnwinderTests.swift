import Glibc
import ImageLog
import ImageLogTestSupport
import Testing

/// The unwinder against real peers over real stacks: libgcc's `_Unwind_Backtrace` over the same stack
/// in the same process (Tests/Programs/unwind-peer.c, built with gcc -O2 -fomit-frame-pointer, natively
/// and for aarch64 under qemu-user), through libc's qsort and a signal handler (also on an alternate
/// signal stack); and `eu-stack -p` on a stopped child unwound from outside through `ProcessMemory`.
@Suite struct StackUnwinderTests {
  struct PeerFrame: Equatable { var pc: UInt64; var detail: String; var exact: Bool }

  /// The program's "ours PC TRUST EXACT" and "theirs PC BEFORE_INSN" lines.
  static func parse(_ output: String) throws -> (ours: [PeerFrame], theirs: [PeerFrame]) {
    var ours: [PeerFrame] = [], theirs: [PeerFrame] = []
    var ended = false
    for line in output.split(separator: "\n") {
      let words = line.split(separator: " ").map(String.init)
      if words == ["end"] { ended = true; continue }
      guard words.count == 4 || words.count == 3, words[1].hasPrefix("0x"), let pc = UInt64(words[1].dropFirst(2), radix: 16) else {
        continue
      }
      if words[0] == "ours", words.count == 4 { ours.append(PeerFrame(pc: pc, detail: words[2], exact: words[3] == "1")) }
      if words[0] == "theirs" { theirs.append(PeerFrame(pc: pc, detail: "", exact: words[2] == "1")) }
    }
    guard ended else { throw TestSupportError("unwind-peer did not finish:\n\(output)") }
    return (ours, theirs)
  }

  /// Our frames 1... equal libgcc's frames 2... (libgcc's frame 0 is the walking function itself, 1 its
  /// caller at the call; ours 0 is the same caller at getcontext): same return addresses, same
  /// "pc is exact" (libgcc's ip_before_insn, set for the frame a signal interrupted), same end.
  static func compare(_ output: String, mode: String, minimumFrames: Int) throws {
    let (ours, theirs) = try parse(output)
    try #require(theirs.count >= minimumFrames, "\(mode): libgcc found \(theirs.count) frames:\n\(output)")
    #expect(ours.first?.detail == "context")
    #expect(Array(ours.dropFirst().map(\.pc)) == Array(theirs.dropFirst(2).map(\.pc)), "\(mode):\n\(output)")
    #expect(Array(ours.dropFirst().map(\.exact)) == Array(theirs.dropFirst(2).map(\.exact)), "\(mode):\n\(output)")
    #expect(ours.dropFirst().allSatisfy { $0.detail == "cfi" }, "\(mode): every caller from call frame information:\n\(output)")
    if mode.hasSuffix("signal") || mode.hasSuffix("altstack") || mode.contains("trampoline") { #expect(ours.contains { $0.exact && $0.detail == "cfi" }, "\(mode): the interrupted frame") }
    print("StackUnwinderTests: \(mode): \(ours.count) frames equal libgcc's _Unwind_Backtrace")
  }

  static let flags = ["-g", "-O2", "-fomit-frame-pointer", "-fasynchronous-unwind-tables"]

  static func build(compiler: String, output: String, flags: [String] = flags) throws -> String {
    let root = packageRoot
    let result = try runChild([compiler] + flags + ["-I", root + "/Sources/CImageLogUnwind/include",
                                                    root + "/Sources/CImageLogUnwind/cfi.c", root + "/Sources/CImageLogUnwind/cfi_expression.c",
                                                    root + "/Sources/CImageLogUnwind/unwind.c",
                                                    root + "/Tests/Programs/unwind-peer.c", "-o", output])
    guard result.exitCode == 0 else { throw TestSupportError("\(compiler): \(result.error)") }
    return output
  }

  static let program: Result<String, TestSupportError> = Result {
    try build(compiler: "gcc", output: try makeTemporaryDirectory("imagelog-unwind") + "/unwind-peer")
  }.mapError { $0 as? TestSupportError ?? TestSupportError("\($0)") }

  @Test(.enabled(if: haveTool("gcc"), "needs gcc"), arguments: ["plain", "qsort", "signal", "altstack"])
  func ownStackEqualsLibgcc(mode: String) throws {
    let program = try Self.program.get()
    let result = try runChild([program, mode], timeoutSeconds: 60)
    #expect(result.exitCode == 0, "\(result.error)")
    try Self.compare(result.output, mode: mode, minimumFrames: mode == "qsort" ? 10 : 8)
  }

  static let i386Program: Result<String, TestSupportError> = Result {
    try build(compiler: "gcc", output: try makeTemporaryDirectory("imagelog-unwind") + "/unwind-peer-i386",
              flags: ["-m32"] + flags)
  }.mapError { $0 as? TestSupportError ?? TestSupportError("\($0)") }

  /// i386 (gcc -m32): 4-byte pointers, .eh_frame_hdr's datarel table, the vDSO's signal frame CFI
  /// (expressions over esp), and the kernel's return trampolines without CFI (rt_sigframe and the old
  /// sigframe), recognised by their code as libgcc's fallback does.
  @Test(.enabled(if: canRun32BitLibcPrograms, "needs gcc -m32 with a 32-bit libc (gcc-12-multilib) and IA-32 emulation"),
        arguments: ["plain", "qsort", "signal", "altstack", "trampoline", "trampoline-plain"])
  func i386StackEqualsLibgcc(mode: String) throws {
    let program = try Self.i386Program.get()
    let result = try runChild([program, mode], timeoutSeconds: 60)
    #expect(result.exitCode == 0, "\(result.error)")
    try Self.compare(result.output, mode: "i386 \(mode)", minimumFrames: mode == "qsort" ? 10 : 8)
  }

  static let armSysroot = "/usr/aarch64-linux-gnu"
  static let armProgram: Result<String, TestSupportError> = Result {
    try build(compiler: "aarch64-linux-gnu-gcc", output: try makeTemporaryDirectory("imagelog-unwind") + "/unwind-peer-arm")
  }.mapError { $0 as? TestSupportError ?? TestSupportError("\($0)") }

  /// aarch64 under qemu-user: x29/x30 frame records, leaf functions without a record, and the signal
  /// return trampoline (qemu's, which has no CFI: recognised by its code, as libgcc does).
  @Test(.enabled(if: haveTool("aarch64-linux-gnu-gcc") && haveTool("qemu-aarch64") && access(armSysroot, F_OK) == 0,
                 "needs aarch64-linux-gnu-gcc, qemu-aarch64 and libc6-dev-arm64-cross"),
        arguments: ["plain", "qsort", "signal", "altstack"])
  func aarch64StackEqualsLibgccUnderQEMU(mode: String) throws {
    let program = try Self.armProgram.get()
    let result = try runChild(["qemu-aarch64", program, mode], environment: ["QEMU_LD_PREFIX": Self.armSysroot],
                              timeoutSeconds: 120)
    #expect(result.exitCode == 0, "\(result.error)")
    try Self.compare(result.output, mode: "aarch64 " + mode, minimumFrames: mode == "qsort" ? 10 : 8)
  }

  /// /proc/PID/stat's state letter.
  static func state(of pid: pid_t) -> Character? {
    guard let stat = readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
    return stat[close...].dropFirst(2).first
  }

  /// A child stopped (SIGSTOP) four calls deep, unwound from outside from the registers it printed:
  /// the same return addresses as `eu-stack -p`, from the frame above the stop on, to `_start`.
  /// Returns our frames.
  static func compareStoppedChild(_ program: String, debugFrame: Bool) throws -> [UnwoundFrame] {
    let child = try RunningChild([program, "stop"])
    defer { child.stop() }
    var registers = RegisterSet(architecture: .x86_64)
    while let line = child.readLine(), line != "ready" {
      let words = line.split(separator: " ")
      guard words.count == 3, words[0] == "register", let number = Int(words[1]),
            let value = UInt64(words[2].dropFirst(2), radix: 16) else { continue }
      registers[dwarf: number] = value
    }
    try #require(registers.pc != nil && registers.sp != nil, "the child printed no registers")
    try waitUntil("child \(child.pid) is stopped") { Self.state(of: child.pid) == "T" }

    let memory = ProcessMemory(pid: child.pid)
    let snapshot = try ProcessImages.snapshot(of: child.pid)
    var images = snapshot.map {
      UnwindImage.locate(loadAddress: $0.loadAddress, loadBias: $0.loadBias, textRange: $0.textRange, in: memory)
    }
    #expect(images.contains { $0.ehFrameHeader != nil }, "PT_GNU_EH_FRAME found through the child's memory")
    if debugFrame {
      let index = try #require(snapshot.firstIndex { $0.path == program }, "\(program) is not in the child's images")
      let bytes = try #require(readFileBytes(program))
      let section: [UInt8] = try #require(try FileCallFrames(bytes).debugFrame, "\(program) has no .debug_frame")
      images[index].debugFrame = section
    }
    let frames = StackUnwinder(memory: memory, images: images).unwind(from: registers)

    let stack = try runChild(["eu-stack", "-p", "\(child.pid)"])
    // "#N  0xPC NAME" lines.
    let theirs: [(pc: UInt64, name: String)] = stack.output.split(separator: "\n").compactMap { line in
      let words = line.split(separator: " ")
      guard words.count >= 3, words[0].hasPrefix("#"), words[1].hasPrefix("0x"),
            let pc = UInt64(words[1].dropFirst(2), radix: 16) else { return nil }
      return (pc, String(words[2]))
    }
    try #require(frames.count >= 2 && theirs.count >= 6, "ours \(frames), eu-stack:\n\(stack.output)\(stack.error)")
    // Frame 0 is level4 at the getcontext call; eu-stack sees it at the raise call: the callers agree.
    let start = try #require(theirs.firstIndex { $0.pc == frames[1].pc }, "eu-stack:\n\(stack.output)\nours \(frames)")
    #expect(start >= 1 && theirs[start - 1].name == "level4", "eu-stack:\n\(stack.output)")
    #expect(frames.dropFirst().map(\.pc) == theirs[start...].map(\.pc), "eu-stack:\n\(stack.output)\nours \(frames)")
    #expect(frames.dropFirst().allSatisfy { !$0.pcIsExact })
    #expect(theirs.last?.name == "_start")
    return frames
  }

  @Test(.enabled(if: haveTool("gcc") && haveTool("eu-stack"), "needs gcc and eu-stack (elfutils)"))
  func stoppedChildEqualsEuStack() throws {
    let frames = try Self.compareStoppedChild(try Self.program.get(), debugFrame: false)
    #expect(frames.dropFirst().allSatisfy { $0.trust == .callFrameInfo })
    print("StackUnwinderTests: a stopped child: \(frames.count - 1) callers equal eu-stack -p's")
  }

  /// The program's own functions described only in `.debug_frame` (no unwind tables; -g): read from
  /// the file and given to the unwinder, as cores and offline tools do; the same stack as eu-stack's.
  @Test(.enabled(if: haveTool("gcc") && haveTool("eu-stack"), "needs gcc and eu-stack (elfutils)"))
  func debugFrameOnlyChildEqualsEuStack() throws {
    let program = try Self.build(compiler: "gcc", output: try makeTemporaryDirectory("imagelog-unwind") + "/unwind-peer-debug-frame",
                                 flags: ["-g", "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"])
    let frames = try Self.compareStoppedChild(program, debugFrame: true)
    #expect(frames.dropFirst().allSatisfy { $0.trust == .callFrameInfo })
    print("StackUnwinderTests: .debug_frame only: \(frames.count - 1) callers equal eu-stack -p's")
  }

  /// No call frame information for the program's functions at all, frame pointers kept: frame records
  /// take the walk from level4 to libc, where CFI takes over; the same stack as eu-stack's.
  @Test(.enabled(if: haveTool("gcc") && haveTool("eu-stack"), "needs gcc and eu-stack (elfutils)"))
  func framePointerChildEqualsEuStack() throws {
    let program = try Self.build(compiler: "gcc", output: try makeTemporaryDirectory("imagelog-unwind") + "/unwind-peer-fp",
                                 flags: ["-O0", "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"])
    let frames = try Self.compareStoppedChild(program, debugFrame: false)
    // level3, level2, level1, main and __libc_start_call_main by frame records, then libc's CFI.
    #expect(frames.dropFirst().map(\.trust).prefix(5) == [.framePointer, .framePointer, .framePointer, .framePointer, .framePointer])
    #expect(frames.last?.trust == .callFrameInfo)
    print("StackUnwinderTests: frame pointers: \(frames.count - 1) callers equal eu-stack -p's")
  }
}
