import Glibc

/// System files by the Debian package that installed them. A test that reads "the system's libraries" or
/// "libc6-dbg's debug files" reads the files of the packages it names (`dpkg-query -L`), never whatever
/// else a folder holds: a developer's workstation has large unrelated packages installed (ceph-osd-dbg's
/// debug file inflates to 544 MB), and a test's result and time must not depend on them.
public enum InstalledPackages {
  /// Libraries every machine that runs the suite has (Debian's base system and what
  /// `Scripts/install-test-tools` installs); the ones not installed here are left out.
  public static let libraryPackages = [
    "libc6", "libstdc++6", "libgcc-s1", "zlib1g", "libzstd1", "liblzma5", "libbz2-1.0", "libelf1", "libdw1",
    "libdebuginfod1", "libssl3", "libsystemd0", "libudev1", "libselinux1", "libpcre2-8-0", "libacl1",
    "libattr1", "libcap2", "libuuid1", "libblkid1", "libmount1", "libsmartcols1", "libcrypt1", "libgmp10",
    "libffi8", "libexpat1", "libtinfo6", "libncursesw6", "libreadline8", "libsqlite3-0", "libpython3.11",
    "libpam0g", "libaudit1", "libgcrypt20", "libgpg-error0", "liblz4-1", "libmpfr6", "libisl23", "libmpc3",
  ]

  /// Programs of the same kind of packages, for tests that read executables.
  public static let programPackages = [
    "coreutils", "util-linux", "binutils", "elfutils", "findutils", "grep", "sed", "tar", "gzip", "diffutils",
    "dpkg", "zstd", "strace", "file", "gdb", "python3.11-minimal", "bsdutils", "procps", "acl",
  ]

  /// Every path `package` lists (`dpkg-query -L`), in its order; empty when it is not installed or dpkg is
  /// absent. Folders are listed too: callers filter.
  public static func files(of package: String) -> [String] {
    guard let listing = try? runChild(["dpkg-query", "-L", package]), listing.exitCode == 0 else { return [] }
    return listing.output.split(separator: "\n").map(String.init).filter { $0.hasPrefix("/") }
  }

  /// The regular files (symbolic links followed, each real file once) that `packages` list under one of
  /// `folders` (its top level only) and whose name passes `include`, sorted by resolved path.
  public static func regularFiles(of packages: [String], in folders: [String],
                                  where include: (String) -> Bool = { _ in true }) -> [String] {
    var seen: Set<String> = []
    for package in packages {
      for path in files(of: package) {
        guard let slash = path.lastIndex(of: "/"), folders.contains(String(path[..<slash])),
              include(String(path[path.index(after: slash)...])), let resolved = realpath(path, nil) else { continue }
        let real = String(cString: resolved)
        free(resolved)
        var info = stat()
        if stat(real, &info) == 0, info.st_mode & S_IFMT == S_IFREG { seen.insert(real) }
      }
    }
    return seen.sorted()
  }

  /// The shared libraries (`*.so`, `*.so.*`) of `libraryPackages` in the system library folder.
  public static func libraries() -> [String] {
    regularFiles(of: libraryPackages, in: ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]) {
      $0.hasSuffix(".so") || $0.contains(".so.")
    }
  }

  /// The separate debug files (`/usr/lib/debug/.build-id/xx/yyyy.debug`) that `packages` install.
  public static func buildIDDebugFiles(of packages: [String]) -> [String] {
    var seen: Set<String> = []
    for package in packages {
      for path in files(of: package) where path.hasPrefix("/usr/lib/debug/.build-id/") && path.hasSuffix(".debug") {
        var info = stat()
        if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG { seen.insert(path) }
      }
    }
    return seen.sorted()
  }
}
