import Glibc
import ImageLog
import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
import Symbolication
import ImageLogTestSupport
import ImageReaders
import Testing

// Two functions of this test binary whose names the symbolicated report must show.
@_cdecl("il_report_writer_probe_one") @inline(never) public func reportWriterProbeOne() -> Int32 { 41 }
@_cdecl("il_report_writer_probe_two") @inline(never) public func reportWriterProbeTwo() -> Int32 { 42 }

/// `ProcessSnapshot.imagelogReportText()`, the Swift writer of imagelog's report layout (`pid --threads`,
/// cores): its lines against C's printf and gmtime, and read back by the parser `imagelog symbolicate` uses.
@Suite struct ReportWriterTests {
  static let probeOne = UInt64(UInt(bitPattern: unsafeBitCast(
    reportWriterProbeOne as @convention(c) () -> Int32, to: UnsafeRawPointer.self)))
  static let probeTwo = UInt64(UInt(bitPattern: unsafeBitCast(
    reportWriterProbeTwo as @convention(c) () -> Int32, to: UnsafeRawPointer.self)))

  /// This process's main executable and libc: small, and files that stay where they are.
  static func images() throws -> [Image] {
    let snapshot = LoadedImages.snapshot()
    let main = try #require(snapshot.first { $0.textRange.contains(probeOne) }, "no image holds the probe")
    let libc = try #require(snapshot.first { $0.name.hasPrefix("libc.so") }, "libc is not loaded")
    return [main, libc]
  }

  /// A report with every part the layout has: a crashed thread with registers, a thread with a state,
  /// frames found by frame pointer and by scanning, a frame in no image, and a thread not unwound.
  /// The registers are the crashed thread's; the architecture and the frames' images are a capture's
  /// (`ProcessSnapshot.capture`): the machine of `OS Version:`, and each frame in the image whose range holds it.
  static func sample(images: [Image], registers: Registers) -> ProcessSnapshot {
    let libcAddress = images[1].textRange.lowerBound + 0x1234
    let osVersion = "Linux 6.1.0-27-amd64 x86_64"
    var snapshot = ProcessSnapshot(
      format: .imagelog,
      process: .init(name: "report-writer", pid: 4321, path: images[0].path, osVersion: osVersion,
                     architecture: ProcessSnapshot.machine(ofOSVersion: osVersion), date: 1_795_000_000),
      exception: .init(signal: SIGSEGV, code: 1, address: 0x10),
      threads: [
        .init(number: 0, tid: 4321, name: "report-writer", frames: frames([(libcAddress, nil), (probeTwo + 1, nil)])),
        .init(number: 1, tid: 4322, name: "worker-1", state: "S", frames: frames([(libcAddress + 8, nil), (probeOne + 1, .framePointer)]) + [
          .init(number: 2, UnwoundFrame(pc: probeTwo + 1, trust: .stackScan, pcIsExact: false)),
          .init(number: 3, UnwoundFrame(pc: 0x10, trust: .callFrameInfo, pcIsExact: false)),
        ]),
        .init(number: 2, tid: 4325, name: "worker-2", crashed: true, registers: registers,
              frames: frames([(probeOne, nil), (probeTwo + 1, nil)])),
        .init(number: 3, tid: 4326, name: "blocked", problem: "the thread did not answer within 100 ms"),
      ],
      images: images.map(ProcessSnapshot.Image.init))
    snapshot.placeFrames()
    return snapshot
  }

  /// A backtrace of these addresses and trusts, innermost first: every frame after the first a return address.
  static func frames(_ list: [(Address, FrameTrust?)]) -> [ProcessSnapshot.Frame] {
    list.enumerated().map { index, frame in
      ProcessSnapshot.Frame(number: index, address: frame.0, isReturnAddress: index > 0, trust: frame.1)
    }
  }

  static let x86Registers = registers(.x86_64) { name in UInt64(name.utf8.reduce(0) { $0 &* 31 &+ UInt64($1) }) }
  static let armRegisters = registers(.aarch64) { name in UInt64(name.utf8.reduce(7) { $0 &* 131 &+ UInt64($1) }) }

