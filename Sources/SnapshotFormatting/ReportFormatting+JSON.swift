import ProcessInspection
import ImageReaders
import Snapshot

extension ProcessSnapshot {
  // MARK: Summary

  /// The images frames are in, with what symbolication made of them, in image order.
  var resolutions: [(imageIndex: Int, status: Image.Resolution)] {
    images.indices.compactMap { index in images[index].resolution.map { (index, $0) } }
  }

  /// The closing summary: how many images were found, and each missing or mismatched one.
  public func summary() -> String {
    var found = 0
    var lines: [String] = []
    let resolutions = self.resolutions
    for resolution in resolutions {
      let image = images[resolution.imageIndex]
      let id = image.identity.map { " <\(TextEscaping.escaped($0.text))>" } ?? ""
      let name = TextEscaping.escaped(image.name)
      switch resolution.status {
      case .found: found += 1
      case .unverified(let path):
        found += 1
        lines.append("  unverified: the report has no build-id: \(name) \(TextEscaping.escaped(path))")
      case .missing: lines.append("  missing:    \(name)\(id)\(image.path.map { " " + TextEscaping.escaped($0) } ?? "")")
      case let .mismatch(reportID, fileID, path):
        lines.append("  mismatch:   \(name) report <\(reportID)> file <\(fileID)> \(TextEscaping.escaped(path))")
      case let .otherBuild(path, reason):
        lines.append("  mismatch:   \(name) \(TextEscaping.escaped(path)): \(TextEscaping.escaped(reason))")
      case .notSearched: break
      }
    }
    let mismatched = resolutions.filter {
      switch $0.status {
      case .mismatch, .otherBuild: true
      default: false
      }
    }.count
    let missing = resolutions.filter { $0.status == .missing }.count
    var symbolicated = 0, withoutModule = 0, frameCount = 0
    for thread in threads {
      for frame in thread.frames {
        frameCount += 1
        switch frame.symbols.status {
        case .symbolicated: symbolicated += 1
        case .noModule: withoutModule += 1
        default: break
        }
      }
    }
    var text = "\n-- symbolicated by imagelog: \(symbolicated) of \(frameCount) frames; "
    text += "\(found) of \(resolutions.count) images found, \(missing) missing, \(mismatched) mismatched\n"
    for line in lines { text += line + "\n" }
    // Frames the report names no module for are kept as it wrote them: said, so the count above is read right.
    if withoutModule > 0 {
      text += "  without a module: \(withoutModule) frame\(withoutModule == 1 ? "" : "s"), kept as the report wrote "
        + (withoutModule == 1 ? "it\n" : "them\n")
    }
    // Problems quote the report's own lines, and notes name paths: both escaped, as every text written.
    for problem in problems { text += "  unreadable: \(TextEscaping.escaped(problem))\n" }
    for note in notes { text += "  note: \(TextEscaping.escaped(note))\n" }
    return text
  }

  // MARK: JSON

  /// The version of the crash document's schema (`Schemas/imagelog-crash.schema.json`), written as
  /// `schemaVersion`: raised when a member changes meaning or a required one is added.
  package static let documentSchemaVersion = 1

  /// What a crash document says it is (`document`), so a reader tells it from other JSON reports.
  package static let documentKind = "imagelog-crash"

  func jsonText() -> String {
    var text = ""
    writeJSON(chunkSize: .max) { text += String(decoding: $0, as: UTF8.self) }
    return text
  }

