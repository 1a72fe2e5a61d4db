import Glibc

/// imagelog's report as the capture helper writes it, symbolicated: the header, each thread's name, tid
/// and frame lines, its physical frames (a frame's inlined functions share its number and address), the
/// crashed thread's registers.
public struct SymbolicatedReportText {
  public struct Thread {
    public var tid: Int32
    public var name: String?
    public var crashed: Bool
    /// Each frame's address, once per frame number.
    public var frames: [UInt64] = []
    public var lines: [String] = []
    /// The `(not unwound: ...)` line's text, when the thread has one.
    public var problem: String?
  }

  public var header: [String: String] = [:]
  public var threads: [Thread] = []
  public var registers: [String: UInt64] = [:]

  public init(_ text: String) throws {
    var name: String?
    var inThreads = false, inRegisters = false
    var lastNumber = -1
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
      if !inThreads, let colon = line.firstIndex(of: ":"), line.count > 17, !line.hasPrefix("Thread") {
        header[String(line[..<colon])] = String(line.dropFirst(17))
        continue
      }
      if line.hasPrefix("Thread "), let label = line.firstRange(of: " name:  ") {
        name = String(line[label.upperBound...])
        inThreads = true
      } else if line.hasPrefix("Thread "), let tid = line.firstRange(of: ":  tid ") {
        inThreads = true
        let number = line[tid.upperBound...].prefix { $0.isNumber }
        threads.append(Thread(tid: Int32(number) ?? 0, name: name, crashed: line.contains(" Crashed:")))
        name = nil
        lastNumber = -1
      } else if line.contains(" crashed with ") {
        inRegisters = true
      } else if inRegisters, line.hasPrefix("  ") {
        let tokens = line.split(separator: " ")
        for cell in stride(from: 0, to: tokens.count - 1, by: 2) where tokens[cell].hasSuffix(":") {
          registers[String(tokens[cell].dropLast())] = UInt64(tokens[cell + 1].dropFirst(2), radix: 16)
        }
      } else if line == "Binary Images:" {
        break
      } else if line.isEmpty {
        inRegisters = false
      } else if inThreads, !threads.isEmpty, line.hasPrefix("(not unwound: ") {
        threads[threads.count - 1].problem = String(line.dropFirst().dropLast())
      } else if !inRegisters, inThreads, !threads.isEmpty, let number = Int(line.prefix { $0.isNumber }) {
        let tokens = line.split(separator: " ")
        guard tokens.count >= 3, let address = UInt64(tokens[2].dropFirst(2), radix: 16) else {
          throw TestSupportError("bad frame line: \(line)")
        }
        threads[threads.count - 1].lines.append(line)
        if number != lastNumber { threads[threads.count - 1].frames.append(address) }
        lastNumber = number
      }
    }
    guard !threads.isEmpty else { throw TestSupportError("no threads in:\n\(text)") }
  }
}

/// gdb's view of a program's crash: it runs `arguments` (no shell, without the LINES and COLUMNS gdb
/// adds, so the program's environment and stack addresses are those of a run without gdb under
/// `setarch -R`), and at the fatal signal reads each thread's physical frames (its NORMAL and SIGTRAMP
/// frames) by tid and the crashed thread's general registers (x86_64), then kills the program.
public struct GDBCrashView {
  public var threads: [Int32: [UInt64]] = [:]
  /// rax ... r15, rip and rfl (gdb's eflags).
  public var registers: [String: UInt64] = [:]
  /// What gdb printed, for failure messages.
  public var output = ""

  /// The gdb Python that prints `frames TID PC...` for each thread by tid (gdb's NORMAL and SIGTRAMP frames:
  /// its inlined frames and the tail-call frames it infers are not on the stack), then selects the crashed
  /// thread again (`crashed`).
  public static let framesScript = """
    import gdb
    gdb.execute("set backtrace past-main on")
    gdb.execute("set backtrace past-entry on")
    crashed = gdb.selected_thread()
    for thread in sorted(gdb.selected_inferior().threads(), key=lambda t: t.ptid[1]):
        thread.switch()
        frame, pcs = gdb.newest_frame(), []
        while frame is not None:
            if frame.type() in (gdb.NORMAL_FRAME, gdb.SIGTRAMP_FRAME):
                pcs.append("%x" % frame.pc())
            frame = frame.older()
        print("frames %d %s" % (thread.ptid[1], " ".join(pcs)))
    crashed.switch()

    """

