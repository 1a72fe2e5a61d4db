import ProcessInspection
import ImageReaders
import Snapshot

/// imagelog's crash document (`symbolicate --format json`, schema `Schemas/imagelog-crash.schema.json`)
/// read back into the snapshot it was written from: its threads with their frames, every image with its
/// whole identity and resolution, the exception, the process and system, problems and notes. Writing
/// what was read gives the same document; symbolicating it again (another machine, a symbol store)
/// looks its frames up as the first run did.
///
/// Strict on shape: a member of the wrong type, an unknown word or a later `schemaVersion` is an error
/// naming the member (`threads[2].frames[0].address: not a hex address`).
enum CrashDocumentParser {
  /// The `schemaVersion` this reader understands.
  static let schemaVersion = 1

  /// True when `value` is a crash document (`"document":"imagelog-crash"`).
  static func detect(_ value: JSONValue) -> Bool { value["document"]?.string == "imagelog-crash" }

  /// The snapshots of `first` and of each document after it in `rest` (a file of several reports gives
  /// one document each, one after another); text after them that is not a crash document is an error.
  static func parseAll(first: JSONValue, rest: Substring) throws(ReportError) -> [ProcessSnapshot] {
    var snapshots = [try parse(first)]
    var rest = rest.drop { $0.isWhitespace }
    while !rest.isEmpty {
      let document: JSONValue
      do { (document, rest) = try JSONValue.parsePrefix(rest) } catch {
        throw ReportError("crash document \(snapshots.count + 1): \(error)")
      }
      guard detect(document) else { throw ReportError("crash document \(snapshots.count + 1): not an imagelog crash document") }
      snapshots.append(try parse(document))
      rest = rest.drop { $0.isWhitespace }
    }
    return snapshots
  }

  /// The snapshot `document` holds.
  static func parse(_ document: JSONValue) throws(ReportError) -> ProcessSnapshot {
    let root = Member(value: document, path: "document")
    let version = try root.required("schemaVersion").int()
    guard version == schemaVersion else {
      throw ReportError("crash document schemaVersion \(version): this imagelog reads version \(schemaVersion)")
    }
    let formatName = try root.required("format").string()
    guard let format = ProcessSnapshot.Format(rawValue: formatName) else {
      throw ReportError("crash document format: unknown source kind '\(formatName)'")
    }
    var snapshot = ProcessSnapshot(format: format)
    let process = try root.required("process")
    snapshot.process.name = try process.optional("name")?.string()
    snapshot.process.pid = try process.optional("pid")?.int32()
    snapshot.process.path = try process.optional("path")?.string()
    if let arguments = try process.optional("arguments") {
      // `/proc/PID/cmdline`'s form: each argument ends with a NUL.
      var commandLine: [UInt8] = []
      for element in try arguments.elements() { commandLine += Array(try element.string().utf8) + [0] }
      snapshot.process.linuxFiles.commandLine = commandLine
    }
    snapshot.process.date = try process.optional("date")?.int64()
    snapshot.process.threadCount = try process.optional("threadCount")?.int()
    snapshot.process.stoppedNanoseconds = try process.optional("stoppedNanoseconds")?.unsigned()
    let system = try root.required("system")
    snapshot.process.osVersion = try system.optional("os")?.string()
    snapshot.process.architecture = try system.optional("cpu")?.string()
    if let exception = try root.optional("exception") { snapshot.exception = try parseException(exception) }
    snapshot.abortMessage = try root.optional("abortMessage")?.string()
    snapshot.oomAllocationSize = try root.optional("oomAllocationSize")?.unsigned()
    for image in try root.required("binaryImages").elements() { snapshot.images.append(try parseImage(image)) }
    for (index, thread) in try root.required("threads").elements().enumerated() {
      snapshot.threads.append(try parseThread(thread, at: index, imageCount: snapshot.images.count,
                                              reported: &snapshot.documentReported))
    }
    if let unloaded = try root.optional("unloadedImages") {
      snapshot.unloadedImages = try unloaded.elements().map { element throws(ReportError) in try parseUnloadedImage(element) }
    }
    if let timeline = try root.optional("imageTimeline") {
      snapshot.imageTimeline = try timeline.elements().map { element throws(ReportError) in try parseImageEvent(element) }
    }
    snapshot.problems = try root.required("problems").elements().map { element throws(ReportError) in try element.string() }
    snapshot.notes = try root.required("notes").elements().map { element throws(ReportError) in try element.string() }
    return snapshot
  }

