import CImageLog
import Glibc
import ImageReaders
import Synchronization
import ImageLogTestSupport
import Testing
@testable import ImageLog

/// Events an observer saw for images under one directory.
final class EventRecorder: Sendable {
  let directory: String
  private let events = Mutex<[(ImageEvent, Image)]>([])
  private let maximumDepth = Mutex(0)

  init(directory: String) { self.directory = directory }

  func record(_ event: ImageEvent, _ image: Image) {
    let depth = Int(il_loader_call_depth())
    maximumDepth.withLock { $0 = max($0, depth) }
    guard image.path.hasPrefix(directory) else { return }
    events.withLock { $0.append((event, image)) }
  }

  var all: [(ImageEvent, Image)] { events.withLock { $0 } }
  /// The largest dlopen/dlclose nesting any handler call saw on its thread (0: never inside the loader).
  var deepestLoaderCall: Int { maximumDepth.withLock { $0 } }

  func events(_ kind: ImageEvent, suffix: String) -> [Image] {
    all.filter { $0.0 == kind && $0.1.path.hasSuffix(suffix) }.map(\.1)
  }
}

/// What the observers had recorded at the moment a C call inside libcore_first.so returned.
let probeRecorder = Mutex<EventRecorder?>(nil)
let probeSeen = Mutex<[[(ImageEvent, Image)]]>([])
let probeAfter: @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in
  let events = probeRecorder.withLock { $0?.all } ?? []
  probeSeen.withLock { $0.append(events) }
}

/// What the constructor hook did: an observer registered inside a constructor, and whether its
/// handler ever ran with the loader's lock held.
let constructorObserver = Mutex<(recorder: EventRecorder?, token: ObservationToken?)>((nil, nil))
let constructorHook: @convention(c) () -> Void = {
  guard let recorder = constructorObserver.withLock({ $0.recorder }) else { return }
  let token = LoadedImages.onAdd { recorder.record(.added, $0) }
  LoadedImages.refresh()
  constructorObserver.withLock { $0.token = token }
}

typealias OpenFunction = @convention(c) (UnsafePointer<CChar>?, (@convention(c) (UnsafeMutableRawPointer?) -> Void)?) -> UnsafeMutableRawPointer?
typealias CloseFunction = @convention(c) (UnsafeMutableRawPointer?, (@convention(c) (UnsafeMutableRawPointer?) -> Void)?) -> Int32

/// Runs `body(index)` on `count` POSIX threads and waits for all of them.
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
  final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
  var threads: [pthread_t] = []
  for index in 0..<count {
    let box = Unmanaged.passRetained(Box { body(index) }).toOpaque()
    var thread = pthread_t()
    let created = pthread_create(&thread, nil, { raw in
      let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
      box.body()
      return nil
    }, box)
    precondition(created == 0, "pthread_create failed")
    threads.append(thread)
  }
  for thread in threads { pthread_join(thread, nil) }
}

/// These tests load and unload libraries and watch what the observers report: `.loaderList` keeps
/// every other test that touches or compares the loader's list (in any suite) from running meanwhile.
@Suite("Image observers", .serialized, .loaderList, .enabled(if: haveCC, "cc is not installed"))
struct ObserverTests {
  @Test func theInterposersAreExportedFromTheTestExecutable() throws {
    let result = try runTool(["readelf", "--dyn-syms", "-W", "/proc/\(getpid())/exe"])
    let defined = result.output.split(separator: "\n").filter { !$0.contains(" UND ") }.compactMap { $0.split(separator: " ").last }
    #expect(defined.contains("dlopen"))
    #expect(defined.contains("dlclose"))
  }

  @Test func addAndRemoveRunOnceBeforeDlopenAndDlcloseReturnWithEqualValues() throws {
    let libraries = try CoreTestLibraries.fresh("once")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }

    // From Swift in the executable.
    let first = try #require(dlopen(libraries.first, RTLD_NOW | RTLD_LOCAL), "\(String(cString: dlerror()))")
    let firstAdds = recorder.events(.added, suffix: "/libcore_first.so")
    #expect(firstAdds.count == 1)
    #expect(firstAdds.first?.path == libraries.first)
    #expect(firstAdds.first?.buildID != nil)

