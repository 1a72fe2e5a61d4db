internal import CImageLogProcess
internal import Glibc
import ImageReaders

/// The folder a crash's files go to (`imagelog core-handler --output-dir`): per crash a report, a
/// dump and, when asked, the core, each named `PROGRAM.PID.TIME.EXTENSION` (TIME in UTC, as
/// `20250131T235959Z`, so names sort by time), written whole or not at all, and the oldest crashes
/// removed beyond a count.
///
/// A file is written unnamed (`O_TMPFILE`) and linked under its name once complete, so a reader of
/// the folder never sees half a file (on a file system without `O_TMPFILE`: a hidden `.NAME.tmp-*`
/// renamed). A name already taken by any entry (a file, a folder, a FIFO, a symbolic link even when
/// dangling) is never written over or through: the crash takes the next free name (`freeStem`).
/// Files are owned by the writer (root, for a handler the kernel starts), mode 0600 (they hold a
/// process's memory), and readable by the crashed process's user through a POSIX ACL entry when one
/// is asked for (`Access.readableBy`), as systemd-coredump grants it, written as the kernel's
/// `system.posix_acl_access` attribute (no ACL library needed).
///
/// Each file carries the attribute `user.imagelog.crash` (`marker`), whose value is the name it was
/// written under, set on the unnamed file before it is linked. Only a file that is ours (owned by the
/// effective user) and carries the marker with its own name is ever removed (`removeOldest`): a file
/// another user made is never the writer's, and of the writer's own files only those it made as
/// crash files (a `user.` attribute can be set only by a file's owner or a privileged process, and is
/// kept by rename, not by a plain copy). An attribute rather than a mode pattern (which any other file may
/// happen to have) or an index file (shared state to lock, which another user could plant or remove
/// in a world-writable folder); on a file system without `user.` attributes the files stay unmarked
/// and are never removed, and the writer says so.
package struct CrashFolder: Sendable {
  /// The folder.
  package let path: String

  /// Who may read the files written.
  package struct Access: Sendable, Equatable {
    /// The user given read access by an ACL entry, or `nil` (then only the owner and its group read).
    package var readableBy: UInt32?

    /// The access given.
    package init(readableBy: UInt32? = nil) { self.readableBy = readableBy }
  }

  /// The folder at `path`, made (mode 0755, and its parents) when missing.
  package init(path: String) throws(SystemError) {
    self.path = path
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
      prefix += "/" + component
      if PathBytes.withCString(prefix, { mkdir($0, 0o755) }) != 0, errno != EEXIST { throw .current("cannot make \(prefix)") }
    }
    var info = stat()
    guard PathBytes.withCString(path, { stat($0, &info) }) == 0 else { throw .current("cannot open \(path)") }
    guard info.st_mode & S_IFMT == S_IFDIR else { throw SystemError("\(path) is not a folder", errno: ENOTDIR) }
  }

  /// `PROGRAM.PID.TIME`: `program` with every byte that is not a letter, digit, `-`, `_`, `+` or an
  /// inner `.` made `_` (at most 64 bytes; `unknown` when empty), and `time` (seconds since the epoch)
  /// in UTC.
  package static func stem(program: String, pid: Int32, time: Int64) -> String {
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

  /// The time (seconds since the epoch) a crash's `PROGRAM.PID.YYYYMMDDTHHMMSSZ` stem was named for: the
  /// inverse of `stem`'s `timeText`; `nil` when the stem does not end in that form.
  package static func time(ofStem stem: String) -> Int64? {
    guard let last = stem.split(separator: ".").last else { return nil }
    let digits = Array(last.utf8)
    guard digits.count == 16, digits[8] == UInt8(ascii: "T"), digits[15] == UInt8(ascii: "Z") else { return nil }
    func number(_ range: Range<Int>) -> Int32? { Int32(String(decoding: digits[range], as: UTF8.self)) }
    guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8), let hour = number(9..<11),
          let minute = number(11..<13), let second = number(13..<15) else { return nil }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = month - 1
    parts.tm_mday = day
    parts.tm_hour = hour
    parts.tm_min = minute
    parts.tm_sec = second
    return Int64(timegm(&parts))
  }

  /// True when no entry of the crash `stem` is in the folder: no file, folder, FIFO or symbolic link
  /// (dangling or not) has the name of one of its files (lstat(2): a link is not followed).
  package func isFree(_ stem: String, extensions: [String]) -> Bool {
    extensions.allSatisfy { ext in
      var info = stat()
      return PathBytes.withCString("\(path)/\(stem).\(ext)") { lstat($0, &info) } != 0 && errno == ENOENT
    }
  }

  /// `PROGRAM.PID.TIME` when free (`isFree`) for every one of `extensions`, or with `_2`, `_3`...
  /// after the program when a crash of that name is there (the last tried when 1000 are taken: its
  /// files then fail to be named, and the writer says so).
  package func freeStem(program: String, pid: Int32, time: Int64, extensions: [String]) -> String {
    var stem = Self.stem(program: program, pid: pid, time: time)
    var attempt = 2
    while !isFree(stem, extensions: extensions), attempt < 1000 {
      stem = Self.stem(program: "\(program)_\(attempt)", pid: pid, time: time)
      attempt += 1
    }
    return stem
  }

  /// One crash's file names: `PROGRAM.PID.TIME` (`stem`), the first free one (`freeStem`), moved on
  /// to the next free one when a name is taken before a file is linked under it.
  package struct CrashNames: Sendable {
    package let program: String
    package let pid: Int32
    /// Seconds since the epoch, in UTC.
    package let time: Int64
    package let extensions: [String]
    /// The crash's `PROGRAM.PID.TIME` now.
    package fileprivate(set) var stem: String

    /// The first free names in `folder` for a crash of `program`, `pid` at `time`, with files of `extensions`.
    package init(in folder: CrashFolder, program: String, pid: Int32, time: Int64, extensions: [String]) {
      self.program = program
      self.pid = pid
      self.time = time
      self.extensions = extensions
      stem = folder.freeStem(program: program, pid: pid, time: time, extensions: extensions)
    }
  }

  /// Commits `file` as `STEM.ext` of `names`: when another entry took that name since it was found
  /// free (`EEXIST`), the crash moves on to the next free stem (the files committed after it too)
  /// and the file is committed under it; at most 8 times.
  package func commit(_ file: PendingFile, as names: inout CrashNames, extension ext: String,
                      access: Access) throws(SystemError) -> (path: String, problem: String?) {
    var tries = 0
    while true {
      do {
        return try file.commit(as: "\(names.stem).\(ext)", access: access, time: names.time)
      } catch where error.errno == EEXIST && tries < 8 {
        tries += 1
        names.stem = freeStem(program: names.program, pid: names.pid, time: names.time, extensions: names.extensions)
      }
    }
  }

  /// Writes `bytes` as the crash file `STEM.ext` of `names` (`create`, then `commit(_:as:extension:access:)`).
  package func write(_ bytes: [UInt8], as names: inout CrashNames, extension ext: String,
                     access: Access) throws(SystemError) -> (path: String, problem: String?) {
    let file = try create()
    guard bytes.withUnsafeBytes({ writeAll(to: file.descriptor, $0) }) else { throw .current("cannot write \(names.stem).\(ext)") }
    return try commit(file, as: &names, extension: ext, access: access)
  }

  /// The extended attribute that marks a file this writer made as a crash file; its value is the
  /// name the file was written under.
  static let marker = "user.imagelog.crash"

  /// A file being written in the folder, not yet visible under any name.
  package final class PendingFile {
    /// The descriptor to write to.
    package let descriptor: Int32
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
      if !finished, let temporaryName { _ = PathBytes.withCString("\(folder.path)/\(temporaryName)", unlink) }
      close(descriptor)
    }

    /// Gives the file `access`, its modification time `time` and the folder's `marker`, writes it to
    /// disk and links it as `name` in the folder; returns the path. Fails with `EEXIST` when any entry
    /// has that name (then the file can be committed again under another). An ACL or a marker the file
    /// system refuses leaves the file at mode 0600, or unmarked, and is said in `problem`.
    package func commit(as name: String, access: Access, time: Int64) throws(SystemError) -> (path: String, problem: String?) {
      try commit(as: name, access: access, time: time, replacing: false)
    }

    /// `commit(as:access:time:)`, and with `replacing`, the file takes the place of `name` at once
    /// (rename(2)): a reader sees the old file or the new one, whole (the capture helper's symbolicated
    /// report over its first one).
    package func commit(as name: String, access: Access, time: Int64,
                       replacing: Bool) throws(SystemError) -> (path: String, problem: String?) {
      var problems: [String] = []
      guard fchmod(descriptor, 0o600) == 0 else { throw .current("cannot set the mode of \(name)") }
      if let user = access.readableBy, !CrashFolder.grantRead(descriptor, to: user) {
        problems.append("\(name): no ACL for uid \(user) (\(SystemError.current("fsetxattr system.posix_acl_access").reason)): mode 0600 only")
      }
      if Array(name.utf8).withUnsafeBytes({ il_set_file_attribute(descriptor, CrashFolder.marker, $0.baseAddress, $0.count) }) != 0 {
        problems.append("\(name): not marked as written here (\(SystemError.current("fsetxattr \(CrashFolder.marker)").reason)): "
                        + "never removed by --max-crashes")
      }
      let omit = (1 << 30) - 2  // UTIME_OMIT: the access time stays
      var times = [timespec(tv_sec: 0, tv_nsec: omit), timespec(tv_sec: time_t(time), tv_nsec: 0)]
      _ = futimens(descriptor, &times)  // the order of crashes shown by `ls -t`; not worth failing for
      guard fsync(descriptor) == 0 else { throw .current("cannot write \(name) to disk") }
      let target = "\(folder.path)/\(name)"
      if replacing {
        // An unnamed file cannot be renamed: it is linked under a hidden name first, one no entry has
        // (a name planted there is passed over, as a crash's own name is).
        var hidden = temporaryName.map { "\(folder.path)/\($0)" } ?? ""
        var attempt = 0
        while temporaryName == nil {
          hidden = "\(folder.path)/.\(name).replacing-\(getpid())-\(attempt)"
          if PathBytes.withCString(hidden, { linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, $0, AT_SYMLINK_FOLLOW) }) == 0 { break }
          guard errno == EEXIST, attempt < 64 else { throw .current("cannot name \(hidden)") }
          attempt += 1
        }
        guard PathBytes.withCString(hidden, { from in PathBytes.withCString(target) { rename(from, $0) } }) == 0 else {
          _ = PathBytes.withCString(hidden, unlink)
          throw .current("cannot replace \(target)")
        }
      } else if let temporaryName {
        // rename(2) would replace an existing file: link then unlink keeps an existing one.
        let temporary = "\(folder.path)/\(temporaryName)"
        guard PathBytes.withCString(temporary, { from in PathBytes.withCString(target) { link(from, $0) } }) == 0 else {
          throw .current("cannot name \(target)")
        }
        _ = PathBytes.withCString(temporary, unlink)
      } else {
        guard PathBytes.withCString(target, { linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, $0, AT_SYMLINK_FOLLOW) }) == 0 else {
          throw .current("cannot name \(target)")
        }
      }
      finished = true
      return (target, problems.isEmpty ? nil : problems.joined(separator: "; "))
    }
  }

  /// A new unnamed file in the folder.
  package func create() throws(SystemError) -> PendingFile {
    let temporaryFile: Int32 = 0o20000000 | O_DIRECTORY  // O_TMPFILE (__O_TMPFILE | O_DIRECTORY)
    let descriptor = PathBytes.withCString(path) { open($0, temporaryFile | O_WRONLY | O_CLOEXEC, 0o600) }
    if descriptor >= 0 { return PendingFile(descriptor: descriptor, folder: self, temporaryName: nil) }
    guard errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL else { throw .current("cannot write in \(path)") }
    var template = PathBytes.bytes("\(path)/.imagelog.tmp-XXXXXX").map { CChar(bitPattern: $0) } + [0]
    let fallback = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
      guard let base = buffer.baseAddress else { return -1 }
      return mkstemp(base)
    }
    guard fallback >= 0 else { throw .current("cannot write in \(path)") }
    _ = fcntl(fallback, F_SETFD, FD_CLOEXEC)
    let name = PathBytes.string(template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
    return PendingFile(descriptor: fallback, folder: self, temporaryName: String(name.split(separator: "/").last ?? ""))
  }

  /// Writes `text` as the file `name` (`create`, then `commit`); with `replacing`, in place of the file
  /// of that name.
  package func write(_ text: String, as name: String, access: Access, time: Int64,
                    replacing: Bool = false) throws(SystemError) -> (path: String, problem: String?) {
    try write(Array(text.utf8), as: name, access: access, time: time, replacing: replacing)
  }

  /// Writes `bytes` as the file `name` (`create`, then `commit`); with `replacing`, in place of the file
  /// of that name.
  package func write(_ bytes: [UInt8], as name: String, access: Access, time: Int64,
                    replacing: Bool = false) throws(SystemError) -> (path: String, problem: String?) {
    let file = try create()
    guard bytes.withUnsafeBytes({ writeAll(to: file.descriptor, $0) }) else { throw .current("cannot write \(name)") }
    return try file.commit(as: name, access: access, time: time, replacing: replacing)
  }

  /// The POSIX ACL `user::rw-, user:UID:r--, group::---, mask::r--, other::---` set on `descriptor`
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
    entry(tag: 0x04, permissions: 0, id: undefined)  // ACL_GROUP_OBJ ---
    entry(tag: 0x10, permissions: 4, id: undefined)  // ACL_MASK r--
    entry(tag: 0x20, permissions: 0, id: undefined)  // ACL_OTHER ---
    return bytes.withUnsafeBytes { il_set_file_attribute(descriptor, "system.posix_acl_access", $0.baseAddress, $0.count) } == 0
  }

  /// Removes the files of the oldest crashes so that at most `count` crashes remain, never those of
  /// `spared` (the crash just written). Only the writer's own crash files count: regular files named
  /// `PROGRAM.PID.TIME.EXTENSION` with one of `extensions`, owned by the effective user and carrying
  /// `marker` with their own name; nothing else is touched, whatever its name says. Crashes are
  /// ordered by their files' modification times (the crash's time, set when written; only the owner
  /// can change it), then by name, never by the time in a name. Returns the paths removed.
  @discardableResult
  package func removeOldest(keeping count: Int, sparing spared: String, extensions: [String]) -> [String] {
    guard let directory = PathBytes.withCString(path, opendir) else { return [] }
    var names: [String] = []
    while let entry = readdir(directory) {
      names.append(withUnsafeBytes(of: entry.pointee.d_name) { PathBytes.string($0.prefix { $0 != 0 }) })
    }
    closedir(directory)
    let owner = geteuid()
    var files: [(stem: String, name: String)] = []
    var times: [String: (Int, Int)] = [:]  // stem -> its oldest file's modification time
    for name in names where !name.hasPrefix(".") {
      guard let stem = Self.crashStem(name, extensions: extensions) else { continue }
      let target = "\(path)/\(name)"
      var info = stat()
      guard PathBytes.withCString(target, { lstat($0, &info) }) == 0, info.st_mode & S_IFMT == S_IFREG,
            info.st_uid == owner, Self.isMarked(target, as: name) else { continue }
      files.append((stem, name))
      let time = (info.st_mtim.tv_sec, info.st_mtim.tv_nsec)
      if let earlier = times[stem], earlier <= time { continue }
      times[stem] = time
    }
    let others = times.keys.filter { $0 != spared }.sorted { first, second in
      let (a, b) = (times[first] ?? (0, 0), times[second] ?? (0, 0))
      return (a.0, a.1, first) < (b.0, b.1, second)
    }
    let room = max(count, 0) - (times[spared] == nil ? 0 : 1)
    guard others.count > max(room, 0) else { return [] }
    let removed = Set(others.prefix(others.count - max(room, 0)))
    var paths: [String] = []
    for file in files where removed.contains(file.stem) {
      let target = "\(path)/\(file.name)"
      if PathBytes.withCString(target, unlink) == 0 { paths.append(target) }
    }
    return paths.sorted()
  }

  /// True when `path` itself (not what a link names) carries `marker` with the value `name`.
  static func isMarked(_ path: String, as name: String) -> Bool {
    let expected = Array(name.utf8)
    var value = [UInt8](repeating: 0, count: expected.count + 1)
    let length = value.withUnsafeMutableBytes { buffer in
      PathBytes.withCString(path) { il_get_file_attribute($0, marker, buffer.baseAddress, buffer.count) }
    }
    return length == expected.count && value.prefix(expected.count).elementsEqual(expected)
  }

  /// The `PROGRAM.PID.TIME` of a file named `PROGRAM.PID.TIME.EXTENSION` with one of `extensions`.
  package static func crashStem(_ name: String, extensions: [String]) -> String? {
    guard let ext = extensions.first(where: { name.hasSuffix("." + $0) }) else { return nil }
    let stem = String(name.dropLast(ext.count + 1))
    let parts = stem.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count >= 3, let time = parts.last, time.count == 16, time.hasSuffix("Z"),
          parts[parts.count - 2].allSatisfy(\.isNumber), !parts[parts.count - 2].isEmpty else { return nil }
    return stem
  }
}
