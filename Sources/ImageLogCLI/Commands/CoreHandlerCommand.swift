#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Symbolication
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources

/// `imagelog core-handler`: the program `/proc/sys/kernel/core_pattern` pipes a dying process's core to.
/// Reads the core once from standard input, writes the symbolicated report (and, when asked, the core
/// compressed) into a folder, and keeps that folder to a number of crashes.
struct CoreHandlerCommand: Command {
  static let name = "core-handler"
  static let abstract = "Turn a core piped from the kernel (core_pattern) into a symbolicated report in a folder."
  static let usage = "imagelog core-handler --output-dir <dir> --pid <pid> [--signal <n>] [--time <seconds>] "
    + "[--uid <uid>] [--dumpable <n>] [--keep-core] [--max-core-size <size>] [--max-crashes <n>] "
    + "[--max-memory <size>] [--upload-url <url>] [--document] [symbolication options]"
  static let helpSections = """
    DESCRIPTION:
      Made to be named in /proc/sys/kernel/core_pattern (Scripts/print-core-pattern prints the line
      for where imagelog is installed; imagelog never changes the setting itself):
        |/usr/local/bin/imagelog core-handler --output-dir /var/crash --pid %P --time %t --uid %u --dumpable %d
      (the kernel splits the line at spaces and keeps 127 bytes of it).
      The core arrives on standard input and is read once, in order, never whole: its header, program
      headers and notes are kept; while the kernel holds the dying process (it waits for the pipe to
      take the rest of the core) its /proc/PID gives the images and the memory its threads are unwound
      in, once /proc/PID/maps is shown to map what the core's NT_FILE lists. Otherwise (the process is
      gone, or the PID is another's) each thread's stack, each image's ELF header page and the vDSO are
      kept from the core as they pass, and the images' code is read from their files.

    OPTIONS:
      --output-dir <dir>      Where the files go (made, mode 0755, when missing). Per crash:
                              PROGRAM.PID.TIME.crash, the symbolicated report (imagelog's layout, with
                              the crash's signature), PROGRAM.PID.TIME.dmp, the minidump, and
                              PROGRAM.PID.TIME.core.zst with --keep-core; TIME is UTC, YYYYMMDDTHHMMSSZ.
                              Each file appears whole or not at all (written unnamed, then linked);
                              a name any entry has (a link, even dangling) moves the crash to the
                              next free name (PROGRAM_2...).
      --pid <pid>             The process, as the kernel numbers it for the handler (%P).
      --signal <n>            The signal (%s): checked against the core's; a difference is noted.
      --time <seconds>        When it crashed, seconds since the epoch (%t); default: now.
      --uid <uid>             The crashed process's real user (%u); default: its AT_UID.
      --dumpable <n>          The process's dumpable flag (%d).
      --keep-core             Also keep the core, zstd-compressed (the system's libzstd.so.1).
      --max-core-size <size>  Keep at most this much of the core, uncompressed (default: 2G, as
                              systemd-coredump's ExternalSizeMax); a longer one is cut and the report
                              says so. Sizes take K, M or G (powers of 1024).
      --max-crashes <n>       Keep the files of at most this many crashes in the folder, removing the
                              oldest (by the files' modification times) after writing, never the
                              crash just written (default: 50). Only the handler's own files go:
                              owned by its user and marked with the user.imagelog.crash attribute
                              when written; no other file is touched, whatever its name.
      --max-memory <size>     The most of the core held in memory at once (default: 128M): header,
                              program headers, notes, the stacks (1M each at most), ELF header pages and
                              the vDSO. The rest of the handler's memory does not grow with the core.
      --upload-url <url>      Once the files are written, start 'imagelog upload --url <url> <dir>' in a
                              process of its own (a session of its own, not waited for: the kernel and
                              the crashed program never wait for the network). See 'imagelog help upload'.
      --document              Also write the crash document, PROGRAM.PID.TIME.json (imagelog
                              symbolicate --format json's, with the signature), before the report.
      --search <path>, --no-lines, --no-system-debug, --no-cache, --demangle <style>, --no-demangle
                              As for 'imagelog symbolicate'.
      -h, --help              Show help information.

    FILES:
      Owned by the user the handler runs as (root, when the kernel starts it), mode 0600, and, as
      systemd-coredump does, readable by the crashed process's user through a POSIX ACL entry when
      that user is not a system user (uid 1000 and above, not nobody), the process was dumpable (1)
      and not set-user-ID or set-group-ID (AT_SECURE 0, real and effective ids equal). The ACL is
      written as the kernel's system.posix_acl_access attribute (its mask shows as mode 0640; the
      group gets nothing); a file system without ACLs leaves mode 0600, and the report says so.

    EXIT STATUS:
      0 when the report was written (what was missing is said in it); 1 when no report could be made
      (not a core, a core cut short before its notes, a folder that cannot be written), with one line
      on standard error (the kernel log, /dev/kmsg, when the kernel started the handler without one).
    """

