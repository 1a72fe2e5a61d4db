import ProcessInspection
import ImageReaders
import Snapshot

/// Reads back the `--state` file `CrashTriage.state` writes: the crashes and unreadable files an
/// earlier `imagelog triage` read, by file, and the groups' examples.
package enum CrashTriageStateParser {
  package struct State: Sendable {
    /// The crashes each file gave (a file with several reports gives several), by path.
    package var crashes: [String: [CrashTriage.Crash]] = [:]
    package var unreadable: [String: CrashTriage.Unreadable] = [:]
    /// The groups' examples, by the file each was read from.
    package var examples: [String: CrashTriage.Example] = [:]

    package init() {}
  }

  /// The state in `text`; throws a one-line `ReportError` for a file that is not a state file imagelog wrote.
  package static func parse(_ text: String) throws(ReportError) -> State {
    let document: JSONValue
    do { document = try JSONValue.parse(Substring(text)) } catch { throw ReportError("not a triage state file: \(error)") }
    guard document["schema"]?.string == "imagelog-triage-state" else {
      throw ReportError("not a triage state file (no \"schema\": \"imagelog-triage-state\")")
    }
    guard document["schemaVersion"]?.integer == 1 else {
      throw ReportError("triage state schemaVersion \(document["schemaVersion"]?.integer.map(String.init) ?? "?") is not 1")
    }
    var state = State()
    for (index, entry) in (document["crashes"]?.array ?? []).enumerated() {
      guard let path = entry["path"]?.string, let signature = entry["signature"]?.string, let size = number(entry["size"]),
            let modified = number(entry["modified"]), let time = number(entry["time"]) else {
        throw ReportError("triage state: crash \(index) lacks its path, signature, size, modified or time")
      }
      let crash = CrashTriage.Crash(path: path, size: size, modified: modified, signature: signature, time: time,
                                    program: entry["program"]?.string, build: entry["build"]?.string,
                                    os: entry["os"]?.string, reason: entry["reason"]?.string)
      state.crashes[path, default: []].append(crash)
    }
    for (index, entry) in (document["unreadable"]?.array ?? []).enumerated() {
      guard let path = entry["path"]?.string, let size = number(entry["size"]), let modified = number(entry["modified"]) else {
        throw ReportError("triage state: unreadable file \(index) lacks its path, size or modified")
      }
      state.unreadable[path] = CrashTriage.Unreadable(path: path, size: size, modified: modified,
                                                      problem: entry["problem"]?.string ?? "unreadable")
    }
    for entry in document["examples"]?.array ?? [] {
      guard let path = entry["path"]?.string, let thread = entry["thread"]?.string else { continue }
      let frames = (entry["frames"]?.array ?? []).prefix(CrashTriage.Example.maximumFrames).map { frame in
        CrashTriage.Frame(number: frame["number"]?.integer ?? 0, address: frame["address"]?.unsigned ?? 0,
                          module: frame["module"]?.string, function: frame["function"]?.string,
                          file: frame["file"]?.string, line: frame["line"]?.integer)
      }
      state.examples[path] = CrashTriage.Example(path: path, thread: thread, frames: Array(frames))
    }
    return state
  }

  static func number(_ value: JSONValue?) -> Int64? {
    value?.unsigned.flatMap { Int64(exactly: $0) }
  }
}
