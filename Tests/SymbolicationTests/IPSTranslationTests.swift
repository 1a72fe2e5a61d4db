import ImageLogTestSupport
import ImageReaders
import Testing
@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication

/// `.ips` reports published together with Apple's own translation of the same report (Console's
/// "Translated Report", Fixtures/apple-reports/README.md names each source): `--format crash` must
/// give Apple's text line for line. No file of these macOS reports exists here, so every frame keeps
/// the report's own symbol, which is what Apple's translation shows.
@Suite struct IPSTranslationTests {
  static let directory = packageRoot + "/Tests/SymbolicationTests/Fixtures/apple-reports/"

  /// Our translation of `name.ips` and Apple's (`name.translated.txt`), as lines; ours without
  /// imagelog's closing summary.
  static func translations(_ name: String) throws -> (ours: [Substring], apple: [Substring]) {
    let ips = try #require(readFile(directory + name + ".ips"))
    let apple = try #require(readFile(directory + name + ".translated.txt"))
    let report = try ReportParser.parse(ips)
    #expect(report.format == .appleIPS)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let result = Symbolicator.symbolicated(report, options: options)
    let text = result.formatted(.crash)
    let ours = try #require(text.firstRange(of: "\n-- symbolicated by imagelog:").map { text[..<$0.lowerBound] })
    return (ours.split(separator: "\n", omittingEmptySubsequences: false),
            apple.split(separator: "\n", omittingEmptySubsequences: false))
  }

  /// Every line equal, in order; each difference named by its line number and both texts.
  static func expectSameLines(_ ours: [Substring], _ apple: [Substring], sourceLocation: SourceLocation = #_sourceLocation) {
    let trim = { (lines: [Substring]) in Array(lines.reversed().drop { $0.isEmpty }.reversed()) }
    let (a, b) = (trim(ours), trim(apple))
    for index in 0..<max(a.count, b.count) {
      let mine = index < a.count ? String(a[index]) : "<none>"
      let theirs = index < b.count ? String(b[index]) : "<none>"
      #expect(mine == theirs, "line \(index + 1)", sourceLocation: sourceLocation)
    }
  }

  /// A macOS 15 arm64 Rust (Tauri) app that aborted: Application Specific Information, Termination
  /// Reason, `symbol + offset (file.rs:178) [inlined]` frames, 18 threads, ARM registers with far/esr,
  /// Binary Images with bundle versions and Apple's `???` image, External Modification Summary.
  @Test func focusTogetherAbortEqualsApplesTranslation() throws {
    let (ours, apple) = try Self.translations("focustogether-abort")
    Self.expectSameLines(ours, apple)
  }

  /// The "Full Report" as Console shows it and people paste it, with the machine's profile after the
  /// body: the same translation, and the rest named as not read.
  @Test func fullReportWithTheProfileAfterIt() throws {
    let ips = try #require(readFile(Self.directory + "focustogether-abort.ips"))
    let pasted = ips + "\nModel: Mac14,2, BootROM 13822.41.1, proc 8:4:4 processors, 8 GB, SMC \nGraphics: Apple M2, Apple M2, Built-In\n"
    let report = try ReportParser.parse(pasted)
    #expect(report.problems == ["text after the .ips body is not read: 'Model: Mac14,2, BootROM 13822.41.1, proc 8:4:4 processors, 8 GB, SMC '"])
    var options = SymbolicationOptions()
    options.systemDirectories = false
    let text = Symbolicator.symbolicated(report, options: options).formatted(.crash)
    let apple = try #require(readFile(Self.directory + "focustogether-abort.translated.txt"))
    #expect(text.hasPrefix(String(apple.reversed().drop { $0 == "\n" }.reversed())))
  }

  /// The fields Apple's translation shows, one by one (the whole-text test above names the line; these
  /// name the field).
  @Test func fieldsOfFocusTogether() throws {
    let (ours, _) = try Self.translations("focustogether-abort")
    let text = ours.joined(separator: "\n")
    for line in [
      "Process:               FocusTogether [9376]",
      "Version:               0.1.0 (20260202.073425)",
      "Code Type:             ARM-64 (Native)",
      "Parent Process:        Exited process [9119]",
      "Responsible:           Cursor [83951]",
      "OS Version:            macOS 15.7.2 (24G325)",
      "Crashed Thread:        0  main  Dispatch queue: com.apple.main-thread",
      "Exception Type:        EXC_CRASH (SIGABRT)",
      "Exception Codes:       0x0000000000000000, 0x0000000000000000",
      "Termination Reason:    Namespace SIGNAL, Code 6 Abort trap: 6",
      "Terminating Process:   FocusTogether [9376]",
      "Application Specific Information:\nabort() called\n",
      "Thread 0 Crashed:: main Dispatch queue: com.apple.main-thread",
      "23  FocusTogether                 \t       0x104efe7b4 objc::message::send_message::h542a535ce49c0aa3 + 28 (mod.rs:178) [inlined]",
      "24  FocusTogether                 \t       0x104efe7b4 tao::platform_impl::platform::event_loop::EventLoop$LT$T$GT$::run_return::he14fccb64a25b8aa + 980 (event_loop.rs:193)",
      "Thread 13:\n0   libsystem_pthread.dylib       \t       0x1988b6b6c start_wqthread + 0\n",
      "   far: 0x0000000000000000  esr: 0x56000080  Address size fault",
      "               0x0 - 0xffffffffffffffff ??? (*) <00000000-0000-0000-0000-000000000000> ???",
      "       0x19c88a000 -        0x19dd1ad1f com.apple.AppKit (6.9) <83f8017f-d50b-38ee-b055-83b7ba6a72d0> /System/Library/Frameworks/AppKit.framework/Versions/C/AppKit",
    ] {
      #expect(text.contains(line), "\(line)")
    }
  }