  /// `jsonText()` handed to `write` in pieces of about `chunkSize` bytes, frames formatted as written.
  ///
  /// The crash document: first the members written before version 1 (`format`, the per-frame list
  /// `frames`, `threads`, the frames' `images`, `exception`, `os`, `problems`, `notes`), unchanged but for
  /// members added to `threads` and `exception`; then `schemaVersion`, `document`, `process`, `system` and
  /// `binaryImages`, every image. Each thread holds its frames (`threads[].frames`): every fact of the
  /// snapshot a writer reads is there, so the document read back (`CrashDocumentParser`) writes the
  /// same bytes.
  func writeJSON(chunkSize: Int, to write: (UnsafeRawBufferPointer) -> Void) {
    let limit = max(1, chunkSize)
    var out = "{\"format\":\"\(format.rawValue)\",\"frames\":["
    func drain() {
      if out.utf8.count >= limit {
        out.withUTF8 { write(UnsafeRawBufferPointer($0)) }
        out.removeAll(keepingCapacity: true)
      }
    }
    var index = 0
    for thread in threads {
      for frame in thread.frames {
        out += (index == 0 ? "\n" : ",\n") + frameJSON(frame, thread: thread.number).serialized()
        index += 1
        drain()
      }
    }
    out += "\n],\"threads\":["
    let marksCrash = threads.contains { $0.crashed }
    for (index, thread) in threads.enumerated() {
      guard case .object(var members) = threadJSON(thread, marksCrash: marksCrash) else { continue }
      if let registers = thread.shownRegisters {
        members.append(("registerLayout", .object([
          ("title", .string(registers.architecture.appleThreadState)),
          ("rows", .array(registers.threadStateRows.map { row in .array(row.map { .string($0.name) }) })),
        ])))
      }
      out += (index == 0 ? "\n" : ",\n")
      out += JSONValue.object(members).serialized().dropLast()  // the closing brace, after the frames
      out += ",\"frames\":["
      for (number, frame) in thread.frames.enumerated() {
        out += (number == 0 ? "\n" : ",\n") + documentFrameJSON(frame).serialized()
        drain()
      }
      out += "]}"
    }
    out += "\n],\"images\":["
    for (index, resolution) in resolutions.enumerated() {
      let image = images[resolution.imageIndex]
      var members: [(String, JSONValue)] = [("name", .string(image.name)), ("loadAddress", .string("0x" + hexDigits(image.loadAddress)))]
      if let identity = image.identity { members.append(("reportID", .string(identity.text))) }
      if let name = image.debugFileName { members.append(("debugFile", .string(name))) }
      if let id = image.debugID { members.append(("debugID", .string(id))) }
      if let id = image.codeID { members.append(("codeID", .string(id))) }
      members += Self.resolutionMembers(resolution.status)
      out += (index == 0 ? "\n" : ",\n") + JSONValue.object(members).serialized()
    }
    out += "\n]"
    if let exception { out += ",\"exception\":" + exceptionJSON(exception).serialized() }
    if let os = process.osVersion { out += ",\"os\":" + JSONValue.string(os).serialized() }
    if !unloadedImages.isEmpty { out += ",\"unloadedImages\":" + unloadedImagesJSON().serialized() }
    if !imageTimeline.isEmpty { out += ",\"imageTimeline\":" + imageTimelineJSON().serialized() }
    if let abortMessage { out += ",\"abortMessage\":" + JSONValue.string(abortMessage).serialized() }
    if let size = oomAllocationSize { out += ",\"oomAllocationSize\":\(size)" }
    if let signature { out += ",\"signature\":" + JSONValue.string(signature).serialized() }
    out += ",\"problems\":" + JSONValue.array(problems.map { .string($0) }).serialized()
    out += ",\"notes\":" + JSONValue.array(notes.map { .string($0) }).serialized()
    out += ",\"schemaVersion\":\(Self.documentSchemaVersion),\"document\":\"\(Self.documentKind)\""
    out += ",\"process\":" + processJSON().serialized()
    out += ",\"system\":" + systemJSON().serialized()
    out += ",\"binaryImages\":["
    for (index, image) in images.enumerated() {
      out += (index == 0 ? "\n" : ",\n") + imageJSON(image).serialized()
      drain()
    }
    out += "\n]}\n"
    out.withUTF8 { write(UnsafeRawBufferPointer($0)) }
  }

  /// `{"name", "pid", "path", "arguments", "date", "dateText", "threadCount", "stoppedNanoseconds"}`, each
  /// when the source gives it (`arguments`: a minidump's or a capture's `/proc/PID/cmdline`): `date` in seconds since the epoch (UTC), `dateText` as the text report writes it.
  func processJSON() -> JSONValue {
    var members: [(String, JSONValue)] = []
    if let name = process.name { members.append(("name", .string(name))) }
    if let pid = process.pid { members.append(("pid", .number(String(pid)))) }
    if let path = process.path { members.append(("path", .string(path))) }
    if let arguments = process.linuxFiles.arguments { members.append(("arguments", .array(arguments.map { .string($0) }))) }
    if let date = process.date { members += [("date", .number(String(date))), ("dateText", .string(Self.dateText(date)))] }
    if let count = process.threadCount { members.append(("threadCount", .number(String(count)))) }
    if let stopped = process.stoppedNanoseconds { members.append(("stoppedNanoseconds", .number(String(stopped)))) }
    return .object(members)
  }

