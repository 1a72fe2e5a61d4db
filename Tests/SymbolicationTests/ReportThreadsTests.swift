import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import ImageLog
import ImageLogTestSupport
import ImageReaders

/// Threads as each kind of report gives them (Apple `.crash` and `.ips`, the Swift backtracer's text
/// and JSON, imagelog's old and new layouts), and the `"threads"` of `symbolicate --format json`.
@Suite struct ReportThreadsTests {
  /// imagelog's crash handler before every thread was reported (the C handler's layout until then): one
  /// crashed thread, its tid in the header only, no `Threads:` line.
  static let singleThread = """
    Process:         crash-test [5150]
    Path:            /tmp/x/crash-test
    Date/Time:       2026-11-25 14:30:00 +0000
    OS Version:      Linux 6.1.0-27-amd64 x86_64
    Exception Type:  SIGSEGV (SEGV_MAPERR)
    Exception Codes: signal 11, code 1, address 0x0000000000000000
    Crashed Thread:  0  tid 5150

    Thread 0 Crashed:
    0   crash-test                    0x000055d0c0de1139 0x55d0c0de0000 + 4409
    1   libc.so.6                     0x00007f0a1c229d90 0x7f0a1c200000 + 171408
    2   ???                           0x0000000000000010 0x10 + 0

    Binary Images:
    0x55d0c0de0000 - 0x55d0c0de1fff +crash-test x86_64  <2b5ae0d9e2c8a4d4f1c07a0d3a7b9c11> /tmp/x/crash-test
    0x7f0a1c200000 - 0x7f0a1c3fffff libc.so.6 x86_64  <c289da5071a3399de893d2af81d6a30c> /usr/lib/x86_64-linux-gnu/libc.so.6

    """

  @Test func oldSingleThreadReport() throws {
    let report = try ReportParser.parse(Self.singleThread)
    #expect(report.format == .imagelog)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.threads.map(\.heading) == [ThreadHeading(number: 0, crashed: true, name: nil, tid: 5150)])
    #expect(report.process.threadCount == nil)
    #expect(report.frames.map(\.address) == [0x55d0c0de1139, 0x7f0a1c229d90, 0x10])
    #expect(report.frames.map(\.imageIndex) == [0, 1, nil])
    #expect(report.frames.map(\.trust) == [FrameTrust?](repeating: nil, count: 3))
    #expect(report.frames.map(\.reportedSymbol) == [nil, nil, nil])
  }

  /// imagelog's report layout (README.md's "Crash reports") written here by hand (not by our writer): every thread of a
  /// crash, the marks, a thread not unwound, the registers.
  static let multiThread = """
    Process:         crash-threads [12340]
    Path:            /tmp/x/crash-threads
    Date/Time:       2026-11-25 14:30:00 +0000
    OS Version:      Linux 6.1.0-27-amd64 x86_64
    Exception Type:  SIGSEGV (SEGV_MAPERR)
    Exception Codes: signal 11, code 1, address 0x0000000000000000
    Crashed Thread:  2  tid 12345
    Threads:         4

    Thread 0 name:  crash-threads
    Thread 0:  tid 12340
    0   libc.so.6                     0x00007f0a1c2d3e4f 0x7f0a1c200000 + 867919
    1   crash-threads                 0x000055d0c0de1234 0x55d0c0de0000 + 4660

    Thread 1 name:  worker-1
    Thread 1:  tid 12341  state S
    0   libc.so.6                     0x00007f0a1c2d3e50 0x7f0a1c200000 + 867920
    1   libfoo.so                     0x00007f0a1c601000 0x7f0a1c600000 + 4096  (frame pointer)
    2   libfoo.so                     0x00007f0a1c601100 0x7f0a1c600000 + 4352  (stack scan)

    Thread 2 name:  worker 2 (with spaces)
    Thread 2 Crashed:  tid 12345
    0   ???                           0x0000000000000000 0x0 + 0

    Thread 3 name:  blocked
    Thread 3:  tid 12346
    (not unwound: the thread did not answer within 100 ms)

    Thread 2 crashed with X86 Thread State (64-bit):
      rax: 0x0000000000000001  rbx: 0x0000000000000002  rcx: 0x0000000000000003  rdx: 0x0000000000000004
      rdi: 0x0000000000000005  rsi: 0x0000000000000006  rbp: 0x0000000000000007  rsp: 0x0000000000000008
       r8: 0x0000000000000009   r9: 0x000000000000000a  r10: 0x000000000000000b  r11: 0x000000000000000c
      r12: 0x000000000000000d  r13: 0x000000000000000e  r14: 0x000000000000000f  r15: 0x0000000000000010
      rip: 0x0000000000000000  rfl: 0x0000000000010246  cr2: 0x0000000000000000

    Binary Images:
    0x55d0c0de0000 - 0x55d0c0de1fff +crash-threads x86_64  <2b5ae0d9e2c8a4d4f1c07a0d3a7b9c11> /tmp/x/crash-threads
    0x7f0a1c200000 - 0x7f0a1c3fffff libc.so.6 x86_64  <c289da5071a3399de893d2af81d6a30c> /usr/lib/x86_64-linux-gnu/libc.so.6
    0x7f0a1c600000 - 0x7f0a1c601fff libfoo.so x86_64  <00112233445566778899aabbccddeeff> /tmp/x/libfoo.so

    """