    // From C inside libcore_first.so, with a bare name found through its RUNPATH ($ORIGIN/deps).
    probeRecorder.withLock { $0 = recorder }
    probeSeen.withLock { $0 = [] }
    defer { probeRecorder.withLock { $0 = nil } }
    let open = unsafeBitCast(try #require(dlsym(first, "core_first_open")), to: OpenFunction.self)
    let close = unsafeBitCast(try #require(dlsym(first, "core_first_close")), to: CloseFunction.self)
    _ = dlerror()
    let second = try #require(open("libcore_second.so", probeAfter), "RUNPATH lookup from the library failed")
    #expect(dlerror() == nil, "a successful dlopen leaves no error behind (the shim's RTLD_NOLOAD probe failed first)")
    let seenAfterOpen = try #require(probeSeen.withLock { $0.last })
    let secondAdds = seenAfterOpen.filter { $0.0 == .added && $0.1.path.hasSuffix("/deps/libcore_second.so") }
    #expect(secondAdds.count == 1, "the add observer ran before dlopen returned inside the library")
    #expect(secondAdds.first?.1.path == libraries.second)

    #expect(close(second, probeAfter) == 0)
    let seenAfterClose = try #require(probeSeen.withLock { $0.last })
    let secondRemoves = seenAfterClose.filter { $0.0 == .removed && $0.1.path.hasSuffix("/deps/libcore_second.so") }
    #expect(secondRemoves.count == 1, "the remove observer ran before dlclose returned inside the library")
    #expect(secondRemoves.first?.1 == secondAdds.first?.1)

    #expect(dlclose(first) == 0)
    let firstRemoves = recorder.events(.removed, suffix: "/libcore_first.so")
    #expect(firstRemoves.count == 1)
    #expect(firstRemoves.first == firstAdds.first)
    #expect(!LoadedImages.snapshot().contains { $0.path.hasPrefix(libraries.directory) })
    // Exactly once each, nothing else.
    #expect(recorder.all.count == 4)
    #expect(recorder.deepestLoaderCall == 0)
  }

  @Test func dollarOriginInANameIsTheCallingLibrarysDirectory() throws {
    let libraries = try CoreTestLibraries.fresh("origin")
    let first = try #require(dlopen(libraries.first, RTLD_NOW | RTLD_LOCAL))
    defer { dlclose(first) }
    let open = unsafeBitCast(try #require(dlsym(first, "core_first_open")), to: OpenFunction.self)
    let close = unsafeBitCast(try #require(dlsym(first, "core_first_close")), to: CloseFunction.self)
    let second = try #require(open("$ORIGIN/deps/libcore_second.so", nil))
    #expect(LoadedImages.snapshot().contains { $0.path == libraries.second })
    #expect(close(second, nil) == 0)
    // A name that exists nowhere still fails, with dlerror set as glibc sets it.
    #expect(open("libcore_does_not_exist.so", nil) == nil)
    #expect(dlerror() != nil)
  }

  @Test func onAddReplaysWhatIsLoaded() throws {
    let replayed = Mutex<[Image]>([])
    let before = withUnchangedLoaderList {
      let before = LoadedImages.snapshot()
      let token = LoadedImages.onAdd { image in replayed.withLock { $0.append(image) } }
      token.cancel()
      return before
    }
    #expect(replayed.withLock { $0 } == before)
  }

  @Test func cancelledObserversHearNothingAndCancelIsIdempotent() throws {
    let libraries = try CoreTestLibraries.fresh("cancel")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    added.cancel()
    added.cancel()
    removed.cancel()
    let handle = try #require(dlopen(libraries.first, RTLD_NOW))
    #expect(dlclose(handle) == 0)
    removed.cancel()
    #expect(recorder.all.isEmpty)
  }

  @Test func constructorsThatDlopenAreReportedOnceAndNotFromInsideTheLoader() throws {
    let libraries = try CoreTestLibraries.fresh("reenter")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }
    let handle = try #require(dlopen(libraries.reenter, RTLD_NOW | RTLD_LOCAL))
    #expect(recorder.events(.added, suffix: "/libcore_reenter.so").count == 1)
    #expect(recorder.events(.added, suffix: "/deps/libcore_second.so").count == 1)
    #expect(dlclose(handle) == 0)
    #expect(recorder.events(.removed, suffix: "/libcore_reenter.so").count == 1)
    #expect(recorder.events(.removed, suffix: "/deps/libcore_second.so").count == 1)
    #expect(recorder.deepestLoaderCall == 0, "a handler ran inside a constructor or destructor")
  }

  @Test func handlersMayCallTheLoaderAndRegisterObservers() throws {
    let libraries = try CoreTestLibraries.fresh("nested")
    let recorder = EventRecorder(directory: libraries.directory)
    let nestedReplay = Mutex<[Image]>([])
    let didNest = Atomic(false)
    let secondPath = libraries.second
    let added = LoadedImages.onAdd { image in
      recorder.record(.added, image)
      guard image.path.hasSuffix("/libcore_first.so"), !didNest.exchange(true, ordering: .relaxed) else { return }
      // All of these take the loader's lock or ours: none may deadlock.
      if let handle = dlopen(secondPath, RTLD_NOW) { _ = dlclose(handle) }
      _ = LoadedImages.snapshot()
      _ = LoadedImages.image(containing: image.textRange.lowerBound)
      LoadedImages.refresh()
      let inner = LoadedImages.onAdd { nested in nestedReplay.withLock { $0.append(nested) } }
      inner.cancel()
    }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }
    let handle = try #require(dlopen(libraries.first, RTLD_NOW))
    #expect(dlclose(handle) == 0)
    // The nested load and unload were delivered after the running handler, in order.
    let kinds = recorder.all.map { ($0.0 == .added ? "+" : "-") + Image.shortName(of: $0.1.path) }
    #expect(kinds == ["+libcore_first.so", "+libcore_second.so", "-libcore_second.so", "-libcore_first.so"])
    // The observer registered inside a handler got the replay there and then, including first.
    #expect(nestedReplay.withLock { $0.contains { $0.path == libraries.first } })
  }

  @Test func logImagesWritesLoggerLinesToTheSink() throws {
    let libraries = try CoreTestLibraries.fresh("log")
    let lines = Mutex<[String]>([])
    let token = LoadedImages.logImages { line in lines.withLock { $0.append(line) } }
    let replayCount = lines.withLock { $0.count }
    #expect(replayCount > 3)
    #expect(lines.withLock { $0.allSatisfy { $0.hasPrefix("Added: 0x") } })
    let handle = try #require(dlopen(libraries.first, RTLD_NOW))
    #expect(dlclose(handle) == 0)
    token.cancel()
    let mine = lines.withLock { $0.filter { $0.contains(libraries.directory) } }
    let image = try #require(LoadedImages.snapshot().first)  // any image: the shape is the formatter's
    #expect(mine.count == 2)
    #expect(mine.first?.hasPrefix("Added: 0x") == true)
    #expect(mine.last?.hasPrefix("Removed: 0x") == true)
    #expect(mine.first?.dropFirst("Added: ".count) == mine.last?.dropFirst("Removed: ".count))
    #expect(ImageFormatter(style: .logger).format(image).hasPrefix("Added: 0x\(hexDigits(image.loadAddress)) "))
  }

  @Test(.enabled(if: haveTool("readelf"), "readelf is not installed"))
  func aLibraryLoadedWhereAnotherWasUnloadedIsReportedAsItself() throws {
    let libraries = try CoreTestLibraries.fresh("reuse")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }
    var addresses: [Address: [String]] = [:]
    for _ in 0..<3 {
      for path in [libraries.first, libraries.reenter] {
        let handle = try #require(dlopen(path, RTLD_NOW | RTLD_LOCAL))
        let image = try #require(LoadedImages.snapshot().first { $0.path == path })
        #expect(image.buildID?.hex == (try readelfBuildID(path)))
        addresses[image.loadAddress, default: []].append(path)
        #expect(dlclose(handle) == 0)
      }
    }
    // Each add has exactly its own remove, whatever address reuse the loader did.
    let events = recorder.all.filter { !$0.1.path.hasSuffix("/libcore_second.so") }
    #expect(events.count == 12)
    for pair in stride(from: 0, to: events.count - 1, by: 2) {
      #expect(events[pair].0 == .added && events[pair + 1].0 == .removed && events[pair].1 == events[pair + 1].1)
    }
  }