  /// Every register Apple's rows list that a Linux capture fills (aarch64's `far` and `esr` none does),
  /// `value` of its name there cut to the digits the rows give it.
  static func registers(_ architecture: Registers.Architecture, _ value: (String) -> UInt64) -> Registers {
    var registers = Registers(architecture)
    for register in registers.table {
      guard let name = register.appleName, name != "far", name != "esr" else { continue }
      registers[name] = register.digits < 16 ? value(name) & 0xFFFF_FFFF : value(name)
    }
    return registers
  }

  /// The writer's report read back: the same threads, frames (with their trust), registers and images.
  @Test(arguments: [x86Registers, armRegisters])
  func writtenReportParsesBackToTheSameThreads(registers: Registers) throws {
    let images = try Self.images()
    let written = Self.sample(images: images, registers: registers)
    let report = try ReportParser.parse(written.imagelogReportText())
    #expect(report.format == .imagelog)
    #expect(report.problems.isEmpty)
    #expect(report.process.threadCount == written.threads.count)
    #expect(report.threads.map(\.number) == Array(written.threads.indices))
    #expect(report.threads.map(\.tid) == written.threads.map(\.tid))
    #expect(report.threads.map(\.name) == written.threads.map(\.name))
    #expect(report.threads.map(\.state) == written.threads.map(\.state))
    #expect(report.threads.map(\.crashed) == written.threads.map(\.crashed))
    #expect(report.threads.map(\.problem) == written.threads.map(\.problem))
    #expect(report.threads.map(\.registers) == written.threads.map { $0.crashed ? registers : nil })
    #expect(report.crashedThreadNumber == 2)

    let expected = written.threads.enumerated().flatMap { thread, entry in
      entry.frames.enumerated().map { (thread, $0, $1) }
    }
    #expect(report.frames.count == expected.count)
    for (frame, (thread, index, written)) in zip(report.frames, expected) {
      #expect(frame.thread == thread && frame.index == index && frame.address == written.address)
      // Only the marks the layout has survive: "cfi" (and "context") are written without one.
      #expect(frame.trust == (written.trust == .callFrameInfo ? nil : written.trust))
      let holder = images.first { $0.textRange.contains(written.address) }
      #expect(frame.imageIndex.map { report.images[$0].loadAddress } == holder?.loadAddress)
    }
    #expect(report.images.map(\.loadAddress) == images.map(\.loadAddress))
    #expect(report.images.map(\.path) == images.map(\.path))
    #expect(report.images.map(\.identity?.bytes) == images.map { $0.buildID.map { Array($0.bytes.prefix(16)) } })
  }

  /// Images whose Binary Images lines do not read back as their own words: a name with spaces and
  /// one ending in a parenthesis, a path with a space and one with a `<`, a name and path that need
  /// escaping, an architecture the parser does not know, no build-id, the vDSO's bracketed name, and
  /// one with neither path nor build-id.
  static func oddImages(after images: [Image]) -> [Image] {
    let start = (images.map(\.loadRange.upperBound).max() ?? 0x7000_0000) + 0x10_0000
    let odd: [(path: String, name: String?, architecture: String, buildID: BuildID?)] = [
      ("/opt/My App/lib two.so", nil, "x86_64", BuildID(Array(1...20))),
      ("/opt/lib/libv(2).so", nil, "arm64", BuildID(Array(21...40))),
      ("/opt/naïve\tlib\\x.so", nil, "x86_64", BuildID(Array(41...60))),
      ("/opt/a<b>.so", nil, "x86_64", nil),
      ("/opt/lib/libriscv.so", nil, "riscv64", BuildID(Array(61...80))),
      ("[vdso]", "[vdso]", "x86_64", BuildID(Array(81...100))),
      ("/opt/lib/+plus.so", nil, "x86_64", BuildID([0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])),
      ("", "anonymous", "x86_64", nil),  // no path and no identity: frames are placed by the name on their line
    ]
    return odd.enumerated().map { index, image in
      let load = start + UInt64(index) * 0x10_0000
      return Image(path: image.path, name: image.name, loadAddress: load, loadBias: load,
                   textRange: load..<load + 0x8000, loadRange: load..<load + 0x10000, buildID: image.buildID,
                   architecture: image.architecture, isMainExecutable: false)
    }
  }