  @Test func contractLayout() throws {
    let report = try ReportParser.parse(Self.multiThread)
    #expect(report.format == .imagelog)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.process.threadCount == 4)
    #expect(report.threads.map(\.number) == [0, 1, 2, 3])
    #expect(report.threads.map(\.tid) == [12340, 12341, 12345, 12346])
    #expect(report.threads.map(\.name) == ["crash-threads", "worker-1", "worker 2 (with spaces)", "blocked"])
    #expect(report.threads.map(\.state) == [nil, "S", nil, nil])
    #expect(report.threads.map(\.crashed) == [false, false, true, false])
    #expect(report.threads.map(\.problem) == [nil, nil, nil, "the thread did not answer within 100 ms"])
    #expect(report.threads.map { $0.registers != nil } == [false, false, true, false])
    let registers = try #require(report.threads[2].registers)
    #expect(registers.threadStateRows.flatMap { $0.map(\.value) } == Array(1...16) + [0, 0x10246, 0])
    #expect(registers.threadStateRows.map { $0.map(\.name) } == [["rax", "rbx", "rcx", "rdx"], ["rdi", "rsi", "rbp", "rsp"], ["r8", "r9", "r10", "r11"], ["r12", "r13", "r14", "r15"], ["rip", "rfl", "cr2"]])
    #expect(report.frames.map(\.thread) == [0, 0, 1, 1, 1, 2])
    #expect(report.frames.map(\.trust) == [nil, nil, nil, .framePointer, .stackScan, nil])
    #expect(report.frames.map(\.imageIndex) == [1, 0, 1, 2, 2, nil])
    #expect(report.frames.map(\.reportedSymbol) == [nil, nil, nil, nil, nil, nil])
  }

  /// The crash handler's `(N more threads not listed)` counts toward `Threads:`; a count that does not
  /// add up is named.
  @Test func threadsNotListed() throws {
    let text = Self.multiThread.replacingFirst("Threads:         4\n", with: "Threads:         7\n")
      .replacingFirst("\nThread 2 crashed with", with: "\n(3 more threads not listed)\n\nThread 2 crashed with")
    let report = try ReportParser.parse(text)
    #expect(report.problems.isEmpty, "\(report.problems)")
    #expect(report.threads.count == 4 && report.threads[2].registers != nil)
    let short = try ReportParser.parse(text.replacingFirst("(3 more", with: "(2 more"))
    #expect(short.problems == ["the header says 7 threads, the report lists 4 and 2 more not listed"])
  }

  /// A line that looks like a heading but is not one of ours, a `Threads:` count the report does not
  /// keep, a tid too long: named in `problems`, the rest still read.
  @Test func malformedThreadLines() throws {
    let text = Self.singleThread
      .replacingFirst("Crashed Thread:  0  tid 5150\n", with: "Crashed Thread:  0  tid 5150\nThreads:         3\n")
      .replacingFirst("Thread 0 Crashed:\n", with: "Thread 0 Crashed:  tid 99999999999999999999999\n")
    let report = try ReportParser.parse(text)
    #expect(report.threads.map(\.number) == [0])
    #expect(report.threads.first?.tid == 5150, "the header's tid, the heading's being unreadable")
    #expect(report.threads.first?.crashed == true)
    #expect(report.frames.count == 3)
    #expect(report.problems.contains("the header says 3 threads, the report lists 1"))
    #expect(report.problems.contains("line 10: unreadable words in the thread heading 'tid 99999999999999999999999'"))
    let trailing = try ReportParser.parse(Self.singleThread.replacingFirst("Thread 0 Crashed:\n", with: "Thread 0 Crashed:  tid 1  pid 2\n"))
    #expect(trailing.threads.first?.tid == 1)
    #expect(trailing.frames.count == 3)
    #expect(trailing.problems == ["line 9: unreadable words in the thread heading 'pid 2'"])
  }

