internal import Glibc

extension ProcessImages {
  /// What keeps this process from reading process `pid`, in words a person can act on: the kernel's
  /// `ptrace_may_access` checks, compared from `/proc/self/status` and `/proc/PID/status` (readable
  /// when the maps are not). Without `CAP_SYS_PTRACE` reading needs the same user (real, effective and
  /// saved uid), a dumpable target, and every capability the target holds in our effective set (the
  /// commoncap rule that stops root without `CAP_SYS_ADMIN` from reading a container's PID 1). Memory
  /// (`process_vm_readv`) also answers to Yama's `ptrace_scope`.
  static func accessHint(for pid: Int32, readingMemory: Bool = false) -> String {
    let ptraceBit: UInt64 = 1 << 19  // CAP_SYS_PTRACE
    guard let ours = AccessStatus(path: "/proc/self/status") else { return "cannot read /proc/self/status" }
    let hasPtrace = ours.effectiveCapabilities & ptraceBit != 0
    guard let target = AccessStatus(path: "/proc/\(pid)/status") else {
      return hasPtrace ? "refused although imagelog has CAP_SYS_PTRACE" : "run as the process's user, or with CAP_SYS_PTRACE"
    }
    var reasons: [String] = []
    // Kernel: the caller's fsuid must equal the target's real, effective and saved uid.
    if target.uids.prefix(3).contains(where: { $0 != ours.uids[3] }) {
      reasons.append("it runs as uid \(target.uids[1]), imagelog as uid \(ours.uids[3])")
    } else if target.gids.prefix(3).contains(where: { $0 != ours.gids[3] }) {
      reasons.append("it runs as gid \(target.gids[1]), imagelog as gid \(ours.gids[3])")
    }
    // Checked after the uid (the kernel's order): another user's process needs CAP_SYS_PTRACE anyway.
    let missing = target.permittedCapabilities & ~ours.effectiveCapabilities
    if missing != 0, reasons.isEmpty {
      reasons.append("it holds capabilities imagelog lacks (\(Self.capabilityNames(missing).joined(separator: ", ")))")
    }
    // A non-dumpable process (set-user-ID, or prctl PR_SET_DUMPABLE 0) has its /proc files owned by root.
    var info = stat()
    if stat("/proc/\(pid)", &info) == 0, info.st_uid != target.uids[1] {
      reasons.append("it is not dumpable (set-user-ID, or prctl PR_SET_DUMPABLE 0)")
    }
    if readingMemory, let scope = try? ProcFile.read("/proc/sys/kernel/yama/ptrace_scope"), let level = scope.first,
       level > UInt8(ascii: "0") {
      reasons.append("/proc/sys/kernel/yama/ptrace_scope is \(Character(UnicodeScalar(level))) (0 lets a process read "
                     + "another of its user's that is not its child)")
    }
    if hasPtrace {
      let said = reasons.isEmpty ? "" : reasons.joined(separator: "; ") + "; "
      return said + "refused although imagelog has CAP_SYS_PTRACE (another user namespace, or a security module)"
    }
    guard !reasons.isEmpty else { return "imagelog lacks CAP_SYS_PTRACE (a security module may also refuse)" }
    return reasons.joined(separator: "; ") + ": give imagelog CAP_SYS_PTRACE"
  }

  /// `cap_chown`... for the bits of `set`, as capabilities(7) names them; `cap_N` past the known ones.
  static func capabilityNames(_ set: UInt64) -> [String] {
    let names = ["chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
                 "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
                 "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
                 "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap",
                 "mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
                 "checkpoint_restore"]
    return (0..<64).filter { set & (1 << UInt64($0)) != 0 }.map { $0 < names.count ? "cap_" + names[$0] : "cap_\($0)" }
  }
}

/// The lines of `/proc/PID/status` that decide access: `Uid:`, `Gid:` (real, effective, saved, fs),
/// `CapPrm:` and `CapEff:` (hex).
struct AccessStatus {
  var uids: [UInt32]
  var gids: [UInt32]
  var permittedCapabilities: UInt64
  var effectiveCapabilities: UInt64

  init?(path: String) {
    guard let bytes = try? ProcFile.read(path) else { return nil }
    var uids: [UInt32] = [], gids: [UInt32] = []
    var permitted: UInt64?, effective: UInt64?
    for line in bytes.split(separator: UInt8(ascii: "\n")) {
      let words = line.split(whereSeparator: { $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: " ") })
        .map { String(decoding: $0, as: UTF8.self) }
      guard let key = words.first else { continue }
      switch key {
      case "Uid:": uids = words.dropFirst().compactMap { UInt32($0) }
      case "Gid:": gids = words.dropFirst().compactMap { UInt32($0) }
      case "CapPrm:": permitted = words.count > 1 ? UInt64(words[1], radix: 16) : nil
      case "CapEff:": effective = words.count > 1 ? UInt64(words[1], radix: 16) : nil
      default: continue
      }
    }
    guard uids.count == 4, gids.count == 4, let permitted, let effective else { return nil }
    self.uids = uids
    self.gids = gids
    permittedCapabilities = permitted
    effectiveCapabilities = effective
  }
}
