internal import CImageLog
internal import Glibc

/// The folder a crash's files go to (`imagelog core-handler --output-dir`): per crash a report, a
/// dump and, when asked, the core, each named `PROGRAM.PID.TIME.EXTENSION` (TIME in UTC, as
/// `20250131T235959Z`, so names sort by time), written whole or not at all, and the oldest crashes
/// removed beyond a count.
///
/// A file is written unnamed (`O_TMPFILE`) and linked under its name once complete, so a reader of
/// the folder never sees half a file (on a file system without `O_TMPFILE`: a hidden `.NAME.tmp-*`
/// renamed). Files are made as systemd-coredump makes its cores: owned by the writer (root, for a
/// handler the kernel starts), mode 0640, and readable by the crashed process's user through a POSIX
/// ACL entry when one is asked for (`Access.readableBy`), written as the kernel's
/// `system.posix_acl_access` attribute (no ACL library needed).
public struct CrashFolder: Sendable {
  /// The folder.
  public let path: String

  /// Who may read the files written.
  public struct Access: Sendable, Equatable {
    /// The user given read access by an ACL entry, or `nil` (then only the owner and its group read).
    public var readableBy: UInt32?

    /// The access given.
    public init(readableBy: UInt32? = nil) { self.readableBy = readableBy }
  }