  static let appleX86Registers = """
    Incident Identifier: 6156F33D-7F2B-4C4A-9E2C-3E6F0C1D2E3F
    Process:               Example [812]
    Code Type:             X86-64 (Native)
    Crashed Thread:        0  Dispatch queue: com.apple.main-thread

    Thread 0 Crashed:: Dispatch queue: com.apple.main-thread
    0   libsystem_kernel.dylib        \t0x00007fff6ba5a33a __pthread_kill + 10

    Thread 0 crashed with X86 Thread State (64-bit):
      rax: 0x0000000000000000  rbx: 0x00007fff8b4a0380  rcx: 0x00007ffee3b6e5b8  rdx: 0x0000000000000000
      rdi: 0x0000000000000307  rsi: 0x0000000000000006  rbp: 0x00007ffee3b6e5e0  rsp: 0x00007ffee3b6e5b8
       r8: 0x0000000000000000   r9: 0x0000000000000000  r10: 0x0000000000000000  r11: 0x0000000000000246
      r12: 0x0000000000000307  r13: 0x00007fc5e0c04a40  r14: 0x0000000000000006  r15: 0x0000000000000016
      rip: 0x00007fff6ba5a33a  rfl: 0x0000000000000246  cr2: 0x00007fff8b4a2f38
    Logical CPU:     0
    Error Code:      0x02000148
    Trap Number:     133

    Binary Images:
        0x7fff6ba3b000 -     0x7fff6ba67fff libsystem_kernel.dylib (6153.141.2) <A65E4E5A-8C8F-3C9E-A1E4-5C2E1A3F7A11> /usr/lib/system/libsystem_kernel.dylib
    """

  /// Apple's register sections are read (and never taken for frames); lines after the rows that are not
  /// indented (`Logical CPU:`) end the section.
  @Test func appleRegisterSections() throws {
    let x86 = try ReportParser.parse(Self.appleX86Registers)
    #expect(x86.problems.isEmpty, "\(x86.problems)")
    #expect(x86.frames.count == 1)
    #expect(x86.threads.map(\.name) == ["Dispatch queue: com.apple.main-thread"])
    let registers = try #require(x86.threads.first?.registers)
    #expect(registers.architecture.appleThreadState == "X86 Thread State (64-bit)")
    #expect(registers.threadStateRows.map { $0.map(\.name) } == [["rax", "rbx", "rcx", "rdx"], ["rdi", "rsi", "rbp", "rsp"], ["r8", "r9", "r10", "r11"], ["r12", "r13", "r14", "r15"], ["rip", "rfl", "cr2"]])
    #expect(registers["rip"] == 0x7fff6ba5a33a && registers["cr2"] == 0x7fff8b4a2f38 && registers["r11"] == 0x246)
    // The section's rows written back are the report's lines.
    let rows = Self.appleX86Registers.split(separator: "\n").filter { $0.hasPrefix(" ") && $0.contains(": 0x") }
      .map { String($0) + "\n" }
    #expect(rows.count == 5)
    #expect(registers.threadStateText() == rows.joined())

    let arm = try ReportParser.parse(ReportParserTests.appleCrash.replacingFirst(
      "    x0: 0x0000000000000000   x1: 0x0000000000000000\n",
      with: "    x0: 0x0000000000000001   x1: 0x0000000000000002\n    sp: 0x000000016f89e580   pc: 0x00000001a2b3c4d8 cpsr: 0x40000000\n   far: 0x0000000000000000  esr: 0x56000080  Address size fault\n"))
    #expect(arm.problems.isEmpty, "\(arm.problems)")
    let state = try #require(arm.threads.first { $0.number == 0 }?.registers)
    #expect(state.architecture.appleThreadState == "ARM Thread State (64-bit)")
    #expect(state.threadStateRows.map { $0.map(\.name) } == [["x0", "x1"], ["sp", "pc", "cpsr"], ["far", "esr"]])
    #expect(state["cpsr"] == 0x40000000 && state.threadStateRows[1][2].digits == 8 && state["x1"] == 2)
    #expect(arm.frames.count == 4)
  }