  @Test func aViewUpdatedAcrossAnUnloadAndALoadReportsBoth() throws {
    let libraries = try CoreTestLibraries.fresh("view")
    for _ in 0..<5 {
      var view = LoaderView()
      _ = view.update()
      let first = try #require(dlopen(libraries.first, RTLD_NOW | RTLD_LOCAL))
      let openUpdate = view.update()
      let opened = try #require(openUpdate)
      let firstImage = try #require(opened.added.first { $0.path == libraries.first })
      // Unload one and load others (likely where it was) with no update in between.
      #expect(dlclose(first) == 0)
      let reenter = try #require(dlopen(libraries.reenter, RTLD_NOW | RTLD_LOCAL))
      let reloadUpdate = view.update()
      let changes = try #require(reloadUpdate)
      #expect(changes.removed.filter { $0.path.hasPrefix(libraries.directory) } == [firstImage])
      #expect(Set(changes.added.map(\.path).filter { $0.hasPrefix(libraries.directory) }) == [libraries.reenter, libraries.second])
      #expect(view.images == LoaderView.capture(), "the updated view equals a fresh walk")
      #expect(dlclose(reenter) == 0)
      let closeUpdate = view.update()
      let closed = try #require(closeUpdate)
      #expect(Set(closed.removed.map(\.path).filter { $0.hasPrefix(libraries.directory) }) == [libraries.reenter, libraries.second])
    }
  }

