import ProcessInspection
import ImageReaders
import Snapshot

/// `imagelog triage`'s three styles: a table for a terminal, a JSON document, one self-contained HTML
/// page; and the `--state` file that lets the next run skip the files already read.
extension CrashTriage {
  /// `YYYY-MM-DD` (UTC).
  static func dayText(_ time: Int64) -> String { String(ProcessSnapshot.dateText(time).prefix(10)) }

  /// `count` of `total` as a percentage with one decimal (`40.0%`).
  static func shareText(_ count: Int, of total: Int) -> String {
    guard total > 0 else { return "0.0%" }
    let tenths = (count * 1000 + total / 2) / total
    return "\(tenths / 10).\(tenths % 10)%"
  }

  /// `text` cut to `width` characters, a cut one ending in `…`.
  static func fitted(_ text: String, _ width: Int) -> String {
    guard width > 0 else { return "" }
    return text.count <= width ? text : String(text.prefix(width - 1)) + "…"
  }

  static func padded(_ text: String, _ width: Int, right: Bool = false) -> String {
    let fill = String(repeating: " ", count: max(0, width - text.count))
    return right ? fill + text : text + fill
  }

  // MARK: Table

  /// The groups as a table at most `width` columns wide (signatures cut to fit), widest groups first,
  /// then a line of totals and one per unreadable file. Every value from a file is escaped (`TextEscaping`).
  package func table(width: Int = 100) -> String {
    var text = Self.padded("COUNT", 6, right: true) + "  " + Self.padded("SHARE", 6, right: true) + "  FIRST      LAST        "
      + "BLDS  " + Self.padded("REASON", 22) + "  SIGNATURE\n"
    let used = 6 + 2 + 6 + 2 + 10 + 1 + 10 + 2 + 4 + 2 + 22 + 2
    for group in rankedGroups {
      let reason = Group.ranked(group.reasons).first.map { $0.value.isEmpty ? "-" : $0.value } ?? "-"
      text += Self.padded(String(group.count), 6, right: true) + "  " + Self.padded(Self.shareText(group.count, of: crashCount), 6, right: true)
        + "  " + Self.dayText(group.firstTime) + " " + Self.dayText(group.lastTime) + "  "
        + Self.padded(String(group.builds.count), 4, right: true) + "  " + Self.padded(Self.fitted(TextEscaping.escaped(reason), 22), 22)
        + "  " + Self.fitted(TextEscaping.escaped(group.signature), width - used) + "\n"
    }
    text += "\(crashCount) crash\(crashCount == 1 ? "" : "es") in \(groups.count) group\(groups.count == 1 ? "" : "s")"
      + " (files: \(filesRead) read, \(filesFromState) from the state, \(unreadable.count) unreadable)\n"
    for file in unreadable { text += "unreadable: \(TextEscaping.escaped(file.path)): \(TextEscaping.escaped(file.problem))\n" }
    return text
  }

  // MARK: JSON

  /// The groups as one JSON document: `crashes`, `filesRead`, `filesFromState`, `unreadable` [{`path`,
  /// `problem`}], `groups` [{`signature`, `count`, `share` (0 to 1), `firstSeen`, `lastSeen` (seconds
  /// since the epoch), `builds`, `oses`, `reasons` [{`value`, `count`}], `days` [{`day` (YYYY-MM-DD),
  /// `count`}], `files`, `example` {`path`, `thread`, `frames` [{`number`, `address`, `module`,
  /// `function`, `file`, `line`}]}].
  package func json() -> [UInt8] {
    var writer = JSONWriter(capacity: 4096)
    writer.beginObject()
    writer.member("schema", string: "imagelog-triage")
    writer.member("schemaVersion", number: 1)
    writer.member("crashes", number: UInt64(crashCount))
    writer.member("filesRead", number: UInt64(filesRead))
    writer.member("filesFromState", number: UInt64(filesFromState))
    writer.key("unreadable")
    writer.beginArray()
    for file in unreadable {
      writer.beginObject()
      writer.member("path", string: file.path)
      writer.member("problem", string: file.problem)
      writer.endObject()
    }
    writer.endArray()
    writer.key("groups")
    writer.beginArray()
    for group in rankedGroups {
      writer.beginObject()
      writer.member("signature", string: group.signature)
      writer.member("count", number: UInt64(group.count))
      writer.key("share")
      writer.number(crashCount > 0 ? UInt64(group.count * 10_000 / crashCount) : 0, scale: 4)
      writer.member("firstSeen", number: UInt64(max(0, group.firstTime)))
      writer.member("lastSeen", number: UInt64(max(0, group.lastTime)))
      let lists: [(StaticString, [String: Int])] = [("builds", group.builds), ("oses", group.oses), ("reasons", group.reasons)]
      for (key, counts) in lists {
        writer.key(key)
        writer.beginArray()
        for (value, count) in Group.ranked(counts) {
          writer.beginObject()
          writer.member("value", string: value.isEmpty ? nil : value)
          writer.member("count", number: UInt64(count))
          writer.endObject()
        }
        writer.endArray()
      }
      writer.key("days")
      writer.beginArray()
      for (day, count) in group.days.sorted(by: { $0.key < $1.key }) {
        writer.beginObject()
        writer.member("day", string: Self.dayText(day * 86_400))
        writer.member("count", number: UInt64(count))
        writer.endObject()
      }
      writer.endArray()
      writer.member("files", strings: group.files)
      writer.key("example")
      if let example = group.example { Self.write(example, to: &writer) } else { writer.null() }
      writer.endObject()
    }
    writer.endArray()
    writer.endObject()
    var bytes = writer.bytes
    bytes.append(UInt8(ascii: "\n"))
    return bytes
  }