  /// One of `unloadedImages` (its `name` is the path's last part: not kept apart).
  static func parseUnloadedImage(_ member: Member) throws(ReportError) -> ProcessSnapshot.UnloadedImage {
    ProcessSnapshot.UnloadedImage(
      baseAddress: try member.required("baseAddress").address(), size: try member.required("size").unsigned(),
      path: try member.required("path").string(), buildID: try member.optional("buildID")?.hexBytes() ?? [],
      unloadedBeforeCrashNanoseconds: try member.optional("unloadedBeforeCrashNanoseconds")?.unsigned(),
      loadedForNanoseconds: try member.optional("loadedForNanoseconds")?.unsigned(),
      tid: try member.optional("tid")?.int32())
  }

  /// One of `imageTimeline`.
  static func parseImageEvent(_ member: Member) throws(ReportError) -> ProcessSnapshot.ImageEvent {
    let kindMember = try member.required("kind")
    guard let kind = ProcessSnapshot.ImageEvent.Kind(rawValue: try kindMember.string()) else {
      throw kindMember.error("not loaded or unloaded")
    }
    return ProcessSnapshot.ImageEvent(
      kind: kind, name: try member.required("name").string(), baseAddress: try member.required("baseAddress").address(),
      crashOffsetNanoseconds: try member.required("crashOffsetNanoseconds").int64(),
      loadedForNanoseconds: try member.optional("loadedForNanoseconds")?.unsigned(), tid: try member.optional("tid")?.int32())
  }

  static func parseException(_ member: Member) throws(ReportError) -> ProcessSnapshot.Exception {
    let address = try member.required("address").address()
    var exception: ProcessSnapshot.Exception
    if let reason = try member.optional("reason")?.string() {
      exception = .init(signal: try member.required("platformCode").int32(), code: try member.required("platformFlags").int32(),
                        address: address)
      exception.reason = reason
    } else {
      exception = .init(signal: try member.required("signal").int32(), code: try member.required("code").int32(), address: address)
    }
    exception.isDumpRequested = try member.optional("dumpRequested")?.bool() ?? false
    return exception
  }

  static func parseImage(_ member: Member) throws(ReportError) -> ProcessSnapshot.Image {
    var identity: ImageIdentity?
    if let record = try member.optional("identity") {
      // The whole identity (any length: a minidump's may be 4 bytes), and the text the source wrote,
      // which may shorten it.
      var whole = ImageIdentity(BuildID(try record.required("buildID").hexBytes()))
      if let text = try record.optional("text")?.string() { whole.text = text }
      identity = whole
    }
    var image = ProcessSnapshot.Image(name: try member.required("name").string(), path: try member.optional("path")?.string(),
                                      loadAddress: try member.required("base").address(),
                                      endAddress: try member.optional("end")?.address(), identity: identity,
                                      architecture: try member.optional("architecture")?.string())
    image.debugFileName = try member.optional("debugFileName")?.string()
    image.debugID = try member.optional("debugID")?.string()
    image.codeID = try member.optional("codeID")?.string()
    image.offsetsFromLoadBias = try member.optional("offsetsFromLoadBias")?.bool() ?? false
    image.loadAddressFromSymbols = try member.optional("baseFromSymbols")?.bool() ?? false
    if let resolution = try member.optional("resolution") { image.resolution = try parseResolution(resolution) }
    image.debugFile = try member.optional("dwarfFile")?.string()
    return image
  }

