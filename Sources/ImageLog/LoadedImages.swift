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
}

/// The previous snapshot, reused while the loader's counters stay the same.
final class SnapshotCache: Sendable {
  static let shared = SnapshotCache()

  private struct State {
    var counters: LoaderCounters?
    var entries: [LoadedObjectKey: Image] = [:]
    var images: [Image] = []
  }

  private let state = Mutex(State())

  func images() -> [Image] {
    state.withLock { state in
      if let counters = state.counters, counters == LoaderCounters.current() { return state.images }
      let walk = LoaderWalk.run(reusing: state.entries, previousCounters: state.counters)
      state.counters = walk.counters
      state.entries = Dictionary(walk.objects.map { ($0.key, $0.image) }, uniquingKeysWith: { first, _ in first })
      state.images = walk.objects.map(\.image)
      return state.images
    }
  }
}