  static func write(_ example: Example, to writer: inout JSONWriter) {
    writer.beginObject()
    writer.member("path", string: example.path)
    writer.member("thread", string: example.thread)
    writer.key("frames")
    writer.beginArray()
    for frame in example.frames {
      writer.beginObject()
      writer.member("number", number: UInt64(max(0, frame.number)))
      writer.member("address", address: frame.address)
      writer.member("module", string: frame.module)
      writer.member("function", string: frame.function)
      writer.member("file", string: frame.file)
      writer.key("line")
      if let line = frame.line, line >= 0 { writer.number(UInt64(line)) } else { writer.null() }
      writer.endObject()
    }
    writer.endArray()
    writer.endObject()
  }

  // MARK: State

  /// The `--state` file: every crash read (`crashes`, each with its file's path, size and modification
  /// time), the unreadable files, and each group's example, so the next run reads only files that are
  /// new or changed. Read back by `CrashTriageStateParser`.
  package static func state(crashes: [Crash], unreadable: [Unreadable], examples: [Example?]) -> [UInt8] {
    var writer = JSONWriter(capacity: 4096)
    writer.beginObject()
    writer.member("schema", string: "imagelog-triage-state")
    writer.member("schemaVersion", number: 1)
    writer.key("crashes")
    writer.beginArray()
    for crash in crashes {
      writer.beginObject()
      writer.member("path", string: crash.path)
      writer.member("size", number: UInt64(max(0, crash.size)))
      writer.member("modified", number: UInt64(max(0, crash.modified)))
      writer.member("signature", string: crash.signature)
      writer.member("time", number: UInt64(max(0, crash.time)))
      writer.member("program", string: crash.program)
      writer.member("build", string: crash.build)
      writer.member("os", string: crash.os)
      writer.member("reason", string: crash.reason)
      writer.endObject()
    }
    writer.endArray()
    writer.key("unreadable")
    writer.beginArray()
    for file in unreadable {
      writer.beginObject()
      writer.member("path", string: file.path)
      writer.member("size", number: UInt64(max(0, file.size)))
      writer.member("modified", number: UInt64(max(0, file.modified)))
      writer.member("problem", string: file.problem)
      writer.endObject()
    }
    writer.endArray()
    writer.key("examples")
    writer.beginArray()
    for example in examples { if let example { write(example, to: &writer) } }
    writer.endArray()
    writer.endObject()
    var bytes = writer.bytes
    bytes.append(UInt8(ascii: "\n"))
    return bytes
  }

  // MARK: HTML

  /// `text` for HTML text and attribute values.
  static func html(_ text: String) -> String { TextEscaping.markup(text, attribute: true) }

