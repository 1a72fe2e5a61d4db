import ImageLogTestSupport
import Testing
@testable import ImageReaders
@testable import SnapshotFormatting

/// Crashpad's module annotations (list, simple and annotation objects), which a real dump holds only
/// for modules built with Crashpad's client: a CrashpadInfo stream made by hand in Crashpad's layout,
/// read by our reader and by `minidump-stackwalk --dump`, which prints every annotation.
@Suite struct MinidumpCrashpadInfoTests {
  /// The bytes of a CrashpadInfo stream that will start at file offset `base`: process annotations
  /// and one module's annotations of every kind; with `oldModuleRecord`, the module's record as
  /// Crashpad wrote it before 2017 (20 bytes: no annotation objects).
  static func stream(base: Int, oldModuleRecord: Bool = false) -> [UInt8] {
    var blob = [UInt8](repeating: 0, count: 64)  // MinidumpCrashpadInfo, filled in below
    func align() { while blob.count % 4 != 0 { blob.append(0) } }
    func place(_ bytes: [UInt8]) -> UInt32 {
      align()
      let rva = UInt32(base + blob.count)
      blob += bytes
      return rva
    }
    func utf8(_ text: String) -> UInt32 {
      var bytes = [UInt8]()
      bytes.append32(UInt32(text.utf8.count))
      return place(bytes + Array(text.utf8) + [0])
    }
    func dictionary(_ pairs: [(String, String)]) -> MinidumpFile.Location {
      var bytes = [UInt8]()
      bytes.append32(UInt32(pairs.count))
      for (key, value) in pairs { bytes.append32(utf8(key)); bytes.append32(utf8(value)) }
      return MinidumpFile.Location(dataSize: UInt32(bytes.count), rva: place(bytes))
    }
    let process = dictionary([("channel", "beta"), ("locale", "en-GB")])
    var list = [UInt8]()
    list.append32(2)
    list.append32(utf8("first annotation")); list.append32(utf8("second"))
    let listLocation = MinidumpFile.Location(dataSize: UInt32(list.count), rva: place(list))
    let simple = dictionary([("module-key", "module value")])
    var objects = [UInt8]()
    objects.append32(3)
    for (name, type, value) in [("crash-reason", UInt16(1), Array("out of cheese".utf8)), ("blob", 0x8001, [1, 2, 3]),
                                ("nothing", 0, [])] {
      var array = [UInt8]()
      array.append32(UInt32(value.count))
      objects.append32(utf8(name)); objects.append16(type); objects.append16(0); objects.append32(place(array + value))
    }
    let objectsLocation = MinidumpFile.Location(dataSize: UInt32(objects.count), rva: place(objects))
    var module = [UInt8]()
    module.append32(1)
    module.appendLocation(listLocation); module.appendLocation(simple)
    if !oldModuleRecord { module.appendLocation(objectsLocation) }
    let moduleLocation = MinidumpFile.Location(dataSize: UInt32(module.count), rva: place(module))
    var links = [UInt8]()
    links.append32(1)
    links.append32(0); links.appendLocation(moduleLocation)
    let linksLocation = MinidumpFile.Location(dataSize: UInt32(links.count), rva: place(links))
    var head = [UInt8]()
    head.append32(1)
    head += Array(0x10..<0x20) + Array(0xA0..<0xB0)  // report and client ids
    head.appendLocation(process); head.appendLocation(linksLocation); head.append32(0); head.append64(0xFF_FFFF_FFFF)
    blob.replaceSubrange(0..<64, with: head)
    return blob
  }

  /// A dump with one module and the stream above, its offsets right: written once to learn where the
  /// stream lands, then its bytes made for that offset (the same length, so nothing else moves).
  static func dump(oldModuleRecord: Bool = false) throws -> [UInt8] {
    func contents(_ stream: [UInt8]) -> MinidumpWriter.Contents {
      MinidumpWriter.Contents(timeDateStamp: 0, systemInfo: MinidumpWriter.SystemInfo(processorArchitecture: 9), threads: [],
                              modules: [MinidumpWriter.Module(baseAddress: 0x1000, size: 0x1000, path: "/lib/libannotated.so",
                                                              buildID: [1, 2, 3, 4])],
                              extraStreams: [(MinidumpFile.crashpadInfoType, stream)])
    }
    let first = try MinidumpWriter.write(contents(stream(base: 0, oldModuleRecord: oldModuleRecord)))
    let dump = try MinidumpFile(bytes: first)
    let base = try #require(dump.streams.first { $0.type == MinidumpFile.crashpadInfoType }).location.rva
    return try MinidumpWriter.write(contents(stream(base: Int(base), oldModuleRecord: oldModuleRecord)))
  }

