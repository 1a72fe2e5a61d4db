internal import Glibc
import ImageLog
import Snapshot
import Synchronization

/// Finds, on a thread of its own, the files symbolication will read for the images of `pid` that
/// frames are in, and their symbols for those frames: the locator keeps what it found and read for
/// `symbolicate`. While the caller stops and copies the threads, it reads the image list itself and
/// looks for the program's file and the C library's (where threads waiting in a system call stopped),
/// until `unwound` gives it the stacks and the images after the stop; then it looks for the other
/// images frames are in and reads the symbols. The vDSO is in no file: its symbols come from the
/// target's memory (a few pages), read there too.
package final class SymbolPrefetch: @unchecked Sendable {
  // Made and used by the worker until `finish` joins it, then the caller's alone; made by `init` when
  // no thread could be started.
  private var madeLocator: DebugFileLocator?
  private var locator: DebugFileLocator { madeLocator! }  // set before any use: see init
  private var worker: WorkerThread?
  private let pid: Int32
  // True once the vDSO's copy is the locator's (it answers again for every image when that changes).
  private var readVDSO = false
  // Written by `unwound` before it posts the semaphore; read by the worker after its wait.
  private var stacks: [[UnwoundFrame]] = []
  private var images: [Image] = []
  private var handedOver = false
  private let stacksReady = Atomic<Bool>(false)
  // Set by the worker as the last thing it does with the locator.
  private let searchDone = Atomic<Bool>(false)
  // Who reads the symbols once the stacks are here: `searching` while the worker's early search
  // uses the locator, then `waiting`; the worker moves it on to `readByWorker`, or `finish` to
  // `readByCaller` (each with a compare-and-exchange, so only one of them reads).
  private let phase = Atomic<Int>(Phase.searching)
  private enum Phase {
    static let searching = 0, waiting = 1, readByWorker = 2, readByCaller = 3
  }
  private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

  package init(of pid: Int32, options: SymbolicationOptions) {
    self.pid = pid
    sem_init(semaphore, 0, 0)
    // With one processor the early search would only slow the stop and the unwinding.
    let early = WorkerThread.processorCount > 1
    worker = WorkerThread.start { [self] in
      madeLocator = Symbolicator.locator(forOneReport: options)
      if early, let images = try? ProcessImages.snapshot(of: pid) {
        readVDSO(images)
        for image in images where Self.isLikely(image) {
          guard !stacksReady.load(ordering: .acquiring) else { break }  // the stacks tell which are needed
          locator.prepareSymbols(ProcessSnapshot.Image(image), architecture: nil, offsets: [])
        }
      }
      phase.store(Phase.waiting, ordering: .releasing)
      // Woken from the semaphore, the worker is often put on the processor of the thread that posts
      // it, to run once that thread blocks or its time slice ends (BENCHMARKS.md, "A worker thread's
      // start while its maker works"): with a processor to itself it watches for the stacks instead,
      // yielding, for at most `watchNanoseconds`, then waits.
      let deadline = monotonicNanoseconds() + Self.watchNanoseconds
      while early, !stacksReady.load(ordering: .acquiring), monotonicNanoseconds() < deadline { sched_yield() }
      while sem_wait(semaphore) != 0 {}  // EINTR: wait again
      guard phase.compareExchange(expected: Phase.waiting, desired: Phase.readByWorker, ordering: .acquiringAndReleasing)
        .exchanged else { return }  // `finish` read them
      readSymbols()
      searchDone.store(true, ordering: .releasing)
    }
    if worker == nil { madeLocator = Symbolicator.locator(forOneReport: options) }  // the work will be done here
  }

  /// How long the worker watches for the stacks before it waits for them: longer than unwinding
  /// takes for most processes.
  static let watchNanoseconds = 20_000_000

  /// How long `finish` watches for the worker's end before it waits for it: longer than reading
  /// symbol tables takes once the stacks are unwound, not DWARF's line tables (which take longer
  /// than a wake-up costs).
  static let finishWatchNanoseconds = 2_000_000

  deinit {
    sem_destroy(semaphore)
    semaphore.deallocate()
  }

  /// The images most frames are in: the program, and the C library, where threads waiting in a
  /// system call stopped. A guess: a wrong one costs time, not answers.
  static func isLikely(_ image: Image) -> Bool {
    image.isMainExecutable || image.name.hasPrefix("libc.so") || image.name.hasPrefix("libc-")
      || image.name.hasPrefix("ld-musl")
  }

  /// Gives the worker the unwound stacks and the images after the stop (once; `finish` gives it none
  /// if this was not called).
  package func unwound(_ stacks: [[UnwoundFrame]], images: [Image]) {
    guard !handedOver else { return }
    handedOver = true
    self.stacks = stacks
    self.images = images
    guard worker != nil else { return readSymbols() }  // no thread to be had: the work, here and now
    stacksReady.store(true, ordering: .releasing)
    sem_post(semaphore)
  }

  /// Waits for the search to end and returns the locator.
  @discardableResult
  package func finish() -> DebugFileLocator {
    unwound([], images: [])
    // A worker that has not taken up the stacks since they were given (it was not given a processor
    // meanwhile) has done with the locator: the symbols are read here instead of waiting for it.
    if worker != nil,
       phase.compareExchange(expected: Phase.waiting, desired: Phase.readByCaller, ordering: .acquiringAndReleasing).exchanged {
      readSymbols()
      worker?.detach()
      worker = nil
      return locator
    }
    // Asleep in pthread_join, this thread would be woken when the worker has exited, often only once
    // its processor is given back to it (as for the worker woken from the semaphore, above). It
    // watches for the worker's last write instead, for at most `finishWatchNanoseconds`, and lets
    // the worker exit unjoined.
    let deadline = monotonicNanoseconds() + Self.finishWatchNanoseconds
    while worker != nil, !searchDone.load(ordering: .acquiring), monotonicNanoseconds() < deadline { sched_yield() }
    if searchDone.load(ordering: .acquiring) { worker?.detach() } else { worker?.join() }
    worker = nil
    return locator
  }

  /// Gives the locator the vDSO's symbols as the target's memory holds them (once).
  private func readVDSO(_ images: [Image]) {
    guard !readVDSO else { return }
    readVDSO = true
    locator.inMemoryImages = InMemoryImage.copies(of: images, in: ProcessMemory(pid: pid))
  }

  /// Finds the files of the images frames are in and reads their symbols for the frames' addresses.
  private func readSymbols() {
    // Each frame's offset in its image as symbolication will look it up: a return address (every
    // frame but a thread's first, as the report is read) less 1.
    var offsets = [[UInt64]](repeating: [], count: images.count)
    for frames in stacks {
      for (position, frame) in frames.enumerated() {
        guard let index = images.firstIndex(where: { $0.loadRange.contains(frame.pc) }) else { continue }
        let offset = frame.pc - images[index].loadAddress  // loadRange starts at loadAddress
        offsets[index].append(position > 0 && offset > 0 ? offset - 1 : offset)
      }
    }
    guard offsets.contains(where: { !$0.isEmpty }) else { return }
    readVDSO(images)
    for index in images.indices where !offsets[index].isEmpty {
      // Each image as the report will be read back: what symbolicate asks the locator for.
      locator.prepareSymbols(ProcessSnapshot.Image(images[index]), architecture: nil, offsets: offsets[index])
    }
  }
}