  static func parseResolution(_ member: Member) throws(ReportError) -> ProcessSnapshot.Image.Resolution {
    let status = try member.required("status")
    switch try status.string() {
    case "found": return .found(path: try member.required("file").string(), how: try member.required("via").string())
    case "unverified": return .unverified(path: try member.required("file").string())
    case "missing": return .missing
    case "not-searched": return .notSearched
    case "uuid-mismatch":
      return .mismatch(reportID: try member.required("reportID").string(), fileID: try member.required("fileID").string(),
                       path: try member.required("file").string())
    case "other-build": return .otherBuild(path: try member.required("file").string(), reason: try member.required("reason").string())
    case let word: throw status.error("unknown image status '\(word)'")
    }
  }

  static func parseThread(_ member: Member, at threadIndex: Int, imageCount: Int,
                          reported: inout [ProcessSnapshot.FrameRef: ProcessSnapshot.ReportedFunction])
    throws(ReportError) -> ProcessSnapshot.Thread {
    var thread = ProcessSnapshot.Thread(number: try member.required("index").int(), tid: try member.optional("tid")?.unsigned(),
                                        name: try member.optional("name")?.string(), state: try member.optional("state")?.string(),
                                        crashed: try member.optional("crashed")?.bool() ?? false,
                                        problem: try member.optional("problem")?.string())
    thread.requestedDump = try member.optional("requestedDump")?.bool() ?? false
    if let layout = try member.optional("registerLayout") {
      let values = try member.required("registers")
      let title = try layout.required("title")
      guard let architecture = Registers.Architecture(appleThreadState: try title.string()) else {
        throw title.error("not a thread state of x86_64, aarch64, i386 or arm")
      }
      var registers = Registers(architecture)
      for row in try layout.required("rows").elements() {
        for cell in try row.elements() {
          let name = try cell.string()
          let value = try values.required(name)
          let text = try value.string()
          guard text.hasPrefix("0x"), text.utf8.count > 2 else { throw value.error("not a hex value") }
          registers[name] = try value.address()
          guard registers[name] != nil else { throw cell.error("no \(architecture.appleThreadState) register") }
        }
      }
      thread.registers = registers
    }
    for (index, element) in try member.required("frames").elements().enumerated() {
      var (frame, function) = try parseFrame(element, imageCount: imageCount)
      if let function {
        frame.position = ProcessSnapshot.Position(line: index, documentThread: threadIndex)
        reported[ProcessSnapshot.FrameRef(thread: threadIndex, frame: index)] = function
      }
      thread.frames.append(frame)
    }
    return thread
  }

  /// The frame, and the report's own name for it (`reported`).
  static func parseFrame(_ member: Member, imageCount: Int)
    throws(ReportError) -> (ProcessSnapshot.Frame, ProcessSnapshot.ReportedFunction?) {
    var trust: FrameTrust?
    if let word = try member.optional("trust") {
      guard let value = FrameTrust(rawValue: try word.string()) else { throw word.error("unknown trust") }
      trust = value
    }
    var imageIndex: Int?
    if let index = try member.optional("imageIndex") {
      let value = try index.int()
      guard value >= 0, value < imageCount else { throw index.error("no image \(value) in binaryImages") }
      imageIndex = value
    }
    var frame = ProcessSnapshot.Frame(number: try member.required("frame").int(), address: try member.required("address").address(),
                                      isReturnAddress: try member.required("returnAddress").bool(), trust: trust,
                                      imageIndex: imageIndex)
    frame.namesNoModule = try member.optional("namesNoModule")?.bool() ?? false
    frame.symbols.imageName = try member.optional("image")?.string()
    frame.symbols.imageOffset = try member.optional("imageOffset")?.unsigned()
    frame.symbols.lookupAddress = try member.optional("lookupAddress")?.address()
    let status = try member.required("status")
    switch try status.string() {
    case "symbolicated": frame.symbols.status = .symbolicated
    case "no-symbol": frame.symbols.status = .noSymbol
    case "no-image": frame.symbols.status = .noImage
    case "missing-image": frame.symbols.status = .missingImage
    case "not-looked-up": frame.symbols.status = .notLookedUp
    case "no-module": frame.symbols.status = .noModule
    case "other-build": frame.symbols.status = .otherBuild
    case "uuid-mismatch":
      frame.symbols.status = .mismatch(reportID: try member.required("reportID").string(),
                                       fileID: try member.required("fileID").string(), path: try member.required("file").string())
    case let word: throw status.error("unknown frame status '\(word)'")
    }
    if let functions = try member.optional("functions") {
      frame.symbols.functions = try functions.elements().map { function throws(ReportError) in
        let name = try function.optional("symbol")?.string()
        let rawName = try function.optional("mangledSymbol")?.string()
        return FrameSymbols.Function(name: name, rawName: rawName ?? name,
                              offset: try function.optional("symbolOffset")?.unsigned(),
                              file: try function.optional("file")?.string(), line: try function.optional("line")?.int(),
                              column: try function.optional("column")?.int(),
                              isInlined: try function.optional("inlined")?.bool() ?? false)
      }
    }
    if let reported = try member.optional("reported") {
      let function = ProcessSnapshot.ReportedFunction(
        name: try reported.optional("symbol")?.string(), offset: try reported.optional("symbolOffset")?.unsigned(),
        file: try reported.optional("file")?.string(), line: try reported.optional("line")?.int(),
        column: try reported.optional("column")?.int())
      // glibc's `NAME+0xOFF` places an image whose load address the report does not give.
      if let name = function.name, let offset = function.offset {
        frame.symbolOffset = ProcessSnapshot.SymbolOffset(name: name, offset: offset)
      }
      return (frame, function)
    }
    return (frame, nil)
  }

