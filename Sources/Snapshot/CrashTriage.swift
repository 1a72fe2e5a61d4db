import ProcessInspection
import ImageReaders

/// Many crashes grouped by signature (`imagelog triage`): per group its count, first and last crash,
/// builds, operating systems, crash reasons, the files, crashes per day and one example crash with its
/// crashing thread.
///
/// Memory grows with the groups and their files, never with the crashes' threads: a crash is added as
/// a `Crash` (a few strings), and only the first crash of a group gives its frames (`Example`).
package struct CrashTriage: Sendable {
  /// What one crash gave: enough to place it in its group again without reading its file (`--state`).
  package struct Crash: Sendable, Equatable {
    /// The file the crash was read from.
    package var path: String
    /// The file's size in bytes and modification time (seconds since the epoch) when it was read.
    package var size: Int64
    package var modified: Int64
    /// Socorro's signature of the crash (`ProcessSnapshot.signature`).
    package var signature: String
    /// When the crash happened, seconds since the epoch: the time the report states, else the time in
    /// the crash folder's file name, else the file's modification time.
    package var time: Int64
    /// The program's name.
    package var program: String?
    /// The main executable's identity (`NAME BUILDID`), when the report names it.
    package var build: String?
    /// The operating system (`Linux 6.1.0-...`), when the report says.
    package var os: String?
    /// The crash as minidump-stackwalk names it (`SIGSEGV / SEGV_MAPERR`).
    package var reason: String?

    package init(path: String, size: Int64, modified: Int64, signature: String, time: Int64, program: String? = nil,
                 build: String? = nil, os: String? = nil, reason: String? = nil) {
      self.path = path
      self.size = size
      self.modified = modified
      self.signature = signature
      self.time = time
      self.program = program
      self.build = build
      self.os = os
      self.reason = reason
    }
  }

  /// One function of an example's crashing thread (an inlined call gets a row of its own, innermost first).
  package struct Frame: Sendable, Equatable {
    /// The frame's number in its thread.
    package var number: Int
    package var address: Address
    package var module: String?
    package var function: String?
    package var file: String?
    package var line: Int?

    package init(number: Int, address: Address, module: String?, function: String?, file: String?, line: Int?) {
      self.number = number
      self.address = address
      self.module = module
      self.function = function
      self.file = file
      self.line = line
    }
  }

  /// A group's example: one crash's file and its crashing thread.
  package struct Example: Sendable, Equatable {
    package var path: String
    /// The thread as the report names it (`Thread 0 (main)`).
    package var thread: String
    /// At most `Example.maximumFrames` frames.
    package var frames: [Frame]

    /// Frames kept of an example's thread: a signature is made from the top few, a person reads a screen.
    package static let maximumFrames = 64

    package init(path: String, thread: String, frames: [Frame]) {
      self.path = path
      self.thread = thread
      self.frames = frames
    }
  }

  /// The crashes that share a signature.
  package struct Group: Sendable {
    package var signature: String
    package var count = 0
    package var firstTime = Int64.max
    package var lastTime = Int64.min
    /// Crashes per build, operating system and reason (`""`: not known).
    package var builds: [String: Int] = [:]
    package var oses: [String: Int] = [:]
    package var reasons: [String: Int] = [:]
    /// Crashes per day (days since the epoch, UTC).
    package var days: [Int64: Int] = [:]
    /// Each crash's file, in the order added (a file with several reports is named once for each).
    package var files: [String] = []
    package var example: Example?

    package init(signature: String) { self.signature = signature }

    /// `counts` as (value, count) pairs, most crashes first, then by value.
    package static func ranked(_ counts: [String: Int]) -> [(value: String, count: Int)] {
      counts.map { ($0.key, $0.value) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
    }
  }

  /// A file that is not a crash imagelog reads (damaged, foreign), with why.
  package struct Unreadable: Sendable, Equatable {
    package var path: String
    package var size: Int64
    package var modified: Int64
    package var problem: String

    package init(path: String, size: Int64, modified: Int64, problem: String) {
      self.path = path
      self.size = size
      self.modified = modified
      self.problem = problem
    }
  }

  package private(set) var groups: [String: Group] = [:]
  package private(set) var unreadable: [Unreadable] = []
  /// How many crashes were added.
  package private(set) var crashCount = 0
  /// How many files were read in this run, and how many were taken from a `--state` file instead.
  package var filesRead = 0
  package var filesFromState = 0

  package init() {}

  /// Adds `crash` to its group; `example` is asked for only when the group has none yet.
  package mutating func add(_ crash: Crash, example: () -> Example?) {
    var group = groups.removeValue(forKey: crash.signature) ?? Group(signature: crash.signature)
    group.count += 1
    group.firstTime = min(group.firstTime, crash.time)
    group.lastTime = max(group.lastTime, crash.time)
    group.builds[crash.build ?? "", default: 0] += 1
    group.oses[crash.os ?? "", default: 0] += 1
    group.reasons[crash.reason ?? "", default: 0] += 1
    group.days[Self.day(of: crash.time), default: 0] += 1
    group.files.append(crash.path)
    if group.example == nil { group.example = example() }
    groups[crash.signature] = group
    crashCount += 1
  }

  /// Counts `file` as unreadable.
  package mutating func addUnreadable(_ file: Unreadable) { unreadable.append(file) }

  /// The groups, most crashes first (then by signature, so the order is the same every run).
  package var rankedGroups: [Group] {
    groups.values.sorted { $0.count != $1.count ? $0.count > $1.count : $0.signature < $1.signature }
  }

  /// The day (since the epoch, UTC) `time` falls on; times before the epoch round down.
  package static func day(of time: Int64) -> Int64 {
    time >= 0 ? time / 86_400 : -((-time + 86_399) / 86_400)
  }

  /// The first and last day any crash fell on, when there is a crash.
  package var dayRange: ClosedRange<Int64>? {
    guard crashCount > 0 else { return nil }
    let first = groups.values.map { Self.day(of: $0.firstTime) }.min() ?? 0
    let last = groups.values.map { Self.day(of: $0.lastTime) }.max() ?? first
    return first...max(first, last)
  }

  /// The chart's buckets over `dayRange`: at most `limit`, each `width` days from `start` on.
  package static func buckets(_ range: ClosedRange<Int64>, limit: Int = 30) -> (start: Int64, width: Int64, count: Int) {
    let span = range.upperBound - range.lowerBound + 1  // >= 1: a ClosedRange is never empty
    let width = (span + Int64(limit) - 1) / Int64(limit)
    return (range.lowerBound, width, Int((span + width - 1) / width))
  }

  /// The group's crashes in each bucket (`buckets`).
  package static func histogram(_ group: Group, start: Int64, width: Int64, count: Int) -> [Int] {
    var counts = [Int](repeating: 0, count: count)
    for (day, crashes) in group.days {
      let index = Int((day - start) / width)
      if counts.indices.contains(index) { counts[index] += crashes }
    }
    return counts
  }
}

extension ProcessSnapshot {
  /// The snapshot as a triage crash read from `path` (its size and modification time given), with
  /// `signature` made already; `fileTime` is the time when the report states none.
  package func triageCrash(path: String, size: Int64, modified: Int64, signature: String, fileTime: Int64) -> CrashTriage.Crash {
    let main = mainExecutableIndex.map { images[$0] }
    // The first 16 bytes of a build-id: what a text report can show of it (Apple's UUID column), so the
    // same build read from its report and from its minidump is one build.
    let build = main.map { image in image.identity.map { "\(image.name) \(BuildID(Array($0.bytes.prefix(16))).hex)" } ?? image.name }
    let os = [stackwalkOS.name, stackwalkOS.version].compactMap { $0 }.joined(separator: " ")
    return CrashTriage.Crash(path: path, size: size, modified: modified, signature: signature, time: process.date ?? fileTime,
                             program: process.name ?? main?.name, build: build, os: os.isEmpty ? nil : os,
                             reason: stackwalkCrashType ?? reportedReason)
  }

  /// The crash as a text report states it when the model has no exception: its `Exception Type:`
  /// (`SIGSEGV (SEGV_MAPERR)` written as minidump-stackwalk's `SIGSEGV / SEGV_MAPERR`), or a
  /// sanitizer's `SUMMARY:` kind (`AddressSanitizer: heap-buffer-overflow`).
  package var reportedReason: String? {
    for line in document?.lines ?? [] {
      let text = line.drop { $0 == " " || $0 == "\t" }
      if text.hasPrefix("Exception Type:") {
        let value = text.dropFirst("Exception Type:".count).trimmingPrefix(" ")
        let words = value.split(separator: " ")
        if words.count == 2, words[1].hasPrefix("("), words[1].hasSuffix(")") {
          return "\(words[0]) / \(words[1].dropFirst().dropLast())"
        }
        return value.isEmpty ? nil : String(value)
      }
      if text.hasPrefix("SUMMARY: ") {
        let words = text.dropFirst("SUMMARY: ".count).split(separator: " ").prefix(2)
        return words.isEmpty ? nil : words.joined(separator: " ")
      }
    }
    return nil
  }

  /// The index of the main executable's image: the one the loader marked, else the one at the
  /// process's path or with its name, else the first.
  package var mainExecutableIndex: Int? {
    images.firstIndex { $0.loaded?.isMainExecutable == true }
      ?? process.path.flatMap { path in images.firstIndex { $0.path == path } }
      ?? process.name.flatMap { name in images.firstIndex { $0.name == name } }
      ?? (images.isEmpty ? nil : 0)
  }

  /// The crashing thread (the one that asked for a dump, else the first) as a triage example.
  package func triageExample(path: String) -> CrashTriage.Example? {
    guard let index = crashedThreadIndex ?? threads.firstIndex(where: \.requestedDump) ?? (threads.isEmpty ? nil : 0) else {
      return nil
    }
    let thread = threads[index]
    var frames: [CrashTriage.Frame] = []
    for frame in thread.frames where frames.count < CrashTriage.Example.maximumFrames {
      let name = stackwalkFrameName(frame)
      let inlined = frame.symbols.functions.count > 1 ? frame.symbols.functions.dropLast() : []
      for function in inlined + [name.function].compactMap({ $0 }) {
        frames.append(CrashTriage.Frame(number: frame.number, address: frame.address, module: name.module,
                                        function: function.name, file: function.file, line: function.line))
      }
      if name.function == nil {
        frames.append(CrashTriage.Frame(number: frame.number, address: frame.address, module: name.module,
                                        function: nil, file: nil, line: nil))
      }
    }
    let label = "Thread \(thread.number)" + (thread.name.map { " (\($0))" } ?? "") + (thread.crashed ? " crashed" : "")
    return CrashTriage.Example(path: path, thread: label, frames: Array(frames.prefix(CrashTriage.Example.maximumFrames)))
  }
}