  var outputDirectory: String
  var pid: Int32
  var signal: Int32?
  var time: Int64?
  var uid: UInt32?
  var dumpable: Int?
  var keepCore = false
  var maxCoreSize = 2 << 30
  var maxCrashes = 50
  var limits = CoreStreamLimits()
  var uploadURL: String?
  var document = false
  var options: SymbolicationOptions

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    options = try parseSymbolicationOptions(&scanner)
    guard let directory = try scanner.option("--output-dir") else { throw scanner.usageError("Missing '--output-dir <dir>'") }
    outputDirectory = directory
    guard let pidText = try scanner.option("--pid") else { throw scanner.usageError("Missing '--pid <pid>'") }
    pid = try parsePID(pidText, scanner)
    func number(_ name: String) throws(UsageError) -> Int? {
      guard let text = try scanner.option(name) else { return nil }
      guard let value = Int(text), value >= 0 else { throw scanner.usageError("The value '\(text)' is invalid for '\(name)'") }
      return value
    }
    func size(_ name: String) throws(UsageError) -> Int? {
      guard let text = try scanner.option(name) else { return nil }
      guard let value = Self.size(text) else {
        throw scanner.usageError("The value '\(text)' is invalid for '\(name) <size>' (a number of bytes, or with K, M or G)")
      }
      return value
    }
    signal = try number("--signal").flatMap { Int32(exactly: $0) }
    time = try number("--time").flatMap { Int64(exactly: $0) }
    uid = try number("--uid").flatMap { UInt32(exactly: $0) }
    dumpable = try number("--dumpable")
    keepCore = scanner.flag("--keep-core")
    if let value = try size("--max-core-size") { maxCoreSize = value }
    if let value = try number("--max-crashes") {
      guard value >= 1 else { throw scanner.usageError("--max-crashes must be at least 1") }
      maxCrashes = value
    }
    if let value = try size("--max-memory") {
      guard value >= 4 << 10 else { throw scanner.usageError("--max-memory must be at least 4K") }
      limits.memoryBytes = value
    }
    uploadURL = try scanner.option("--upload-url")
    document = scanner.flag("--document")
    let rest = try scanner.positionals()
    guard rest.isEmpty else { throw scanner.usageError("Unexpected argument '\(rest[0])'") }
  }

  /// `1234`, `64K`, `128M`, `2G` (powers of 1024); nil when malformed or past `Int`.
  static func size(_ text: String) -> Int? {
    let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    var digits = Substring(text)
    var unit = 1
    if let last = digits.last, let scale = units[Character(last.uppercased())] {
      unit = scale
      digits = digits.dropLast()
    }
    guard let value = Int(digits), value >= 0 else { return nil }
    let (product, overflow) = value.multipliedReportingOverflow(by: unit)
    return overflow ? nil : product
  }

  func run() throws -> ExitStatus {
    Self.openStandardDescriptors()
    let label = "imagelog: core-handler: pid \(pid)"
    let folder: CrashFolder
    do { folder = try CrashFolder(path: outputDirectory) } catch {
      printError("\(label): \(error)")
      return .failure
    }
    var notes: [String] = []
    var copy: CoreCopy?
    if keepCore {
      do { copy = try CoreCopy(folder: folder, limit: maxCoreSize) } catch {
        notes.append("the core is not kept: \(error)")
      }
    }
    let stream = CoreStream(descriptor: 0, pid: pid, limits: limits, copy: copy.map { copy in { copy.take($0) } })
    var (capture, dump): (DumpCapture, ProcessSnapshot)
    do {
      // While the dying process can be read: the threads' stacks the minidump keeps (the snapshot holds
      // the images only the process had, the vDSO and the files deleted since they were loaded, already).
      (capture, dump) = try stream.read { capture in
        var dump = capture.snapshot
        dump.keepStacks(of: capture.core, in: capture.memory)
        return dump
      }
    } catch {
      printError("\(label): \(error)")
      return .failure
    }
    let crashTime = time ?? Int64(Glibc.time(nil))
    capture.snapshot.process.date = crashTime
    dump.process.date = crashTime
    if let signal, signal != (capture.snapshot.exception?.signal ?? 0) {
      notes.append("the kernel gave signal \(signal); the core's notes say \(capture.snapshot.exception.map { String($0.signal) } ?? "none")")
    }
    let access = CrashFolder.Access(readableBy: Self.readableUser(capture.core, uid: uid, dumpable: dumpable))
    var names = CrashFolder.CrashNames(in: folder, program: capture.snapshot.process.name ?? "unknown", pid: pid,
                                       time: crashTime, extensions: CrashDatabase.fileExtensions)
    var written: [String] = []
    if let copy {
      switch copy.finish({ file throws(SystemError) in try folder.commit(file, as: &names, extension: "core.zst", access: access) }) {
      case .success(let (path, problem)):
        written.append(path)
        if let problem { notes.append(problem) }
        notes.append("the core, \(stream.bytesRead) bytes\(copy.cut ? " (cut at --max-core-size \(maxCoreSize))" : ""): \(names.stem).core.zst")
      case .failure(let error):
        notes.append("the core is not kept: \(error)")
      }
    }
    // The problems of the files written before the report are in its last lines; the report's own is said here.
    var inReport = 0
    let files = folder.writeCrash(capture.snapshot, dump: dump, as: &names, settings: CrashFolder.CrashFileSettings(symbolication: options, access: access, document: document),
                                  section: { problems in inReport = problems.count; return handlerSection(capture, notes: notes + problems) })
    for problem in files.problems.dropFirst(inReport) { printError("\(label): \(problem)") }
    if files.reportFailed { return .failure }
    written += files.paths
    folder.removeOldest(keeping: maxCrashes, sparing: names.stem, extensions: CrashDatabase.fileExtensions)
    for path in written { printOutput(path) }
    if let uploadURL { startDetachedImagelog([UploadCommand.name, "--url", uploadURL, outputDirectory]) }
    return .success
  }

  /// The report's last lines: where the memory came from, what was kept, what was missing.
  func handlerSection(_ capture: DumpCapture, notes: [String]) -> String {
    var text = "\n-- imagelog core-handler: memory read from "
    switch capture.memorySource {
    case .process(let pid): text += "the dumping process (/proc/\(pid))\n"
    case .stream: text += "the core itself (and the images' files)\n"
    }
    for line in capture.problems + notes { text += "  note: \(TextEscaping.escaped(line))\n" }
    return text
  }

  /// The user given read access to the files, as systemd-coredump grants it: a regular user (uid
  /// 1000 and above, not nobody) whose process was dumpable and ran without set-user-ID or
  /// set-group-ID (`AT_SECURE` 0, `AT_UID` = `AT_EUID`, `AT_GID` = `AT_EGID`).
  static func readableUser(_ core: ELFCore, uid: UInt32?, dumpable: Int?) -> UInt32? {
    // AT_UID 11, AT_EUID 12, AT_GID 13, AT_EGID 14, AT_SECURE 23.
    guard let realUID = uid ?? core.auxiliaryValue(11).flatMap({ UInt32(exactly: $0) }),
          realUID >= 1000, realUID != 65534, dumpable ?? 1 == 1,
          core.auxiliaryValue(23) == 0,
          core.auxiliaryValue(11) == UInt64(realUID), core.auxiliaryValue(12) == UInt64(realUID),
          let gid = core.auxiliaryValue(13), core.auxiliaryValue(14) == gid else { return nil }
    return realUID
  }

  /// The kernel starts a core handler with only standard input open: a file opened then would take
  /// descriptor 1 or 2, and a diagnostic would be written into it. Standard output becomes /dev/null,
  /// standard error the kernel log.
  static func openStandardDescriptors() {
    for (descriptor, path) in [(Int32(1), "/dev/null"), (2, "/dev/kmsg")] where fcntl(descriptor, F_GETFD) < 0 {
      var opened = open(path, O_WRONLY | O_CLOEXEC)
      if opened < 0 { opened = open("/dev/null", O_WRONLY | O_CLOEXEC) }
      if opened >= 0, opened != descriptor {
        _ = dup2(opened, descriptor)
        close(opened)
      }
    }
  }
}