  static let script = framesScript + """
    frame = gdb.newest_frame()
    for name in ["rax", "rbx", "rcx", "rdx", "rdi", "rsi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
                 "r14", "r15", "rip", "eflags"]:
        print("register %s %x" % (name, int(frame.read_register(name)) & 0xffffffffffffffff))
    gdb.execute("kill")

    """

  public static func run(gdb: String, _ arguments: [String], environment: [String: String]) throws -> GDBCrashView {
    let directory = try makeTemporaryDirectory("imagelog-gdb")
    let scriptPath = "\(directory)/frames.py"
    try writeFile(scriptPath, script)
    let result = try runChild([gdb, "-nx", "-batch", "-ex", "set startup-with-shell off", "-ex", "unset environment LINES",
                               "-ex", "unset environment COLUMNS", "-ex", "run", "-x", scriptPath, "--args"] + arguments,
                              environment: environment, timeoutSeconds: 120)
    var view = GDBCrashView()
    view.output = String(result.output.suffix(3000)) + String(result.error.suffix(2000))
    for line in result.output.split(separator: "\n") {
      let tokens = line.split(separator: " ")
      if tokens.first == "frames", tokens.count >= 2, let tid = Int32(tokens[1]) {
        view.threads[tid] = tokens.dropFirst(2).compactMap { UInt64($0, radix: 16) }
      } else if tokens.first == "register", tokens.count == 3, let value = UInt64(tokens[2], radix: 16) {
        view.registers[tokens[1] == "eflags" ? "rfl" : String(tokens[1])] = value
      }
    }
    return view
  }
}

extension GDBCrashView {
  /// Where `report` differs from gdb's view of the same crash (both runs without address randomization),
  /// one sentence each: threads are matched by their place in the list (tids differ between runs); the
  /// thread named `moving` (one that spins) is compared from its caller on, as where in its loop it was
  /// stopped differs between the runs; r10 is skipped: the crashed code left a pointer in it that glibc
  /// mangles with its pointer guard (from AT_RANDOM, new in every run).
  public func differences(from report: SymbolicatedReportText, moving: String = "spinner") -> [String] {
    var found: [String] = []
    let tids = threads.keys.sorted()
    if tids.count != report.threads.count { found.append("gdb saw \(tids.count) threads, the report \(report.threads.count)") }
    for (thread, tid) in zip(report.threads, tids) {
      guard let expected = threads[tid] else { continue }
      let skip = thread.name == moving ? 1 : 0
      if Array(thread.frames.dropFirst(skip)) != Array(expected.dropFirst(skip)) {
        found.append("thread \(thread.name ?? ""): frames \(thread.frames.map { String($0, radix: 16) }), gdb's \(expected.map { String($0, radix: 16) })")
      }
    }
    if registers.count != 18 { found.append("gdb gave \(registers.count) registers") }
    for (name, value) in registers.sorted(by: { $0.key < $1.key }) where name != "r10" && report.registers[name] != value {
      found.append("register \(name): report \(report.registers[name].map { String($0, radix: 16) } ?? "none"), gdb \(String(value, radix: 16))")
    }
    return found
  }
}

/// The names in folder `path` (not `.` and `..`), sorted; empty when it cannot be read.
public func directoryEntries(_ path: String) -> [String] {
  guard let directory = opendir(path) else { return [] }
  defer { closedir(directory) }
  var names: [String] = []
  while let entry = readdir(directory) {
    let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    if name != "." && name != ".." { names.append(name) }
  }
  return names.sorted()
}

/// Waits until the capture helper is done with crash folder `path`, after the program it captured has
/// died: the helper wrote its report before letting the program go, and goes on to put the symbolicated
/// report in its place (a hidden `.partial` file renamed over it). With `helperWrote` (its stderr line
/// said "report written to"), until the one report is symbolicated; always, until no temporary file is
/// left. Returns the folder's names.
public func finishedCrashDirectory(_ path: String, helperWrote: Bool) throws -> [String] {
  try waitUntil("the capture helper is done with \(path)") {
    let names = directoryEntries(path)
    guard !names.contains(where: { $0.hasPrefix(".") }) else { return false }
    guard helperWrote else { return true }
    return names.contains { name in
      name.hasSuffix(".crash") && (readFile("\(path)/\(name)")?.contains("\n-- symbolicated by imagelog") ?? false)
    }
  }
  return directoryEntries(path)
}
