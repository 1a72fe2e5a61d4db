#if canImport(Glibc)
internal import Glibc
#endif

/// This imagelog executable's path (/proc/self/exe), or nil when it cannot be read.
func ownExecutablePath() -> String? {
  var buffer = [CChar](repeating: 0, count: 4096)
  let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
  guard count > 0 else { return nil }
  return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Starts `imagelog ARGUMENTS...` in a session of its own, its standard streams on /dev/null, every
/// signal at its default and none blocked, without waiting for it: a terminal's ^C for the process
/// that started it does not stop it half-way, and the starter's exit does not wait for it (work for
/// later: a symbol cache entry, an upload). `descriptor`, when given, is passed on as descriptor
/// `as` (not close-on-exec there). False when imagelog's own path cannot be found or the process
/// cannot be started.
@discardableResult
func startDetachedImagelog(_ arguments: [String], passing descriptor: (Int32, as: Int32)? = nil) -> Bool {
  guard let executable = ownExecutablePath() else { return false }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  if let (source, target) = descriptor { posix_spawn_file_actions_adddup2(&actions, source, target) }
  for stream: Int32 in 0...2 {
    posix_spawn_file_actions_addopen(&actions, stream, "/dev/null", stream == 0 ? O_RDONLY : O_WRONLY, 0)
  }
  var attributes = posix_spawnattr_t()
  posix_spawnattr_init(&attributes)
  defer { posix_spawnattr_destroy(&attributes) }
  // glibc's POSIX_SPAWN_SETSID (<spawn.h> under _GNU_SOURCE, which Swift's Glibc module does not define).
  let setSession: Int32 = 0x80
  posix_spawnattr_setflags(&attributes, Int16(setSession | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
  var none = sigset_t()
  sigemptyset(&none)
  posix_spawnattr_setsigmask(&attributes, &none)
  var all = sigset_t()
  sigfillset(&all)
  posix_spawnattr_setsigdefault(&attributes, &all)
  let argv = ([executable] + arguments).map { strdup($0) } + [nil]
  defer { argv.forEach { free($0) } }
  var pid: pid_t = 0
  return posix_spawn(&pid, executable, &actions, &attributes, argv, environ) == 0
}
