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
  /// The existing images are delivered before `onAdd` returns (when called inside a constructor or
  /// destructor that `dlopen`/`dlclose` is running, as soon as that outermost call returns instead:
  /// no handler runs under the loader's lock). A later `dlopen` (from Swift, or from
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
  package static func refresh() {
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
///
/// The deliverer takes every waiting item at once, with the observer lists as they are then: an
/// observer registered later numbers its first event after all of them (`firstSequence`), and one
/// cancelled meanwhile has its `cancelled` flag set before it leaves the lists, which is checked
/// before each call. The queue's storage goes back and forth between the queue and the deliverer.
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

  /// What one deliverer takes from the queue: the items and the observers at that moment.
  struct Batch {
    var items: [Item] = []
    var addObservers: [Observer] = []
    var removeObservers: [Observer] = []
  }

  private struct State {
    var view = LoaderView()
    /// Registration order, one list per kind (delivery takes a copy of both without filtering).
    var addObservers: [Observer] = []
    var removeObservers: [Observer] = []
    var hasObservers: Bool { !addObservers.isEmpty || !removeObservers.isEmpty }
    var nextID = 0
    /// Items waiting for delivery, in number order.
    var queue: [Item] = []
    /// An emptied batch, kept for its capacity (the next batch's queue).
    var spare: [Item] = []
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
    // Inside a constructor or destructor run by dlopen/dlclose the loader's lock is held: queue the
    // replay for the outermost dlopen/dlclose to deliver once the lock is released.
    let insideLoader = il_loader_call_depth() > 0
    var batch = Batch()
    let (observer, inlineReplay, deliver, target) = state.withLock { state in
      Self.sync(&state)
      state.nextID += 1
      let observer: Observer
      var inlineReplay: [Image]?
      switch kind {
      case .remove:
        observer = Observer(id: state.nextID, kind: kind, handler: handler, firstSequence: state.nextSequence)
        state.removeObservers.append(observer)
      case .add where nested && !insideLoader:
        // Inside a handler this thread is the deliverer: nothing else delivers concurrently, so
        // replaying here, before returning, keeps the observer's order.
        observer = Observer(id: state.nextID, kind: kind, handler: handler, firstSequence: state.nextSequence)
        state.addObservers.append(observer)
        inlineReplay = state.view.images
      case .add:
        // The replay is the item just before the first event this observer receives.
        observer = Observer(id: state.nextID, kind: kind, handler: handler, firstSequence: state.nextSequence + 1)
        state.queue.append(.replay(sequence: state.nextSequence, observer: observer, images: state.view.images))
        state.nextSequence += 1
        state.addObservers.append(observer)
      }
      il_set_observing(1)
      let (deliver, target) = insideLoader ? (false, 0) : Self.claimDelivery(&state, &batch)
      return (observer, inlineReplay, deliver, target)
    }
    if let inlineReplay {
      for image in inlineReplay where !observer.cancelled.load(ordering: .acquiring) { observer.handler(image) }
    }
    finishDelivery(deliver: deliver, &batch, target: target, nested: nested || insideLoader)
    let id = observer.id
    return ObservationToken { [weak self] in
      observer.cancelled.store(true, ordering: .releasing)
      self?.state.withLock { state in
        state.addObservers.removeAll { $0.id == id }
        state.removeObservers.removeAll { $0.id == id }
        il_set_observing(state.hasObservers ? 1 : 0)
      }
    }
  }

  /// The hook after every outermost successful `dlopen`/`dlmopen`/`dlclose`, and `refresh()`.
  func loaderChanged() {
    let nested = il_is_delivering() != 0
    // refresh() from a constructor or destructor: queue only (the loader's lock is held).
    let insideLoader = il_loader_call_depth() > 0
    var batch = Batch()
    let (deliver, target) = state.withLock { state -> (Bool, UInt64) in
      guard state.hasObservers || !state.queue.isEmpty else { return (false, 0) }
      Self.sync(&state)
      return insideLoader ? (false, 0) : Self.claimDelivery(&state, &batch)
    }
    finishDelivery(deliver: deliver, &batch, target: target, nested: nested || insideLoader)
  }

  /// Whether the caller must deliver the queue (nobody is: then `batch` holds what to deliver), and
  /// the number it must see delivered.
  private static func claimDelivery(_ state: inout State, _ batch: inout Batch) -> (Bool, UInt64) {
    let target = state.nextSequence - 1
    if !state.queue.isEmpty && !state.delivering {
      state.delivering = true
      takeBatch(&state, &batch)
      return (true, target)
    }
    return (false, target)
  }

  /// Moves the waiting items into `batch` (whose `items` is empty) and leaves the spare storage as
  /// the queue.
  private static func takeBatch(_ state: inout State, _ batch: inout Batch) {
    swap(&batch.items, &state.spare)
    swap(&batch.items, &state.queue)
    batch.addObservers = state.addObservers
    batch.removeObservers = state.removeObservers
  }

  private func finishDelivery(deliver: Bool, _ batch: inout Batch, target: UInt64, nested: Bool) {
    if deliver {
      deliverQueue(&batch)
    } else if !nested && target > 0 {
      il_gate_wait(target)
    }
  }

  /// Delivers `batch`, then whatever was queued meanwhile, until the queue is empty.
  private func deliverQueue(_ batch: inout Batch) {
    il_set_delivering(1)
    defer { il_set_delivering(0) }
    while true {
      // The items are read in place (the handlers cannot reach `batch`): no copy of each image.
      batch.items.withUnsafeBufferPointer { items in
        for index in items.indices {
          switch items[index] {
          case .event(let sequence, let event, let image):
            let recipients = event == .added ? batch.addObservers : batch.removeObservers
            // Observers registered after the event are skipped (firstSequence).
            for observer in recipients where observer.firstSequence <= sequence && !observer.cancelled.load(ordering: .acquiring) {
              observer.handler(image)
            }
            il_gate_publish(sequence)
          case .replay(let sequence, let observer, let images):
            for image in images where !observer.cancelled.load(ordering: .acquiring) {
              observer.handler(image)
            }
            il_gate_publish(sequence)
          }
        }
      }
      batch.items.emptyKeepingCapacity()
      let more = state.withLock { state -> Bool in
        swap(&state.spare, &batch.items)
        guard !state.queue.isEmpty else {
          state.delivering = false
          return false
        }
        Self.takeBatch(&state, &batch)
        return true
      }
      guard more else { return }
    }
  }

  /// Brings the view up to date with the loader and queues the differences for the observers that
  /// want them. Removes come first, in load order, then adds, in load order.
  private static func sync(_ state: inout State) {
    // The view leaves the state while it reports into the queue.
    var view = LoaderView()
    swap(&view, &state.view)
    let wantsRemovals = !state.removeObservers.isEmpty, wantsAdditions = !state.addObservers.isEmpty
    func report(_ event: ImageEvent, _ image: Image) {
      if event == .removed ? wantsRemovals : wantsAdditions { enqueue(&state, event, image) }
    }
    // After a dlclose or dlopen, the object it was called for is usually all that changed: checked
    // without a walk (LoaderView.removeClosed, addOpened).
    var closed: UInt = 0
    if il_closed_load_bias(&closed) != 0 ? !view.removeClosed(loadBias: UInt64(closed), report) : !view.addOpened(report) {
      _ = view.update(report)
    }
    swap(&view, &state.view)
  }

  private static func enqueue(_ state: inout State, _ event: ImageEvent, _ image: Image) {
    state.queue.append(.event(sequence: state.nextSequence, event: event, image: image))
    state.nextSequence += 1
  }
}