/// The core kept as it is read: compressed into an unnamed file in the folder, named with the report.
final class CoreCopy {
  private let file: CrashFolder.PendingFile
  private let compressor: ZstdStreamCompressor
  private let limit: Int
  private var taken = 0
  private var failure: String?
  /// True when the core was longer than the limit.
  private(set) var cut = false

  init(folder: CrashFolder, limit: Int) throws {
    file = try folder.create()
    compressor = try ZstdStreamCompressor(writingTo: file.descriptor)
    self.limit = limit
  }

  /// Compresses `bytes` (up to the limit); a failure stops the copy and is kept for `finish`.
  func take(_ bytes: UnsafeRawBufferPointer) {
    guard failure == nil, taken < limit else { if taken >= limit, bytes.count > 0 { cut = true }; return }
    let count = min(bytes.count, limit - taken)
    if count < bytes.count { cut = true }
    do { try compressor.write(UnsafeRawBufferPointer(rebasing: bytes[0..<count])) } catch { failure = error.description }
    taken += count
  }

  /// Ends the compressed stream and names the file by `commit` (the path and a problem to note).
  func finish(_ commit: (CrashFolder.PendingFile) throws(SystemError) -> (path: String, problem: String?))
    -> Result<(String, String?), CoreCopyError> {
    if let failure { return .failure(CoreCopyError(message: failure)) }
    do { try compressor.finish() } catch { return .failure(CoreCopyError(message: error.description)) }
    do {
      let (path, problem) = try commit(file)
      return .success((path, problem))
    } catch {
      return .failure(CoreCopyError(message: error.description))
    }
  }
}

/// Why the core was not kept.
struct CoreCopyError: Error, CustomStringConvertible {
  var message: String
  var description: String { message }
}
