import ImageLog
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

  func jsonText() -> String {
    var text = ""
    writeJSON(chunkSize: .max) { text += String(decoding: $0, as: UTF8.self) }
    return text
  }

  /// `jsonText()` handed to `write` in pieces of about `chunkSize` bytes, frames formatted as written.
  func writeJSON(chunkSize: Int, to write: (UnsafeRawBufferPointer) -> Void) {
    let limit = max(1, chunkSize)
    var out = "{\"format\":\"\(format.rawValue)\",\"frames\":["
    var index = 0
    for thread in threads {
      for frame in thread.frames {
        out += (index == 0 ? "\n" : ",\n") + frameJSON(frame, thread: thread.number).serialized()
        index += 1
        if out.utf8.count >= limit {
          out.withUTF8 { write(UnsafeRawBufferPointer($0)) }
          out.removeAll(keepingCapacity: true)
        }
      }
    }
    out += "\n],\"threads\":" + threadsJSON().serialized() + ",\"images\":["
    for (index, resolution) in resolutions.enumerated() {
      let image = images[resolution.imageIndex]
      var members: [(String, JSONValue)] = [("name", .string(image.name)), ("loadAddress", .string("0x" + hexDigits(image.loadAddress)))]
      if let identity = image.identity { members.append(("reportID", .string(identity.text))) }
      if let name = image.debugFileName { members.append(("debugFile", .string(name))) }
      if let id = image.debugID { members.append(("debugID", .string(id))) }
      if let id = image.codeID { members.append(("codeID", .string(id))) }
      switch resolution.status {
      case let .found(path, how): members += [("status", .string("found")), ("file", .string(path)), ("via", .string(how))]
      case .unverified(let path): members += [("status", .string("unverified")), ("file", .string(path))]
      case .missing: members.append(("status", .string("missing")))
      case .notSearched: members.append(("status", .string("not-searched")))
      case let .mismatch(_, fileID, path):
        members += [("status", .string("uuid-mismatch")), ("fileID", .string(fileID)), ("file", .string(path))]
      case let .otherBuild(path, reason):
        members += [("status", .string("other-build")), ("file", .string(path)), ("reason", .string(reason))]
      }
      out += (index == 0 ? "\n" : ",\n") + JSONValue.object(members).serialized()
    }
    out += "\n]"
    if let exception { out += ",\"exception\":" + exceptionJSON(exception).serialized() }
    if let os = process.osVersion { out += ",\"os\":" + JSONValue.string(os).serialized() }
    if !unloadedImages.isEmpty { out += ",\"unloadedImages\":" + unloadedImagesJSON().serialized() }
    if let signature { out += ",\"signature\":" + JSONValue.string(signature).serialized() }
    out += ",\"problems\":" + JSONValue.array(problems.map { .string($0) }).serialized()
    out += ",\"notes\":" + JSONValue.array(notes.map { .string($0) }).serialized() + "}\n"
    out.withUTF8 { write(UnsafeRawBufferPointer($0)) }
  }

  /// `{"reason"|"signal","code", "address", "dumpRequested"}`: the exception as its platform names it
  /// (a signal by number and `si_code`), and the address it is about.
  func exceptionJSON(_ exception: Exception) -> JSONValue {
    var members: [(String, JSONValue)] = []
    if let reason = exception.reason {
      members.append(("reason", .string(reason)))
    } else {
      members += [("signal", .number(String(exception.signal))), ("code", .number(String(exception.code)))]
    }
    members.append(("address", .string("0x" + hexDigits(exception.address, width: 16))))
    if exception.isDumpRequested { members.append(("dumpRequested", .bool(true))) }
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
    let mapped = frame.imageIndex.flatMap { images.indices.contains($0) ? images[$0] : nil }
    if let gone = mapped.map({ previousImage(at: frame.address, in: $0) }) ?? unloadedImage(holding: frame.address) {
      // Code no longer mapped, in an image removed before the crash (or mapped over since).
      members += [("unloadedImage", .string(gone.name)), ("unloadedImageOffset", .number(String(frame.address - gone.baseAddress)))]
    }
    if let trust = frame.markedTrust { members.append(("trust", .string(trust.rawValue))) }
    let status: String
    switch result.status {
    case .symbolicated: status = "symbolicated"
    case .noSymbol: status = "no-symbol"
    case .noImage: status = "no-image"
    case .missingImage: status = "missing-image"
    case .notLookedUp: status = "not-looked-up"
    case .noModule: status = "no-module"
    case .otherBuild: status = "other-build"  // the image's entry names the file; the names here are the report's
    case let .mismatch(reportID, fileID, path):
      status = "uuid-mismatch"
      members += [("reportID", .string(reportID)), ("fileID", .string(fileID)), ("file", .string(path))]
    }
    members.append(("status", .string(status)))
    if let real = result.functions.last {
      members += functionMembers(real)
      let inlined = result.functions.dropLast()
      if !inlined.isEmpty { members.append(("inlined", .array(inlined.map { .object(functionMembers($0)) }))) }
    }
    // The report's own name for the frame, whatever became of it here (found, not found, not looked up):
    // kept apart from imagelog's answer, so a reader can tell which names no file confirmed.
    if let reported = reportedFunction(of: frame) {
      var own: [(String, JSONValue)] = []
      if let name = reported.name { own.append(("symbol", .string(name))) }
      if let offset = reported.offset { own.append(("symbolOffset", .number(String(offset)))) }
      if let file = reported.file { own.append(("file", .string(file))) }
      if let line = reported.line { own.append(("line", .number(String(line)))) }
      if let column = reported.column { own.append(("column", .number(String(column)))) }
      members.append(("reported", .object(own)))
    }
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

  /// `[{"index", "tid", "name", "crashed", "state", "problem", "registers"}]`: each thread the report lists, keys
  /// absent when the report does not give them (`crashed` is given when the report marks any thread
  /// crashed: a live process's threads have none). Frames name their thread by `index`.
  func threadsJSON() -> JSONValue {
    let marksCrash = threads.contains { $0.crashed }
    return .array(threads.map { thread in
      var members: [(String, JSONValue)] = [("index", .number(String(thread.number)))]
      if let tid = thread.tid { members.append(("tid", .number(String(tid)))) }
      if let name = thread.name { members.append(("name", .string(name))) }
      if marksCrash { members.append(("crashed", .bool(thread.crashed))) }
      if thread.requestedDump { members.append(("requestedDump", .bool(true))) }
      if let state = thread.state { members.append(("state", .string(state))) }
      if let problem = thread.problem { members.append(("problem", .string(problem))) }
      if let registers = thread.registers {
        members.append(("registers", .object(registers.rows.joined().map {
          ($0.name, .string("0x" + hexDigits($0.value, width: $0.digits)))
        })))
      }
      return .object(members)
    })
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
