import Synchronization

/// The images loaded in this process, as the dynamic loader lists them.
///
/// `snapshot()` is the hot path: one `dl_iterate_phdr` walk, no file I/O, no per-image syscalls, and
/// when the loader's `dlpi_adds`/`dlpi_subs` counters have not moved since the previous call it returns
/// the previous values without rebuilding them (after a `dlopen` it decodes only the new images). The
/// observers (`onAdd`, `onRemove`) mirror dyld's `_dyld_register_func_for_add_image` / `_remove_image`
/// and are called synchronously with `dlopen`/`dlclose`.
///
/// ## How the observers see `dlopen` and `dlclose`, and the limits of it
/// The C shim defines `dlopen`, `dlmopen` and `dlclose`. Linked into the executable (SwiftPM links
/// library targets statically), these definitions come first in the process's global symbol scope,
/// and the static linker exports them because libc.so.6 defines the same names (glibc 2.34+; checked
/// with GNU ld, gold and lld: no `--export-dynamic` flag is needed). Each forwards to libc's
/// (`dlsym(RTLD_NEXT)`), then, if the call succeeded and is the outermost loader call on this thread,
/// compares the loader's list with the observers' view and delivers the differences before returning.
/// - Seen synchronously: `dlopen`/`dlmopen`/`dlclose` called from the executable (Swift or C) and from
///   any shared library that resolves them through the global scope (the normal case: their calls bind
///   to the executable's exported definitions).
/// - Seen late (at the next `refresh()`, interposed `dlopen`/`dlclose`, or registration): loads that do
///   not go through the exported symbols: glibc's internal loads (NSS modules, iconv/gconv modules,
///   `libgcc_s` for unwinding, all through `__libc_dlopen_mode`), code calling a `dlopen` pointer it
///   fetched from libc itself (`dlsym(RTLD_NEXT, "dlopen")`, as other interposers do), and every call when the shim is not
///   ahead of libc in the global scope: it must be in the executable (the SwiftPM default) or, untested,
///   in a direct dependency or `LD_PRELOAD` library; in a plugin loaded with `dlopen` it interposes
///   nothing (observers still work through `refresh()`).
/// - Never seen: images in another link-map namespace (`dlmopen` with `LM_ID_NEWLM`): `dl_iterate_phdr`
///   reports only the caller's namespace, so neither `snapshot()` nor the observers list them.
/// - A `dlopen` or `dlclose` made inside a constructor or destructor (the loader's lock is held there)
///   is reported when the outermost call returns; one made inside an observer is reported right after
///   that observer returns (so every observer keeps the loader's order).
/// - glibc resolves a bare name (no `/`) along the *caller's* RPATH/RUNPATH and expands `$ORIGIN` to
///   the caller's directory, taking the caller from `dlopen`'s return address, which the forwarding
///   would make the executable. For a caller inside a shared library the shim therefore expands
///   `$ORIGIN` itself (`dlinfo(RTLD_DI_ORIGIN)`), asks for an already loaded object of that name first
///   (`RTLD_NOLOAD`), then tries the caller's own search directories (`dlinfo(RTLD_DI_SERINFO)`: its
///   RPATH chain, `LD_LIBRARY_PATH`, its RUNPATH) before the ordinary search (ld.so.cache and the
///   default directories, plus the executable's RUNPATH, which glibc would not use for that caller).
///   In secure-execution mode (setuid) names are passed through unchanged.
/// - Events are exact per object: a replaced object at a reused address is reported as removed and
///   added, using the loader's per-object counters to know when to check. If another thread unloads
///   and reloads the same file at the same address before this thread's `dlclose` has compared the
///   lists, neither event is reported (the observers' view still equals the loader's list).
/// - A handler must not wait for another thread that is itself inside `dlopen`, `dlclose`, `refresh()`
///   or `onAdd`: that thread waits for the running delivery to reach its events (the price of
///   synchronous delivery: one thread delivers at a time, to keep every observer's order). After
///   `fork()` in a multithreaded process the child must not `dlopen` before `exec` (as POSIX says).
public enum LoadedImages {
  /// Every image loaded now, in load order: the main executable first, then the libraries the
  /// loader mapped at startup (the vDSO among them), then those `dlopen`ed since.
  ///
  /// Mirrors `dl_iterate_phdr(3)`. Images whose program headers cannot be decoded (never seen in
  /// practice) are left out rather than guessed. Thread-safe; not async-signal-safe (it locks and
  /// allocates): a crash handler should take its snapshot before the crash, or keep one up to date
  /// with `onAdd`/`onRemove`.
  public static func snapshot() -> [Image] {
    SnapshotCache.shared.images()
  }

  /// `snapshot()` without the cache: every image decoded again from its program headers and notes.
  /// For benchmarks (the cost `snapshot()` pays right after a `dlopen` or `dlclose`).
  @_spi(Benchmarks) public static func uncachedSnapshot() -> [Image] {
    LoaderView.capture()
  }
}

/// The previous snapshot, kept up to date by `LoaderView` (nothing rebuilt while the counters stay).
final class SnapshotCache: Sendable {
  static let shared = SnapshotCache()

  private let view = Mutex(LoaderView())

  func images() -> [Image] {
    view.withLock { view in
      _ = view.update(collectingChanges: false)
      return view.images
    }
  }
}