  @Test func moduleAnnotationsRead() throws {
    let dump = try MinidumpFile(bytes: try Self.dump())
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    let info = try #require(dump.crashpadInfo)
    #expect(info.simpleAnnotations.map { "\($0.key)=\($0.value)" } == ["channel=beta", "locale=en-GB"])
    #expect(info.reportIDString == "13121110-1514-1716-1819-1a1b1c1d1e1f")
    #expect(info.addressMask == 0xFF_FFFF_FFFF)
    let module = try #require(info.moduleInfos.first)
    #expect(module.moduleIndex == 0)
    #expect(module.listAnnotations == ["first annotation", "second"])
    #expect(module.simpleAnnotations.map { "\($0.key)=\($0.value)" } == ["module-key=module value"])
    #expect(module.annotationObjects.map(\.name) == ["crash-reason", "blob", "nothing"])
    #expect(module.annotationObjects.map(\.stringValue) == ["out of cheese", nil, nil])
    #expect(module.annotationObjects[1].value == [1, 2, 3] && module.annotationObjects[1].type == 0x8001)
  }

  /// Crashpad's header allows the 20-byte record of before 2017 (no annotation objects): it is read,
  /// not called unreadable (it was: "MinidumpModuleCrashpadInfo needs 28"). minidump-stackwalk 0.25
  /// drops the whole CrashpadInfo stream of such a dump, so no oracle here: the values are the stream's.
  @Test func oldModuleRecordRead() throws {
    let dump = try MinidumpFile(bytes: try Self.dump(oldModuleRecord: true))
    #expect(dump.problems.isEmpty, "\(dump.problems)")
    let module = try #require(dump.crashpadInfo?.moduleInfos.first)
    #expect(module.listAnnotations == ["first annotation", "second"])
    #expect(module.simpleAnnotations.map { "\($0.key)=\($0.value)" } == ["module-key=module value"])
    #expect(module.annotationObjects.isEmpty)
  }

  @Test(.enabled(if: pipelineTool("minidump-stackwalk") != nil, "minidump-stackwalk (Scripts/install-test-tools) missing"))
  func moduleAnnotationsEqualMinidumpStackwalks() throws {
    let bytes = try Self.dump()
    let directory = try makeTemporaryDirectory("imagelog-minidump-annotations")
    defer { _ = try? runTool(["rm", "-rf", directory]) }
    try writeFile("\(directory)/annotated.dmp", bytes: bytes)
    let oracle = try #require(try StackwalkOracle.run("\(directory)/annotated.dmp"))
    let theirs = try #require(oracle.blocks("MDRawCrashpadInfo").first)
    let info = try #require(try MinidumpFile(bytes: bytes).crashpadInfo)
    var expected: [String: String] = ["version": "1", "report_id": info.reportIDString, "client_id": info.clientIDString]
    for (key, value) in info.simpleAnnotations { expected["simple_annotations[\"\(key)\"]"] = value }
    for (index, module) in info.moduleInfos.enumerated() {
      expected["module_list[\(index)].minidump_module_list_index"] = "\(module.moduleIndex)"
      expected["module_list[\(index)].version"] = "\(module.version)"
      for (number, text) in module.listAnnotations.enumerated() { expected["module_list[\(index)].list_annotations[\(number)]"] = text }
      for (key, value) in module.simpleAnnotations { expected["module_list[\(index)].simple_annotations[\"\(key)\"]"] = value }
      for object in module.annotationObjects {
        // minidump-stackwalk's names for what it does not print as text.
        let shown = object.stringValue ?? (object.type == 0 ? "<invalid>" : object.type >= 0x8000 ? "<user defined>" : "<unsupported>")
        expected["module_list[\(index)].annotation_objects[\"\(object.name)\"]"] = shown
      }
    }
    #expect(theirs == expected)
  }
}