  /// One self-contained page: the CSS inline, the charts plain SVG, no script and no address to fetch.
  /// Each group is a `<details class="group">` (its `data-signature` and `data-count`) whose summary has
  /// the count, share, dates and signature and two charts: crashes over time (`rect.bucket`, one per
  /// bucket of days, the same buckets for every group) and crashes per build (`rect.build`, one per
  /// build); opened, it shows the builds, systems, reasons and the example's frames with file:line.
  package func html(title: String = "imagelog triage") -> String {
    let range = dayRange ?? 0...0
    let buckets = Self.buckets(range)
    var page = """
      <!DOCTYPE html>
      <html lang="en"><head><meta charset="utf-8"><title>\(Self.html(title))</title>
      <style>
      body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
      h1{font-size:1.3em}
      details.group{border:1px solid #ccc;border-radius:6px;margin:.5em 0;padding:.3em .6em}
      details.group>summary{cursor:pointer;display:flex;gap:1em;align-items:center;flex-wrap:wrap}
      .count{font-weight:bold;min-width:4em;text-align:right}
      .share,.dates{color:#555}
      .signature{font-family:ui-monospace,monospace;flex:1 1 30em;word-break:break-all}
      svg.chart{background:#f6f6f6;border:1px solid #ddd}
      rect.bucket{fill:#c0392b} rect.build{fill:#2c6fbb}
      table.frames{border-collapse:collapse;font-family:ui-monospace,monospace;font-size:12px;margin:.5em 0}
      table.frames td{padding:1px 8px;border-bottom:1px solid #eee;vertical-align:top}
      ul.facts{margin:.3em 0;padding-left:1.2em}
      .unreadable{color:#a00}
      </style></head><body>
      <h1>\(Self.html(title))</h1>
      <p class="totals">\(crashCount) crashes in \(groups.count) groups, \(Self.dayText(range.lowerBound * 86_400)) to \
      \(Self.dayText(range.upperBound * 86_400)); files: \(filesRead) read, \(filesFromState) from the state, \
      \(unreadable.count) unreadable. Charts: crashes per \(buckets.width == 1 ? "day" : "\(buckets.width) days"); \
      crashes per build.</p>

      """
    for group in rankedGroups {
      page += "<details class=\"group\" data-signature=\"\(Self.html(group.signature))\" data-count=\"\(group.count)\">\n<summary>"
      page += "<span class=\"count\">\(group.count)</span><span class=\"share\">\(Self.shareText(group.count, of: crashCount))</span>"
      page += "<span class=\"dates\">\(Self.dayText(group.firstTime)) – \(Self.dayText(group.lastTime))</span>"
      page += "<span class=\"signature\">\(Self.html(group.signature))</span>"
      page += Self.timeChart(group, buckets: buckets) + Self.buildChart(group)
      page += "</summary>\n<ul class=\"facts\">\n"
      for (label, counts) in [("Builds", group.builds), ("Systems", group.oses), ("Reasons", group.reasons)] {
        let values = Group.ranked(counts).map { "\(Self.html($0.value.isEmpty ? "unknown" : $0.value)) (\($0.count))" }
        page += "<li>\(label): \(values.joined(separator: ", "))</li>\n"
      }
      page += "</ul>\n"
      if let example = group.example {
        page += "<p>Example: <code>\(Self.html(example.path))</code>, \(Self.html(example.thread))</p>\n<table class=\"frames\">\n"
        for frame in example.frames {
          let place = frame.file.map { file in file + (frame.line.map { ":\($0)" } ?? "") } ?? ""
          page += "<tr class=\"frame\"><td>\(frame.number)</td><td>\(Self.html(frame.module ?? "???"))</td>"
            + "<td>\(Self.html(frame.function ?? "0x" + hexDigits(frame.address, width: 16)))</td>"
            + "<td class=\"place\">\(Self.html(place))</td></tr>\n"
        }
        page += "</table>\n"
      }
      page += "</details>\n"
    }
    if !unreadable.isEmpty {
      page += "<h2>Unreadable files</h2>\n<ul>\n"
      for file in unreadable {
        page += "<li class=\"unreadable\"><code>\(Self.html(file.path))</code>: \(Self.html(file.problem))</li>\n"
      }
      page += "</ul>\n"
    }
    return page + "</body></html>\n"
  }

  /// Crashes per bucket of days as bars (`rect.bucket`, one per bucket, each with a `<title>`).
  static func timeChart(_ group: Group, buckets: (start: Int64, width: Int64, count: Int)) -> String {
    let counts = histogram(group, start: buckets.start, width: buckets.width, count: buckets.count)
    let highest = max(1, counts.max() ?? 1)
    let barWidth = 6
    var svg = "<svg class=\"chart time\" width=\"\(buckets.count * barWidth + 2)\" height=\"32\" role=\"img\">"
    for (index, count) in counts.enumerated() {
      let height = count == 0 ? 0 : max(1, count * 30 / highest)
      let from = (buckets.start + Int64(index) * buckets.width) * 86_400
      svg += "<rect class=\"bucket\" data-count=\"\(count)\" x=\"\(1 + index * barWidth)\" y=\"\(31 - height)\" "
        + "width=\"\(barWidth - 1)\" height=\"\(height)\"><title>\(dayText(from)): \(count)</title></rect>"
    }
    return svg + "</svg>"
  }

  /// Crashes per build as bars (`rect.build`, one per build, most crashes first).
  static func buildChart(_ group: Group) -> String {
    let ranked = Group.ranked(group.builds)
    let highest = max(1, ranked.first?.count ?? 1)
    let barWidth = 10
    var svg = "<svg class=\"chart builds\" width=\"\(ranked.count * barWidth + 2)\" height=\"32\" role=\"img\">"
    for (index, build) in ranked.enumerated() {
      let height = max(1, build.count * 30 / highest)
      svg += "<rect class=\"build\" data-count=\"\(build.count)\" x=\"\(1 + index * barWidth)\" y=\"\(31 - height)\" "
        + "width=\"\(barWidth - 2)\" height=\"\(height)\"><title>\(html(build.value.isEmpty ? "unknown" : build.value)): "
        + "\(build.count)</title></rect>"
    }
    return svg + "</svg>"
  }
}