  /// `{"os", "cpu"}`: the report's `OS Version:` (or `uname`'s) and its architecture, when given.
  func systemJSON() -> JSONValue {
    var members: [(String, JSONValue)] = []
    if let os = process.osVersion { members.append(("os", .string(os))) }
    if let cpu = process.architecture { members.append(("cpu", .string(cpu))) }
    return .object(members)
  }

  /// The `status` of an image's resolution and what goes with it (`file`, `via`, `fileID`, `reason`),
  /// as the frames' `images` have written them since before the document.
  static func resolutionMembers(_ status: Image.Resolution) -> [(String, JSONValue)] {
    switch status {
    case let .found(path, how): [("status", .string("found")), ("file", .string(path)), ("via", .string(how))]
    case .unverified(let path): [("status", .string("unverified")), ("file", .string(path))]
    case .missing: [("status", .string("missing"))]
    case .notSearched: [("status", .string("not-searched"))]
    case let .mismatch(reportID, fileID, path):
      [("status", .string("uuid-mismatch")), ("reportID", .string(reportID)), ("fileID", .string(fileID)),
       ("file", .string(path))]
    case let .otherBuild(path, reason): [("status", .string("other-build")), ("file", .string(path)), ("reason", .string(reason))]
    }
  }

  /// One of `binaryImages`: every fact of the image. `identity` holds the identity as the source wrote
  /// it (`text`), the whole build-id or UUID (`buildID`: the loaded file's when the source read one)
  /// and its derived forms (`uuid`, Breakpad's `debugID`); `debugFileName`, `debugID` and `codeID` at
  /// the image's level are the source's own records (a minidump's CodeView record).
  func imageJSON(_ image: Image) -> JSONValue {
    var members: [(String, JSONValue)] = [("name", .string(image.name))]
    if let path = image.path { members.append(("path", .string(path))) }
    members.append(("base", .string("0x" + hexDigits(image.loadAddress))))
    if let end = image.endAddress {
      members.append(("end", .string("0x" + hexDigits(end))))
      if end >= image.loadAddress, end - image.loadAddress < .max {
        members.append(("size", .number(String(end - image.loadAddress + 1))))
      }
    }
    if let architecture = image.architecture { members.append(("architecture", .string(architecture))) }
    let whole = image.loaded?.buildID?.bytes ?? image.identity?.bytes
    if let whole, !whole.isEmpty {
      let id = BuildID(whole)
      var identity: [(String, JSONValue)] = []
      if let text = image.identity?.text { identity.append(("text", .string(text))) }
      identity += [("buildID", .string(id.hex)), ("uuid", .string(id.uuid)), ("debugID", .string(id.breakpadDebugID()))]
      members.append(("identity", .object(identity)))
    }
    if let name = image.debugFileName { members.append(("debugFileName", .string(name))) }
    if let id = image.debugID { members.append(("debugID", .string(id))) }
    if let id = image.codeID { members.append(("codeID", .string(id))) }
    if image.offsetsFromLoadBias { members.append(("offsetsFromLoadBias", .bool(true))) }
    if image.loadAddressFromSymbols { members.append(("baseFromSymbols", .bool(true))) }
    if let resolution = image.resolution { members.append(("resolution", .object(Self.resolutionMembers(resolution)))) }
    if let file = image.debugFile { members.append(("dwarfFile", .string(file))) }
    return .object(members)
  }

  /// One of a thread's `frames` in the document: every fact of the frame (the per-frame list's `frameJSON`
  /// writes a part of them).
  func documentFrameJSON(_ frame: Frame) -> JSONValue {
    let result = frame.symbols
    var members: [(String, JSONValue)] = [
      ("frame", .number(String(frame.number))), ("address", .string("0x" + hexDigits(frame.address, width: 16))),
      ("returnAddress", .bool(frame.isReturnAddress)),
    ]
    if let trust = frame.trust { members.append(("trust", .string(trust.rawValue))) }
    if let index = frame.imageIndex { members.append(("imageIndex", .number(String(index)))) }
    if let name = result.imageName { members.append(("image", .string(name))) }
    if let offset = result.imageOffset { members.append(("imageOffset", .number(String(offset)))) }
    if let address = result.lookupAddress { members.append(("lookupAddress", .string("0x" + hexDigits(address)))) }
    members += unloadedMembers(of: frame)
    if frame.namesNoModule { members.append(("namesNoModule", .bool(true))) }
    members.append(("status", .string(Self.statusName(result.status))))
    if case let .mismatch(reportID, fileID, path) = result.status {
      members += [("reportID", .string(reportID)), ("fileID", .string(fileID)), ("file", .string(path))]
    }
    let functions = result.functions
    if !functions.isEmpty {
      members.append(("functions", .array(functions.map { function in
        var own = functionMembers(function)
        if function.isInlined { own.append(("inlined", .bool(true))) }
        return .object(own)
      })))
    }
    if let reported = reportedFunction(of: frame) { members.append(("reported", Self.reportedJSON(reported))) }
    return .object(members)
  }

