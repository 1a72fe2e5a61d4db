import Synchronization

/// The images loaded in this process, as the dynamic loader lists them.
///
/// `snapshot()` is the hot path: one `dl_iterate_phdr` walk, no file I/O, no per-image syscalls, and
/// when the loader's `dlpi_adds`/`dlpi_subs` counters have not moved since the previous call it returns
/// the previous values without rebuilding them. The observers (`onAdd`, `onRemove`) mirror dyld's
/// `_dyld_register_func_for_add_image` / `_remove_image` and are called synchronously with
/// `dlopen`/`dlclose`; see `ImageObservers.swift` for exactly when.
public enum LoadedImages {
  /// Every image loaded now, in load order: the main executable first, then the libraries the
  /// loader mapped at startup (the vDSO among them), then those `dlopen`ed since.
  ///
  /// Mirrors `dl_iterate_phdr(3)`. Images whose program headers cannot be decoded (never seen in
  /// practice) are left out rather than guessed.
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
