import Glibc

/// Tests/Programs/unloaded-plugin.c built as a shared library (a SHA-1 build-id) into `directory`, with
/// its build-id as `readelf -n` prints it: the plugin the "unloaded" crash modes close and then call.
public struct UnloadedPlugin: Sendable {
  /// The library's path.
  public var path: String
  /// `Build ID:` of `readelf -n` (lowercase hex).
  public var buildID: String
  /// Tests/Programs/unloaded-other.c built beside it (`libother.so`): the library the "replaced" modes
  /// load where the plugin was.
  public var other: String

  /// Builds the plugin with `compiler` and reads its build-id with `readelf`.
  public static func build(in directory: String, compiler: String, readelf: String) throws -> UnloadedPlugin {
    let path = directory + "/libplugin.so"
    let built = try runChild([compiler, "-shared", "-fPIC", "-Wl,--build-id=sha1",
                              packageRoot + "/Tests/Programs/unloaded-plugin.c", "-o", path])
    guard built.exitCode == 0 else { throw TestSupportError("cc failed: \(built.error)") }
    let other = directory + "/libother.so"
    let builtOther = try runChild([compiler, "-shared", "-fPIC", "-Wl,--build-id=sha1",
                                   packageRoot + "/Tests/Programs/unloaded-other.c", "-o", other])
    guard builtOther.exitCode == 0 else { throw TestSupportError("cc failed: \(builtOther.error)") }
    let notes = try runChild([readelf, "-n", path])
    guard let line = notes.output.split(separator: "\n").first(where: { $0.contains("Build ID:") }),
          let id = line.split(separator: " ").last else {
      throw TestSupportError("readelf -n shows no build-id: \(notes.output)")
    }
    return UnloadedPlugin(path: path, buildID: String(id), other: other)
  }
}

/// One line of a report's `Image Timeline:` section ("-0.173 ms  loaded libplugin.so at 0x7f.. by thread 522",
/// "-0.120 ms  unloaded libplugin.so at 0x7f.. (loaded for 0.052 ms) by thread 522"), read by the tests' own parser.
public struct TimelineLine: Sendable, Equatable {
  /// Milliseconds relative to the crash (negative: before it).
  public var milliseconds: Double
  /// "loaded" or "unloaded".
  public var kind: String
  /// The image's name.
  public var name: String
  /// Where the image was.
  public var base: UInt64?
  /// An unload's "loaded for" milliseconds.
  public var loadedForMilliseconds: Double?
  /// The thread.
  public var tid: Int32

  /// The lines of `report`'s `Image Timeline:` section, in order; nil when a line does not read.
  public static func parse(report: String) -> [TimelineLine]? {
    guard let start = report.ranges(of: "\nImage Timeline:\n").first else { return [] }
    var lines: [TimelineLine] = []
    for line in report[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
      if line.isEmpty { break }
      let words = line.split(separator: " ")
      guard words.count >= 7, words[1] == "ms", let milliseconds = Double(words[0]),
            words[words.count - 3] == "by", words[words.count - 2] == "thread", let tid = Int32(words[words.count - 1])
      else { return nil }
      var parsed = TimelineLine(milliseconds: milliseconds, kind: String(words[2]), name: String(words[3]), base: nil,
                                loadedForMilliseconds: nil, tid: tid)
      guard words[4] == "at", words[5].hasPrefix("0x") else { return nil }
      parsed.base = UInt64(words[5].dropFirst(2), radix: 16)
      if parsed.kind == "unloaded", words.count == 13, words[6] == "(loaded", words[7] == "for", words[9] == "ms)" {
        parsed.loadedForMilliseconds = Double(words[8])
      } else if words.count != 9 || !["loaded", "unloaded"].contains(parsed.kind) {
        return nil
      }
      lines.append(parsed)
    }
    return lines
  }

  /// The issues of a timeline that should be, in order, the loads of `first` (at `firstBase`) and `second`
  /// (at `secondBase`) then their unloads in the same order, all by thread `tid`, before the crash and no
  /// earlier than `withinMilliseconds` before it, with each "loaded for" the time between its two events.
  public static func problems(_ lines: [TimelineLine], first: String, firstBase: UInt64, second: String,
                              secondBase: UInt64, tid: Int32, withinMilliseconds: Double) -> [String] {
    var problems: [String] = []
    let expected = [("loaded", first), ("loaded", second), ("unloaded", first), ("unloaded", second)]
    guard lines.map({ [$0.kind, $0.name] }) == expected.map({ [$0.0, $0.1] }) else {
      return ["events \(lines.map { "\($0.kind) \($0.name)" }), expected \(expected)"]
    }
    if lines.map(\.base) != [firstBase, secondBase, firstBase, secondBase] { problems.append("addresses \(lines.map(\.base))") }
    if lines.contains(where: { $0.tid != tid }) { problems.append("threads \(lines.map(\.tid)), expected \(tid)") }
    let times = lines.map(\.milliseconds)
    if times != times.sorted() { problems.append("times not in order: \(times)") }
    if times.contains(where: { $0 > 0 }) { problems.append("an event after the crash: \(times)") }
    if times[0] < -withinMilliseconds { problems.append("\(times[0]) ms: before the program ran (\(withinMilliseconds) ms)") }
    // Each time is cut to microseconds: a difference of two is within 0.002 ms of the exact one.
    for (unload, load) in [(2, 0), (3, 1)] {
      guard let loadedFor = lines[unload].loadedForMilliseconds else { problems.append("no loaded for: \(lines[unload])"); continue }
      if abs(loadedFor - (times[unload] - times[load])) > 0.0021 {
        problems.append("\(lines[unload].name) loaded for \(loadedFor) ms, its events \(times[unload] - times[load]) ms apart")
      }
    }
    return problems
  }
}