  /// `unloadedImage` and `unloadedImageOffset` when the frame's code is no longer mapped, in an image removed
  /// before the crash (or mapped over since); none otherwise.
  func unloadedMembers(of frame: Frame) -> [(String, JSONValue)] {
    let mapped = frame.imageIndex.flatMap { images.indices.contains($0) ? images[$0] : nil }
    guard let gone = mapped.map({ previousImage(at: frame.address, in: $0) }) ?? unloadedImage(holding: frame.address) else {
      return []
    }
    return [("unloadedImage", .string(gone.name)), ("unloadedImageOffset", .number(String(frame.address - gone.baseAddress)))]
  }

  /// A frame's `status` word.
  static func statusName(_ status: FrameSymbols.Status) -> String {
    switch status {
    case .symbolicated: "symbolicated"
    case .noSymbol: "no-symbol"
    case .noImage: "no-image"
    case .missingImage: "missing-image"
    case .notLookedUp: "not-looked-up"
    case .noModule: "no-module"
    case .otherBuild: "other-build"  // the image's entry names the file; the names here are the report's
    case .mismatch: "uuid-mismatch"
    }
  }

  /// The report's own name for a frame (`reported`).
  static func reportedJSON(_ reported: ReportedFunction) -> JSONValue {
    var own: [(String, JSONValue)] = []
    if let name = reported.name { own.append(("symbol", .string(name))) }
    if let offset = reported.offset { own.append(("symbolOffset", .number(String(offset)))) }
    if let file = reported.file { own.append(("file", .string(file))) }
    if let line = reported.line { own.append(("line", .number(String(line)))) }
    if let column = reported.column { own.append(("column", .number(String(column)))) }
    return .object(own)
  }

  /// `{"reason"|"signal","code", "address", "dumpRequested"}`: the exception as its platform names it
  /// (a signal by number and `si_code`), and the address it is about; since the document, also the
  /// names the text report gives them (`signalName`, `codeName`), a platform exception's raw
  /// `platformCode` and `platformFlags`, and the crashed thread's index in `threads` (`crashedThread`).
  func exceptionJSON(_ exception: Exception) -> JSONValue {
    var members: [(String, JSONValue)] = []
    if let reason = exception.reason {
      members.append(("reason", .string(reason)))
    } else {
      members += [("signal", .number(String(exception.signal))), ("code", .number(String(exception.code)))]
    }
    members.append(("address", .string("0x" + hexDigits(exception.address, width: 16))))
    if exception.isDumpRequested { members.append(("dumpRequested", .bool(true))) }
    if exception.reason != nil {
      members += [("platformCode", .number(String(exception.signal))), ("platformFlags", .number(String(exception.code)))]
    } else {
      if let name = Self.signalName(exception.signal) { members.append(("signalName", .string(name))) }
      if let name = Self.codeName(signal: exception.signal, code: exception.code) { members.append(("codeName", .string(name))) }
    }
    if let crashed = crashedThreadIndex { members.append(("crashedThread", .number(String(crashed)))) }
    return .object(members)
  }

  func frameJSON(_ frame: Frame, thread: Int) -> JSONValue {
    let result = frame.symbols
    var members: [(String, JSONValue)] = [
      ("thread", .number(String(thread))), ("frame", .number(String(frame.number))),
      ("address", .string("0x" + hexDigits(frame.address, width: 16))),
    ]
    if let name = result.imageName { members.append(("image", .string(name))) }
    if let offset = result.imageOffset { members.append(("imageOffset", .number(String(offset)))) }
    members += unloadedMembers(of: frame)
    if let trust = frame.markedTrust { members.append(("trust", .string(trust.rawValue))) }
    if case let .mismatch(reportID, fileID, path) = result.status {
      members += [("reportID", .string(reportID)), ("fileID", .string(fileID)), ("file", .string(path))]
    }
    members.append(("status", .string(Self.statusName(result.status))))
    if let real = result.functions.last {
      members += functionMembers(real)
      let inlined = result.functions.dropLast()
      if !inlined.isEmpty { members.append(("inlined", .array(inlined.map { .object(functionMembers($0)) }))) }
    }
    // The report's own name for the frame, whatever became of it here (found, not found, not looked up):
    // kept apart from imagelog's answer, so a reader can tell which names no file confirmed.
    if let reported = reportedFunction(of: frame) { members.append(("reported", Self.reportedJSON(reported))) }
    return .object(members)
  }