  /// A value in the document and where it is (`threads[2].frames[0].address`), for errors that say where.
  struct Member {
    var value: JSONValue
    var path: String

    func error(_ problem: String) -> ReportError { ReportError("crash document \(path): \(problem)") }

    func optional(_ key: String) throws(ReportError) -> Member? {
      guard case .object = value else { throw error("not an object") }
      guard let member = value[key], member != .null else { return nil }
      return Member(value: member, path: path == "document" ? key : "\(path).\(key)")
    }

    func required(_ key: String) throws(ReportError) -> Member {
      guard let member = try optional(key) else { throw error("no \(key)") }
      return member
    }

    func elements() throws(ReportError) -> [Member] {
      guard let array = value.array else { throw error("not an array") }
      return array.enumerated().map { Member(value: $1, path: "\(path)[\($0)]") }
    }

    func string() throws(ReportError) -> String {
      guard let text = value.string else { throw error("not a string") }
      return text
    }

    func bool() throws(ReportError) -> Bool {
      guard case .bool(let flag) = value else { throw error("not true or false") }
      return flag
    }

    func int() throws(ReportError) -> Int {
      guard let number = value.integer else { throw error("not an integer") }
      return number
    }

    func int32() throws(ReportError) -> Int32 {
      guard let number = Int32(exactly: try int()) else { throw error("out of range") }
      return number
    }

    func int64() throws(ReportError) -> Int64 {
      guard case .number(let text) = value, let number = Int64(text) else { throw error("not an integer") }
      return number
    }

    func unsigned() throws(ReportError) -> UInt64 {
      guard case .number(let text) = value, let number = UInt64(text) else { throw error("not a non-negative integer") }
      return number
    }

    /// Lowercase hex digits, two a byte (a build-id).
    func hexBytes() throws(ReportError) -> [UInt8] {
      let digits = Array(try string())
      guard !digits.isEmpty, digits.count % 2 == 0, digits.count <= 256 else { throw error("not a build-id in hex") }
      var bytes: [UInt8] = []
      bytes.reserveCapacity(digits.count / 2)
      for index in stride(from: 0, to: digits.count, by: 2) {
        guard digits[index].isHexDigit, digits[index + 1].isHexDigit, let byte = UInt8(String(digits[index...index + 1]), radix: 16)
        else { throw error("not a build-id in hex") }
        bytes.append(byte)
      }
      return bytes
    }

    /// `0x` and hex digits, as the document writes addresses.
    func address() throws(ReportError) -> UInt64 {
      guard let text = value.string, text.hasPrefix("0x"), let number = UInt64(text.dropFirst(2), radix: 16) else {
        throw error("not a hex address")
      }
      return number
    }
  }
}
