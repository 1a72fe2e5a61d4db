internal import CImageLogProcess
internal import Glibc

extension ProcessImages {
  /// An image that came or went between two snapshots.
  public enum Change: Sendable, Equatable {
    case added(Image)
    case removed(Image)
  }

  /// Why `watch` returned.
  public enum WatchEnd: Sendable, Equatable {
    /// The process exited (or became a zombie).
    case processExited
    /// SIGINT or SIGTERM arrived.
    case interrupted
  }

  /// What changed from `old` to `new`: removals first (in `old`'s order), then additions (in
  /// `new`'s order). An image is the same when its path, load address and build-id are, so a
  /// library unloaded and another loaded at the same address is a removal and an addition.
  package static func changes(from old: [Image], to new: [Image]) -> [Change] {
    struct Key: Hashable { var path: String; var loadAddress: Address; var buildID: String? }
    func key(_ image: Image) -> Key { Key(path: image.path, loadAddress: image.loadAddress, buildID: image.buildID?.hex) }
    let oldKeys = Set(old.map(key))
    let newKeys = Set(new.map(key))
    return old.filter { !newKeys.contains(key($0)) }.map(Change.removed)
      + new.filter { !oldKeys.contains(key($0)) }.map(Change.added)
  }

  /// Polls process `pid` every `interval` and calls `onChange` for each image that came or went,
  /// starting with an `.added` for every image already loaded, and `afterPoll` once each poll's changes
  /// are delivered. Returns when the process exits or on SIGINT/SIGTERM (which it catches for the
  /// duration).
  ///
  /// Polling cannot see an image loaded and unloaded within one interval; one that stays for
  /// longer is always reported.
  public static func watch(pid: Int32, interval: Duration,
                           onChange: (Change) -> Void, afterPoll: () -> Void = {}) throws(ProcessError) -> WatchEnd {
    il_catch_interrupts()
    var previous: [Image] = []
    var first = true
    while il_was_interrupted() == 0 {
      let current: [Image]
      do {
        current = try snapshot(of: pid)
      } catch {
        switch error {
        case .noImages where !previous.isEmpty:
          current = previous  // inside an exec or exiting: the next poll tells which
        case .exited, .zombie: return .processExited
        case .noSuchProcess where !first: return .processExited
        default: throw error
        }
      }
      for change in changes(from: previous, to: current) { onChange(change) }
      afterPoll()
      previous = current
      first = false
      var remaining = timespec(tv_sec: Int(interval.components.seconds),
                               tv_nsec: Int(interval.components.attoseconds / 1_000_000_000))
      // A signal cuts the sleep short (EINTR); the loop condition then sees the flag.
      if nanosleep(&remaining, nil) != 0 && il_was_interrupted() != 0 { break }
    }
    return .interrupted
  }
}
