import ProcessInspection
import ImageReaders
import Snapshot

extension ProcessSnapshot {
  // MARK: .ips

  /// The `.ips` header line and body with each symbolicated frame's `symbol`, `symbolLocation`,
  /// `sourceFile` and `sourceLine` filled in (inlined frames inserted before it with `"inline": true`),
  /// as Apple's symbolicated reports have them.
  func ipsText() -> String {
    guard var body = document?.ipsBody else { return "" }
    var byThread: [Int: [(Int, FrameSymbols)]] = [:]
    for thread in threads {
      for frame in thread.frames {
        if let place = frame.position?.documentThread { byThread[place, default: []].append((frame.number, frame.symbols)) }
      }
    }
    if case .array(var threads)? = body["threads"] {
      for (threadIndex, entries) in byThread where threads.indices.contains(threadIndex) {
        guard case .array(let original)? = threads[threadIndex]["frames"] else { continue }
        threads[threadIndex].set("frames", .array(Self.filledIPSFrames(original, entries)))
      }
      body.set("threads", .array(threads))
    }
    if let entries = byThread[-1], case .array(let original)? = body["lastExceptionBacktrace"] {
      body.set("lastExceptionBacktrace", .array(Self.filledIPSFrames(original, entries)))
    }
    var out = ""
    if let header = document?.ipsHeader { out += header.serialized() + "\n" }
    return out + body.serialized(indent: 2) + "\n"
  }

  /// The backtracer's JSON with each symbolicated frame filled in as `symbolicate=full` fills it:
  /// `symbol` (as stored), `offset`, `description` (`name + offset`), `image`, `sourceLocation`;
  /// inlined frames are inserted before their caller with `"inlined": true`.
  func swiftJSONText() -> String {
    let preamble = document?.preamble ?? ""
    guard var document = document?.swiftDocument else { return preamble }
    var results: [Int: [Int: FrameSymbols]] = [:]
    for thread in threads {
      for frame in thread.frames {
        if let place = frame.position?.documentThread { results[place, default: [:]][frame.number] = frame.symbols }
      }
    }
    if case .array(var threads)? = document["threads"] {
      for (threadIndex, byFrame) in results where threads.indices.contains(threadIndex) {
        guard case .array(let original)? = threads[threadIndex]["frames"] else { continue }
        var updated: [JSONValue] = []
        for (frameIndex, frame) in original.enumerated() {
          guard let result = byFrame[frameIndex], result.status == .symbolicated else { updated.append(frame); continue }
          for function in result.functions {
            var entry = frame
            if function.isInlined { entry.set("inlined", .bool(true)) }
            if let raw = function.rawName ?? function.name { entry.set("symbol", .string(raw)) }
            if let offset = function.offset { entry.set("offset", .number(String(offset))) }
            let name = function.name ?? "???"
            entry.set("description", .string(function.offset.map { "\(name) + \($0)" } ?? name))
            if let image = result.imageName { entry.set("image", .string(image)) }
            if let file = function.file, let line = function.line {
              entry.set("sourceLocation", .object([("file", .string(file)), ("line", .number(String(line))),
                                                   ("column", .number(String(function.column ?? 0)))]))
            }
            updated.append(entry)
          }
        }
        threads[threadIndex].set("frames", .array(updated))
      }
      document.set("threads", .array(threads))
    }
    return preamble + document.serialized() + "\n"
  }

  /// `.ips` frames with `symbol`, `symbolLocation`, `sourceFile`, `sourceLine` filled in from `entries`
  /// (frame index, answer); inlined functions become frames of their own with `"inline": true`.
  static func filledIPSFrames(_ original: [JSONValue], _ entries: [(Int, FrameSymbols)]) -> [JSONValue] {
    var updated: [JSONValue] = []
    let results = Dictionary(entries, uniquingKeysWith: { first, _ in first })
    for (frameIndex, var frame) in original.enumerated() {
      guard let result = results[frameIndex], result.status == .symbolicated, let real = result.functions.last else {
        updated.append(frame)
        continue
      }
      for inlined in result.functions.dropLast() {
        var copy = frame
        copy.set("inline", .bool(true))
        if let name = inlined.name { copy.set("symbol", .string(name)) }
        copy.remove("symbolLocation")
        if let file = inlined.file { copy.set("sourceFile", .string(ProcessInspection.Image.shortName(of: file))) }
        if let line = inlined.line { copy.set("sourceLine", .number(String(line))) }
        updated.append(copy)
      }
      if let name = real.name { frame.set("symbol", .string(name)) }
      if let offset = real.offset { frame.set("symbolLocation", .number(String(offset))) }
      if let file = real.file { frame.set("sourceFile", .string(ProcessInspection.Image.shortName(of: file))) }
      if let line = real.line { frame.set("sourceLine", .number(String(line))) }
      updated.append(frame)
    }
    return updated
  }
}
