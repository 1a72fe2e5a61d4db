import Glibc
import ImageLogTestSupport
import Testing

/// `-o FILE` of `symbols`, `minidump` and `triage` when FILE is a stream: written in place as a shell's
/// `>` writes it, never replaced by a regular file (as root, `-o /dev/stdout` or `-o /dev/null` replaced
/// the machine's own node: every later program's `/dev/stdout` was that file).
@Suite struct NamedOutputTests {
  static let imagelog = builtProduct("imagelog")
  static let program = packageRoot + "/Tests/SymbolicationTests/Fixtures/dwarf/gcc-cxx-O2-dwarf5"
  static let core = packageRoot + "/Tests/ImageReadersTests/Fixtures/cores/linkmap-x86_64.core"
  static let report = packageRoot + "/Tests/SymbolicationTests/Fixtures/linux-reports/coredump-systemd-35316.txt"

  /// Each command's `-o`, with what it writes to standard output without `-o` (nil when it has no such
  /// form: a dump is only ever written to a file, so its bytes are checked by their header).
  static let commands: [(name: String, arguments: [String], printed: [String]?)] = [
    ("symbols", ["symbols", program, "-o"], ["symbols", program]),
    ("minidump", ["minidump", core, "-o"], nil),
    ("triage", ["triage", "--no-cache", report, "-o"], ["triage", "--no-cache", report]),
  ]

  static func fileType(_ path: String) -> mode_t? {
    var status = stat()
    return lstat(path, &status) == 0 ? status.st_mode & S_IFMT : nil
  }

  /// A link to the writer's own standard output (a pipe here), as `/dev/stdout` is: the output comes
  /// through the pipe and the link is still a link.
  @Test(arguments: commands.map(\.name))
  func linkToStandardOutputIsWrittenThrough(_ name: String) throws {
    let command = try #require(Self.commands.first { $0.name == name })
    let folder = try makeTemporaryDirectory("imagelog-named-output")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let link = folder + "/stdout"
    #expect(symlink("/proc/self/fd/1", link) == 0)
    let written = try runChild([Self.imagelog] + command.arguments + [link])
    #expect(written.exitCode == 0, "\(written.error)")
    #expect(Self.fileType(link) == S_IFLNK, "the link was replaced")
    if let printed = command.printed {
      #expect(written.output == (try runChild([Self.imagelog] + printed)).output)
    } else {
      // The dump and nothing else: its summary line goes to standard error then.
      #expect(written.output.hasPrefix("MDMP") && !written.output.contains(" threads, "))
      #expect(written.error.hasPrefix("\(link): ") && written.error.contains(" threads, "))
    }
  }

  /// A FIFO with a reader gets the output and stays a FIFO; one without a reader fails at once with a
  /// line naming it (no wait for a reader that never comes).
  @Test(arguments: commands.map(\.name))
  func fifoIsWrittenInPlace(_ name: String) throws {
    let command = try #require(Self.commands.first { $0.name == name })
    let folder = try makeTemporaryDirectory("imagelog-named-output")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let fifo = folder + "/fifo"
    #expect(mkfifo(fifo, 0o600) == 0)
    let unread = try runChild([Self.imagelog] + command.arguments + [fifo], timeoutSeconds: 60)
    #expect(!unread.timedOut && unread.exitCode != 0)
    #expect(unread.error == "imagelog: \(fifo): cannot open: No such device or address\n")
    // The test is the reader, present before imagelog opens the FIFO: opened without waiting for a
    // writer; the outputs are far below a pipe's buffer, so imagelog never waits for this read.
    let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    #expect(reader >= 0)
    defer { close(reader) }
    let read = try runChild([Self.imagelog] + command.arguments + [fifo], timeoutSeconds: 120)
    #expect(read.exitCode == 0, "\(read.error)")
    #expect(Self.fileType(fifo) == S_IFIFO, "the FIFO was replaced")
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while case let count = Glibc.read(reader, &buffer, buffer.count), count > 0 { bytes += buffer.prefix(count) }
    let copy = String(decoding: bytes, as: UTF8.self)
    if let printed = command.printed {
      #expect(copy == (try runChild([Self.imagelog] + printed)).output)
    } else {
      #expect(bytes.starts(with: Array("MDMP".utf8)))
    }
  }
}