  /// The folder at `path`, made (mode 0755, and its parents) when missing.
  public init(path: String) throws(SystemError) {
    self.path = path
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
      prefix += "/" + component
      if mkdir(prefix, 0o755) != 0, errno != EEXIST { throw .current("cannot make \(prefix)") }
    }
    var info = stat()
    guard stat(path, &info) == 0 else { throw .current("cannot open \(path)") }
    guard info.st_mode & S_IFMT == S_IFDIR else { throw SystemError("\(path) is not a folder", errno: ENOTDIR) }
  }

  /// `PROGRAM.PID.TIME`: `program` with every byte that is not a letter, digit, `-`, `_`, `+` or an
  /// inner `.` made `_` (at most 64 bytes; `unknown` when empty), and `time` (seconds since the epoch)
  /// in UTC.
  public static func stem(program: String, pid: Int32, time: Int64) -> String {
    var name = ""
    for byte in program.utf8.prefix(64) {
      let allowed = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
        || byte == 0x2D || byte == 0x5F || byte == 0x2B || (byte == 0x2E && !name.isEmpty)
      name.append(allowed ? Character(UnicodeScalar(byte)) : "_")
    }
    return "\(name.isEmpty ? "unknown" : name).\(pid).\(timeText(time))"
  }

  /// `YYYYMMDDTHHMMSSZ` for `time` in UTC.
  static func timeText(_ time: Int64) -> String {
    var seconds = time_t(time)
    var parts = tm()
    guard gmtime_r(&seconds, &parts) != nil else { return "00000000T000000Z" }
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
    return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
      + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
  }

  /// True when no file of the crash `stem` is in the folder.
  public func isFree(_ stem: String, extensions: [String]) -> Bool {
    extensions.allSatisfy { access("\(path)/\(stem).\($0)", F_OK) != 0 }
  }

  /// A file being written in the folder, not yet visible under any name.
  public final class PendingFile {
    /// The descriptor to write to.
    public let descriptor: Int32
    private let folder: CrashFolder
    /// The hidden name, when the file system has no `O_TMPFILE`.
    private let temporaryName: String?
    private var finished = false

    fileprivate init(descriptor: Int32, folder: CrashFolder, temporaryName: String?) {
      self.descriptor = descriptor
      self.folder = folder
      self.temporaryName = temporaryName
    }

    deinit {
      if !finished, let temporaryName { unlink("\(folder.path)/\(temporaryName)") }
      close(descriptor)
    }

    /// Gives the file `access`, its modification time `time`, writes it to disk and links it as `name`
    /// in the folder; returns the path. Fails when `name` exists. An ACL the file system refuses
    /// leaves the file at mode 0640 and is said in `aclProblem`.
    public func commit(as name: String, access: Access, time: Int64) throws(SystemError) -> (path: String, aclProblem: String?) {
      try commit(as: name, access: access, time: time, replacing: false)
    }

    /// `commit(as:access:time:)`, and with `replacing`, the file takes the place of `name` at once
    /// (rename(2)): a reader sees the old file or the new one, whole (the capture helper's symbolicated
    /// report over its first one).
    public func commit(as name: String, access: Access, time: Int64,
                       replacing: Bool) throws(SystemError) -> (path: String, aclProblem: String?) {
      var aclProblem: String?
      guard fchmod(descriptor, 0o640) == 0 else { throw .current("cannot set the mode of \(name)") }
      if let user = access.readableBy, !CrashFolder.grantRead(descriptor, to: user) {
        aclProblem = "\(name): no ACL for uid \(user) (\(SystemError.current("fsetxattr system.posix_acl_access").reason)): mode 0640 only"
      }
      let omit = (1 << 30) - 2  // UTIME_OMIT: the access time stays
      var times = [timespec(tv_sec: 0, tv_nsec: omit), timespec(tv_sec: time_t(time), tv_nsec: 0)]
      _ = futimens(descriptor, &times)  // the order of crashes shown by `ls -t`; not worth failing for
      guard fsync(descriptor) == 0 else { throw .current("cannot write \(name) to disk") }
      let target = "\(folder.path)/\(name)"
      if replacing {
        // An unnamed file cannot be renamed: it is linked under a hidden name first.
        let hidden = temporaryName.map { "\(folder.path)/\($0)" } ?? "\(folder.path)/.\(name).replacing-\(getpid())"
        if temporaryName == nil {
          guard linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, hidden, AT_SYMLINK_FOLLOW) == 0 else {
            throw .current("cannot name \(hidden)")
          }
        }
        guard rename(hidden, target) == 0 else {
          unlink(hidden)
          throw .current("cannot replace \(target)")
        }
      } else if let temporaryName {
        // rename(2) would replace an existing file: link then unlink keeps an existing one.
        guard link("\(folder.path)/\(temporaryName)", target) == 0 else { throw .current("cannot name \(target)") }
        unlink("\(folder.path)/\(temporaryName)")
      } else {
        guard linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, target, AT_SYMLINK_FOLLOW) == 0 else {
          throw .current("cannot name \(target)")
        }
      }
      finished = true
      return (target, aclProblem)
    }
  }

  /// A new unnamed file in the folder.
  public func create() throws(SystemError) -> PendingFile {
    let temporaryFile: Int32 = 0o20000000 | O_DIRECTORY  // O_TMPFILE (__O_TMPFILE | O_DIRECTORY)
    let descriptor = open(path, temporaryFile | O_WRONLY | O_CLOEXEC, 0o600)
    if descriptor >= 0 { return PendingFile(descriptor: descriptor, folder: self, temporaryName: nil) }
    guard errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL else { throw .current("cannot write in \(path)") }
    var template = Array("\(path)/.imagelog.tmp-XXXXXX".utf8CString)
    let fallback = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
      guard let base = buffer.baseAddress else { return -1 }
      return mkstemp(base)
    }
    guard fallback >= 0 else { throw .current("cannot write in \(path)") }
    _ = fcntl(fallback, F_SETFD, FD_CLOEXEC)
    let name = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return PendingFile(descriptor: fallback, folder: self, temporaryName: String(name.split(separator: "/").last ?? ""))
  }

  /// Writes `text` as the file `name` (`create`, then `commit`); with `replacing`, in place of the file
  /// of that name.
  public func write(_ text: String, as name: String, access: Access, time: Int64,
                    replacing: Bool = false) throws(SystemError) -> (path: String, aclProblem: String?) {
    try write(Array(text.utf8), as: name, access: access, time: time, replacing: replacing)
  }

  /// Writes `bytes` as the file `name` (`create`, then `commit`); with `replacing`, in place of the file
  /// of that name.
  public func write(_ bytes: [UInt8], as name: String, access: Access, time: Int64,
                    replacing: Bool = false) throws(SystemError) -> (path: String, aclProblem: String?) {
    let file = try create()
    guard bytes.withUnsafeBytes({ writeAll(to: file.descriptor, $0) }) else { throw .current("cannot write \(name)") }
    return try file.commit(as: name, access: access, time: time, replacing: replacing)
  }

  /// The POSIX ACL `user::rw-, user:UID:r--, group::r--, mask::r--, other::---` set on `descriptor`
  /// in the kernel's `system.posix_acl_access` form (version 2, then tag, permissions and id per
  /// entry, little-endian, in tag order). False when the file system refuses it.
  static func grantRead(_ descriptor: Int32, to user: UInt32) -> Bool {
    var bytes: [UInt8] = []
    func append32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
    func entry(tag: UInt16, permissions: UInt16, id: UInt32) {
      withUnsafeBytes(of: tag.littleEndian) { bytes += $0 }
      withUnsafeBytes(of: permissions.littleEndian) { bytes += $0 }
      append32(id)
    }
    let undefined = UInt32.max  // ACL_UNDEFINED_ID
    append32(2)  // POSIX_ACL_XATTR_VERSION
    entry(tag: 0x01, permissions: 6, id: undefined)  // ACL_USER_OBJ rw-
    entry(tag: 0x02, permissions: 4, id: user)       // ACL_USER r--
    entry(tag: 0x04, permissions: 4, id: undefined)  // ACL_GROUP_OBJ r--
    entry(tag: 0x10, permissions: 4, id: undefined)  // ACL_MASK r--
    entry(tag: 0x20, permissions: 0, id: undefined)  // ACL_OTHER ---
    return bytes.withUnsafeBytes { il_set_file_attribute(descriptor, "system.posix_acl_access", $0.baseAddress, $0.count) } == 0
  }

  /// Removes the files of the oldest crashes (by the time in their names, then their names) so that
  /// at most `count` crashes remain; files of other names are not touched. Returns the paths removed.
  @discardableResult
  public func removeOldest(keeping count: Int, extensions: [String]) -> [String] {
    guard let directory = opendir(path) else { return [] }
    var files: [(stem: String, name: String)] = []
    while let entry = readdir(directory) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
      guard !name.hasPrefix("."), let stem = Self.crashStem(name, extensions: extensions) else { continue }
      files.append((stem, name))
    }
    closedir(directory)
    // PROGRAM.PID.TIME: ordered by TIME (which sorts as text), then by the whole stem.
    func key(_ stem: String) -> (String, String) { (String(stem.split(separator: ".").last ?? ""), stem) }
    let stems = Set(files.map(\.stem)).sorted { key($0) < key($1) }
    guard stems.count > count else { return [] }
    let removed = Set(stems.prefix(stems.count - max(count, 0)))
    var paths: [String] = []
    for file in files where removed.contains(file.stem) {
      let target = "\(path)/\(file.name)"
      if unlink(target) == 0 { paths.append(target) }
    }
    return paths.sorted()
  }

  /// The `PROGRAM.PID.TIME` of a file named `PROGRAM.PID.TIME.EXTENSION` with one of `extensions`.
  static func crashStem(_ name: String, extensions: [String]) -> String? {
    guard let ext = extensions.first(where: { name.hasSuffix("." + $0) }) else { return nil }
    let stem = String(name.dropLast(ext.count + 1))
    let parts = stem.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count >= 3, let time = parts.last, time.count == 16, time.hasSuffix("Z"),
          parts[parts.count - 2].allSatisfy(\.isNumber), !parts[parts.count - 2].isEmpty else { return nil }
    return stem
  }
}
