import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing

/// `imagelog triage` on a few hundred crashes of a handful of bugs (`TriageCorpus`): one group per bug,
/// its count, files, builds, reasons, dates and example; the damaged files named; `--state`; the HTML
/// page in headless chromium.
@Suite(.serialized, .enabled(if: haveTool("cc") && haveTool("readelf"), "needs cc and readelf to make the crashes"))
struct TriageCommandTests {
  let imagelog = builtProduct("imagelog")

  func corpus() throws -> TriageCorpus { try TriageCorpus.shared.get() }

  func triage(_ arguments: [String]) throws -> ChildResult {
    // No debuginfod: every file the crashes name is on this machine.
    let result = try runChild([imagelog, "triage"] + arguments, environment: ["DEBUGINFOD_URLS": ""], timeoutSeconds: 300)
    #expect(!result.timedOut)
    return result
  }

  func json(_ text: String) throws -> JSONValue { try JSONValue.parse(Substring(text)) }

  /// The groups of a triage JSON document by signature.
  func groups(_ document: JSONValue) -> [String: JSONValue] {
    var result: [String: JSONValue] = [:]
    for group in document["groups"]?.array ?? [] { if let signature = group["signature"]?.string { result[signature] = group } }
    return result
  }

  func values(_ list: JSONValue?) -> [String: Int] {
    var result: [String: Int] = [:]
    for entry in list?.array ?? [] { result[entry["value"]?.string ?? "", default: 0] += entry["count"]?.integer ?? 0 }
    return result
  }