  /// A frame imagelog symbolicated shows imagelog's chain in place of the report's: its inlined
  /// functions marked `[inlined]`, the report's own inline entry for that address not repeated.
  @Test func ourAnswersReplaceTheReportsChain() throws {
    let ips = try #require(readFile(Self.directory + "focustogether-abort.ips"))
    let report = try ReportParser.parse(ips)
    var options = SymbolicationOptions()
    options.systemDirectories = false
    var result = Symbolicator.symbolicated(report, options: options)
    let refs = report.frameRefs
    let inline = try #require(refs.first { report[$0].position?.documentThread == 0 && report[$0].number == 23 })
    let real = try #require(refs.first { report[$0].position?.documentThread == 0 && report[$0].number == 24 })
    for ref in [inline, real] {
      result[ref].symbols.status = .symbolicated
      result[ref].symbols.functions = [
        .init(name: "inner\nfake", rawName: nil, offset: nil, file: "/src/a/inner.rs", line: 7, column: 3, isInlined: true),
        .init(name: "outer", rawName: nil, offset: 980, file: "/src/b/outer.rs", line: 193, column: 1, isInlined: false),
      ]
    }
    let lines = result.formatted(.crash).split(separator: "\n").map(String.init)
    #expect(lines.contains("23  FocusTogether                 \t       0x104efe7b4 inner\\nfake (inner.rs:7) [inlined]"))
    #expect(lines.contains("24  FocusTogether                 \t       0x104efe7b4 outer + 980 (outer.rs:193)"))
    #expect(lines.contains { $0.hasPrefix("25  FocusTogether") && $0.contains("EventLoop$LT$T$GT$::run::h1d6984c548acdeb1 + 20 (event_loop.rs:160)") })
    #expect(!lines.contains { $0.contains("send_message") })
  }

  /// The X86 register block as a published macOS 12 translation of an Electron app's crash writes it
  /// (registers, the `  ` line, Logical CPU, the error code with the trap's description, the trap),
  /// from a thread state shaped as that report's JSON.
  @Test func x86ThreadState() throws {
    let values: [(String, UInt64)] = [
      ("rax", 0x804177f04b95003b), ("rbx", 0), ("rcx", 0x8000100), ("rdx", 0x80), ("rdi", 0), ("rsi", 0x7ff7b3177360),
      ("rbp", 0x7ff7b3177330), ("rsp", 0x7ff7b31772f0), ("r8", 0x600003e54128), ("r9", 0), ("r10", 0xffffff00),
      ("r11", 0x600003e54120), ("r12", 0x80), ("r13", 0x200832d1b1), ("r14", 0x7ff7b3177360), ("r15", 0x8000100),
      ("rip", 0x7ff81490e6d9), ("rflags", 0x10246), ("cr2", 0), ("cpu", 0), ("err", 4),
    ]
    var members = values.map { ($0.0, JSONValue.object([("value", .number(String($0.1)))])) }
    members.append(("trap", .object([("value", .number("14")), ("description", .string("(no mapping for user data read)"))])))
    members.append(("flavor", .string("x86_THREAD_STATE")))
    let text = ProcessSnapshot.threadStateText(.object(members), thread: 0)
    #expect(text == """
      Thread 0 crashed with X86 Thread State (64-bit):
        rax: 0x804177f04b95003b  rbx: 0x0000000000000000  rcx: 0x0000000008000100  rdx: 0x0000000000000080
        rdi: 0x0000000000000000  rsi: 0x00007ff7b3177360  rbp: 0x00007ff7b3177330  rsp: 0x00007ff7b31772f0
         r8: 0x0000600003e54128   r9: 0x0000000000000000  r10: 0x00000000ffffff00  r11: 0x0000600003e54120
        r12: 0x0000000000000080  r13: 0x000000200832d1b1  r14: 0x00007ff7b3177360  r15: 0x0000000008000100
        rip: 0x00007ff81490e6d9  rfl: 0x0000000000010246  cr2: 0x0000000000000000
      \u{20}\u{20}
      Logical CPU:     0
      Error Code:      0x00000004 (no mapping for user data read)
      Trap Number:     14

      """)
  }
}
