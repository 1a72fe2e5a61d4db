internal import Glibc

import ImageLog

/// `imagelog watch PID`: images as they come and go in a running process.
struct WatchCommand: Command {
  static let name = "watch"
  static let abstract = "Print images as a running process loads and unloads them, until it exits."
  static let usage = "imagelog watch <pid> [--interval <seconds>] [--format <style>] [--full-build-ids]"
  static let helpSections = """
    ARGUMENTS:
      <pid>                   The process to watch.

    OPTIONS:
      --interval <seconds>    How often to look (default: 0.5; at least 0.001).
      --format <style>        logger, crash, unstrip or json (default: logger).
      --full-build-ids        In the crash style, print whole build-ids instead of their first 16 bytes.
      -h, --help              Show help information.

    NOTES:
      Prints an Added: line for every image loaded at the start, then Added:/Removed: lines as
      images come and go; a Removed: line of an image added during the watch ends with how long it
      was loaded, '(loaded for D ms)' (to the interval's precision; "loadedForNanoseconds" in JSON). Exits 0 when the process exits; stops on Ctrl-C (SIGINT) or SIGTERM.
      This polls /proc/PID/maps: an image loaded and unloaded within one interval is missed; one
      that stays loaded for longer than the interval is always reported. For every event, use
      'imagelog run'.
    """

  var pid: Int32
  var interval: Duration
  var formatter: ImageFormatter

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    formatter = try parseFormatter(&scanner, default: .logger)
    let intervalText = try scanner.option("--interval")
    if let intervalText {
      guard let seconds = Double(intervalText), seconds.isFinite, seconds >= 0.001, seconds <= 86_400 else {
        throw scanner.usageError("The value '\(intervalText)' is invalid for '--interval <seconds>'")
      }
      interval = .nanoseconds(Int64(seconds * 1e9))  // seconds <= 86400, so the product fits
    } else {
      interval = .milliseconds(500)
    }
    pid = try parsePIDArgument(&scanner)
  }

  func run() throws -> ExitStatus {
    // When each image was first seen added, by load address: a removal says how long it stayed (to the
    // poll: the interval is the precision). Images already loaded when the watch began are not timed.
    var addedAt: [UInt64: Int] = [:]
    var first = true
    do {
      _ = try ProcessImages.watch(pid: pid, interval: interval) { change in
        switch change {
        case .added(let image):
          if !first { addedAt[image.loadAddress] = monotonicNanoseconds() }
          printOutput(formatter.eventLine(image, event: .added))
        case .removed(let image):
          let loadedFor = addedAt.removeValue(forKey: image.loadAddress).map { UInt64(max(0, monotonicNanoseconds() - $0)) }
          printOutput(formatter.eventLine(image, event: .removed, loadedFor: loadedFor))
        }
      } afterPoll: {
        first = false
      }
    } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    return .success
  }
}