  @Test func oneGroupPerBugWithItsCountsFilesAndExample() throws {
    let corpus = try corpus()
    let start = monotonicTime()
    let result = try triage(["--format", "json", corpus.folder])
    let seconds = monotonicTime() - start
    print("triage of \(corpus.total + corpus.unreadable.count) files: \(seconds) s")
    // The damaged files make the status 1; each is named on standard error, one line each.
    #expect(result.exitCode == 1)
    for path in corpus.unreadable { #expect(result.error.contains("imagelog: \(path): unreadable: ")) }
    #expect(result.error.split(separator: "\n").count == corpus.unreadable.count)
    let document = try json(result.output)
    #expect(document["crashes"]?.integer == corpus.total)
    #expect(document["filesRead"]?.integer == corpus.total + corpus.unreadable.count)
    #expect(document["filesFromState"]?.integer == 0)
    #expect(Set((document["unreadable"]?.array ?? []).compactMap { $0["path"]?.string }) == Set(corpus.unreadable))
    for entry in document["unreadable"]?.array ?? [] {
      let problem = entry["problem"]?.string ?? ""
      #expect(!problem.isEmpty)
    }
    let groups = document["groups"]?.array ?? []
    #expect(groups.count == corpus.bugs.count, "one group per bug")
    // Widest first.
    let counts = groups.compactMap { $0["count"]?.integer }
    #expect(counts == counts.sorted(by: >))
    var total = 0
    for (name, bug) in corpus.bugs {
      // The group holding the bug's files holds all of them and nothing else.
      let matching = groups.filter { group in (group["files"]?.array ?? []).contains { bug.files.contains($0.string ?? "") } }
      #expect(matching.count == 1, "\(name): its crashes are in \(matching.count) groups")
      guard let group = matching.first else { continue }
      let files = (group["files"]?.array ?? []).compactMap(\.string)
      #expect(Set(files) == bug.files, "\(name)")
      #expect(files.count == bug.files.count, "\(name): a file counted twice")
      #expect(group["count"]?.integer == bug.files.count, "\(name)")
      total += group["count"]?.integer ?? 0
      if let signature = bug.signature { #expect(group["signature"]?.string == signature, "\(name)") }
      if !bug.builds.isEmpty { #expect(Set(values(group["builds"]).keys) == bug.builds, "\(name)") }
      if !bug.reasons.isEmpty { #expect(Set(values(group["reasons"]).keys) == bug.reasons, "\(name)") }
      #expect(values(group["builds"]).values.reduce(0, +) == bug.files.count)
      let days = (group["days"]?.array ?? []).compactMap { $0["count"]?.integer }
      #expect(days.reduce(0, +) == bug.files.count, "\(name): crashes per day")
      if let first = bug.firstSeen { #expect(group["firstSeen"]?.integer.map(Int64.init) == first, "\(name)") }
      if let last = bug.lastSeen { #expect(group["lastSeen"]?.integer.map(Int64.init) == last, "\(name)") }
      // The example: one of the group's files, its crashing thread with the bug's function at its line.
      let example = group["example"]
      #expect(bug.files.contains(example?["path"]?.string ?? ""), "\(name)")
      let frames = example?["frames"]?.array ?? []
      #expect(!frames.isEmpty, "\(name)")
      if let function = bug.function {
        let frame = frames.first { $0["function"]?.string == function }
        #expect(frame != nil, "\(name): \(function) not in the example \(frames.compactMap { $0["function"]?.string })")
        #expect(frame?["file"]?.string?.hasSuffix("/triage-bugs.c") == true, "\(name)")
        #expect(frame?["line"]?.integer == bug.line, "\(name)")
        // Frames above it are only the abort's own (libc), never another of the program's functions.
        let above = frames.prefix { $0["function"]?.string != function }
        #expect(!above.contains { ($0["file"]?.string ?? "").hasSuffix("triage-bugs.c") }, "\(name)")
      }
    }
    #expect(total == corpus.total)
  }

  @Test func tableFitsAHundredColumnsWidestGroupsFirst() throws {
    let corpus = try corpus()
    let result = try triage([corpus.folder])
    let lines = result.output.split(separator: "\n").map(String.init)
    for line in lines where !line.hasPrefix("unreadable: ") { #expect(line.count <= 100, "\(line.count) columns: \(line)") }
    let rows = lines.dropFirst().prefix { $0.first == " " }
    #expect(rows.count == corpus.bugs.count)
    let counts = rows.compactMap { Int($0.split(separator: " ").first ?? "") }
    #expect(counts == corpus.bugs.values.map(\.files.count).sorted(by: >))
    // The signature cell (after the last two spaces), whole or cut to fit with an ellipsis.
    let cells = rows.map { row in String((row.ranges(of: "  ").last.map { row[$0.upperBound...] } ?? row[...]).drop { $0 == " " }) }
    for signature in corpus.bugs.values.compactMap(\.signature) {
      #expect(cells.contains { $0 == signature || ($0.hasSuffix("…") && $0.count > 10 && signature.hasPrefix($0.dropLast())) }, "\(signature): \(cells)")
    }
    #expect(lines.contains("\(corpus.total) crashes in \(corpus.bugs.count) groups (files: \(corpus.total + corpus.unreadable.count) read, "
                           + "0 from the state, \(corpus.unreadable.count) unreadable)"))
    for path in corpus.unreadable { #expect(lines.contains { $0.hasPrefix("unreadable: \(path): ") }) }
  }

  @Test func aSecondRunWithStateReadsOnlyNewAndChangedFiles() throws {
    let corpus = try corpus()
    let folder = try makeTemporaryDirectory("imagelog-triage-state")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let crashes = folder + "/crashes"
    let copied = try runChild(["cp", "-r", corpus.folder + "/sanitizer", corpus.folder + "/copied", corpus.folder + "/dumps", folder + "/"])
    #expect(copied.exitCode == 0)
    _ = mkdir(crashes, 0o755)
    for name in ["sanitizer", "copied", "dumps"] { _ = rename(folder + "/" + name, crashes + "/" + name) }
    let state = folder + "/state.json"
    let before = directoryNames(crashes + "/sanitizer").count + directoryNames(crashes + "/copied").count
      + directoryNames(crashes + "/dumps").count
    let first = try json(try triage(["--format", "json", "--state", state, crashes]).output)
    #expect(first["filesRead"]?.integer == before)
    #expect(first["filesFromState"]?.integer == 0)
    #expect(readFile(state)?.contains("\"imagelog-triage-state\"") == true)
    // New files, and one changed: only these are read again.
    for copy in 0..<3 { _ = try runChild(["cp", corpus.folder + "/sanitizer/gamma-0.log", crashes + "/new-\(copy).log"]) }
    let changed = crashes + "/sanitizer/gamma-1-5.log"
    try TriageCorpus.setModified(changed, epochSeconds("2026-12-01 00:00:00"))
    let secondRun = try triage(["--format", "json", "--state", state, crashes])
    #expect(secondRun.exitCode == 0, "\(secondRun.error)")
    let second = try json(secondRun.output)
    #expect(second["filesRead"]?.integer == 4)
    #expect(second["filesFromState"]?.integer == before - 1)
    #expect(second["crashes"]?.integer == before + 3)
    // What the state gave is what reading every file gives.
    let fresh = try json(try triage(["--format", "json", crashes]).output)
    #expect(fresh["filesRead"]?.integer == before + 3)
    let stated = groups(second), read = groups(fresh)
    #expect(Set(stated.keys) == Set(read.keys))
    for (signature, group) in read {
      for key in ["count", "firstSeen", "lastSeen", "builds", "oses", "reasons", "days", "example"] {
        #expect(stated[signature]?[key] == group[key], "\(signature): \(key)")
      }
      #expect(Set((stated[signature]?["files"]?.array ?? []).compactMap(\.string)) == Set((group["files"]?.array ?? []).compactMap(\.string)))
    }
    let lastSeen = stated["Abort | AddressSanitizer: heap-buffer-overflow | triage_overflow"]?["lastSeen"]?.integer.map(Int64.init) ?? 0
    #expect(lastSeen >= TriageCorpus.modified(crashes + "/new-0.log"))
  }

  /// The engine triage reads with is symbolicate --output-dir's: it now reads cores and minidumps too.
  @Test func symbolicateOutputDirReadsCoresAndMinidumpsAsTriageDoes() throws {
    let corpus = try corpus()
    let folder = try makeTemporaryDirectory("imagelog-triage-outputdir")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let dump = try #require(directoryNames(corpus.folder + "/dumps").first { $0.hasPrefix("beta-") })
    var inputs = [corpus.folder + "/dumps/" + dump]
    if haveTool("gdb") { inputs.append(corpus.folder + "/cores/beta.core") }
    let result = try runChild([imagelog, "symbolicate", "--output-dir", folder + "/out"] + inputs, environment: ["DEBUGINFOD_URLS": ""])
    #expect(result.exitCode == 0, "\(result.error)")
    let line = try TriageCorpus.sourceLine("abort")
    for input in inputs {
      let report = readFile(folder + "/out/" + (input.split(separator: "/").last.map(String.init) ?? "")) ?? ""
      #expect(report.contains("\nSignature:       triage_check_failed\n"), "\(input)")
      #expect(report.contains("triage_check_failed") && report.contains("triage-bugs.c:\(line)"), "\(input): \(report.prefix(2000))")
    }
  }

  @Test func badOptionsAndAForeignStateFileAreOneLineErrors() throws {
    let folder = try makeTemporaryDirectory("imagelog-triage-options")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let format = try triage(["--format", "xml", folder])
    #expect(format.exitCode == 64)
    #expect(format.error.hasPrefix("Error: Unknown format 'xml' (table, json or html)\n"))
    let none = try triage([])
    #expect(none.exitCode == 64)
    #expect(none.error.hasPrefix("Error: Missing a crash report or a folder of them\n"))
    let state = folder + "/state.json"
    try writeFile(state, "{\"threads\": []}\n")
    let foreign = try triage(["--state", state, folder])
    #expect(foreign.exitCode == 1)
    #expect(foreign.error == "imagelog: \(state): not a triage state file (no \"schema\": \"imagelog-triage-state\")\n")
    #expect(readFile(state) == "{\"threads\": []}\n", "a file that is not a state is left as it was")
    let missing = try triage([folder + "/absent"])
    #expect(missing.exitCode == 1)
    #expect(missing.error.contains("imagelog: \(folder)/absent: no such file or directory\n"))
  }

  @Test(.enabled(if: haveTool("chromium"), "chromium is not installed (Scripts/install-test-tools installs it)"))
  func htmlPageDrawsEveryGroupInHeadlessChromium() throws {
    let corpus = try corpus()
    let folder = try makeTemporaryDirectory("imagelog-triage-html")
    let page = folder + "/triage.html"
    let written = try triage(["--format", "html", "-o", page, corpus.folder])
    #expect(written.exitCode == 1, "the damaged files are named")
    #expect(written.output.isEmpty)
    let document = try json(try triage(["--format", "json", corpus.folder]).output)
    guard let html = readFile(page) else { Issue.record("no page written"); return }
    // Self-contained: nothing to fetch.
    for needle in ["http://", "https://", "<script", "<link", "url(", "@import", "src="] {
      #expect(!html.contains(needle), "the page holds \(needle)")
    }
    // Chromium with the network off (a proxy on the discard port), as a person's browser would see it.
    var browser = ["chromium", "--headless", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--no-first-run",
                   "--user-data-dir=\(folder)/profile"]
    if geteuid() == 0 { browser.append("--no-sandbox") }  // Chromium refuses to run as root with its sandbox
    let dump = try runChild(browser + ["--dump-dom", "file://" + page], timeoutSeconds: 120)
    #expect(dump.exitCode == 0, "\(dump.error)")
    let dom = dump.output
    let chunks = dom.split(separator: "<details class=\"group\"").dropFirst()
    let groups = document["groups"]?.array ?? []
    #expect(chunks.count == groups.count)
    var bucketCounts: Set<Int> = []
    for (group, chunk) in zip(groups, chunks) {
      let signature = group["signature"]?.string ?? ""
      let count = group["count"]?.integer ?? -1
      let escaped = signature.replacingAll("&", "&amp;").replacingAll("<", "&lt;").replacingAll(">", "&gt;").replacingAll("\"", "&quot;")
      #expect(chunk.hasPrefix(" data-signature=\"\(escaped)\" data-count=\"\(count)\""), "\(signature)")
      // An element per bucket, the buckets holding the group's crashes; a bar per build.
      let buckets = chunk.components("<rect class=\"bucket\" data-count=\"").dropFirst().compactMap { Int($0.prefix { $0 != "\"" }) }
      #expect(!buckets.isEmpty)
      #expect(buckets.reduce(0, +) == count, "\(signature)")
      bucketCounts.insert(buckets.count)
      let builds = chunk.components("<rect class=\"build\" data-count=\"").dropFirst().compactMap { Int($0.prefix { $0 != "\"" }) }
      #expect(builds.count == group["builds"]?.array?.count, "\(signature)")
      #expect(builds.reduce(0, +) == count)
      // The example's frames with file:line.
      if let frame = group["example"]?["frames"]?.array?.first(where: { $0["line"]?.integer != nil }),
         let file = frame["file"]?.string, let line = frame["line"]?.integer {
        #expect(chunk.contains("<td class=\"place\">\(file.replacingAll("&", "&amp;")):\(line)</td>"), "\(signature)")
      }
    }
    #expect(bucketCounts.count == 1, "every group's time chart has the same buckets")
    let screenshot = folder + "/triage.png"
    let shot = try runChild(browser + ["--screenshot=\(screenshot)", "--window-size=1200,1400", "file://" + page], timeoutSeconds: 120)
    #expect(shot.exitCode == 0, "\(shot.error)")
    let png = readFileBytes(screenshot) ?? []
    #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG at \(screenshot)")
    print("triage page: \(page); its screenshot: \(screenshot)")
  }
}

private func monotonicTime() -> Double {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

extension StringProtocol {
  /// The parts of the text between occurrences of `separator` (no Foundation here).
  fileprivate func components(_ separator: String) -> [Substring] {
    var parts: [Substring] = []
    var rest = Substring(self)
    while let range = rest.firstRange(of: separator) {
      parts.append(rest[..<range.lowerBound])
      rest = rest[range.upperBound...]
    }
    parts.append(rest)
    return parts
  }

  fileprivate func replacingAll(_ target: String, _ replacement: String) -> String {
    components(target).joined(separator: replacement)
  }
}