  @Test func loadsThatBypassTheInterposersAreSeenAtRefresh() throws {
    let libraries = try CoreTestLibraries.fresh("bypass")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }
    // libc's dlopen, as glibc's own internal loads (NSS, iconv modules) reach it: no hook runs.
    let handle = try #require(il_real_dlopen(libraries.first, RTLD_NOW))
    #expect(recorder.all.isEmpty)
    #expect(LoadedImages.snapshot().contains { $0.path == libraries.first }, "snapshot() reads the loader directly")
    LoadedImages.refresh()
    #expect(recorder.events(.added, suffix: "/libcore_first.so").count == 1)
    LoadedImages.refresh()
    #expect(recorder.all.count == 1, "refresh() with nothing new delivers nothing")
    #expect(il_real_dlclose(handle) == 0)
    #expect(recorder.events(.removed, suffix: "/libcore_first.so").isEmpty)
    LoadedImages.refresh()
    #expect(recorder.events(.removed, suffix: "/libcore_first.so") == recorder.events(.added, suffix: "/libcore_first.so"))
  }

  /// A `dlopen` or `dlclose` is matched to what it changed without a walk only when the loader shows it
  /// is the one change (LoaderView.addOpened, removeClosed); these are the cases where it is not, and
  /// each must still give exactly the loader's changes.
  @Test func dlopenAndDlcloseReportExactlyTheLoadersChanges() throws {
    let libraries = try CoreTestLibraries.fresh("close")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }
    // Opened twice: the first dlclose unloads nothing, the second unloads it.
    let first = try #require(dlopen(libraries.first, RTLD_NOW))
    let again = try #require(dlopen(libraries.first, RTLD_NOW))
    #expect(recorder.events(.added, suffix: "/libcore_first.so").count == 1, "a second reference adds nothing")
    #expect(dlclose(again) == 0)
    #expect(recorder.events(.removed, suffix: "/libcore_first.so").isEmpty, "still loaded: no remove event")
    #expect(dlclose(first) == 0)
    #expect(recorder.events(.removed, suffix: "/libcore_first.so") == recorder.events(.added, suffix: "/libcore_first.so"))
    #expect(recorder.events(.removed, suffix: "/libcore_first.so").count == 1)
    // Another library unloaded behind the interposers just before: the next dlclose sees two objects
    // gone and reports both, each once, with the values their adds carried.
    let bypassed = try #require(dlopen(libraries.second, RTLD_NOW))
    let closed = try #require(dlopen(libraries.reenter, RTLD_NOW))
    #expect(il_real_dlclose(bypassed) == 0)
    #expect(dlclose(closed) == 0)
    for suffix in ["/libcore_second.so", "/libcore_reenter.so"] {
      #expect(recorder.events(.removed, suffix: suffix).count == 1, "\(suffix)")
      #expect(recorder.events(.removed, suffix: suffix) == recorder.events(.added, suffix: suffix), "\(suffix)")
    }
    // Likewise for dlopen: a library loaded behind the interposers just before is reported with the
    // next interposed dlopen's, in load order.
    let quiet = try #require(il_real_dlopen(libraries.second, RTLD_NOW))
    let loud = try #require(dlopen(libraries.reenter, RTLD_NOW))
    let adds = recorder.all.filter { $0.0 == .added }.map(\.1.path)
    #expect(Array(adds.suffix(2)) == [libraries.second, libraries.reenter])
    #expect(dlclose(loud) == 0)
    #expect(il_real_dlclose(quiet) == 0)
    LoadedImages.refresh()
    // Nothing left over for the next look at the loader.
    let before = recorder.all.count
    LoadedImages.refresh()
    #expect(recorder.all.count == before)
    #expect(!LoadedImages.snapshot().contains { $0.path.hasPrefix(libraries.directory) })
  }

  @Test func logImagesWritesToStandardErrorByDefault() throws {
    let libraries = try CoreTestLibraries.fresh("stderr")
    let capture = libraries.directory + "/stderr.txt"
    let file = open(capture, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    try #require(file >= 0)
    let saved = fcntl(2, F_DUPFD_CLOEXEC, 0)  // not inherited by children other tests start meanwhile
    dup2(file, 2)
    let token = LoadedImages.logImages()
    let handle = dlopen(libraries.first, RTLD_NOW)
    if let handle { dlclose(handle) }
    token.cancel()
    dup2(saved, 2)
    close(saved)
    close(file)
    try #require(handle != nil)
    let lines = try readTextFile(capture).split(separator: "\n")
    #expect(lines.contains { $0.hasPrefix("Added: 0x") && $0.contains(" \(LoadedImages.snapshot()[0].path) <") })
    #expect(lines.filter { $0.contains(libraries.first) }.map { $0.split(separator: " ")[0] } == ["Added:", "Removed:"])
  }

  /// dl_iterate_phdr reports only the caller's link-map namespace, so images `dlmopen`ed into another
  /// namespace are outside the list (a documented limit); they must not disturb what is reported.
  @Test func dlmopenNamespacesAreOutsideTheListAndDisturbNothing() throws {
    let libraries = try CoreTestLibraries.fresh("dlmopen")
    let recorder = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { recorder.record(.added, $0) }
    let removed = LoadedImages.onRemove { recorder.record(.removed, $0) }
    defer { added.cancel(); removed.cancel() }
    // Glibc's module map hides dlmopen (_GNU_SOURCE): look it up as a library would bind it, which
    // finds the executable's interposer first. LM_ID_NEWLM is -1.
    typealias DlmopenFunction = @convention(c) (Int, UnsafePointer<CChar>?, Int32) -> UnsafeMutableRawPointer?
    let dlmopen = unsafeBitCast(try #require(dlsym(nil, "dlmopen")), to: DlmopenFunction.self)
    let isolated = try #require(dlmopen(-1, libraries.second, RTLD_NOW), "\(String(cString: dlerror()))")
    #expect(recorder.all.isEmpty)
    #expect(!LoadedImages.snapshot().contains { $0.path.hasPrefix(libraries.directory) })
    let first = try #require(dlopen(libraries.first, RTLD_NOW | RTLD_LOCAL))
    #expect(recorder.all.map(\.1.path) == [libraries.first])
    #expect(dlclose(isolated) == 0)
    #expect(dlclose(first) == 0)
    #expect(recorder.all.map { $0.0 } == [.added, .removed])
    #expect(recorder.all.map(\.1.path) == [libraries.first, libraries.first])
  }

  @Test func registeringOrRefreshingInsideAConstructorDefersDelivery() throws {
    let libraries = try CoreTestLibraries.fresh("ctor")
    let hookLibrary = try #require(dlopen(libraries.ctorHook, RTLD_NOW | RTLD_GLOBAL))
    defer { dlclose(hookLibrary) }
    typealias Hook = (@convention(c) () -> Void)?
    let slot = try #require(dlsym(hookLibrary, "core_ctor_hook"))
    slot.storeBytes(of: constructorHook as Hook, as: Hook.self)
    defer { slot.storeBytes(of: nil as Hook, as: Hook.self) }
    let inside = EventRecorder(directory: libraries.directory)
    constructorObserver.withLock { $0 = (inside, nil) }
    let outside = EventRecorder(directory: libraries.directory)
    let added = LoadedImages.onAdd { outside.record(.added, $0) }
    defer { added.cancel() }

    let handle = try #require(dlopen(libraries.ctorCall, RTLD_NOW | RTLD_LOCAL), "\(String(cString: dlerror()))")
    let token = try #require(constructorObserver.withLock { $0.token }, "the constructor ran the hook")
    // Both observers heard of the library exactly once by the time dlopen returned, never from inside it.
    #expect(inside.events(.added, suffix: "/libcore_ctorcall.so").count == 1)
    #expect(outside.events(.added, suffix: "/libcore_ctorcall.so").count == 1)
    #expect(inside.deepestLoaderCall == 0 && outside.deepestLoaderCall == 0)
    token.cancel()
    #expect(dlclose(handle) == 0)
  }

  @Test func stressLoadingWhileRegisteringAndCancelling() throws {
    let libraries = try CoreTestLibraries.fresh("stress")
    let mine = libraries.directory
    // A permanent pair: per image, adds and removes must alternate, starting with an add.
    let history = Mutex<[Image: [ImageEvent]]>([:])
    let violations = Atomic(0)
    let loadFailures = Atomic(0)
    let permanentAdd = LoadedImages.onAdd { image in
      guard image.path.hasPrefix(mine) else { return }
      history.withLock { $0[image, default: []].append(.added) }
    }
    let permanentRemove = LoadedImages.onRemove { image in
      guard image.path.hasPrefix(mine) else { return }
      history.withLock { $0[image, default: []].append(.removed) }
    }
    let loaders = 4
    let registrars = 3
    let iterations = 150
    let finishedLoaders = Atomic(0)
    let observed = Atomic(0)
    let paths = [libraries.first, libraries.second, libraries.reenter]
    runOnThreads(loaders + registrars) { index in
      if index < loaders {
        for iteration in 0..<iterations {
          let path = paths[(index + iteration) % paths.count]
          guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else { loadFailures.add(1, ordering: .relaxed); continue }
          if iteration % 7 == 0 { LoadedImages.refresh() }
          if dlclose(handle) != 0 { loadFailures.add(1, ordering: .relaxed) }
        }
        finishedLoaders.add(1, ordering: .relaxed)
      } else {
        while finishedLoaders.load(ordering: .relaxed) < loaders {
          // Each transient observer keeps its own view: replay, then adds and removes must fit it.
          let view = Mutex<(ready: Bool, done: Bool, loaded: Set<Image>)>((false, false, []))
          let remove = LoadedImages.onRemove { image in
            view.withLock { view in
              // Before the replay: not in this observer's view yet; after `done`: one of the pair is cancelled.
              guard view.ready, !view.done else { return }
              if view.loaded.remove(image) == nil { violations.add(1, ordering: .relaxed) }
            }
          }
          let add = LoadedImages.onAdd { image in
            observed.add(1, ordering: .relaxed)
            view.withLock { view in
              guard !view.done else { return }
              view.ready = true  // the replay (never empty: the executable) comes first
              if !view.loaded.insert(image).inserted { violations.add(1, ordering: .relaxed) }
            }
          }
          #expect(view.withLock { $0.ready }, "onAdd returned before its replay")
          view.withLock { $0.done = true }
          add.cancel()
          remove.cancel()
        }
      }
    }
    permanentAdd.cancel()
    permanentRemove.cancel()
    #expect(violations.load(ordering: .relaxed) == 0)
    #expect(loadFailures.load(ordering: .relaxed) == 0)
    #expect(observed.load(ordering: .relaxed) > 0)
    let final = history.withLock { $0 }
    #expect(!final.isEmpty)
    for (image, events) in final {
      let alternates = events.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? .added : .removed) }
      #expect(alternates && events.count % 2 == 0, "\(image.path): \(events)")
    }
    #expect(!LoadedImages.snapshot().contains { $0.path.hasPrefix(mine) })
  }
}
