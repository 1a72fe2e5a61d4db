internal import CImageLog
import Synchronization

/// A registration that can be cancelled. `cancel()` may be called from any thread, any number of
/// times; only the first call does anything. Dropping the token does not cancel (like dyld's
/// registrations, an observer normally lives as long as the process).
public final class ObservationToken: Sendable {
  private let cancellation: Mutex<(@Sendable () -> Void)?>

  init(_ cancel: @escaping @Sendable () -> Void) {
    cancellation = Mutex(cancel)
  }

  /// Stops the observer. After `cancel()` returns the handler is not called again, except for a call
  /// that another thread had already begun. Safe to call from inside the handler itself.
  public func cancel() {
    let cancel = cancellation.withLock { stored -> (@Sendable () -> Void)? in
      let cancel = stored
      stored = nil
      return cancel
    }
    cancel?()
  }
}

extension LoadedImages {
  /// Calls `handler` once for every image loaded now, then once for every image loaded later, like
  /// `_dyld_register_func_for_add_image`.
  ///
  /// The existing images are delivered before `onAdd` returns. A later `dlopen` (from Swift, or from
  /// C in any shared library) returns only after every add observer has seen the images it mapped.
  /// Handlers are never called with the loader's lock or any lock of ours held: they may call
  /// `dlopen`, `dlclose`, `dladdr`, `snapshot()` or register and cancel observers. Events reach each
  /// observer one at a time, in the order the loader made them, without gaps or repeats; they are
  /// delivered on whichever thread is delivering (usually the one that called `dlopen`). When a
  /// handler itself calls `dlopen`, that call returns before the resulting events are delivered (they
  /// follow as soon as the running handler returns, to keep every observer's order). Images loaded
  /// by means other than `dlopen`/`dlmopen` are seen at the next `refresh()`, `dlopen` or `dlclose`.
  public static func onAdd(_ handler: @escaping @Sendable (Image) -> Void) -> ObservationToken {
    ObserverCenter.shared.register(.add, handler)
  }

  /// Calls `handler` for every image unloaded from now on, with the same `Image` value its add event
  /// carried (nothing is read from the unmapped image), before the `dlclose` that unloaded it
  /// returns. The same delivery rules as `onAdd` apply.
  public static func onRemove(_ handler: @escaping @Sendable (Image) -> Void) -> ObservationToken {
    ObserverCenter.shared.register(.remove, handler)
  }

  /// Compares the loader's list with the observers' view and delivers the differences: catches
  /// images loaded or unloaded without `dlopen`/`dlclose` (or by a library that calls libc's directly).
  /// Cheap when nothing changed: it reads the loader's `dlpi_adds`/`dlpi_subs` counters only.
  public static func refresh() {
    ObserverCenter.shared.loaderChanged()
  }

  /// Logs every loaded image, and every image added or removed later, as `logger`-style lines
  /// (`Added: 0x... (0x...) /path <UUID>`, `Removed: ...`) to standard error.
  public static func logImages() -> ObservationToken {
    logImages { line in writeLineToStandardError(line) }
  }

  /// Logs every loaded image, and every image added or removed later, as `logger`-style lines given
  /// to `sink` (without a newline).
  public static func logImages(to sink: @escaping @Sendable (String) -> Void) -> ObservationToken {
    let formatter = ImageFormatter(style: .logger)
    let added = onAdd { sink(formatter.format($0, event: .added)) }
    let removed = onRemove { sink(formatter.format($0, event: .removed)) }
    return ObservationToken {
      added.cancel()
      removed.cancel()
    }
  }
}

/// The observers and the view of the loader's list they share.
///
/// Every change found (by the `dlopen`/`dlclose` hook, `refresh()` or a registration) becomes a
/// numbered item in one queue, under the lock. One thread at a time delivers the queue, unlocked,
/// in order; a thread that needs its items delivered (the `dlopen` that made them, the registration
/// whose replay it is) either becomes that deliverer or waits on the gate until the deliverer has
/// passed its number. An observer receives the events numbered after its registration, and an add
/// observer's replay of the images known at registration is the item just before those: so nothing
/// falls between the replay and the first event, and nothing appears in both.
final class ObserverCenter: Sendable {
  static let shared = ObserverCenter()

  enum Kind: Sendable { case add, remove }

  final class Observer: Sendable {
    let id: Int
    let kind: Kind
    let handler: @Sendable (Image) -> Void
    /// The first event number this observer receives.
    let firstSequence: UInt64
    let cancelled = Atomic<Bool>(false)

    init(id: Int, kind: Kind, handler: @escaping @Sendable (Image) -> Void, firstSequence: UInt64) {
      self.id = id
      self.kind = kind
      self.handler = handler
      self.firstSequence = firstSequence
    }
  }

  enum Item: Sendable {
    case event(sequence: UInt64, event: ImageEvent, image: Image)
    case replay(sequence: UInt64, observer: Observer, images: [Image])

    var sequence: UInt64 {
      switch self {
      case .event(let sequence, _, _), .replay(let sequence, _, _): sequence
      }
    }
  }

  private struct State {
    var counters: LoaderCounters?
    var loaded: [LoadedObjectKey: Image] = [:]
    var order: [LoadedObjectKey] = []
    var observers: [Observer] = []
    var nextID = 0
    var queue: [Item] = []
    var head = 0
    var nextSequence: UInt64 = 1
    var delivering = false
  }