  /// The snapshot `pid --threads` symbolicates is what `ReportParser.parse(imagelogReportText())` reads: the
  /// same threads, frames (numbers, addresses, images, trust) and images. For the sample (a crash with
  /// registers), a live process's report (states, `Stopped:`), and a report whose names need escaping,
  /// are not ASCII or have spaces inside, with frames in images whose lines read back lossily.
  @Test(arguments: [x86Registers, armRegisters])
  func crashReportIsTheTextReadBack(registers: Registers) throws {
    let images = try Self.images()
    let crash = Self.sample(images: images, registers: registers)
    var live = crash
    live.exception = nil
    for index in live.threads.indices { live.threads[index].crashed = false }
    live.process.stoppedNanoseconds = 412_345
    var odd = live
    let oddImages = Array(Self.oddImages(after: images).reversed())  // listed out of text order, as a process may
    odd.images += oddImages.map(ProcessSnapshot.Image.init)
    odd.process.name = "naïve proc\u{7}"
    odd.process.path = "/opt/My App/naïve"
    odd.threads[0].name = "日本語 thread"
    odd.threads[1].name = "tab\there  two  spaces\\"
    odd.threads[2].name = "é\u{301}combining"
    odd.threads.append(.init(number: 4, tid: 4327, name: "odd-images", state: "D",
                             frames: Self.frames(oddImages.enumerated().map { index, image in
                               (image.textRange.lowerBound + UInt64(index) * 16, index % 2 == 0 ? .stackScan : .framePointer)
                             } + [(0x10, .callFrameInfo)])))
    odd.placeFrames()
    /// A frame's parts the layout writes, with its thread's number.
    func written(_ frames: [ListedFrame]) -> [String] {
      frames.map { "\($0.thread) \($0.index) \($0.address) \($0.isReturnAddress) \($0.imageIndex.map(String.init) ?? "-") \($0.markedTrust.map { "\($0)" } ?? "-")" }
    }
    /// An image as a report gives it (a capture's keeps the loader's image besides).
    func reported(_ image: ProcessSnapshot.Image) -> ProcessSnapshot.Image {
      var copy = image
      copy.loaded = nil
      return copy
    }
    for (kind, snapshot) in [("crash", crash), ("live", live), ("odd names", odd)] {
      let parsed = try ReportParser.parse(snapshot.imagelogReportText())
      #expect(snapshot.format == parsed.format, "\(kind)")
      // Registers are written for the crashed thread alone.
      #expect(snapshot.threads.map { thread in
        var heading = thread.heading
        if !thread.crashed { heading.registers = nil }
        return heading
      } == parsed.threads.map(\.heading), "\(kind)")
      #expect(written(snapshot.frames) == written(parsed.frames), "\(kind)")
      // What symbolication asks the locator for is what the report holds; the odd images' lines read back
      // lossily in their words (a name with spaces, escapes, an architecture the parser does not know, a
      // leading `+`), and a capture's snapshot keeps the loader's own words: their ranges and identities
      // read back.
      let plain = kind == "odd names" ? 2 : snapshot.images.count
      #expect(Array(snapshot.images.prefix(plain).map(reported)) == Array(parsed.images.prefix(plain)), "\(kind)")
      #expect(snapshot.images.map { "\($0.loadAddress) \($0.endAddress ?? 0) \($0.identity?.bytes ?? [])" }
                == parsed.images.map { "\($0.loadAddress) \($0.endAddress ?? 0) \($0.identity?.bytes ?? [])" }, "\(kind)")
      #expect(snapshot.process.architecture == parsed.process.architecture, "\(kind)")
      #expect(snapshot.threads.count == parsed.process.threadCount, "\(kind)")
      #expect(snapshot.problems == parsed.problems, "\(kind)")
      #expect(parsed.frameCount == snapshot.threads.map(\.frames.count).reduce(0, +), "\(kind)")
    }
  }

  /// Frame lines as C's printf writes `%-4d%-30s0x%016llx 0x%llx + %llu` (the crash handler's `w_frame`
  /// for names under 30 bytes), the trust mark after them; header lines as crash_report.c's.
  @Test func linesAreTheCrashHandlersLayout() throws {
    let images = try Self.images()
    let written = Self.sample(images: images, registers: Self.x86Registers)
    let lines = written.imagelogReportText().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    func printf(_ format: String, _ arguments: [any CVarArg]) -> String {
      var buffer = [CChar](repeating: 0, count: 512)
      _ = withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) }
      return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    func frameLine(_ index: Int, _ frame: ProcessSnapshot.Frame) -> String {
      let image = images.first { $0.textRange.contains(frame.address) }
      let base = image?.loadAddress ?? frame.address
      let mark = frame.trust == .framePointer ? "  (frame pointer)" : frame.trust == .stackScan ? "  (stack scan)" : ""
      return (image?.name ?? "???").withCString { name in
        printf("%-4d%-30s0x%016llx 0x%llx + %llu", [Int32(index), name, frame.address, base, frame.address - base])
      } + mark
    }
    var expected = [
      "Process:         report-writer [4321]", "Path:            \(images[0].path)",
      "Date/Time:       \(try Self.gmtimeText(written.process.date ?? 0))", "OS Version:      Linux 6.1.0-27-amd64 x86_64",
      "Exception Type:  SIGSEGV (SEGV_MAPERR)", "Exception Codes: signal 11, code 1, address 0x0000000000000010",
      "Crashed Thread:  2  tid 4325", "Threads:         4",
    ]
    let headings = [["Thread 0 name:  report-writer", "Thread 0:  tid 4321"],
                    ["Thread 1 name:  worker-1", "Thread 1:  tid 4322  state S"],
                    ["Thread 2 name:  worker-2", "Thread 2 Crashed:  tid 4325"],
                    ["Thread 3 name:  blocked", "Thread 3:  tid 4326"]]
    for (thread, heading) in zip(written.threads, headings) {
      expected += [""] + heading + thread.frames.enumerated().map { frameLine($0, $1) }
    }
    expected.append("(not unwound: the thread did not answer within 100 ms)")
    expected += ["", "Thread 2 crashed with X86 Thread State (64-bit):"]
    for row in Self.x86Registers.threadStateRows {
      expected.append("  " + row.map { register in
        register.name.withCString { printf("%3s: 0x%016llx", [$0, register.value]) }
      }.joined(separator: "  "))
    }
    expected += ["", "Binary Images:"] + images.map { ImageFormatter(style: .crash).format($0) } + [""]
    #expect(lines == expected)
  }

  /// ARM's register rows: names right-aligned in 4, one space between cells, cpsr with 8 digits.
  @Test func armRegisterLinesMatchPrintf() {
    let lines = Self.armRegisters.threadStateText().split(separator: "\n").map(String.init)
    #expect(lines.count == 9)
    #expect(Self.armRegisters.threadStateRows.map { $0.map(\.name) }.last == ["sp", "pc", "cpsr"])
    for (line, row) in zip(lines, Self.armRegisters.threadStateRows) {
      let cells = row.map { register in
        var buffer = [CChar](repeating: 0, count: 64)
        let format = register.digits == 8 ? "%4s: 0x%08llx" : "%4s: 0x%016llx"
        _ = register.name.withCString { name in
          withVaList([name, register.value]) { vsnprintf(&buffer, buffer.count, format, $0) }
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      }
      #expect(line == "  " + cells.joined(separator: " "))
    }
  }

  /// `pid --threads`: no exception, no crashed thread, no registers even when given, `Stopped:` in ms.
  @Test func liveProcessReportHasNoCrash() throws {
    var written = Self.sample(images: try Self.images(), registers: Self.x86Registers)
    written.exception = nil
    for index in written.threads.indices { written.threads[index].crashed = false }
    written.process.stoppedNanoseconds = 412_345
    let text = written.imagelogReportText()
    #expect(!text.contains("Exception") && !text.contains("Crashed") && !text.contains("Thread State"))
    #expect(text.contains("\nThreads:         4\nStopped:         0.412 ms\n\nThread 0 name:"))
    let report = try ReportParser.parse(text)
    #expect(report.crashedThreadNumber == nil && report.problems.isEmpty)
    #expect(report.threads.allSatisfy { $0.registers == nil })
  }

  /// The date as glibc's `gmtime_r` and `strftime` write it, for dates around leap days and the epoch.
  @Test(arguments: [0, -1, 951_782_400, 951_868_799, 1_709_164_800, 4_107_542_399, -86_400 * 366] as [Int64])
  func datesMatchGmtime(seconds: Int64) throws {
    let text = try Self.gmtimeText(seconds)
    let written = ProcessSnapshot(format: .imagelog, process: .init(name: "p", pid: 1, path: "/p", osVersion: "Linux", date: seconds))
      .imagelogReportText()
    #expect(written.contains("\nDate/Time:       \(text)\n"))
  }

  static func gmtimeText(_ seconds: Int64) throws -> String {
    var time = time_t(seconds)
    var parts = tm()
    try #require(gmtime_r(&time, &parts) != nil)
    var buffer = [CChar](repeating: 0, count: 64)
    let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S +0000", &parts)
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// The written report through the built `imagelog symbolicate`: the probes are named, frames keep
  /// their trust marks, and the headings, the not-unwound line and the registers come out unchanged.
  @Test(.enabled(if: access(builtProduct("imagelog"), X_OK) == 0, "needs the built imagelog (swift build)"))
  func symbolicatedReportKeepsTheLayout() throws {
    let images = try Self.images()
    let written = Self.sample(images: images, registers: Self.x86Registers)
    let directory = try makeTemporaryDirectory()
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let path = directory + "/threads.crash"
    let text = written.imagelogReportText()
    try writeFile(path, text)
    let run = try runChild([builtProduct("imagelog"), "symbolicate", "--no-lines", path])
    #expect(run.status == 0, "\(run.error)")
    let original = text.split(separator: "\n", omittingEmptySubsequences: false)
    let output = run.output.split(separator: "\n", omittingEmptySubsequences: false)
    // Every line but the frames in an image comes out as it went in, in order.
    let kept = original.filter { !($0.first?.isNumber == true && !$0.contains(" ???  ")) }
    var position = 0
    for line in output where position < kept.count && line == kept[position] { position += 1 }
    #expect(position == kept.count, "first line missing: \(position < kept.count ? kept[position] : "")")
    // The probes' frames are named (a return address's offset counts from the function's start, as
    // Apple's do), each keeps its mark after the symbol.
    // (The Signature: header field names the crashing frame too: it is no frame line.)
    #expect(output.contains { $0.hasPrefix("Signature:       il_report_writer_probe") })
    let probeLines = output.filter { $0.contains("il_report_writer_probe") && !$0.hasPrefix("Signature:") }
    #expect(probeLines.count == 5)
    #expect(probeLines.contains { $0.hasPrefix("1   ") && $0.hasSuffix(" il_report_writer_probe_one + 1  (frame pointer)") })
    #expect(probeLines.contains { $0.hasPrefix("2   ") && $0.hasSuffix(" il_report_writer_probe_two + 1  (stack scan)") })
    #expect(probeLines.contains { $0.hasPrefix("0   ") && $0.hasSuffix(" il_report_writer_probe_one + 0") })

    // JSON: one object per thread with what the report gave, frames naming theirs and their trust.
    let json = try runChild([builtProduct("imagelog"), "symbolicate", "--format", "json", "--no-lines", path])
    #expect(json.status == 0, "\(json.error)")
    let document = try JSONValue.parse(json.output[...])
    let threads = try #require(document["threads"]?.array)
    #expect(threads.map { $0["index"]?.integer } == [0, 1, 2, 3])
    #expect(threads.map { $0["tid"]?.integer } == written.threads.map { $0.tid.map { Int($0) } })
    #expect(threads.map { $0["name"]?.string } == written.threads.map(\.name))
    #expect(threads.map { $0["crashed"] } == written.threads.map { .bool($0.crashed) })
    #expect(threads.map { $0["state"]?.string } == written.threads.map(\.state))
    #expect(threads[3]["problem"]?.string == "the thread did not answer within 100 ms")
    #expect(threads[2]["registers"]?["rip"]?.string == "0x" + hexDigits(Self.x86Registers["rip"] ?? 0, width: 16))
    let frames = try #require(document["frames"]?.array)
    #expect(frames.map { $0["thread"]?.integer } == [0, 0, 1, 1, 1, 1, 2, 2])
    #expect(frames.map { $0["trust"]?.string } == [nil, nil, nil, "frame-pointer", "scan", nil, nil, nil])
    #expect(frames[6]["symbol"]?.string == "il_report_writer_probe_one")
  }
}