  /// `[{"name", "path", "baseAddress", "size", "buildID", "unloadedBeforeCrashNanoseconds",
  /// "loadedForNanoseconds", "tid"}]`: the images removed before the crash, newest first; keys absent when
  /// the source does not give them.
  func unloadedImagesJSON() -> JSONValue {
    .array(unloadedImages.map { gone in
      var members: [(String, JSONValue)] = [
        ("name", .string(gone.name)), ("path", .string(gone.path)), ("baseAddress", .string("0x" + hexDigits(gone.baseAddress))),
        ("size", .number(String(gone.size))),
      ]
      if !gone.buildID.isEmpty { members.append(("buildID", .string(HexText.bytes(gone.buildID)))) }
      if let before = gone.unloadedBeforeCrashNanoseconds { members.append(("unloadedBeforeCrashNanoseconds", .number(String(before)))) }
      if let loadedFor = gone.loadedForNanoseconds { members.append(("loadedForNanoseconds", .number(String(loadedFor)))) }
      if let tid = gone.tid { members.append(("tid", .number(String(tid)))) }
      return .object(members)
    })
  }

  /// `[{"kind", "name", "baseAddress", "crashOffsetNanoseconds", "loadedForNanoseconds", "tid"}]`: the images
  /// added after the program started and those removed, oldest first; keys absent when the source does not
  /// give them.
  func imageTimelineJSON() -> JSONValue {
    .array(imageTimeline.map { event in
      var members: [(String, JSONValue)] = [
        ("kind", .string(event.kind.rawValue)), ("name", .string(event.name)),
        ("baseAddress", .string("0x" + hexDigits(event.baseAddress))),
        ("crashOffsetNanoseconds", .number(String(event.crashOffsetNanoseconds))),
      ]
      if let loadedFor = event.loadedForNanoseconds { members.append(("loadedForNanoseconds", .number(String(loadedFor)))) }
      if let tid = event.tid { members.append(("tid", .number(String(tid)))) }
      return .object(members)
    })
  }

  /// `{"index", "tid", "name", "crashed", "state", "problem", "registers"}`: a thread as the report lists
  /// it, keys absent when the report does not give them (`crashed` is given when the report marks any
  /// thread crashed: a live process's threads have none). Frames name their thread by `index`.
  func threadJSON(_ thread: Thread, marksCrash: Bool) -> JSONValue {
    var members: [(String, JSONValue)] = [("index", .number(String(thread.number)))]
    if let tid = thread.tid { members.append(("tid", .number(String(tid)))) }
    if let name = thread.name { members.append(("name", .string(name))) }
    if marksCrash { members.append(("crashed", .bool(thread.crashed))) }
    if thread.requestedDump { members.append(("requestedDump", .bool(true))) }
    if let state = thread.state { members.append(("state", .string(state))) }
    if let problem = thread.problem { members.append(("problem", .string(problem))) }
    if let registers = thread.shownRegisters {
      members.append(("registers", .object(registers.threadStateRows.joined().map {
        ($0.name, .string("0x" + hexDigits($0.value, width: $0.digits)))
      })))
    }
    return .object(members)
  }

  func functionMembers(_ function: FrameSymbols.Function) -> [(String, JSONValue)] {
    var members: [(String, JSONValue)] = []
    if let name = function.name { members.append(("symbol", .string(name))) }
    if let raw = function.rawName, raw != function.name { members.append(("mangledSymbol", .string(raw))) }
    if let offset = function.offset { members.append(("symbolOffset", .number(String(offset)))) }
    if let file = function.file { members.append(("file", .string(file))) }
    if let line = function.line { members.append(("line", .number(String(line)))) }
    if let column = function.column { members.append(("column", .number(String(column)))) }
    return members
  }
}