  private let state = Mutex(State())

  /// Installs the `dlopen`/`dlclose` hook once per process.
  private static let hookInstalled: Bool = {
    il_set_loader_hook { ObserverCenter.shared.loaderChanged() }
    return true
  }()

  func register(_ kind: Kind, _ handler: @escaping @Sendable (Image) -> Void) -> ObservationToken {
    _ = Self.hookInstalled
    let nested = il_is_delivering() != 0
    let (observer, inlineReplay, deliver, target) = state.withLock { state in
      Self.sync(&state)
      state.nextID += 1
      var inlineReplay: [Image]?
      let first: UInt64
      let images = kind == .add ? state.order.compactMap { state.loaded[$0] } : []
      if kind == .add && !nested {
        first = state.nextSequence + 1
        let observer = Observer(id: state.nextID, kind: kind, handler: handler, firstSequence: first)
        state.queue.append(.replay(sequence: state.nextSequence, observer: observer, images: images))
        state.nextSequence += 1
        state.observers.append(observer)
      } else {
        // Inside a handler this thread is the deliverer: nothing else delivers concurrently, so
        // replaying here, before returning, keeps the observer's order.
        first = state.nextSequence
        state.observers.append(Observer(id: state.nextID, kind: kind, handler: handler, firstSequence: first))
        if kind == .add { inlineReplay = images }
      }
      let (deliver, target) = Self.claimDelivery(&state)
      return (state.observers[state.observers.count - 1], inlineReplay, deliver, target)
    }
    if let inlineReplay {
      for image in inlineReplay where !observer.cancelled.load(ordering: .acquiring) { observer.handler(image) }
    }
    finishDelivery(deliver: deliver, target: target, nested: nested)
    let id = observer.id
    return ObservationToken { [weak self] in
      observer.cancelled.store(true, ordering: .releasing)
      self?.state.withLock { state in state.observers.removeAll { $0.id == id } }
    }
  }

  /// The hook after every outermost successful `dlopen`/`dlmopen`/`dlclose`, and `refresh()`.
  func loaderChanged() {
    let nested = il_is_delivering() != 0
    let (deliver, target) = state.withLock { state -> (Bool, UInt64) in
      guard !state.observers.isEmpty || state.head < state.queue.count else { return (false, 0) }
      Self.sync(&state)
      return Self.claimDelivery(&state)
    }
    finishDelivery(deliver: deliver, target: target, nested: nested)
  }

  /// Whether the caller must deliver the queue (nobody is), and the number it must see delivered.
  private static func claimDelivery(_ state: inout State) -> (Bool, UInt64) {
    let target = state.nextSequence - 1
    if state.head < state.queue.count && !state.delivering {
      state.delivering = true
      return (true, target)
    }
    return (false, target)
  }

  private func finishDelivery(deliver: Bool, target: UInt64, nested: Bool) {
    if deliver {
      deliverQueue()
    } else if !nested && target > 0 {
      il_gate_wait(target)
    }
  }

  private func deliverQueue() {
    il_set_delivering(1)
    defer { il_set_delivering(0) }
    while true {
      let next = state.withLock { state -> (Item, [Observer])? in
        guard state.head < state.queue.count else {
          state.queue.removeAll(keepingCapacity: true)
          state.head = 0
          state.delivering = false
          return nil
        }
        let item = state.queue[state.head]
        state.head += 1
        switch item {
        case .event(let sequence, let event, _):
          let kind: Kind = event == .added ? .add : .remove
          return (item, state.observers.filter { $0.kind == kind && $0.firstSequence <= sequence })
        case .replay(_, let observer, _):
          return (item, state.observers.contains { $0 === observer } ? [observer] : [])
        }
      }
      guard let (item, recipients) = next else { return }
      switch item {
      case .event(_, _, let image):
        for observer in recipients where !observer.cancelled.load(ordering: .acquiring) { observer.handler(image) }
      case .replay(_, let observer, let images):
        for image in images where !recipients.isEmpty && !observer.cancelled.load(ordering: .acquiring) {
          observer.handler(image)
        }
      }
      il_gate_publish(item.sequence)
    }
  }

  /// Brings the view up to date with the loader and queues the differences for the observers that
  /// want them. Removes come first, in load order, then adds, in load order.
  private static func sync(_ state: inout State) {
    if let counters = state.counters, counters == LoaderCounters.current() { return }
    let walk = LoaderWalk.run(reusing: state.loaded, previousCounters: state.counters)
    var current: [LoadedObjectKey: Image] = [:]
    current.reserveCapacity(walk.objects.count)
    for (key, image) in walk.objects where current[key] == nil { current[key] = image }
    let wantsRemoves = state.observers.contains { $0.kind == .remove }
    let wantsAdds = state.observers.contains { $0.kind == .add }
    if state.counters != nil {
      for key in state.order {
        guard let old = state.loaded[key], current[key] != old else { continue }
        if wantsRemoves { enqueue(&state, .removed, old) }
      }
      for (key, image) in walk.objects where state.loaded[key] != image && wantsAdds {
        enqueue(&state, .added, image)
      }
    }
    state.loaded = current
    state.order = walk.objects.map(\.key)
    state.counters = walk.counters
  }

  private static func enqueue(_ state: inout State, _ event: ImageEvent, _ image: Image) {
    state.queue.append(.event(sequence: state.nextSequence, event: event, image: image))
    state.nextSequence += 1
  }
}