  /// `.ips`: `id` is the tid, the queue names a thread without a name, `triggered` marks the crash.
  @Test func ipsThreads() throws {
    let report = try ReportParser.parse(ReportParserTests.ips)
    #expect(report.threads.map(\.tid) == [100, 101])
    #expect(report.threads.map(\.name) == ["com.apple.main-thread", nil])
    #expect(report.threads.map(\.crashed) == [false, true])
  }

  /// `symbolicate --format json`'s `"threads"` for each kind, keys absent where the report is silent,
  /// frames naming their thread by index; the other keys as they were.
  @Test func jsonThreadsForEveryKind() throws {
    var options = SymbolicationOptions()
    options.systemDirectories = false
    func threads(_ text: String) throws -> (JSONValue, [JSONValue]) {
      let json = Symbolicator.symbolicated(try ReportParser.parse(text), options: options).formatted(.json)
      let document = try JSONValue.parse(json[...])
      guard case .object(let members) = document else { throw ReportError("not an object") }
      // The members written before the crash document first, as they were; then the document's own.
      let documentKeys = ["schemaVersion", "document", "process", "system", "binaryImages"]
      // Members a report gives only when it says them: its OS, an abort message, an allocation size, a timeline.
      let optionalKeys = ["os", "abortMessage", "oomAllocationSize", "imageTimeline"]
      #expect(members.map(\.0).filter { !documentKeys.contains($0) && !optionalKeys.contains($0) }
                == ["format", "frames", "threads", "images", "problems", "notes"])
      #expect(Array(members.map(\.0).suffix(documentKeys.count)) == documentKeys)
      if CrashDocumentSchema.unavailableReason == nil { #expect(try CrashDocumentSchema.problems(json) == []) }
      // A thread's members before the document: without its frames and register layout, as they were.
      let threads = try #require(document["threads"]?.array).map { thread -> JSONValue in
        var thread = thread
        thread.remove("frames")
        thread.remove("registerLayout")
        return thread
      }
      return (document, threads)
    }
    func object(_ members: [(String, JSONValue)]) -> JSONValue { .object(members) }

    let (apple, appleThreads) = try threads(ReportParserTests.appleCrash)
    #expect(appleThreads == [
      object([("index", .number("0")), ("name", .string("Dispatch queue: com.apple.main-thread")), ("crashed", .bool(true)),
              ("registers", object([("x0", .string("0x0000000000000000")), ("x1", .string("0x0000000000000000"))]))]),
      object([("index", .number("1")), ("crashed", .bool(false))]),
    ])
    #expect(apple["frames"]?.array?.map { $0["thread"] } == [.number("0"), .number("0"), .number("0"), .number("1")])

    let (_, ipsThreads) = try threads(ReportParserTests.ips)
    #expect(ipsThreads == [
      object([("index", .number("0")), ("tid", .number("100")), ("name", .string("com.apple.main-thread")), ("crashed", .bool(false))]),
      object([("index", .number("1")), ("tid", .number("101")), ("crashed", .bool(true))]),
    ])

    let (_, swiftThreads) = try threads(ReportParserTests.swiftJSON)
    #expect(swiftThreads == [
      object([("index", .number("0")), ("name", .string("main")), ("crashed", .bool(true))]),
      object([("index", .number("1")), ("crashed", .bool(false))]),
    ])

    let (_, swiftTextThreads) = try threads(SampleReports.swiftBacktrace)
    #expect(swiftTextThreads == [
      object([("index", .number("0")), ("name", .string("crasher")), ("crashed", .bool(true))]),
      object([("index", .number("1")), ("name", .string("worker")), ("crashed", .bool(false))]),
    ])

    let (old, oldThreads) = try threads(Self.singleThread)
    #expect(oldThreads == [object([("index", .number("0")), ("tid", .number("5150")), ("crashed", .bool(true))])])
    #expect(old["frames"]?.array?.allSatisfy { $0["thread"] == .number("0") && $0["trust"] == nil } == true)
  }
}
