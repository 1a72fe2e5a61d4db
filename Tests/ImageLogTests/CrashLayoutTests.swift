import Glibc
import ImageLog
import ImageReaders
import ImageLogTestSupport
import Snapshot
import SnapshotFormatting
import Testing

/// One layout, two writers (README.md's "Crash reports"): the crash handler's report, written in C at crash time, and
/// `ProcessSnapshot.imagelogReportText()`, the Swift writer of `pid --threads`, cores and minidumps, given the
/// same values (threads, frames and their trust, registers, images, header), write the same bytes.
@Suite(.serialized) struct CrashLayoutTests {
  @Test(.enabled(if: CrashHandlerTests.compiler != nil && CrashThreadsTests.gcc != nil, "needs cc and gcc"),
        arguments: ["qsort", "blocked", "abort"])
  func crashHandlerAndSwiftWriterWriteTheSameText(mode: String) throws {
    let program = try CrashHandlerTests.program.get()
    let directory = CrashTestSupport.makeTemporaryDirectory()
    let reportPath = "\(directory)/report.crash"
    let result = try CrashTestSupport.run(program, [mode, reportPath, "\(directory)/maps"],
                                          environment: ["CRASH_LIBRARY": try CrashThreadsTests.library.get()])
    let text = try #require(readFile(reportPath))
    let report = try ParsedCrashReport(text)

    let images = report.images.map { image in
      Image(path: image.path, loadAddress: image.start, loadBias: 0, textRange: image.start..<(image.end + 1),
            loadRange: image.start..<(image.end + 1), buildID: Self.buildID(image.uuid),
            architecture: image.architecture, isMainExecutable: image.isMainExecutable)
    }
    #if arch(x86_64)
    var registers = Registers(.x86_64)
    #else
    var registers = Registers(.aarch64)
    #endif
    for (name, value) in report.registers { registers[name] = value }
    let threads = report.threads.enumerated().map { number, thread in
      var entry = ProcessSnapshot.Thread(number: number, tid: UInt64(thread.tid), name: thread.name, crashed: thread.crashed,
                                         problem: thread.problem.map { String($0.dropFirst("not unwound: ".count)) },
                                         registers: thread.crashed ? registers : nil)
      entry.frames = thread.frames.enumerated().map { index, frame in
        ProcessSnapshot.Frame(number: index, address: frame.address, isReturnAddress: index > 0,
                              trust: frame.trust == "frame pointer" ? .framePointer : frame.trust == "stack scan" ? .stackScan : nil)
      }
      return entry
    }
    // "signal 11, code 1, address 0x0000000000000000"
    let codes = try #require(report.header["Exception Codes"]).split(separator: " ")
    let exception = ProcessSnapshot.Exception(signal: Int32(codes[1].dropLast()) ?? 0, code: Int32(codes[3].dropLast()) ?? 0,
                                              address: ParsedCrashReport.hex(codes[5]) ?? 0)
    let path: String = try #require(report.header["Path"])
    let osVersion: String = try #require(report.header["OS Version"])
    let date = epochSeconds(try #require(report.header["Date/Time"]))
    var snapshot = ProcessSnapshot(
      format: .imagelog,
      process: ProcessSnapshot.Process(name: "crash-program", pid: result.pid, path: path, osVersion: osVersion, date: date,
                                       threadCount: threads.count),
      exception: exception, threads: threads, images: images.map(ProcessSnapshot.Image.init))
    snapshot.placeFrames()
    let written = snapshot.imagelogReportText()
    #expect(written == text)
    if written != text {
      let ours = text.split(separator: "\n", omittingEmptySubsequences: false)
      let theirs = written.split(separator: "\n", omittingEmptySubsequences: false)
      for (number, (a, b)) in zip(ours, theirs).enumerated() where a != b {
        Issue.record("line \(number + 1): crash_report.c '\(a)', imagelogReportText '\(b)'")
        break
      }
    }
  }

  /// The Binary Images UUID column (the build-id's first 16 bytes) as a build-id that prints the same.
  static func buildID(_ hex: String) -> BuildID? {
    guard hex != String(repeating: "0", count: 32) else { return nil }
    var bytes: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
      bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
      index = next
    }
    return BuildID(bytes)
  }
}
